"""Diagnostics of one optimisation step: what the ratio, the clip and the KLs are doing."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor

# How a statistic combines over several records (the minibatches of a pass, the data-parallel processes):
# the mean, unless named here. The one table both ``update`` and ``ladder.runtime.distributed`` read.
REDUCTIONS: dict[str, Callable[[list[float]], float]] = {
    "ratio_min": min, "ratio_max": max, "sampler/logp_diff_max": max, "sampler/is_ratio_min": min,
    "sampler/is_ratio_max": max}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def reduce_stats(records: Iterable[dict[str, float]]) -> dict[str, float]:
    """One record from many: each key's values, over the records that hold it, reduced by
    ``REDUCTIONS[key]`` (the mean for a key not in the table).

        ratio_min = min_k ratio_min_k      ratio_max = max_k ratio_max_k      x = (1/K) Σ_k x_k
    """
    values: dict[str, list[float]] = {}
    for record in records:
        for key, value in record.items():
            values.setdefault(key, []).append(value)
    return {key: REDUCTIONS.get(key, _mean)(v) for key, v in values.items()}


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def _floats(stats: dict[str, Tensor]) -> dict[str, float]:
    values = torch.stack(list(stats.values())).tolist()  # one synchronisation, not one per number
    return dict(zip(stats, values))


def clip_fraction_tensors(ratio: Tensor, advantages: Tensor, mask: Tensor, clip_eps_low: float,
                          clip_eps_high: float) -> dict[str, Tensor]:
    low = ((ratio < 1.0 - clip_eps_low) & (advantages < 0)).to(mask.dtype)
    high = ((ratio > 1.0 + clip_eps_high) & (advantages > 0)).to(mask.dtype)
    return {"clip_frac_low": masked_mean(low, mask), "clip_frac_high": masked_mean(high, mask),
            "clip_frac": masked_mean(low + high, mask)}


def clip_fractions(ratio: Tensor, advantages: Tensor, mask: Tensor, clip_eps_low: float,
                   clip_eps_high: float) -> dict[str, float]:
    """Fraction of actions whose gradient the clip switched off.

        low    ρ < 1 − ε_low  and Â < 0
        high   ρ > 1 + ε_high and Â > 0
        region low or high
    """
    return _floats(clip_fraction_tensors(ratio, advantages, mask, clip_eps_low, clip_eps_high))


def approx_kl_old_tensors(logp: Tensor, old_logp: Tensor, mask: Tensor) -> dict[str, Tensor]:
    log_ratio = torch.where(mask.bool(), logp - old_logp, 0.0)
    return {"approx_kl_old_k1": masked_mean(-log_ratio, mask),
            "approx_kl_old_k3": masked_mean(torch.expm1(log_ratio) - log_ratio, mask)}


def approx_kl_old(logp: Tensor, old_logp: Tensor, mask: Tensor) -> dict[str, float]:
    """KL(π_old ‖ π_θ) from the batch's samples (a ~ π_old), with ρ = π_θ/π_old:

        k1 = E[−log ρ]           k3 = E[(ρ − 1) − log ρ]
    """
    return _floats(approx_kl_old_tensors(logp, old_logp, mask))


def ratio_stat_tensors(ratio: Tensor, mask: Tensor) -> dict[str, Tensor]:
    real = mask.bool()
    if not real.any():
        one = torch.ones((), dtype=ratio.dtype, device=ratio.device)
        return {"ratio_min": one, "ratio_mean": one, "ratio_max": one}
    inf = torch.full_like(ratio, float("inf"))
    return {"ratio_min": torch.where(real, ratio, inf).min(), "ratio_mean": masked_mean(ratio, mask.to(ratio.dtype)),
            "ratio_max": torch.where(real, ratio, -inf).max()}


def ratio_stats(ratio: Tensor, mask: Tensor) -> dict[str, float]:
    """min, mean and max of the ratio π_θ/π_old over the real actions."""
    return _floats(ratio_stat_tensors(ratio, mask))


def explained_variance(values: Tensor, returns: Tensor, mask: Tensor) -> float:
    """1 − Var[R − V] / Var[R]: 1 is a perfect critic, 0 no better than a constant, < 0 worse."""
    real = mask.bool()
    v, r = values[real], returns[real]
    var_r = r.var(unbiased=False)
    if r.numel() < 2 or var_r.item() == 0.0:
        return float("nan")
    return (1.0 - (r - v).var(unbiased=False) / var_r).item()


def minibatch_stats(terms: dict[str, Tensor], ratio: Tensor, advantages: Tensor, mask: Tensor, logp: Tensor,
                    old_logp: Tensor, clip_eps_low: float, clip_eps_high: float) -> dict[str, float]:
    """The statistics of one minibatch's loss, as floats: its terms (``loss``, ``loss_pg``, …), the clip
    fractions, KL(π_old‖π_θ) as k1 and k3, and the ratio's min / mean / max over the real actions."""
    with torch.no_grad():
        out = dict(terms)
        out.update(clip_fraction_tensors(ratio, advantages, mask, clip_eps_low, clip_eps_high))
        out.update(approx_kl_old_tensors(logp, old_logp, mask))
        out.update(ratio_stat_tensors(ratio, mask))
        return _floats({k: v.detach().float() for k, v in out.items()})


def pass_record(k: int, steps: list[dict[str, float]], critic: list[tuple[Tensor, Tensor, Tensor]]) -> dict:
    """One pass's record from its minibatches' statistics: reduced (``reduce_stats``), ``skipped_steps``
    as a count, the critic's explained variance over the whole pass (from each minibatch's
    (values, returns, mask); none without a critic), and the pass's index ``pass`` = k."""
    record = reduce_stats(steps)
    record["skipped_steps"] = sum(step["skipped_steps"] for step in steps)  # a count of steps, not an average
    if critic:
        v, r, m = (torch.cat([c[i].reshape(-1) for c in critic]) for i in range(3))
        record["explained_variance"] = explained_variance(v, r, m)
    record["pass"] = k
    return record


def step_counts(passes: list[dict], num_minibatches: int) -> dict:
    """An update's optimiser steps from ``update``'s passes, for the record and the loop's non-finite guard:
    ``skipped_steps`` (summed over the passes) of ``optimizer_steps`` = passes × M minibatches."""
    return {"skipped_steps": sum(p["skipped_steps"] for p in passes),
            "optimizer_steps": len(passes) * num_minibatches}
