"""What grpo's options mean to ``ladder.core``: each translation made here, once.

    update_config(cfg)        the ``core.UpdateConfig`` of every update: μ, M, the objective and aggregation of
                              ``--loss-type`` (``loss_types``), the ratio level and ε, the entropy terms, β·KL in the
                              loss, the sampler's correction; ε_high and the KL correction as ``settle`` decides them
    (the KL to π_ref, in the loss or in the reward, and its correction: the spec ``cfg.kl``, ``kl_to_ref``)
    records_sampler_logp(cfg) whether sampling keeps π_sampler's own log-probs (the spec ``cfg.sampler``'s rule,
                              given the lag --max-staleness)
"""

from __future__ import annotations

from ladder import core
from ladder.rungs.grpo import loss_types
from ladder.rungs.grpo.settle import eps_high as eps_high  # (re-exported: decided in settle)
from ladder.rungs.grpo.settle import settle


def records_sampler_logp(cfg) -> bool:
    """Whether sampling records π_sampler's log-probs: a sampler of its own dtype, a lagging π_rollout, or a
    correction asked for (with --sampler-dtype same it then weighs the sampling kernels' small mismatch)."""
    return cfg.sampler.records_logp(cfg.max_staleness)


def update_config(cfg) -> core.UpdateConfig:
    """GRPO's ``core.update``: the objective spec and aggregation of ``--loss-type``, the ratio level, ε (ε_high
    settled), the entropy terms, β·KL(π_θ‖π_ref) in the loss (``cfg.kl.in_loss()``) and its settled correction, and
    the sampler's correction (``cfg.sampler.options()``: as ``cfg`` holds it, settled by the run first)."""
    settled = settle(cfg, None)
    return core.UpdateConfig(
        mu=cfg.mu, num_minibatches=cfg.num_minibatches, objective=loss_types.objective(cfg),
        ratio_level=cfg.ratio.level, clip_eps_low=cfg.ratio.clip_eps, clip_eps_high=settled.eps_high,
        aggregation=loss_types.aggregation(cfg), entropy_coef=cfg.entropy.coef,
        entropy_quantile=cfg.entropy.top_quantile, kl_coef=cfg.kl.in_loss(), kl_estimator=cfg.kl.estimator,
        kl_correction=settled.kl_correction, max_grad_norm=cfg.optimisation.max_grad_norm,
        sampler=settled.sampler.options())
