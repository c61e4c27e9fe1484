"""The cases of the LM exercises (10–15, 21): group advantages, aggregation, GSPO's ratio, leave-one-out,
the KL in the reward, the soft π_ref update, the sampler's importance weights. The toy exercises' cases and
the tools are in ``cases``."""

from __future__ import annotations

import math

import torch

from .cases import JUNK, Case, Mismatch, kl_random, lengths_mask, padded, pick, randn, shapes, t


def group_relative() -> list[Case]:
    cases = [
        Case("one right answer in a group of four", dict(rewards=t([1, 0, 0, 0]), group_size=4)),
        Case("a group whose rewards are all equal gets Â = 0 (no nan)",
             dict(rewards=t([1, 1, 1, 1, 0, 1, 0, 1]), group_size=4)),
        Case("two groups of two", dict(rewards=t([0.5, 1.0, 3.0, 1.0]), group_size=2)),
        Case("scale='batch': divide by the std of the whole batch", dict(rewards=t([1, 0, 0, 0, 1, 1, 0, 1]),
                                                                       group_size=4, scale="batch")),
        Case("scale='none' (Dr. GRPO): centre only", dict(rewards=t([1, 0, 0, 0, 1, 1, 0, 1]), group_size=4,
                                                          scale="none")),
        Case("a larger ε", dict(rewards=t([1, 0, 0, 0]), group_size=4, eps=0.5)),
        Case("an unknown scale: a ValueError, not a silent fallback",
             dict(rewards=t([1, 0, 0, 0]), group_size=4, scale="std"), raises=ValueError),
        Case("a group of one compares nothing: a ValueError", dict(rewards=t([1, 0]), group_size=1), raises=ValueError),
        Case("5 rewards do not form groups of 2: a ValueError", dict(rewards=t([1, 0, 0, 1, 1]), group_size=2),
             raises=ValueError),
    ]
    g = torch.Generator().manual_seed(10)
    for _ in range(6):
        P, G = pick(g, (1, 2, 3)), pick(g, (2, 3, 4))
        rewards = pick(g, (randn(g, P * G), (torch.rand(P * G, generator=g) < 0.5).float()))
        cases.append(Case(f"random {P} groups of {G}", dict(rewards=rewards, group_size=G,
                                                            scale=pick(g, ("group", "batch", "none")))))
    return cases


def aggregate() -> list[Case]:
    x, mask = t([[1, 2, 3], [4, JUNK, JUNK]]), lengths_mask([3, 1], 3)
    cases = [Case("mode omitted: token_mean, every real action counts once", dict(per_action=x, mask=mask),
                  grad=("per_action",))]
    cases += [
        Case("seq_mean_token_mean (GRPO): every sequence counts once",
             dict(per_action=x, mask=mask, mode="seq_mean_token_mean"), grad=("per_action",)),
        Case("seq_mean_token_sum (LUSPO): each sequence's sum, then the mean over sequences",
             dict(per_action=x, mask=mask, mode="seq_mean_token_sum"), grad=("per_action",)),
        Case("sum_over_constant, Dr. GRPO's num_tokens = B · L_max, the generation budget (2 · 5, not B · T = 6)",
             dict(per_action=x, mask=mask, mode="sum_over_constant", num_tokens=10.0), grad=("per_action",)),
        Case("sum_over_constant, DAPO's num_tokens: the whole batch's real tokens (8, over every minibatch)",
             dict(per_action=x, mask=mask, mode="sum_over_constant", num_tokens=8.0), grad=("per_action",)),
        Case("sum_over_constant with num_tokens = 0 passed by the caller: divide by 1, never by 0",
             dict(per_action=x, mask=mask, mode="sum_over_constant", num_tokens=0.0), grad=("per_action",)),
        Case("sum_over_constant without num_tokens: a ValueError, the constant is the caller's to give",
             dict(per_action=x, mask=mask, mode="sum_over_constant"), raises=ValueError),
        Case("an unknown mode: a ValueError, not a silent fallback",
             dict(per_action=x, mask=mask, mode="mean"), raises=ValueError),
    ]
    empty = lengths_mask([0, 0], 2)
    cases += [Case(f"{mode}, a batch without a real action: 0 (never 0 / 0)",
                   dict(per_action=t([[JUNK, JUNK], [JUNK, JUNK]]), mask=empty, mode=mode,
                        **({"num_tokens": 0.0} if mode == "sum_over_constant" else {})), grad=("per_action",))
              for mode in ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "sum_over_constant")]
    cases += [
        Case("token_mean ignores num_tokens", dict(per_action=x, mask=mask, mode="token_mean", num_tokens=8.0),
             grad=("per_action",)),
        Case("padding holding inf and nan never leaks in",
             dict(per_action=t([[1, float("inf")], [2, float("nan")]]), mask=lengths_mask([1, 1], 2)),
             grad=("per_action",)),
        Case("seq_mean_token_mean with an empty row: it counts 0 in the mean over B",
             dict(per_action=t([[1, 3], [JUNK, JUNK]]), mask=lengths_mask([2, 0], 2), mode="seq_mean_token_mean"),
             grad=("per_action",)),
    ]
    g = torch.Generator().manual_seed(11)
    for B, T, mask in shapes(g, 6):
        mode = pick(g, ("token_mean", "seq_mean_token_mean", "sum_over_constant"))
        inputs = dict(per_action=padded(randn(g, B, T), mask), mask=mask, mode=mode)
        if mode == "sum_over_constant":
            real_tokens = float(mask.sum()) * pick(g, (1.0, 1.5))    # DAPO: the real tokens (or a share of them)
            budget = float(B * (T + pick(g, (0, 2, 5))))              # Dr. GRPO: B · L_max, L_max ≥ T
            inputs["num_tokens"] = pick(g, (real_tokens, budget))
        constant = f", num_tokens = {inputs['num_tokens']:g}" if "num_tokens" in inputs else ""
        cases.append(Case(f"random {B}×{T}, {mode}{constant}", inputs, grad=("per_action",)))
    return cases


def sequence_log_ratio() -> list[Case]:
    inf, nan = float("inf"), float("nan")
    mask = lengths_mask([2, 0], 3)
    cases = [
        Case("log s_i: the mean log-ratio over each row's real tokens; an empty row gets 0",
             dict(logp=t([[-1.0, -2.0, JUNK], [JUNK, JUNK, JUNK]]), old_logp=t([[-1.2, -1.6, -JUNK], [0, 0, 0]]),
                  mask=mask), grad=("logp",)),
        Case("π_θ = π_old: log s = 0", dict(logp=t([[-1.0, -2.0, -0.5]]), old_logp=t([[-1.0, -2.0, -0.5]]),
                                           mask=torch.ones(1, 3)), grad=("logp",)),
        Case("divide by the real tokens |y_i| (3 and 1), not by T = 4",
             dict(logp=t([[-1.0, -0.5, -2.0, JUNK], [-0.1, JUNK, JUNK, JUNK]]),
                  old_logp=t([[-1.5, -1.0, -1.0, -JUNK], [-0.4, -JUNK, -JUNK, -JUNK]]), mask=lengths_mask([3, 1], 4)),
             grad=("logp",)),
        Case("padding holding inf and nan never leaks in, nor into the gradient",
             dict(logp=t([[-1.0, inf], [-2.0, nan]]), old_logp=t([[-0.5, nan], [-1.0, -inf]]),
                  mask=lengths_mask([1, 1], 2)), grad=("logp",)),
        Case("a row without real tokens: log s = 0 (s = 1), not nan",
             dict(logp=t([[nan, nan]]), old_logp=t([[0.0, 0.0]]), mask=lengths_mask([0], 2)), grad=("logp",)),
    ]
    g = torch.Generator().manual_seed(12)
    for B, T, mask in shapes(g, 6):
        logp = -3 * torch.rand(B, T, generator=g)
        fill = pick(g, (JUNK, inf, nan))
        inputs = dict(logp=padded(logp, mask, fill), old_logp=padded(logp + randn(g, B, T, scale=0.3), mask, -JUNK),
                      mask=mask)
        cases.append(Case(f"random {B}×{T}, padding {fill}", inputs, grad=("logp",)))
    return cases


def leave_one_out() -> list[Case]:
    cases = [
        Case("one right answer in a group of four: the others' mean is the baseline",
             dict(rewards=t([1, 0, 0, 0]), group_size=4)),
        Case("a group whose rewards are all equal gets Â = 0", dict(rewards=t([1, 1, 1, 1, 0, 1, 0, 1]), group_size=4)),
        Case("groups of two: Â_i = r_i − r_j, the one other completion", dict(rewards=t([0.5, 1.0, 3.0, 1.0]),
                                                                           group_size=2)),
        Case("Â_i = G/(G−1) · (r_i − mean): the baseline divides by G − 1, not G",
             dict(rewards=t([2, 0, 1, 0.5, -1, 3]), group_size=3, scale="none")),
        Case("scale='batch': Â whitened over the whole batch (sample std)",
             dict(rewards=t([1, 0, 0, 0, 1, 1, 0, 1]), group_size=4, scale="batch")),
        Case("scale='batch', every reward equal: Â = 0 / (0 + ε) = 0, not nan",
             dict(rewards=t([1, 1, 1, 1]), group_size=2, scale="batch")),
        Case("scale='batch' with a larger ε", dict(rewards=t([1, 0, 0, 0, 1, 1, 0, 1]), group_size=4, scale="batch",
                                                  eps=0.5)),
        Case("group_size 1: no other completion to compare with (ValueError)", dict(rewards=t([1, 0]), group_size=1),
             raises=ValueError),
        Case("6 rewards do not form groups of 4 (ValueError)", dict(rewards=t([1, 0, 0, 1, 1, 0]), group_size=4),
             raises=ValueError),
        Case("scale='group' is GRPO's, not leave-one-out's (ValueError)",
             dict(rewards=t([1, 0, 0, 0]), group_size=4, scale="group"), raises=ValueError),
    ]
    g = torch.Generator().manual_seed(13)
    for _ in range(6):
        P, G = pick(g, (1, 2, 3)), pick(g, (2, 3, 4))
        rewards = pick(g, (randn(g, P * G), (torch.rand(P * G, generator=g) < 0.5).float()))
        cases.append(Case(f"random {P} groups of {G}", dict(rewards=rewards, group_size=G,
                                                            scale=pick(g, ("none", "batch")))))
    return cases


def kl_in_reward() -> list[Case]:
    inf, nan = float("inf"), float("nan")
    mask = lengths_mask([2, 3], 3)
    old, ref = t([[-1.0, -1.5, JUNK], [-0.5, -0.5, -0.5]]), t([[-2.0, -1.0, -JUNK], [-0.5, -1.0, -1.0]])
    grad = ("rewards", "old_logp")
    cases = [
        Case("k1 summed over each row's real tokens, r − β·KL (estimator omitted: k1); no gradient reaches old_logp",
             dict(rewards=t([1.0, 0.0]), old_logp=old, ref_logp=ref, mask=mask, kl_coef=0.1), grad=grad),
    ]
    cases += [Case(f"{k} and a larger β", dict(rewards=t([1.0, 0.0]), old_logp=old, ref_logp=ref, mask=mask,
                                              kl_coef=0.5, estimator=k), grad=grad) for k in ("k2", "k3")]
    cases += [
        Case("padding holding inf and nan never leaks in",
             dict(rewards=t([0.5, -0.5]), old_logp=t([[-1.0, inf], [-0.3, nan]]),
                  ref_logp=t([[-1.2, nan], [-0.1, inf]]), mask=lengths_mask([1, 1], 2), kl_coef=0.2, estimator="k3"),
             grad=grad),
        Case("an empty row: KL 0, its reward unchanged",
             dict(rewards=t([2.0, 1.0]), old_logp=t([[JUNK, JUNK], [-1.0, -1.0]]),
                  ref_logp=t([[0.0, 0.0], [-2.0, -1.0]]), mask=lengths_mask([0, 2], 2), kl_coef=0.1), grad=grad),
        Case("β = 0: the rewards unchanged, the KL still measured",
             dict(rewards=t([1.0, 0.0]), old_logp=old, ref_logp=ref, mask=mask, kl_coef=0.0), grad=grad),
        Case("an unknown estimator: a ValueError, not a silent fallback",
             dict(rewards=t([1.0, 0.0]), old_logp=old, ref_logp=ref, mask=mask, kl_coef=0.1, estimator="k4"),
             raises=ValueError),
    ]
    g = torch.Generator().manual_seed(14)
    for B, T, mask in shapes(g, 6):
        kl = kl_random(g, B, T)
        inputs = dict(rewards=randn(g, B), old_logp=padded(kl["logp"], mask, pick(g, (JUNK, inf, nan))),
                      ref_logp=padded(kl["ref_logp"], mask, -JUNK), mask=mask, kl_coef=pick(g, (0.03, 0.1, 0.5)),
                      estimator=pick(g, ("k1", "k2", "k3")))
        cases.append(Case(f"random {B}×{T} with padding, {inputs['estimator']}", inputs, grad=grad))
    return cases


def soft_update() -> list[Case]:
    def leaves(*values, requires_grad=False, dtype=torch.float32):
        return [torch.tensor(v, dtype=dtype, requires_grad=requires_grad) for v in values]

    ref, theta = ([[0.0, 1.0], [2.0, 3.0]], [4.0]), ([[1.0, 1.0], [0.0, 3.0]], [0.0])
    far, near = [1e8, -3e7, 5.0], [1.0, 0.3, -2.0]
    up = ("reference",)
    cases = [
        Case("α = 0.25: θ_ref moves a quarter of the way to θ, tensor by tensor, in place",
             dict(reference=leaves(*ref), policy=leaves(*theta), alpha=0.25), updates=up),
        Case("α = 0 keeps π_ref as it is", dict(reference=leaves(near), policy=leaves(far), alpha=0.0), updates=up),
        Case("α = 1 copies π_θ exactly, even from far away (θ_ref + α(θ − θ_ref) would give 0 for 1e8 → 1)",
             dict(reference=leaves(far), policy=leaves(near), alpha=1.0), updates=up),
        Case("π_θ's parameters require grad (nn.Parameters): π_ref must not join the autograd graph",
             dict(reference=leaves(*ref), policy=leaves(*theta, requires_grad=True), alpha=0.5), updates=up),
        Case("π_ref's parameters require grad too: an in-place change of them needs torch.no_grad()",
             dict(reference=leaves(*ref, requires_grad=True), policy=leaves(*theta, requires_grad=True), alpha=0.6),
             updates=up),
        Case("a float64 π_ref and a float32 π_θ: θ is cast to π_ref's dtype",
             dict(reference=leaves(*ref, dtype=torch.float64), policy=leaves(*theta), alpha=0.6), updates=up),
        Case("no parameters: nothing to do", dict(reference=[], policy=[], alpha=0.6), updates=up),
        Case("2 reference tensors for 1 policy tensor (ValueError; zip would stop at the shorter)",
             dict(reference=leaves(*ref), policy=leaves(theta[0]), alpha=0.5), updates=up, raises=ValueError),
    ]
    g = torch.Generator().manual_seed(15)
    for _ in range(6):
        n = pick(g, (1, 2, 3))
        sizes = [tuple(int(torch.randint(1, 4, (), generator=g)) for _ in range(pick(g, (1, 2)))) for _ in range(n)]
        alpha = pick(g, (0.0, 0.1, 0.6, 1.0, float(torch.rand((), generator=g))))
        cases.append(Case(f"random: {n} tensors, α = {alpha:.3g}",
                          dict(reference=[randn(g, *s) for s in sizes], policy=[randn(g, *s, scale=2.0) for s in sizes],
                               alpha=alpha), updates=up))
    return cases


def sampler_weights() -> list[Case]:
    """Rows by hand, then random rows of every mode."""
    return _sampler_weights_by_hand() + _sampler_weights_random()


def _sampler_weights_by_hand() -> list[Case]:
    """Three real tokens whose weights π_old/π_sampler are 4, 0.5 and 1 (their product 2), and a pad."""
    nan, inf, log = math.nan, math.inf, math.log
    old, sampling = t([[log(0.4), log(0.1), log(0.3), JUNK]]), t([[log(0.1), log(0.2), log(0.3), -JUNK]])
    mask = lengths_mask([3], 4)

    def weights(label: str, mode: str, clip_min: float | None, clip_max: float | None, **given) -> Case:
        inputs = dict(old_logp=old, sampling_logp=sampling, mask=mask, mode=mode, clip_min=clip_min,
                      clip_max=clip_max)
        return Case(label, {**inputs, **given})

    unscored = t([[nan, log(0.2), log(0.3), inf]])          # the sampler could not score the first token
    two_rows = dict(old_logp=t([[log(0.4), log(0.1), nan], [nan, inf, -inf]]),
                    sampling_logp=t([[log(0.1), log(0.2), inf], [nan, -inf, nan]]), mask=lengths_mask([2, 0], 3))
    cases = [
        weights("token_truncate, C_max = 3: w_t = π_old/π_sampler = 4, 0.5, 1 become 3, 0.5, 1; the pad's junk "
                "log-ratio (14) is left out: it weighs 1", "token_truncate", None, 3.0),
        weights("token_truncate with C_min = 0.6 too: 0.5 is raised to 0.6", "token_truncate", 0.6, 3.0),
        weights("token_truncate, both bounds None (no bound): the plain weights 4, 0.5, 1", "token_truncate",
                None, None),
        weights("token_mask, C_max = 3: 4 lies above, so it becomes 0 (masked), not 3", "token_mask", None, 3.0),
        weights("token_mask in [0.6, 5]: 0.5 lies below C_min, so it becomes 0", "token_mask", 0.6, 5.0),
        weights("token_mask, both bounds None: nothing is masked", "token_mask", None, None),
        weights("sequence_truncate: one weight per row, [B, 1]: 4 · 0.5 · 1 = 2, the exp of the summed token "
                "log-ratios (not of their mean)", "sequence_truncate", None, 3.0),
        weights("sequence_truncate, C_max = 1.5: 2 becomes 1.5", "sequence_truncate", None, 1.5),
        weights("sequence_mask, C_max = 1.5: 2 lies above, the whole completion's weight is 0", "sequence_mask",
                None, 1.5),
        weights("sequence_mask in [0.5, 3]: 2 lies inside, kept", "sequence_mask", 0.5, 3.0),
        weights("sequence_mask, C_min = 2.5 and C_max None: masked below, no bound above", "sequence_mask", 2.5, None),
        weights("a token the sampler could not score (log π_sampler NaN) weighs 1; the pad holds inf",
                "token_truncate", None, 3.0, sampling_logp=unscored),
        weights("… and adds nothing to its sequence's log-weight: 0.5 · 1 = 0.5, not NaN", "sequence_truncate",
                None, 3.0, sampling_logp=unscored),
        Case("padding holding NaN and ±inf, and an empty row: every pad weighs 1 (token_mask in [0.3, 5])",
             dict(**two_rows, mode="token_mask", clip_min=0.3, clip_max=5.0)),
        Case("sequence level: an empty row's log-weight is a sum over no tokens, 0, so its w is 1",
             dict(**two_rows, mode="sequence_mask", clip_min=0.5, clip_max=5.0)),
        weights("token_truncate with C_min = 1.5: the bound applies after the pad got w = 1, so the pad's w is 1.5 "
                "(as TRL's); 0.5 and 1 are raised to 1.5 too", "token_truncate", 1.5, 3.0),
        weights("token_mask with C_min = 1.5: the pad's w = 1 lies below, so it becomes 0, like 0.5 and 1",
                "token_mask", 1.5, 5.0),
        Case("a weight exactly at a bound is inside: w = 1 with C_min = C_max = 1 is kept (≤, not <)",
             dict(old_logp=t([[0.0, -1.0]]), sampling_logp=t([[0.0, -1.0]]), mask=t([[1.0, 1.0]]), mode="token_mask",
                  clip_min=1.0, clip_max=1.0)),
        Case("an unknown mode: a ValueError", dict(old_logp=old, sampling_logp=sampling, mask=mask, mode="tok_trunc",
                                                  clip_min=None, clip_max=3.0), raises=ValueError),
        Case("w is a constant: no gradient flows through it to old_logp or sampling_logp",
             dict(old_logp=old, sampling_logp=sampling, mask=mask, mode="token_truncate", clip_min=None,
                  clip_max=3.0), check=_no_gradient(old, sampling, mask)),
    ]
    return cases


def _sampler_weights_random() -> list[Case]:
    """Eight random shapes, the modes in turn; junk, NaN or inf in the padding; some tokens left unscored."""
    nan, inf = math.nan, math.inf
    cases = []
    g = torch.Generator().manual_seed(21)
    modes = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
    for i, (B, T, mask_r) in enumerate(shapes(g, 8)):
        old_r = -3 * torch.rand(B, T, generator=g)
        sampling_r = old_r + randn(g, B, T, scale=0.5)
        unscored_r = (torch.rand(B, T, generator=g) < 0.15) & mask_r.bool()
        fill = pick(g, (JUNK, nan, inf))
        inputs = dict(old_logp=padded(old_r, mask_r, fill),
                      sampling_logp=padded(torch.where(unscored_r, nan, sampling_r), mask_r, -fill),
                      mask=mask_r, mode=modes[i % 4], clip_min=pick(g, (None, 0.5, 0.8)),
                      clip_max=pick(g, (None, 1.5, 2.0, 3.0)))
        cases.append(Case(f"random {B}×{T}, {inputs['mode']}, [C_min, C_max] = [{inputs['clip_min']}, "
                          f"{inputs['clip_max']}], padding {fill}" + (", NaN where the sampler could not score"
                                                                       if unscored_r.any() else ""), inputs))
    return cases


def _no_gradient(old, sampling, mask):
    def check(fn, core):
        given = dict(old_logp=old.clone().requires_grad_(True), sampling_logp=sampling.clone().requires_grad_(True),
                     mask=mask, mode="token_truncate", clip_min=None, clip_max=3.0)
        w = fn(**given)
        if isinstance(w, torch.Tensor) and w.requires_grad:
            raise Mismatch("the weight carries a gradient back to the log-probs: π_old and π_sampler are fixed, "
                           "so w is a constant (detach it)")
    return check


LM_CASES = {
    "ex10_group_relative": group_relative, "ex11_aggregate": aggregate, "ex12_sequence_ratio": sequence_log_ratio,
    "ex13_leave_one_out": leave_one_out, "ex14_kl_in_reward": kl_in_reward, "ex15_soft_update": soft_update,
    "ex21_sampler_weights": sampler_weights,
}
