"""The fourth policy: π_sampler, the one that drew the tokens, when it is not π_old.

A cheaper sampler (another engine, a lower precision, a KV-cached decode) gives other log-probs
than the trainer's full-precision forward of the same weights, π_old. The batch was drawn from
π_sampler, so the surrogate built on π_old is off-policy by the weight

    w = π_old / π_sampler          per token:    w_t = exp(log π_old(a_t) − log π_sampler(a_t))
                                   per sequence: w_i = exp(Σ_t m_t · (log π_old(a_t) − log π_sampler(a_t)))

``sampler_weights`` computes it truncated (TIS: clamp(w, C_min, C_max) — biased, bounded variance) or
masked (w outside [C_min, C_max] becomes 0: the token or sequence leaves the loss);
``off_policy_keep`` drops whole sequences that are both off-policy and bad (DeepSeek-V3.2). Both
multiply the policy term of the loss, never the KL to π_ref (``update.compute_loss``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .swappable import swappable

CORRECTIONS = ("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def sampler_log_ratio(old_logp: Tensor, sampling_logp: Tensor, mask: Tensor, level: str) -> Tensor:
    """log w = log π_old − log π_sampler over the real tokens: ``[B, T]`` (level "token") or ``[B, 1]``
    ("sequence": the sum over the row, the log of the product of its token weights). Padding and tokens
    the sampler could not score (NaN) add 0: their weight is 1."""
    diff = torch.nan_to_num(torch.where(mask.bool(), old_logp - sampling_logp, 0.0), nan=0.0)
    return diff.sum(dim=1, keepdim=True) if level == "sequence" else diff


@swappable
def sampler_weights(old_logp: Tensor, sampling_logp: Tensor, mask: Tensor, mode: str,
                    clip_min: float | None = None, clip_max: float | None = 3.0) -> Tensor:
    """The importance weight w = π_old / π_sampler of each token ``[B, T]`` or sequence ``[B, 1]``, corrected.

        token_truncate     w_t ← clamp(w_t, C_min, C_max)
        token_mask         w_t ← w_t if C_min ≤ w_t ≤ C_max else 0
        sequence_truncate  w_i ← clamp(w_i, C_min, C_max)      w_i = Π_t w_t
        sequence_mask      w_i ← w_i if C_min ≤ w_i ≤ C_max else 0

    A bound left None is no bound; the bounds apply to every entry, padding's w = 1 included (as TRL's do;
    the loss masks padding anyway). No gradient flows through w (π_old and π_sampler are fixed).
    """
    if mode not in CORRECTIONS[1:]:
        raise ValueError(f"mode must be one of {', '.join(CORRECTIONS[1:])}, got {mode!r}")
    level, how = mode.split("_")
    w = torch.exp(sampler_log_ratio(old_logp, sampling_logp, mask, level).detach().float())
    if how == "truncate":
        return w if clip_min is None and clip_max is None else torch.clamp(w, min=clip_min, max=clip_max)
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    return w.masked_fill((w < low) | (w > high), 0.0)


def off_policy_keep(advantages: Tensor, logp: Tensor, sampling_logp: Tensor, mask: Tensor, delta: float) -> Tensor:
    """DeepSeek-V3.2's off-policy sequence mask, ``[B, T]`` of 0/1: keep a completion's tokens if its advantage
    is not negative or it is close enough to π_θ,

        keep_i = (Â_i ≥ 0)  or  (1/|y_i|) Σ_t m_t · (log π_sampler(a_t) − log π_θ(a_t)) ≤ δ

    (π_θ detached, recomputed at every step; ``sampling_logp`` is π_old's log-probs when the sampler is
    π_old). Â is read per token, so a row's tokens share its keep when they share its advantage."""
    diff = torch.nan_to_num(torch.where(mask.bool(), sampling_logp - logp.detach(), 0.0), nan=0.0)
    mean_kl = diff.sum(dim=1, keepdim=True) / mask.sum(dim=1, keepdim=True).clamp(min=1.0)
    return ((advantages >= 0) | (mean_kl <= delta)).to(mask.dtype)


def sampler_stat_tensors(old_logp: Tensor, sampling_logp: Tensor, mask: Tensor, mode: str,
                         weights: Tensor | None) -> dict[str, Tensor]:
    """What the sampler did to the batch: |log π_old − log π_sampler| (mean and max over the real tokens), the
    spread (std over rows) of the sequence log-weight Σ_t log(π_old/π_sampler) — a sum over |y| tokens, so it
    grows with length where each token's stays small —, and with a correction the weights' min / mean / max
    and the share of tokens (token modes) or sequences (sequence modes) it truncated or masked."""
    real = mask.bool()
    gap = torch.nan_to_num((old_logp - sampling_logp).abs(), nan=0.0)[real]
    seq = sampler_log_ratio(old_logp, sampling_logp, mask, "sequence").squeeze(1)
    zero = torch.zeros((), device=mask.device)
    out = {"sampler/logp_diff_mean": gap.mean() if gap.numel() else zero,
           "sampler/logp_diff_max": gap.max() if gap.numel() else zero,
           "sampler/seq_log_ratio_std": seq.std() if seq.numel() > 1 else zero}
    if weights is not None:
        level = mode.split("_")[0]
        raw = torch.exp(sampler_log_ratio(old_logp, sampling_logp, mask, level))
        shown = weights[real] if level == "token" else weights.squeeze(1)
        changed = (weights != raw)[real] if level == "token" else (weights != raw).squeeze(1)
        out.update({"sampler/is_ratio_min": shown.min() if shown.numel() else zero,
                    "sampler/is_ratio_mean": shown.mean() if shown.numel() else zero,
                    "sampler/is_ratio_max": shown.max() if shown.numel() else zero,
                    "sampler/corrected_frac": changed.float().mean() if changed.numel() else zero})
    return out


@dataclass(frozen=True)
class SamplerOptions:
    """How the policy term is corrected for its sampler: the weight's mode and bounds, and δ of the mask."""

    correction: str = "none"            # π_old/π_sampler weight of the policy term: CORRECTIONS
    clip_min: float | None = None       # C_min of that weight (None: no lower bound)
    clip_max: float | None = 3.0        # C_max of that weight (None: no upper bound)
    off_policy_mask: float | None = None  # δ of the off-policy sequence mask (None: off)


def corrected_weights(old_logp: Tensor, sampling_logp: Tensor | None, mask: Tensor, options: SamplerOptions
                      ) -> Tensor | None:
    """w = π_old/π_sampler as ``options`` corrects it (``sampler_weights``), or None: no sampler's log-probs
    (π_sampler = π_old), or no correction asked for."""
    if sampling_logp is None or options.correction == "none":
        return None
    return sampler_weights(old_logp, sampling_logp, mask, options.correction, options.clip_min, options.clip_max)


def sampler_correction(per_token_loss: Tensor, logp: Tensor, old_logp: Tensor, sampling_logp: Tensor | None,
                       advantages: Tensor, mask: Tensor, options: SamplerOptions, weights: Tensor | None,
                       weigh: bool = True) -> tuple[Tensor, dict[str, Tensor]]:
    """The policy term's per-token loss, corrected for its sampler, and the statistics of the correction:

        L_t ← keep_i · w · L_t       w = ``weights`` (``corrected_weights``; 1 when None or not ``weigh``:
                                     an objective that folds w into its own weight), keep_i =
                                     off_policy_keep(…, δ) (1 with δ None)

    Without ``sampling_logp`` the sampler is π_old: no weight, and the off-policy mask compares π_old with π_θ."""
    stats: dict[str, Tensor] = {}
    if sampling_logp is not None:
        stats.update(sampler_stat_tensors(old_logp, sampling_logp, mask, options.correction, weights))
        if weights is not None and weigh:
            per_token_loss = per_token_loss * weights
    if options.off_policy_mask is not None:
        sampler = old_logp if sampling_logp is None else sampling_logp
        keep = off_policy_keep(advantages, logp, sampler, mask, options.off_policy_mask)
        real = mask.sum(1)
        rows = real > 0  # a row's share of real tokens dropped (not keep at t = 0, which may be a masked token)
        stats["off_policy/masked_frac"] = 1.0 - ((keep * mask).sum(1)[rows] / real[rows]).float().mean() \
            if rows.any() else torch.zeros((), device=mask.device)
        per_token_loss = per_token_loss * keep
    return per_token_loss, stats
