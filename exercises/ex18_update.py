"""Exercise 18 — the update loop: μ passes × shuffled minibatches, one optimiser step each (``core.update``).

Goes with notebook 3, section “Why $\\pi_{\\text{old}} = \\pi_\\theta$ at sampling, and what $\\mu$ does”.

The loop every rung calls once per batch (notebook 2 runs it; notebook 3 watches π_θ leave π_old):

    if cfg.mu < 1, or len(batch) is not a multiple of M = cfg.num_minibatches: raise ValueError
    if batch.old_logp is None and μ·M > 1:              record π_old once, before the first pass —
        old_logp = log π_θ of every row, under torch.no_grad(), minibatch by minibatch: the rows
                   split in order into M equal blocks (rows = torch.arange(len(batch),
                   device=batch.actions.device).view(M, -1); batch.select(rows[j])), each evaluated on its own
        batch    = dataclasses.replace(batch, old_logp=old_logp.float())   (a copy: leave the caller's batch)
                 (with μ·M = 1 nothing is recorded: compute_loss uses logp.detach(), the same numbers;
                 μ = 1 with M ≥ 2 does record it: the first minibatch's step moves π_θ, so the second
                 minibatch's r is already ≠ 1, where logp.detach() would make it 1)
    a π_old the batch already has (batch.old_logp not None) is used as it is, never recorded over
    params = the optimiser's parameters that require a gradient
    for k in range(μ):
        for mb in batch.minibatches(M, generator):      a fresh shuffle each pass, from ``generator``
            cfg_k = cfg, or with entropy_control: replace(cfg, entropy_coef=entropy_control.applied())
            loss, stats, tensors = compute_loss(policy, mb, cfg_k, N / M)    (N = num_tokens; None stays None)
            optimizer.zero_grad(set_to_none=True); loss.backward()
            ‖g‖ = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm, or inf when it is None)
            stats.update(step_if_finite(optimizer, params, loss, ‖g‖))     (ladder.core.update: steps unless
                                                                           something is not finite)
            with entropy_control: entropy_control.observe((H · kept).sum(), kept.sum()) and
                stats["entropy_coef"] = entropy_control.coef and stats["entropy/controlled"] =
                entropy_control.last_entropy (the H it read), where H = tensors["entropy"] and
                kept = tensors["kept"] (the tokens the policy term kept; tensors["mask"] if absent)
            keep (tensors["values"], tensors["returns"], tensors["mask"]) when both are not None
        record = pass_record(k, the pass's stats, the kept critic tensors)   (ladder.core.stats; both lists,
                                                                           in the order of the steps)
        stop after this pass if cfg.target_kl is not None and record["approx_kl_old_k3"] > cfg.target_kl
    return the records, one per pass that ran

    policy     anything with evaluate(batch) -> (logp, entropy or None, values or None), each [B, T]
    batch      a Batch of B rows [B, T]
    optimizer  a torch optimiser over the policy's parameters
    cfg        a ladder.core.UpdateConfig
    generator  the torch.Generator that shuffles the minibatches (None: torch's global one)
    num_tokens N of aggregation "sum_over_constant" for the whole batch (else None)
    entropy_control  a ladder.core.AdaptiveEntropyCoef that moves c_H after every step (None: c_H is cfg's)
    result     list[dict]: one record per pass

Use your ``compute_loss`` (``from ex17_compute_loss import compute_loss``) or ladder.core's. Worked
example: 8 rows, μ = 4 passes × M = 2 minibatches. The first minibatch of the first pass has ρ = 1;
from the second on π_θ has moved, so the first pass's largest ratio is already above 1:

    >>> from ladder.core import UpdateConfig
    >>> from ladder.graders.cases_loop import small_policy_and_batch
    >>> policy, batch = small_policy_and_batch(seed=23, B=8, old=False)
    >>> passes = update(policy, batch, torch.optim.Adam(policy.parameters(), lr=0.05),
    ...                 UpdateConfig(mu=4, num_minibatches=2), torch.Generator().manual_seed(0))
    >>> [p["pass"] for p in passes], passes[0]["ratio_max"] > 1.0, batch.old_logp is None
    ([0, 1, 2, 3], True, True)

Mirrors ``ladder.core.update``. Grade it: ``pytest exercises/`` (it trains a small policy with yours
and with the core's from the same seed: the same statistics and the same parameters after, to
1e-6); once it passes, every rung's ``--use-exercises`` trains with it.
"""

from __future__ import annotations

import math  # noqa: F401 - you will need it
from dataclasses import replace  # noqa: F401 - you will need it

import torch  # noqa: F401 - you will need it

from ladder.core import Batch, UpdateConfig
from ladder.core.stats import pass_record  # noqa: F401 - you will need it
from ladder.core.update import step_if_finite  # noqa: F401 - you will need it


def update(policy, batch: Batch, optimizer: torch.optim.Optimizer, cfg: UpdateConfig,
           generator: torch.Generator | None = None, num_tokens: float | None = None,
           entropy_control=None) -> list[dict]:
    """μ passes of shuffled minibatches, one optimiser step each; one record per pass."""
    raise NotImplementedError
