"""Diagnostics of one optimisation step: what the ratio, the clip and the KLs are doing."""

from __future__ import annotations

import torch
from torch import Tensor


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def clip_fractions(ratio: Tensor, advantages: Tensor, mask: Tensor, clip_eps_low: float,
                   clip_eps_high: float) -> dict[str, float]:
    """Fraction of actions whose gradient the clip switched off.

        low    r < 1 − ε_low  and Â < 0
        high   r > 1 + ε_high and Â > 0
        region low or high
    """
    low = ((ratio < 1.0 - clip_eps_low) & (advantages < 0)).to(mask.dtype)
    high = ((ratio > 1.0 + clip_eps_high) & (advantages > 0)).to(mask.dtype)
    return {
        "clip_frac_low": masked_mean(low, mask).item(),
        "clip_frac_high": masked_mean(high, mask).item(),
        "clip_frac": masked_mean(low + high, mask).item(),
    }


def approx_kl_old(logp: Tensor, old_logp: Tensor, mask: Tensor) -> dict[str, float]:
    """KL(π_old ‖ π_θ) from the batch's samples (a ~ π_old), with r = π_θ/π_old:

        k1 = E[−log r]           k3 = E[(r − 1) − log r]
    """
    log_ratio = logp - old_logp
    return {
        "approx_kl_old_k1": masked_mean(-log_ratio, mask).item(),
        "approx_kl_old_k3": masked_mean(torch.expm1(log_ratio) - log_ratio, mask).item(),
    }


def ratio_stats(ratio: Tensor, mask: Tensor) -> dict[str, float]:
    real = ratio[mask.bool()]
    if real.numel() == 0:
        return {"ratio_min": 1.0, "ratio_mean": 1.0, "ratio_max": 1.0}
    return {"ratio_min": real.min().item(), "ratio_mean": real.mean().item(), "ratio_max": real.max().item()}


def explained_variance(values: Tensor, returns: Tensor, mask: Tensor) -> float:
    """1 − Var[R − V] / Var[R]: 1 is a perfect critic, 0 no better than a constant, < 0 worse."""
    real = mask.bool()
    v, r = values[real], returns[real]
    var_r = r.var(unbiased=False)
    if r.numel() < 2 or var_r.item() == 0.0:
        return float("nan")
    return (1.0 - (r - v).var(unbiased=False) / var_r).item()
