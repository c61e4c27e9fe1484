"""Solution to exercise 17 — the loss of one minibatch, from the earlier exercises."""

from __future__ import annotations

import torch
from ex02_reinforce_loss import pg_loss
from ex04_whiten import whiten
from ex05_clipped_surrogate import clipped_surrogate
from ex06_value_loss import value_loss
from ex08_kl_corrected import kl_estimate
from ex11_aggregate import aggregate
from ex12_sequence_ratio import sequence_log_ratio
from torch import Tensor

from ladder.core import Batch, UpdateConfig, cispo_loss, corrected_weights, entropy_bonus, sampler_correction
from ladder.core.stats import masked_mean, minibatch_stats


def compute_loss(policy, mb: Batch, cfg: UpdateConfig, num_tokens: float | None = None
                 ) -> tuple[Tensor, dict, dict]:
    """(L, its statistics, the tensors behind them) of one minibatch."""
    eps_high = cfg.clip_eps_low if cfg.clip_eps_high is None else cfg.clip_eps_high
    logp, entropy, values = policy.evaluate(mb)
    logp = logp.float()
    old_logp = logp.detach() if mb.old_logp is None else mb.old_logp      # nothing recorded: π_old = π_θ
    mask = mb.mask.float()
    adv = whiten(mb.advantages, mask) if cfg.normalize_advantages else mb.advantages
    adv = torch.where(mask.bool(), adv, 0.0)

    def agg(x: Tensor) -> Tensor:
        return aggregate(x, mask, cfg.aggregation, num_tokens)

    if cfg.ratio_level == "token":
        log_ratio = torch.where(mask.bool(), logp - old_logp, 0.0)
    elif cfg.ratio_level == "sequence":
        log_ratio = sequence_log_ratio(logp, old_logp, mask).expand_as(logp)
    else:
        raise ValueError(f"unknown ratio_level {cfg.ratio_level!r}")
    ratio = torch.exp(log_ratio)
    if cfg.objective == "clipped":
        pg = clipped_surrogate(ratio, adv, cfg.clip_eps_low, eps_high, cfg.delta)
    elif cfg.objective == "cispo":
        pg = cispo_loss(logp, ratio, adv, cfg.cispo_max_weight)
    elif cfg.objective == "reinforce":
        pg = pg_loss(logp, adv)
    else:
        raise ValueError(f"unknown objective {cfg.objective!r}")
    # π_sampler drew the tokens: ℓ_t × π_old/π_sampler (exercise 21's weights) × the off-policy mask, per token,
    # on the policy term alone and before the aggregation (without mb.sampling_logp or cfg.sampler.off_policy_mask:
    # as it was)
    weights = corrected_weights(old_logp, mb.sampling_logp, mask, cfg.sampler)
    pg, sampler_stats = sampler_correction(pg, logp, old_logp, mb.sampling_logp, adv, mask, cfg.sampler, weights)
    loss_pg = agg(pg)
    loss, terms = loss_pg, {"loss_pg": loss_pg, **sampler_stats}

    if values is not None and mb.returns is not None:                      # the critic
        old_values = mb.values if mb.values is not None else values.detach()
        loss_v = agg(value_loss(values, old_values, mb.returns, cfg.value_clip))
        loss = loss + cfg.value_coef * loss_v
        terms["value_loss"] = loss_v
    if entropy is not None:
        loss_h = masked_mean(entropy_bonus(entropy), mask)       # a token mean, whatever the aggregation
        if cfg.entropy_coef:
            loss = loss + cfg.entropy_coef * loss_h
        terms["entropy"] = masked_mean(entropy.detach(), mask)  # nats per token
    if mb.ref_logp is not None:                                            # the KL to π_ref, in the loss
        loss_kl = agg(kl_estimate(logp, mb.ref_logp, cfg.kl_estimator, old_logp if cfg.kl_correction else None))
        if cfg.kl_coef:
            loss = loss + cfg.kl_coef * loss_kl
        terms["kl_ref"] = loss_kl
    terms["loss"] = loss
    stats = minibatch_stats(terms, ratio, adv, mask, logp, old_logp, cfg.clip_eps_low, eps_high)
    tensors = {"ratio": ratio.detach(), "advantages": adv, "mask": mask,
               "values": None if values is None else values.detach(), "returns": mb.returns}
    return loss, stats, tensors
