"""The one update every rung calls: μ passes × shuffled minibatches over a ``Batch``.

For each minibatch:

    logp, H, V  = policy.evaluate(minibatch)              log π_θ, entropy, values  [b, T]
    ρ           = exp(logp − old_logp)                    ratio π_θ / π_old, per token
                  (or GSPO's one ratio per row: ratio_level "sequence")
    L_pg        = objective.term(x, cfg)                  Clipped, CISPO, SoftGate, GammaWeighted, Reinforce:
                                                          a spec with its parameters (objectives.py)
                  × keep_i · π_old/π_sampler              when the batch has a sampler's log-probs (off_policy.py)
                  × keep_t                                with entropy_quantile q < 1: the top-q entropy
                                                          tokens only (entropy.py)
    L           = agg(L_pg) + c_v·agg(L_V) − c_H·mean_t(H) + β·agg(KL(π_θ‖π_ref))

then one optimiser step with the gradient norm clipped. REINFORCE, PPO and GRPO all come through
here: what differs between them is in the batch (its advantages: returns, GAE with a critic, or
group-relative; a π_ref to anchor to) and in this configuration (the objective, μ, M, the value and
KL terms).

A policy is anything with ``evaluate(batch) -> (logp, entropy | None, values | None)``, each
``[B, T]``, computed with gradients for the actions stored in the batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Protocol

import torch
from torch import Tensor

from . import stats
from .advantages import whiten
from .batch import Batch
from .entropy import AdaptiveEntropyCoef, high_entropy_mask
from .guard import step_if_finite
from .kl import kl_estimate
from .losses import aggregate, entropy_bonus, sequence_log_ratio, value_loss
from .objectives import Objective, PolicyInputs, objective_spec
from .off_policy import SamplerOptions, corrected_weights, sampler_correction
from .stats import masked_mean
from .swappable import swappable

RATIO_LEVELS = ("token", "sequence")


class Policy(Protocol):
    def evaluate(self, batch: Batch) -> tuple[Tensor, Tensor | None, Tensor | None]: ...


@dataclass
class UpdateConfig:
    """How ``update`` turns a batch into optimiser steps. Names follow the equations above."""

    mu: int = 1                          # μ: optimisation passes over one batch
    num_minibatches: int = 1             # shuffled minibatches per pass (each one optimiser step)
    objective: Objective | str = "clipped"  # the policy term: a spec of objectives.py (Clipped(delta=1.5), …),
                                         # or a registered name for its defaults ("clipped", "cispo", …)
    ratio_level: str = "token"           # "token": ρ per action; "sequence": GSPO's s_i per row
    clip_eps_low: float = 0.2            # ε_low:  ρ is clipped below at 1 − ε_low (the clip statistics' too)
    clip_eps_high: float | None = None   # ε_high: ρ is clipped above at 1 + ε_high (None: ε_low)
    aggregation: str = "token_mean"      # see losses.aggregate ("sum_over_constant": update's num_tokens)
    value_coef: float = 0.5              # c_v (ignored when the policy has no critic)
    value_clip: float | None = None      # clip of V around V_old in the value loss
    entropy_coef: float = 0.0            # c_H of the bonus −c_H·mean_t H (over the tokens the policy term keeps)
    entropy_quantile: float = 1.0        # q: the policy term keeps the top-q share of tokens by entropy (1: all)
    kl_coef: float = 0.0                 # β of KL(π_θ‖π_ref) in the loss (0: no KL term)
    kl_estimator: str = "k3"
    kl_correction: bool = True           # importance-weight the KL term by π_θ/π_old
    normalize_advantages: bool = False   # whiten Â within each minibatch
    max_grad_norm: float | None = 1.0
    target_kl: float | None = None       # stop the passes once KL(π_old‖π_θ) (k3) exceeds it
    sampler: SamplerOptions = field(default_factory=SamplerOptions)  # π_old/π_sampler and the off-policy mask

    @property
    def eps_high(self) -> float:
        """ε_high resolved: ``clip_eps_high``, or ε_low when it is None."""
        return self.clip_eps_low if self.clip_eps_high is None else self.clip_eps_high


def _trainable(optimizer: torch.optim.Optimizer) -> list[Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]


@torch.no_grad()
def _record_old_logp(policy: Policy, batch: Batch, num_minibatches: int) -> Tensor:
    """log π_old for the whole batch, evaluated minibatch by minibatch (π_old = π_θ now)."""
    rows = torch.arange(len(batch)).view(num_minibatches, -1)
    old = torch.empty_like(batch.actions, dtype=torch.float32)
    for r in rows:
        old[r] = policy.evaluate(batch.select(r))[0].float()
    return old


def _log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor, level: str) -> Tensor:
    """log ρ ``[B, T]``: per token (0 on padding: ρ = 1), or GSPO's one per row broadcast along it."""
    if level == "token":
        return torch.where(mask.bool(), logp - old_logp, 0.0)
    if level == "sequence":
        return sequence_log_ratio(logp, old_logp, mask).expand_as(logp)
    raise ValueError(f"ratio_level must be one of {RATIO_LEVELS}, got {level!r}")


def policy_term(x: PolicyInputs, old_logp: Tensor, sampling_logp: Tensor | None, entropy: Tensor | None,
                cfg: UpdateConfig) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """The policy term's per-token loss, the tokens it keeps, and the statistics of what weighed it:

        ℓ_t = objective.term(x, cfg)_t · keep_i · w · keep_t

    keep_i · w from the sampler (``sampler_correction``: 1 without a sampler or a correction), keep_t the
    top-q entropy tokens (``high_entropy_mask``; every real token with q = 1 or no entropy); the statistics
    include the objective's own where it states some (a preference objective's accuracy and margin)."""
    objective = objective_spec(cfg.objective)
    pg = objective.term(x, cfg)
    own_statistics = getattr(objective, "statistics", None)
    pg, out = sampler_correction(pg, x.logp, old_logp, sampling_logp, x.advantages, x.mask, cfg.sampler,
                                 x.sampler_weight, weigh=not objective.folds_sampler_weight)
    kept = x.mask
    if entropy is not None and cfg.entropy_quantile < 1.0:
        kept = high_entropy_mask(entropy, x.mask, cfg.entropy_quantile)
        out["entropy/kept_frac"] = kept.sum() / x.mask.sum().clamp(min=1.0)
    if own_statistics is not None:
        out.update(own_statistics(x, cfg))
    return pg * kept, kept, out


@swappable
def compute_loss(policy: Policy, mb: Batch, cfg: UpdateConfig, num_tokens: float | None = None
                 ) -> tuple[Tensor, dict, dict]:
    """The scalar loss of one minibatch, its statistics, and the tensors behind them.

    ``num_tokens`` is this minibatch's constant N of the aggregation "sum_over_constant" (see
    ``losses.aggregate``); the averaging aggregations ignore it.
    The KL's importance weight stays per token at either ratio level: it corrects each token's KL
    estimate for the token having been sampled by π_old, which a per-row average would not.
    The entropy bonus is the mean entropy of the tokens the policy term keeps, whatever the aggregation,
    so c_H means the same for every loss.
    Returns (loss, stats, tensors) with tensors = ratio, advantages, mask, values, returns, and the
    entropy and the tokens the policy term kept (what ``AdaptiveEntropyCoef`` reads).
    """
    logp, entropy, values = policy.evaluate(mb)
    logp = logp.float()
    old_logp = logp.detach() if mb.old_logp is None else mb.old_logp
    mask = mb.mask.float()
    adv = whiten(mb.advantages, mask) if cfg.normalize_advantages else mb.advantages
    adv = torch.where(mask.bool(), adv, 0.0)  # padding carries no advantage, not even in the backward pass

    def agg(x: Tensor) -> Tensor:
        return aggregate(x, mask, cfg.aggregation, num_tokens)

    log_ratio = _log_ratio(logp, old_logp, mask, cfg.ratio_level)
    ratio = torch.exp(log_ratio)
    weights = corrected_weights(old_logp, mb.sampling_logp, mask, cfg.sampler)   # π_old/π_sampler, or None
    x = PolicyInputs(logp, log_ratio, ratio, _log_ratio(logp, old_logp, mask, "token"), adv, mask, weights,
                     mb.ref_logp)
    pg, kept, pg_stats = policy_term(x, old_logp, mb.sampling_logp, entropy, cfg)
    loss_pg = agg(pg)
    loss = loss_pg
    out = {"loss_pg": loss_pg, **pg_stats}

    if values is not None and mb.returns is not None:
        old_values = mb.values if mb.values is not None else values.detach()
        loss_v = agg(value_loss(values, old_values, mb.returns, cfg.value_clip))
        loss = loss + cfg.value_coef * loss_v
        out["value_loss"] = loss_v
    if entropy is not None:
        if cfg.entropy_coef:
            if torch.is_grad_enabled() and not entropy.requires_grad:
                raise ValueError("entropy_coef > 0 needs an entropy with a graph; this policy's evaluate returns "
                                 "it as a detached statistic: ask the policy for the entropy's graph")
            loss = loss + cfg.entropy_coef * masked_mean(entropy_bonus(entropy), kept)
        out["entropy"] = masked_mean(entropy.detach(), mask)  # nats per token, whatever the aggregation
    if mb.ref_logp is not None:
        kl = kl_estimate(logp, mb.ref_logp, cfg.kl_estimator, old_logp if cfg.kl_correction else None)
        loss_kl = agg(kl)
        if cfg.kl_coef:
            loss = loss + cfg.kl_coef * loss_kl
        out["kl_ref"] = loss_kl
    out["loss"] = loss
    out = stats.minibatch_stats(out, ratio, adv, mask, logp, old_logp, cfg.clip_eps_low, cfg.eps_high)
    tensors = {"ratio": ratio.detach(), "advantages": adv, "mask": mask,
               "values": None if values is None else values.detach(), "returns": mb.returns,
               "entropy": None if entropy is None else entropy.detach(), "kept": kept}
    return loss, out, tensors


@swappable
def update(policy: Policy, batch: Batch, optimizer: torch.optim.Optimizer, cfg: UpdateConfig,
           generator: torch.Generator | None = None, num_tokens: float | None = None,
           entropy_control: AdaptiveEntropyCoef | None = None) -> list[dict]:
    """Run μ passes of shuffled minibatches; return one dict of statistics per pass.

    ``num_tokens`` is the constant N of the aggregation "sum_over_constant" for the whole batch,
    computed by the caller (see ``losses.aggregate``); each of the M minibatches divides by its
    share N / M. With P processes each holding part of the batch, N is this process's part of the
    whole, so that the gradients the processes average add up to one process's on the whole batch.
    The averaging aggregations ignore it (None).
    ``batch`` is left as it was: π_old, when it has to be recorded, goes into a copy.
    A minibatch whose loss or gradient is not finite changes nothing: its step is skipped and
    counted in ``skipped_steps``; so is a step that would leave a weight non-finite (it is undone).
    With ``entropy_control`` each minibatch's c_H is ``entropy_control.applied()``, and after its step the
    controller reads the entropy of the tokens the policy term kept and moves c_H (logged as ``entropy_coef``, and
    the entropy it read as ``entropy/controlled``).
    """
    if cfg.mu < 1:
        raise ValueError(f"mu must be at least 1, got {cfg.mu}")
    if len(batch) % cfg.num_minibatches:
        raise ValueError(f"batch of {len(batch)} rows cannot be split into {cfg.num_minibatches} minibatches")
    if batch.old_logp is None and (cfg.mu > 1 or cfg.num_minibatches > 1):
        batch = replace(batch, old_logp=_record_old_logp(policy, batch, cfg.num_minibatches))
    tokens_per_minibatch = None if num_tokens is None else num_tokens / cfg.num_minibatches
    params = _trainable(optimizer)
    max_norm = cfg.max_grad_norm if cfg.max_grad_norm is not None else math.inf

    passes = []
    for k in range(cfg.mu):
        steps = []
        critic = []
        for mb in batch.minibatches(cfg.num_minibatches, generator):
            step_cfg = cfg if entropy_control is None else replace(cfg, entropy_coef=entropy_control.applied())
            loss, step, tensors = compute_loss(policy, mb, step_cfg, tokens_per_minibatch)
            optimizer.zero_grad(set_to_none=True)
            # A non-finite loss still runs backward, as NaN: every gradient is then NaN, so data-parallel
            # processes (which average gradients in backward) all see a non-finite norm and all skip alike.
            loss_finite = torch.isfinite(loss).item()
            (loss if loss_finite else loss * math.nan).backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
            step.update(step_if_finite(optimizer, params, loss, grad_norm))
            if entropy_control is not None:
                kept = tensors.get("kept", tensors["mask"])
                entropy_control.observe((tensors["entropy"] * kept).sum(), kept.sum())
                step["entropy_coef"] = entropy_control.coef  # c_H after the move (TRL logs the same)
                step["entropy/controlled"] = entropy_control.last_entropy  # the H it moved by: the kept tokens'

            if tensors["values"] is not None and tensors["returns"] is not None:
                critic.append((tensors["values"], tensors["returns"], tensors["mask"]))
            steps.append(step)
        record = stats.pass_record(k, steps, critic)
        passes.append(record)
        if cfg.target_kl is not None and record["approx_kl_old_k3"] > cfg.target_kl:
            break
    return passes
