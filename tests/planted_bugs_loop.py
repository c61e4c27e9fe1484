"""Planted wrong implementations of the loop exercises (16–20) and of the sampler's weights (21): each is the
solution with one line changed the way a learner might get it wrong. ``PLANTED_LOOP[stem][label]``; every one
must fail its grader."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ladder.graders import load

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"
_HERE = Path(tempfile.mkdtemp(prefix="ladder-planted-"))   # the solutions, beside which each mutant is loaded
for _path in SOLUTIONS.glob("ex*.py"):
    shutil.copy(_path, _HERE)
_count = 0


def mutant(stem: str, function: str, old: str, new: str):
    """The solution of ``stem`` with ``old`` replaced by ``new`` (which must occur in it)."""
    global _count
    source = (SOLUTIONS / f"{stem}.py").read_text()
    assert old in source, f"{stem}: {old!r} is not in the solution"
    _count += 1
    path = _HERE / f"{stem}_planted{_count}.py"
    path.write_text(source.replace(old, new, 1))
    return getattr(load(path), function)


def _planted(stem: str, function: str, bugs: dict[str, tuple[str, str]]) -> dict:
    return {label: mutant(stem, function, old, new) for label, (old, new) in bugs.items()}


PLANTED_LOOP = {
    "ex16_token_logp": _planted("ex16_token_logp", "token_logp", {
        "no shift: each token scored by its own position's logits": (
            "targets = input_ids[:, 1:, None]", "targets = input_ids[:, :-1, None]"),
        "temperature ignored": ("logits[:, :-1].float() / temperature", "logits[:, :-1].float()"),
        "log(softmax(z)): −inf where it should be −1000": (
            "scaled.gather(-1, targets).squeeze(-1) - torch.logsumexp(scaled, dim=-1)",
            "torch.log(torch.softmax(scaled, dim=-1)).gather(-1, targets).squeeze(-1)"),
        "padding not zeroed": ("return torch.where(mask.bool(), logp, 0.0)", "return logp"),
        "temperature 0 not refused": ("if temperature <= 0:", "if temperature < 0:"),
        "computed in the logits' own dtype (bf16)": ("logits[:, :-1].float() / temperature",
                                                     "logits[:, :-1] / temperature"),
    }),
    "ex17_compute_loss": _planted("ex17_compute_loss", "compute_loss", {
        "padding keeps its advantage": ("adv = torch.where(mask.bool(), adv, 0.0)", "adv = adv"),
        "π_old ignored: the ratio is always 1": (
            "old_logp = logp.detach() if mb.old_logp is None else mb.old_logp", "old_logp = logp.detach()"),
        "value loss without its coefficient": ("loss = loss + cfg.value_coef * loss_v", "loss = loss + loss_v"),
        "KL never importance-corrected": ("old_logp if cfg.kl_correction else None", "None"),
        "entropy bonus with the wrong sign": ("loss = loss + cfg.entropy_coef * loss_h",
                                              "loss = loss - cfg.entropy_coef * loss_h"),
        "GSPO's sequence ratio ignored": ("sequence_log_ratio(logp, old_logp, mask).expand_as(logp)",
                                          "torch.where(mask.bool(), logp - old_logp, 0.0)"),
        "ε_high ignored in the clip statistics": (
            "minibatch_stats(terms, ratio, adv, mask, logp, old_logp, cfg.clip_eps_low, eps_high)",
            "minibatch_stats(terms, ratio, adv, mask, logp, old_logp, cfg.clip_eps_low, cfg.clip_eps_low)"),
        "ε_high left None in the statistics": (
            "eps_high = cfg.clip_eps_low if cfg.clip_eps_high is None else cfg.clip_eps_high",
            "eps_high = cfg.clip_eps_high"),
        "the objective's parameters dropped: its name's defaults": (
            "    objective = objective_spec(cfg.objective)", "    objective = objective_spec(cfg.objective.name)"),
        "the token-level inputs given the sequence's ratio": (
            "PolicyInputs(logp, log_ratio, ratio, token_log_ratio,",
            "PolicyInputs(logp, token_log_ratio, torch.exp(token_log_ratio), token_log_ratio,"),
        "log π_ref not given to the objective (DPO cannot read it)": (
            "adv, mask, weights, mb.ref_logp)", "adv, mask, weights)"),
        "the objective's own statistics left out": (
            "        sampler_stats.update(objective.statistics(inputs, cfg))", "        pass"),
        "the sampler's correction left out of the loss (its statistics kept)": (
            "pg, sampler_stats = sampler_correction(pg,", "_, sampler_stats = sampler_correction(pg,"),
        "the sampler's correction applied to the KL to π_ref too": (
            "loss_kl = agg(kl_estimate(logp, mb.ref_logp, cfg.kl_estimator, old_logp if cfg.kl_correction else None))",
            "loss_kl = agg(sampler_correction(kl_estimate(logp, mb.ref_logp, cfg.kl_estimator, old_logp if "
            "cfg.kl_correction else None), logp, old_logp, mb.sampling_logp, adv, mask, cfg.sampler, weights)[0])"),
        "the sampler's statistics from π_θ instead of π_old": (
            "pg, sampler_stats = sampler_correction(pg, logp, old_logp,",
            "pg, sampler_stats = sampler_correction(pg, logp, logp.detach(),"),
        "the sampler's weights from π_θ instead of π_old": ("corrected_weights(old_logp,",
                                                             "corrected_weights(logp.detach(),"),
        "the sampler's weight multiplied again where the gamma weight folds it in": (
            "weigh=not objective.folds_sampler_weight", "weigh=True"),
        "the entropy mask not applied to the policy term": ("        pg = pg * kept\n", ""),
        "the entropy bonus over every real token, not the kept ones": (
            "masked_mean(entropy_bonus(entropy), kept)", "masked_mean(entropy_bonus(entropy), mask)"),
        "the kept fraction not reported": ('        sampler_stats["entropy/kept_frac"] = ', "        _ = "),
    }),
    "ex18_update": _planted("ex18_update", "update", {
        "π_old never recorded: every ratio is 1": ("if batch.old_logp is None and cfg.mu * M > 1:", "if False:"),
        "π_old recorded only when μ > 1: with μ = 1, M = 2 the second minibatch's ratio reads 1": (
            "if batch.old_logp is None and cfg.mu * M > 1:", "if batch.old_logp is None and cfg.mu > 1:"),
        "a given π_old recorded over": ("if batch.old_logp is None and cfg.mu * M > 1:", "if cfg.mu * M > 1:"),
        "no gradient clipping": ("max_norm = math.inf if cfg.max_grad_norm is None else cfg.max_grad_norm",
                                 "max_norm = math.inf"),
        "the shuffle ignores the generator": ("batch.minibatches(M, generator)",
                                              "batch.minibatches(M, torch.Generator().manual_seed(0))"),
        "the target-KL stop ignored": ("            break", "            pass"),
        "N not shared among the minibatches": ("num_tokens / M", "num_tokens"),
        "zero_grad forgotten: gradients pile up": ("            optimizer.zero_grad(set_to_none=True)\n", ""),
        "the caller's batch changed": ("        batch = replace(batch, old_logp=old_logp)",
                                       "        batch.old_logp = old_logp"),
    }),
    "ex19_masked_gae": _planted("ex19_masked_gae", "masked_gae", {
        "padding's junk kept: a NaN there reaches the last real token through γ·V_{t+1}·(1 − d_t)": (
            "rewards, values = torch.where(real, rewards, 0.0), torch.where(real, values, 0.0)",
            "rewards, values = rewards, values"),
        "returns without the value: R = Â": ("torch.where(real, returns, 0.0)", "torch.where(real, advantages, 0.0)"),
        "γ and λ swapped": ("dones, gamma, lam)", "dones, lam, gamma)"),
        "padding masked by multiplying: NaN · 0 = NaN reaches the real tokens": (
            "rewards, values = torch.where(real, rewards, 0.0), torch.where(real, values, 0.0)",
            "rewards, values = rewards * mask, values * mask"),
    }),
    "ex20_grpo_step": _planted("ex20_grpo_step", "grpo_step", {
        "every token gets the reward, not the advantage": ("step.credit(rollout, advantages, cfg)",
                                                           "step.credit(rollout, rewards, cfg)"),
        "an agent's environment tokens not read (no attention mask to lm_batch)": (
            "completion_attention_mask=rollout.attention_mask)", ")"),
        "the credit ignored: Â_i on every token, even per turn": ("step.credit(rollout, advantages, cfg)",
                                                                 "advantages[:, None]"),
        "DAPO's normaliser left out": ("num_tokens=num_tokens, **control)", "num_tokens=None, **control)"),
        "the KL in the reward forgotten": ("if cfg.kl.in_reward() > 0:", "if False:"),
        "cut-off completions kept in the loss": ("    if cfg.mask_truncated:", "    if False:"),
        "the rewards returned where the advantages belong": ("return record, rollout, advantages",
                                                             "return record, rollout, rewards"),
        "the sampler's log-probs left out of the batch": ("sampling_logp=rollout.sampling_logp)",
                                                          "sampling_logp=None)"),
        "GDPO ignored: the summed rewards' advantages always": (
            "advantages = batch_advantages(step, rollout, rewards)",
            "advantages = step.advantages(procs.gather(rewards), cfg)[procs.rank * B:][:B]"),
        "the adaptive entropy coefficient never reaches the update": (
            'control = {} if step.entropy_control is None else {"entropy_control": step.entropy_control}',
            "control = {}"),
    }),
    "ex21_sampler_weights": _planted("ex21_sampler_weights", "sampler_weights", {
        "the ratio inverted: π_sampler/π_old": ("old_logp - sampling_logp", "sampling_logp - old_logp"),
        "truncate masks instead": ('if how == "truncate":', 'if how == "clip":'),
        "mask truncates instead": ('if how == "truncate":', "if True:"),
        "the sequence's weight from the mean of its token log-ratios, not their sum": (
            "log_w.sum(dim=1, keepdim=True)",
            "log_w.sum(dim=1, keepdim=True) / mask.sum(1, keepdim=True).clamp(min=1)"),
        "[B] instead of [B, 1] at the sequence level": ("log_w.sum(dim=1, keepdim=True)", "log_w.sum(dim=1)"),
        "padding not left out: its junk log-ratio counts": ("torch.where(mask.bool(), old_logp - sampling_logp, 0.0)",
                                                             "old_logp - sampling_logp"),
        "padding weighs 0, not 1": ("w = torch.exp(log_w.detach().float())",
                                    "w = torch.exp(log_w.detach().float()) * (mask if level == 'token' else 1)"),
        "NaN propagates: a token the sampler could not score makes its weight NaN": (
            "log_w = torch.nan_to_num(log_w, nan=0.0)", "log_w = log_w"),
        "C_max None taken as 3, not as no bound": ("high = math.inf if clip_max is None",
                                                   "high = 3.0 if clip_max is None"),
        "not detached: a gradient flows through w": ("torch.exp(log_w.detach().float())", "torch.exp(log_w.float())"),
        "a weight exactly at a bound masked (< and > made ≤ and ≥)": ("(w < low) | (w > high)",
                                                                       "(w <= low) | (w >= high)"),
        "padding forced back to 1 after the bounds": (
            'return torch.where((w < low) | (w > high), 0.0, w)',
            'return torch.where(mask.bool() if level == "token" else True, torch.where((w < low) | (w > high), 0.0, w),'
            ' 1.0)'),
        "an unknown mode read as a mask": ('    if mode not in ("token_truncate"', '    if False and mode not in ("x"'),
    }),
}
