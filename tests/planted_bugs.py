"""Planted wrong implementations of the exercises, each a bug a learner might write: ``PLANTED[stem][label]``.
Every one must fail its exercise's grader (tests/test_exercises_grading.py)."""

from __future__ import annotations

import contextlib

import torch


def _returns_without_r_t(rewards, mask, gamma):
    out, running = torch.zeros_like(rewards), torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        out[:, t] = gamma * running
        running = rewards[:, t] * mask[:, t] + gamma * running
    return out


def _returns_mask_ignored(rewards, mask, gamma):
    out, running = torch.zeros_like(rewards), torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + gamma * running
        out[:, t] = running
    return out


def _gae(next_shift: int = 1, use_dones_in_trace: bool = True, plus_values: bool = True, bootstrap: bool = True):
    def gae(rewards, values, dones, gamma, lam, last_values=None):
        last = last_values if (last_values is not None and bootstrap) else torch.zeros_like(values[:, 0])
        nxt = torch.cat([values[:, 1:], last[:, None]], 1) if next_shift else values   # off by one: V(s_t)
        not_done = 1.0 - dones
        deltas = rewards + gamma * nxt * not_done - values
        adv, running = torch.zeros_like(rewards), torch.zeros_like(rewards[:, 0])
        for t in reversed(range(rewards.shape[1])):
            running = deltas[:, t] + gamma * lam * (not_done[:, t] if use_dones_in_trace else 1.0) * running
            adv[:, t] = running
        return adv, adv + values if plus_values else adv
    return gae


def _whiten(eps_guard: bool = True, unbiased: bool = True, use_mask: bool = True, multiply: bool = False):
    def whiten(x, mask=None, shift_mean=True, eps=1e-8):
        mask = torch.ones_like(x) if mask is None or not use_mask else mask
        real = mask.bool()
        vals = x[real] if not multiply else (x * mask).flatten()
        mean = vals.mean() if not multiply else vals.sum() / mask.sum()
        std = vals.std(unbiased=unbiased) if vals.numel() > 1 else torch.zeros(())
        out = (x - mean) / (torch.sqrt(std**2 + eps) if eps_guard else std)
        out = out if shift_mean else out + mean
        return torch.where(real, out, 0.0) if not multiply else out * mask
    return whiten


def _clip(sign: float = -1.0, reduce=torch.min, swap_eps: bool = False, low_only: bool = False,
          delta_on: str = "ratio"):
    def clipped_surrogate(ratio, advantages, clip_eps_low, clip_eps_high=None, delta=None):
        high = clip_eps_low if clip_eps_high is None else clip_eps_high
        low, high = (high, clip_eps_low) if swap_eps else (clip_eps_low, high)
        clipped = torch.clamp(ratio, min=1 - low) if low_only else torch.clamp(ratio, 1 - low, 1 + high)
        capped = ratio if delta is None or delta_on != "ratio" else torch.clamp(ratio, max=delta)
        loss = sign * reduce(capped * advantages, clipped * advantages)
        return torch.clamp(loss, max=delta) if delta is not None and delta_on == "loss" else loss
    return clipped_surrogate


def _value_loss(reduce=torch.max, half: float = 0.5, around_returns: bool = False):
    def value_loss(values, old_values, returns, clip=None):
        unclipped = (values - returns) ** 2
        if clip is None:
            return half * unclipped
        anchor = returns if around_returns else old_values
        clipped = anchor + torch.clamp(values - anchor, -clip, clip)
        return half * reduce(unclipped, (clipped - returns) ** 2)
    return value_loss


def _kl(k1_sign: float = -1.0, k2_half: float = 0.5, k3_flip: bool = False, weight: str = "grad",
        check_estimator: bool = True):
    def kl_estimate(logp, ref_logp, estimator="k3", old_logp=None):
        lr = ref_logp - logp
        estimators = {"k1": k1_sign * lr, "k2": k2_half * lr**2,
                      "k3": torch.expm1(-lr) + lr if k3_flip else torch.expm1(lr) - lr}
        if estimator not in estimators:
            if check_estimator:
                raise ValueError("estimator")
            estimator = "k3"        # a silent fallback: anything unknown is k3
        kl = estimators[estimator]
        if old_logp is None or weight == "none":
            return kl
        w = torch.exp(logp - old_logp)
        return {"grad": w, "detached": w.detach(), "inverted": 1 / w}[weight] * kl
    return kl_estimate


def _kl_rewards(score_at: str = "last", sign: float = -1.0, mask_kl: bool = True):
    def kl_penalized_rewards(scores, old_logp, ref_logp, mask, kl_coef, estimator="k1"):
        from ladder.core import kl_estimate, last_step_mask
        kl = kl_estimate(old_logp, ref_logp, estimator) * (mask if mask_kl else 1.0)
        where = {"last": last_step_mask(mask), "column": torch.zeros_like(mask).index_fill(1, torch.tensor(
            [mask.shape[1] - 1]), 1.0), "first": torch.zeros_like(mask).index_fill(1, torch.tensor([0]), 1.0)}
        return sign * kl_coef * kl + where[score_at] * scores[:, None], kl
    return kl_penalized_rewards


def _group(eps_guard: bool = True, unbiased: bool = True, batch_mean: bool = False, ignore_scale: bool = False,
           check_scale: bool = True):
    def group_relative(rewards, group_size, scale="group", eps=1e-4):
        if check_scale and scale not in ("group", "batch", "none"):
            raise ValueError("scale")   # unchecked, an unknown scale falls through to the batch's std below
        g = rewards.view(-1, group_size)
        centred = g - (rewards.mean() if batch_mean else g.mean(1, keepdim=True))
        scale = "group" if ignore_scale else scale
        if scale == "none":
            return centred.reshape(-1)
        std = g.std(1, keepdim=True, unbiased=unbiased) if scale == "group" else rewards.std(unbiased=unbiased)
        return (centred / (std + eps if eps_guard else std)).reshape(-1)
    return group_relative


def _aggregate(multiply: bool = False, use_mask: bool = True, constant_by_tokens: bool = False,
               seq_nonempty: bool = False, missing_raises: bool = True, sum_over_tokens: bool = False):
    def aggregate(per_action, mask, mode="token_mean", num_tokens=None):
        mask = mask if use_mask else torch.ones_like(mask)
        x = per_action * mask if multiply else torch.where(mask.bool(), per_action, 0.0)
        n = mask.sum().clamp(min=1)
        if mode == "seq_mean_token_mean":
            per_seq = x.sum(1) / mask.sum(1).clamp(min=1)
            return per_seq.sum() / (mask.sum(1) > 0).sum() if seq_nonempty else per_seq.mean()
        if mode == "seq_mean_token_sum":
            return x.sum() / n if sum_over_tokens else x.sum(1).mean()
        if mode == "sum_over_constant":
            if num_tokens is None and missing_raises:
                raise ValueError("num_tokens")
            constant = mask.numel() if num_tokens is None else max(num_tokens, 1.0)
            return x.sum() / (n if constant_by_tokens else constant)
        return x.sum() / n
    return aggregate


def _seq_ratio(reduce: str = "mean", multiply: bool = False, clamp: bool = True, keepdim: bool = True,
               exp: bool = False):
    def sequence_log_ratio(logp, old_logp, mask):
        real = mask.bool()
        diff = (logp - old_logp) * mask if multiply else torch.where(real, logp - old_logp, 0.0)
        total = diff.sum(dim=1, keepdim=True)
        count = real.sum(dim=1, keepdim=True).float()
        out = {"mean": total / (count.clamp(min=1) if clamp else count), "sum": total,
               "over_T": total / mask.shape[1]}[reduce]
        out = torch.exp(out) if exp else out
        return out if keepdim else out.squeeze(1)
    return sequence_log_ratio


def _loo(divide_by: str = "G-1", scale_used: bool = True, unbiased: bool = True, eps_guard: bool = True,
         check_group: bool = True, check_size: bool = True, check_scale: bool = True):
    def leave_one_out(rewards, group_size, scale="none", eps=1e-4):
        if check_group and group_size < 2:
            raise ValueError("group_size")
        if check_size and rewards.numel() % group_size:
            raise ValueError("size")
        g = rewards.view(-1, group_size)
        if divide_by == "self":      # r_i in its own baseline: GRPO's group mean
            baseline = g.mean(1, keepdim=True)
        else:
            baseline = (g.sum(1, keepdim=True) - g) / (group_size - (1 if divide_by == "G-1" else 0))
        adv = (g - baseline).reshape(-1)
        if scale == "batch" and scale_used:
            std = adv.std(unbiased=unbiased)
            return (adv - adv.mean()) / (std + eps if eps_guard else std)
        if check_scale and scale not in ("none", "batch"):
            raise ValueError("scale")
        return adv
    return leave_one_out


def _kl_in_reward(detach: bool = True, reduce: str = "sum", sign: float = -1.0, multiply: bool = False,
                  swap: bool = False, per_token: bool = False):
    def kl_in_reward(rewards, old_logp, ref_logp, mask, kl_coef, estimator="k1"):
        from ladder.core import kl_estimate
        k = kl_estimate(ref_logp, old_logp, estimator) if swap else kl_estimate(old_logp, ref_logp, estimator)
        k = k * mask if multiply else torch.where(mask.bool(), k, 0.0)
        if per_token:
            return rewards[:, None] + sign * kl_coef * k, k
        kl = k.sum(1) if reduce == "sum" else k.sum(1) / mask.sum(1).clamp(min=1)
        kl = kl.detach() if detach else kl
        return rewards + sign * kl_coef * kl, kl
    return kl_in_reward


def _soft(formula: str = "lerp", no_grad: bool = True, check_length: bool = True, cast: bool = True,
          in_place: bool = True, target: str = "reference"):
    def soft_update(reference, policy, alpha):
        reference, policy = list(reference), list(policy)
        if check_length and len(reference) != len(policy):
            raise ValueError("lengths")
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            new = []
            for ref, theta in zip(reference, policy):
                theta = theta.to(ref.dtype) if cast else theta
                if target == "policy":       # θ ← …: moves π_θ, not π_ref
                    theta.lerp_(ref, 1 - alpha)
                    continue
                if not in_place:
                    new.append(torch.lerp(ref, theta, alpha))
                elif formula == "lerp":
                    ref.lerp_(theta, alpha)
                elif formula == "swapped":   # α and 1 − α swapped
                    ref.mul_(alpha).add_((1 - alpha) * theta)
                elif formula == "difference":  # θ_ref + α(θ − θ_ref): not exact at α = 1
                    ref.add_(alpha * (theta - ref))
        return None if in_place else new
    return soft_update


PLANTED = {
    "ex01_discounted_returns": {
        "G_t leaves out r_t": _returns_without_r_t,
        "mask ignored": _returns_mask_ignored,
        "γ applied forwards": lambda rewards, mask, gamma: torch.cumsum(rewards * mask, 1) * gamma,
    },
    "ex02_reinforce_loss": {
        "sign flipped": lambda logp, advantages: advantages * logp,
        "log-prob detached": lambda logp, advantages: -advantages * logp.detach(),
    },
    "ex03_gae": {
        "off by one: V(s_t) bootstraps instead of V(s_{t+1})": _gae(next_shift=0),
        "dones ignored in the Â recursion": _gae(use_dones_in_trace=False),
        "returns = Â (V left out)": _gae(plus_values=False),
        "last_values ignored": _gae(bootstrap=False),
    },
    "ex04_whiten": {
        "std without ε guard": _whiten(eps_guard=False),
        "biased variance (n, not n − 1)": _whiten(unbiased=False),
        "mask ignored": _whiten(use_mask=False),
        "padding multiplied by the mask (nan leaks)": _whiten(multiply=True),
    },
    "ex05_clipped_surrogate": {
        "sign flipped": _clip(sign=1.0),
        "max instead of min": _clip(reduce=torch.max),
        "clipping on the wrong side (ε_low and ε_high swapped)": _clip(swap_eps=True),
        "only clipped below": _clip(low_only=True),
        "delta ignored (no two-sided cap)": _clip(delta_on="nothing"),
        "the loss capped at δ, not the ratio": _clip(delta_on="loss"),
    },
    "ex06_value_loss": {
        "min instead of max": _value_loss(reduce=torch.min),
        "no ½": _value_loss(half=1.0),
        "clipped around the returns": _value_loss(around_returns=True),
    },
    "ex07_kl_estimators": {
        "k1 sign flipped": _kl(k1_sign=1.0),
        "k2 without ½": _kl(k2_half=1.0),
        "k3 with ℓ of the wrong sign": _kl(k3_flip=True),
        "an unknown estimator silently taken as k3": _kl(check_estimator=False),
    },
    "ex08_kl_corrected": {
        "biased: no importance weight where the corrected KL is asked": _kl(weight="none"),
        "weight detached": _kl(weight="detached"),
        "weight inverted (π_old/π_θ)": _kl(weight="inverted"),
        "an unknown estimator silently taken as k3": _kl(check_estimator=False),
    },
    "ex09_kl_rewards": {
        "score on the last column, not the last real token": _kl_rewards(score_at="column"),
        "score on the first token": _kl_rewards(score_at="first"),
        "+β·KL": _kl_rewards(sign=1.0),
        "KL not masked": _kl_rewards(mask_kl=False),
    },
    "ex10_group_relative": {
        "std without ε guard": _group(eps_guard=False),
        "population std": _group(unbiased=False),
        "batch mean instead of the group's": _group(batch_mean=True),
        "scale ignored": _group(ignore_scale=True),
        "an unknown scale silently taken as 'batch'": _group(check_scale=False),
    },
    "ex11_aggregate": {
        "mask multiplied (inf padding leaks)": _aggregate(multiply=True),
        "mask ignored": _aggregate(use_mask=False),
        "sum_over_constant divided by the token count": _aggregate(constant_by_tokens=True),
        "sum_over_constant without num_tokens divides by B · T": _aggregate(missing_raises=False),
        "grpo averages only over non-empty rows": _aggregate(seq_nonempty=True),
        "luspo's sums divided by the tokens, not the sequences": _aggregate(sum_over_tokens=True),
    },
    "ex12_sequence_ratio": {
        "sum instead of mean (GSPO's ratio grows with the length)": _seq_ratio(reduce="sum"),
        "mean over T instead of over the real tokens": _seq_ratio(reduce="over_T"),
        "mask multiplied (inf/nan padding leaks)": _seq_ratio(multiply=True),
        "an empty row divides 0 by 0": _seq_ratio(clamp=False),
        "[B] instead of [B, 1]": _seq_ratio(keepdim=False),
        "s_i instead of log s_i": _seq_ratio(exp=True),
    },
    "ex13_leave_one_out": {
        "baseline includes r_i itself (GRPO's group mean)": _loo(divide_by="self"),
        "the others' sum divided by G, not G − 1": _loo(divide_by="G"),
        "scale ignored": _loo(scale_used=False),
        "batch scale with the population std": _loo(unbiased=False),
        "batch scale without ε (all equal: nan)": _loo(eps_guard=False),
        "group_size 1 not refused": _loo(check_group=False),
        "N not a multiple of G: view's RuntimeError, not ValueError": _loo(check_size=False),
        "an unknown scale not refused": _loo(check_scale=False),
    },
    "ex14_kl_in_reward": {
        "KL with gradient (not detached, as if π_old were π_θ)": _kl_in_reward(detach=False),
        "KL averaged over the tokens, not summed": _kl_in_reward(reduce="mean"),
        "+β·KL": _kl_in_reward(sign=1.0),
        "mask multiplied (inf/nan padding leaks)": _kl_in_reward(multiply=True),
        "KL the wrong way round: k(log π_ref, log π_old)": _kl_in_reward(swap=True),
        "per-token rewards [B, T], not summed per completion": _kl_in_reward(per_token=True),
    },
    "ex15_soft_update": {
        "α and 1 − α swapped": _soft(formula="swapped"),
        "θ_ref + α(θ − θ_ref): not exact at α = 1": _soft(formula="difference"),
        "new tensors returned, π_ref left as it was": _soft(in_place=False),
        "π_θ moved towards π_ref instead": _soft(target="policy"),
        "different lengths not refused (zip stops at the shorter)": _soft(check_length=False),
        "outside torch.no_grad()": _soft(no_grad=False),
        "θ not cast to π_ref's dtype": _soft(cast=False),
    },
}

from planted_bugs_loop import PLANTED_LOOP  # noqa: E402 - the loop exercises' bugs, planted in their solutions

PLANTED.update(PLANTED_LOOP)

from planted_bugs_agent import PLANTED_AGENT  # noqa: E402 - the agent exercises' bugs (22, 23)

PLANTED.update(PLANTED_AGENT)

from planted_bugs_design import PLANTED_DESIGN  # noqa: E402 - the design-space exercises' bugs (24, 25)

PLANTED.update(PLANTED_DESIGN)

from planted_bugs_preferences import PLANTED_PREFERENCES  # noqa: E402 - the preference exercises' bugs (26, 27)

PLANTED.update(PLANTED_PREFERENCES)

from planted_bugs_distill import PLANTED_DISTILL  # noqa: E402 - the distillation exercises' bugs (28, 29)

PLANTED.update(PLANTED_DISTILL)
