"""What grpo's options mean to ``ladder.core``: each translation made here, once.

    update_config(cfg)        the ``core.UpdateConfig`` of every update: μ, M, the objective and aggregation of
                              ``--loss-type`` (``loss_types``), the ratio level and ε, the entropy terms, β·KL in the
                              loss, the sampler's correction
    (the KL to π_ref, in the loss or in the reward, and its correction: the spec ``cfg.kl``, ``kl_to_ref``)
    records_sampler_logp(cfg) whether sampling keeps π_sampler's own log-probs (the spec ``cfg.sampler``'s rule,
                              given the lag --max-staleness)
"""

from __future__ import annotations

from ladder import core
from ladder.rungs.grpo import loss_types


def eps_high(cfg) -> float:
    """ε_high: ``--clip-eps-high``, or ``--clip-eps`` when it is not given (symmetric clipping, as TRL)."""
    return cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high


def records_sampler_logp(cfg) -> bool:
    """Whether sampling records π_sampler's log-probs: a sampler of its own dtype, a lagging π_rollout, or a
    correction asked for (with --sampler-dtype same it then weighs the sampling kernels' small mismatch)."""
    return cfg.sampler.records_logp(cfg.max_staleness)


def update_config(cfg) -> core.UpdateConfig:
    """GRPO's ``core.update``: the objective spec and aggregation of ``--loss-type``, the ratio level, ε, the
    entropy terms, β·KL(π_θ‖π_ref) in the loss (``cfg.kl.in_loss()``) and the sampler's correction
    (``cfg.sampler.options()``)."""
    return core.UpdateConfig(
        mu=cfg.mu, num_minibatches=cfg.num_minibatches, objective=loss_types.objective(cfg),
        ratio_level=cfg.ratio_level, clip_eps_low=cfg.clip_eps, clip_eps_high=eps_high(cfg),
        aggregation=loss_types.aggregation(cfg), entropy_coef=cfg.entropy_coef,
        entropy_quantile=cfg.top_entropy_quantile, kl_coef=cfg.kl.in_loss(), kl_estimator=cfg.kl.estimator,
        kl_correction=cfg.kl.corrected() != "off", max_grad_norm=cfg.max_grad_norm, sampler=cfg.sampler.options())
