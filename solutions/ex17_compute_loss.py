"""Solution to exercise 17 — the loss of one minibatch, from the earlier exercises and the objective's spec."""

from __future__ import annotations

import torch
from ex04_whiten import whiten
from ex06_value_loss import value_loss
from ex08_kl_corrected import kl_estimate
from ex11_aggregate import aggregate
from ex12_sequence_ratio import sequence_log_ratio
from torch import Tensor

from ladder.core import Batch, UpdateConfig, corrected_weights, entropy_bonus, high_entropy_mask, sampler_correction
from ladder.core.objectives import PolicyInputs, objective_spec
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

    token_log_ratio = torch.where(mask.bool(), logp - old_logp, 0.0)     # log r per token, 0 on padding
    if cfg.ratio_level == "token":
        log_ratio = token_log_ratio
    elif cfg.ratio_level == "sequence":
        log_ratio = sequence_log_ratio(logp, old_logp, mask).expand_as(logp)
    else:
        raise ValueError(f"unknown ratio_level {cfg.ratio_level!r}")
    ratio = torch.exp(log_ratio)
    objective = objective_spec(cfg.objective)                              # a name: its spec's defaults
    weights = corrected_weights(old_logp, mb.sampling_logp, mask, cfg.sampler)   # π_old/π_sampler (ex21), or None
    inputs = PolicyInputs(logp, log_ratio, ratio, token_log_ratio, adv, mask, weights, mb.ref_logp)
    pg = objective.term(inputs, cfg)                                       # ℓ_t: Clipped, CISPO, SoftGate, …
    # π_sampler drew the tokens: ℓ_t × w (unless the term folds w in itself) × the off-policy mask, per token, on the
    # policy term alone, before the aggregation (no mb.sampling_logp and no cfg.sampler.off_policy_mask: as it was)
    pg, sampler_stats = sampler_correction(pg, logp, old_logp, mb.sampling_logp, adv, mask, cfg.sampler, weights,
                                           weigh=not objective.folds_sampler_weight)
    if hasattr(objective, "statistics"):                                   # a preference objective's accuracy, margin
        sampler_stats.update(objective.statistics(inputs, cfg))
    kept = mask                                                            # the tokens the policy term keeps
    if entropy is not None and cfg.entropy_quantile < 1.0:                 # only the top-ρ entropy tokens
        kept = high_entropy_mask(entropy, mask, cfg.entropy_quantile)
        pg = pg * kept
        sampler_stats["entropy/kept_frac"] = kept.sum() / mask.sum().clamp(min=1.0)
    loss_pg = agg(pg)
    loss, terms = loss_pg, {"loss_pg": loss_pg, **sampler_stats}

    if values is not None and mb.returns is not None:                      # the critic
        old_values = mb.values if mb.values is not None else values.detach()
        loss_v = agg(value_loss(values, old_values, mb.returns, cfg.value_clip))
        loss = loss + cfg.value_coef * loss_v
        terms["value_loss"] = loss_v
    if entropy is not None:
        loss_h = masked_mean(entropy_bonus(entropy), kept)       # a token mean over the kept, whatever agg
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
               "values": None if values is None else values.detach(), "returns": mb.returns,
               "entropy": None if entropy is None else entropy.detach(), "kept": kept}
    return loss, stats, tensors
