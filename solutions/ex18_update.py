"""Solution to exercise 18 — μ passes × M shuffled minibatches, π_old recorded once before the first."""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from ex17_compute_loss import compute_loss

from ladder.core import Batch, UpdateConfig
from ladder.core.stats import pass_record
from ladder.core.update import step_if_finite


def update(policy, batch: Batch, optimizer: torch.optim.Optimizer, cfg: UpdateConfig,
           generator: torch.Generator | None = None, num_tokens: float | None = None,
           entropy_control=None) -> list[dict]:
    """μ passes of shuffled minibatches, one optimiser step each; one record per pass."""
    M = cfg.num_minibatches
    if cfg.mu < 1 or len(batch) % M:
        raise ValueError(f"need μ ≥ 1 and {len(batch)} rows divisible into {M} minibatches")
    if batch.old_logp is None and cfg.mu * M > 1:          # π_old = π_θ now, before the first step
        old_logp = torch.empty_like(batch.actions, dtype=torch.float32)
        with torch.no_grad():
            for rows in torch.arange(len(batch)).view(M, -1):
                old_logp[rows] = policy.evaluate(batch.select(rows))[0].float()
        batch = replace(batch, old_logp=old_logp)          # a copy: the caller's batch stays as it was
    params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    max_norm = math.inf if cfg.max_grad_norm is None else cfg.max_grad_norm
    per_minibatch = None if num_tokens is None else num_tokens / M

    passes = []
    for k in range(cfg.mu):
        steps, critic = [], []
        for mb in batch.minibatches(M, generator):
            step_cfg = cfg if entropy_control is None else replace(cfg, entropy_coef=entropy_control.applied())
            loss, stats, tensors = compute_loss(policy, mb, step_cfg, per_minibatch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
            stats.update(step_if_finite(optimizer, params, loss, grad_norm))
            if entropy_control is not None:                # c_H moves after every step, on what was kept
                kept = tensors.get("kept", tensors["mask"])
                entropy_control.observe((tensors["entropy"] * kept).sum(), kept.sum())
                stats["entropy_coef"] = entropy_control.coef
                stats["entropy/controlled"] = entropy_control.last_entropy
            if tensors["values"] is not None and tensors["returns"] is not None:
                critic.append((tensors["values"], tensors["returns"], tensors["mask"]))
            steps.append(stats)
        passes.append(pass_record(k, steps, critic))
        if cfg.target_kl is not None and passes[-1]["approx_kl_old_k3"] > cfg.target_kl:
            break                                          # π_θ has left π_old far enough: stop early
    return passes
