"""Real numbers for the views: one fixed CartPole batch and μ real ``core.update`` passes over it.

The three policies are concrete here:

    π_ref  the freshly initialised MLP (a frozen snapshot; the KL anchor)
    π_old  the same MLP after ``warmup_updates`` updates of the CartPole rung's own recipe (through the loop,
           in memory); it samples the fixed batch (``cartpole.collect``), so ``batch.old_logp`` = log π_old
    π_θ    a copy of π_old optimised for μ passes over that batch by ``core.update``

CartPole has two actions, so every KL between the three policies at the batch's states is exact:

    KL(π_θ ‖ π_x)(s) = Σ_a π_θ(a|s) · log π_θ(a|s) / π_x(a|s)      π_x = π_old or π_ref

and can be set next to what the core estimates from the batch's samples a ~ π_old:

    biased     mean_t k3(a_t)                        (assumes a ~ π_θ, wrong once π_θ ≠ π_old)
    corrected  mean_t (π_θ/π_old)(a_t) · k3(a_t)     (importance-sampled: unbiased for any μ)

Both are ``core.kl_estimate`` — without and with ``old_logp``.
"""

from __future__ import annotations

import copy
import functools
import math

import torch

from ladder import core
from ladder.policies.mlp import MLPActorCritic
from ladder.rungs import cartpole
from ladder.runtime import loop


class one_thread:
    """Small MLPs run fastest on one CPU thread (as the CartPole rung sets); restore the count after."""

    def __enter__(self):
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.threads)


@functools.lru_cache(maxsize=4)
def fixed_batch(seed: int = 0, num_envs: int = 8, num_steps: int = 128, warmup_updates: int = 4):
    """(π_ref, π_old, batch): a batch of ``num_envs × num_steps`` CartPole transitions from π_old.

    Cached: every view and every μ starts from the same batch and the same π_old.
    """
    with one_thread():
        return _fixed_batch(seed, num_envs, num_steps, warmup_updates)


def _fixed_batch(seed: int, num_envs: int, num_steps: int, warmup_updates: int):
    """π_ref: the rung's freshly built policy; π_old: the same after ``warmup_updates`` of the rung's own updates
    (its recipe through the loop, held in memory, no evaluation); the batch: one more rollout of π_old, as the
    rung's next update would collect it."""
    cfg = cartpole.Config(num_envs=num_envs, num_steps=num_steps, seed=seed, progress=False)
    session, recipe = loop.in_memory(cfg, cartpole.NAME, cartpole.build, evaluations=False)
    ref = copy.deepcopy(recipe.policy).requires_grad_(False)
    for _ in range(warmup_updates):
        loop.one_update(session, recipe)
    counters = recipe.counters
    _, obs_nt, actions, logp, values, rewards, dones, last_values = cartpole.collect(
        recipe.policy, recipe.envs, counters["obs"], cfg, counters["episode"])
    advantages, returns = core.gae(rewards, values, dones, cfg.gamma, cfg.gae_lambda, last_values)
    batch = core.Batch(actions=actions, mask=torch.ones_like(rewards), advantages=advantages,
                       old_logp=logp, values=values, rewards=rewards, returns=returns,
                       inputs={"obs": obs_nt}).as_transitions()
    recipe.envs.close()
    with torch.no_grad():
        batch.ref_logp = ref.evaluate(batch)[0]
    return ref, recipe.policy.requires_grad_(False), batch


@torch.no_grad()
def _log_probs(policy: MLPActorCritic, batch: core.Batch) -> torch.Tensor:
    """log π(·|s) over both actions at every state of the batch, [N, 1, n_actions]."""
    return torch.log_softmax(policy.actor(batch.inputs["obs"]), dim=-1)


def exact_kl(logp_p: torch.Tensor, logp_q: torch.Tensor) -> float:
    """Mean over the states of Σ_a p(a|s) log p(a|s)/q(a|s), from full log-prob tables [..., A]."""
    return (logp_p.exp() * (logp_p - logp_q)).sum(-1).mean().item()


def mu_passes(mu: int, lr: float = 2e-3, clip_eps: float = 0.2, clip_eps_high: float | None = None,
              seed: int = 0, estimator: str = "k3") -> dict:
    """Run ``core.update`` for μ passes on a copy of π_old over the fixed batch; measure after each.

    One ``core.update`` call with μ passes is the same as μ calls with one pass each (same batch,
    same ``old_logp``, same optimiser state); the calls are split only to look at π_θ in between.
    Per pass k (lists of length μ; entry k is measured after pass k's optimiser step):

        ratios            π_θ/π_old at every transition after the pass              [N]
        clip_frac         core's clip fraction during the pass (0 in pass 1: ρ = 1)
        clip_frac_after   clip fraction of the ratios after the pass
        kl_old_exact      KL(π_θ‖π_old), exact           kl_ref_exact   KL(π_θ‖π_ref), exact
        kl_ref_biased     core.kl_estimate without old_logp, averaged over the batch
        kl_ref_corrected  core.kl_estimate with old_logp (importance-sampled)
        approx_kl_old_k3  core's KL(π_old‖π_θ) estimate during the pass
    """
    with one_thread():
        return _mu_passes(mu, lr, clip_eps, clip_eps_high, seed, estimator)


def _theta_from_old(lr: float, clip_eps: float, clip_eps_high: float | None, seed: int):
    """(π_ref, π_old, batch, π_θ, optimiser, one-pass update config, generator): π_θ a trainable copy of π_old.

    Every function here that steps π_θ starts from this, so its k-th step is the same step everywhere.
    """
    ref, old, batch = fixed_batch(seed)
    policy = copy.deepcopy(old).requires_grad_(True)
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr, eps=1e-5)
    cfg = cartpole.update_config(cartpole.Config(mu=1, clip_eps=clip_eps, progress=False))
    if clip_eps_high is not None:
        cfg.clip_eps_high = clip_eps_high
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    return ref, old, batch, policy, optimizer, cfg, generator


def _mu_passes(mu: int, lr: float, clip_eps: float, clip_eps_high: float | None, seed: int, estimator: str) -> dict:
    ref, old, batch, policy, optimizer, cfg, generator = _theta_from_old(lr, clip_eps, clip_eps_high, seed)
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    logp_old_all, logp_ref_all = _log_probs(old, batch), _log_probs(ref, batch)
    adv = core.whiten(batch.advantages, batch.mask)  # what the clipped surrogate saw (normalised)
    out: dict[str, list] = {k: [] for k in ("ratios", "clip_frac", "clip_frac_after", "kl_old_exact", "kl_ref_exact",
                                            "kl_ref_biased", "kl_ref_corrected", "approx_kl_old_k3")}
    for _ in range(mu):
        record = core.update(policy, batch, optimizer, cfg, generator)[0]
        with torch.no_grad():
            logp_all = _log_probs(policy, batch)
            logp = policy.evaluate(batch)[0]
            ratio = torch.exp(logp - batch.old_logp)
            biased = core.kl_estimate(logp, batch.ref_logp, estimator)
            corrected = core.kl_estimate(logp, batch.ref_logp, estimator, batch.old_logp)
            after = core.clip_fractions(ratio, adv, batch.mask, clip_eps, eps_high)
        out["ratios"].append(ratio.flatten().numpy())
        out["clip_frac"].append(record["clip_frac"])
        out["clip_frac_after"].append(after["clip_frac"])
        out["kl_old_exact"].append(exact_kl(logp_all, logp_old_all))
        out["kl_ref_exact"].append(exact_kl(logp_all, logp_ref_all))
        out["kl_ref_biased"].append(core.masked_mean(biased, batch.mask).item())
        out["kl_ref_corrected"].append(core.masked_mean(corrected, batch.mask).item())
        out["approx_kl_old_k3"].append(record["approx_kl_old_k3"])
    out["advantages"] = adv.flatten().numpy()
    out["kl_ref_exact_old"] = exact_kl(logp_old_all, logp_ref_all)
    return out


def _flat(grads) -> torch.Tensor:
    return torch.cat([g.flatten() for g in grads])


def surrogate_vs_reinforce(steps: int = 4, lr: float = 2e-3, clip_eps: float = 0.2, seed: int = 0) -> dict:
    """PPO's clipped surrogate against REINFORCE's loss on the fixed batch, before and after real PPO steps.

    π_θ starts as a copy of π_old (ρ = 1) and takes ``steps`` optimiser steps of ``core.update`` (one
    pass each: step k is pass k of ``mu_passes``). Before the first step and after each one, with the
    batch's whitened Â (what ``core.update`` uses) and ``core.aggregate``'s token mean over the N samples:

        L_clip(θ) = aggregate(clipped_surrogate(ρ, Â, ε))    ρ = π_θ/π_old = exp(logp − old_logp)
        L_IS(θ)   = aggregate(clipped_surrogate(ρ, Â, ∞))    = −mean ρ·Â: the ratio, no clip
        L_PG(θ)   = aggregate(pg_loss(logp, Â))              = −mean Â·log π_θ: REINFORCE on these samples

    and the gradients g_clip, g_IS, g_PG of each with respect to the actor's weights θ. Per step k
    (lists of length ``steps`` + 1; entry 0 is at θ = θ_old):

        max_abs_diff     max |g_clip − g_PG|                    (0 up to float32 rounding at k = 0)
        pg_grad_max      max |g_PG|: the scale max_abs_diff is read against
        cosine           cos(g_clip, g_PG)                      norm_ratio   ‖g_clip‖ / ‖g_PG‖
        cosine_is        cos(g_IS, g_PG): what the ratio alone changes, before any clipping
        norm_ratio_is    ‖g_IS‖ / ‖g_PG‖
        removed          per sample: ∂L_clip/∂logp = 0 while Â ≠ 0 (the clip took its gradient)  [N] bool
        removed_share    mean of ``removed``
        ratios           ρ at every sample [N];  advantages: Â [N]
    """
    with one_thread():
        return _surrogate_vs_reinforce(steps, lr, clip_eps, seed)


def _surrogate_vs_reinforce(steps: int, lr: float, clip_eps: float, seed: int) -> dict:
    _, _, batch, policy, optimizer, cfg, generator = _theta_from_old(lr, clip_eps, None, seed)
    theta = list(policy.actor.parameters())
    adv = core.whiten(batch.advantages, batch.mask)
    out: dict[str, list] = {k: [] for k in ("max_abs_diff", "pg_grad_max", "cosine", "norm_ratio", "cosine_is",
                                            "norm_ratio_is",
                                            "removed", "removed_share", "ratios")}
    for k in range(steps + 1):
        if k:
            core.update(policy, batch, optimizer, cfg, generator)
        logp = policy.evaluate(batch)[0]
        ratio = torch.exp(logp - batch.old_logp)
        loss_clip = core.aggregate(core.clipped_surrogate(ratio, adv, clip_eps), batch.mask)
        loss_is = core.aggregate(core.clipped_surrogate(ratio, adv, math.inf), batch.mask)
        loss_pg = core.aggregate(core.pg_loss(logp, adv), batch.mask)
        *g_clip, per_sample = torch.autograd.grad(loss_clip, theta + [logp], retain_graph=True)
        g_clip, g_is = _flat(g_clip), _flat(torch.autograd.grad(loss_is, theta, retain_graph=True))
        g_pg = _flat(torch.autograd.grad(loss_pg, theta))
        removed = (per_sample == 0) & (adv != 0)
        out["max_abs_diff"].append((g_clip - g_pg).abs().max().item())
        out["pg_grad_max"].append(g_pg.abs().max().item())
        out["cosine"].append(torch.cosine_similarity(g_clip, g_pg, dim=0).item())
        out["norm_ratio"].append((g_clip.norm() / g_pg.norm()).item())
        out["cosine_is"].append(torch.cosine_similarity(g_is, g_pg, dim=0).item())
        out["norm_ratio_is"].append((g_is.norm() / g_pg.norm()).item())
        out["removed"].append(removed.flatten().numpy())
        out["removed_share"].append(removed.float().mean().item())
        out["ratios"].append(ratio.detach().flatten().numpy())
    out["advantages"] = adv.flatten().numpy()
    out["clip_eps"] = clip_eps
    return out
