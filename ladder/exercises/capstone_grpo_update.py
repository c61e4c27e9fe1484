"""Capstone II's properties of the loss, the update and the loop, against ``ladder.core`` on the same weights.

The grader builds one rollout itself (3 prompts × G = 2 completions sampled by ``generate``; π_old and
π_ref a little away from π_θ; junk where the mask is 0) and hands the same batch to the learner's
function and to the core's: ``core.compute_loss`` / ``core.update`` on ``CausalLMPolicy`` with GRPO's
configuration (clipped surrogate, β·k3 not importance-corrected, mean over tokens then completions).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .capstone_grpo_task import (
    Broken,
    greedy_accuracy,
    load_model,
    load_tokenizer,
    prompt_batch,
    reference_logp,
    sampled_completions,
    tiny_task,
)

TEMPERATURE, CLIP_EPS, BETA = 0.9, 0.2, 0.1
JUNK = 1e4                    # on padding: exp(1e4) is inf, and inf · 0 is NaN — select, never multiply
SEED, STEPS, THRESHOLD = 0, 16, 0.9   # the training check: train(..., steps=STEPS, seed=SEED), greedy accuracy after


def rollout(seed: int = 0) -> dict:
    """The batch both losses see: prompt_ids / prompt_mask [N, P], completion_ids / completion_mask [N, T],
    old_logp / ref_logp [N, T] (−1e4 where the mask is 0), advantages [N]; N = 3 prompts × G = 2."""
    model, tokenizer = load_model(), load_tokenizer()
    ids, mask = prompt_batch(tokenizer, ["What is 48 + 36?", "What is 5 + 17?", "What is 67 + 25?"])
    ids, mask = ids.repeat_interleave(2, 0), mask.repeat_interleave(2, 0)
    out, cmask = sampled_completions(model, tokenizer, ids, mask, seed)
    lengths = torch.tensor([30, 9, 30, 4, 14, 30])       # rows of different lengths: the means differ
    cmask = cmask * (torch.arange(out.shape[1]) < lengths[:, None])
    g = torch.Generator().manual_seed(seed)
    logp = reference_logp(model, ids, mask, out, cmask, TEMPERATURE)
    noisy = dict(old_logp=logp + 0.3 * torch.randn(logp.shape, generator=g),
                 ref_logp=logp + 0.5 * torch.randn(logp.shape, generator=g))
    batch = {k: torch.where(cmask.bool(), v, -JUNK) for k, v in noisy.items()}
    return dict(prompt_ids=ids, prompt_mask=mask, completion_ids=out, completion_mask=cmask,
                advantages=torch.randn(len(ids), generator=g), **batch)


def core_batch(r: dict):
    from ladder.core import Batch

    mask = r["completion_mask"]
    return Batch(actions=r["completion_ids"], mask=mask, advantages=r["advantages"][:, None] * mask,
                 old_logp=r.get("old_logp"), ref_logp=r["ref_logp"],
                 inputs={"input_ids": torch.cat([r["prompt_ids"], r["completion_ids"]], 1),
                         "attention_mask": torch.cat([r["prompt_mask"].long(), mask.long()], 1)})


def core_config(mu: int = 1):
    from ladder.core import UpdateConfig

    return UpdateConfig(mu=mu, clip_eps_low=CLIP_EPS, kl_coef=BETA, kl_estimator="k3", kl_correction=False,
                        aggregation="seq_mean_token_mean", max_grad_norm=1.0)


def core_policy(model):
    from ladder.policies.causal_lm import CausalLMPolicy

    return CausalLMPolicy(model, temperature=TEMPERATURE, share_prompts=False)


def _differs(got: torch.nn.Module, want: torch.nn.Module, what: str, rtol: float, atol: float) -> str | None:
    """'the gradient of model.layers.0…: differs by up to 3e-4', or None when every tensor is close."""
    for (name, a), (_, b) in zip(got.named_parameters(), want.named_parameters()):
        x, y = (a.grad, b.grad) if what == "gradient" else (a, b)
        x = torch.zeros_like(a) if x is None else x.detach()
        y = torch.zeros_like(b) if y is None else y.detach()
        if not torch.allclose(x, y, rtol=rtol, atol=atol):
            return f"the {what} of {name} differs by up to {(x - y).abs().max().item():.2g}"
    return None


def loss_and_gradient(sol) -> None:
    """grpo_loss and its gradient equal core.compute_loss's (GRPO's configuration) on the same batch and weights."""
    from ladder.core import compute_loss

    r = rollout()
    mine, core = load_model(), core_policy(load_model())
    want, _, _ = compute_loss(core, core_batch(r), core_config())
    want.backward()
    got = sol.grpo_loss(mine, {k: v.clone() for k, v in r.items()}, CLIP_EPS, BETA, TEMPERATURE)
    where = (f"3 prompts × G = 2, completion lengths {r['completion_mask'].sum(1).long().tolist()}, "
             f"ε = {CLIP_EPS}, β = {BETA}, τ = {TEMPERATURE}")
    if not isinstance(got, Tensor) or got.shape != ():
        raise Broken(f"{where}: should return a scalar tensor, got {got!r}")
    if not torch.isclose(got.detach(), want.detach(), rtol=1e-5, atol=1e-6):
        raise Broken(f"{where}: loss {got.item():.6g}, expected {want.item():.6g}")
    if not got.requires_grad:
        raise Broken(f"{where}: the right loss, but with no graph: the gradient cannot reach the model")
    got.backward()
    bad = _differs(mine, core.model, "gradient", 1e-4, 1e-6)
    if bad:
        raise Broken(f"{where}: the right loss, but {bad}")


class CountingAdam(torch.optim.Adam):
    """Adam that counts its steps."""

    def __init__(self, params, lr: float):
        super().__init__(params, lr=lr)
        self.steps = 0

    def step(self, closure=None):
        self.steps += 1
        return super().step(closure)


def _update(sol, mu: int, max_grad_norm: float = 1.0) -> tuple[torch.nn.Module, CountingAdam, object]:
    """(the model after ``sol.update`` with μ passes on the grader's rollout, the optimiser, what it returned)."""
    r = {k: v for k, v in rollout().items() if k != "old_logp"}
    model = load_model()
    optimizer = CountingAdam(model.parameters(), lr=1e-3)
    losses = sol.update(model, optimizer, r, mu, CLIP_EPS, BETA, TEMPERATURE, max_grad_norm)
    return model, optimizer, losses


def update_mu_steps(sol) -> None:
    """One call of update is exactly μ optimiser steps (no minibatches), and returns the μ losses."""
    for mu in (1, 3):
        _, optimizer, losses = _update(sol, mu)
        if optimizer.steps != mu:
            raise Broken(f"update with μ = {mu} took {optimizer.steps} optimiser step(s), expected {mu}")
        if not isinstance(losses, list) or len(losses) != mu:
            raise Broken(f"update with μ = {mu} should return the list of its {mu} losses, got {losses!r}")


def update_pi_old_before_first_step(sol) -> None:
    """π_old is recorded once, before the first step: after μ = 3 steps the weights are core.update's (with the
    gradient norm clipped to 1, and with a bound of 100 that never clips: clipped, gradients that pile up
    over the passes would point the same way and go unseen)."""
    for max_grad_norm in (1.0, 100.0):
        _weights_after_three_steps(sol, max_grad_norm)


UPDATE_RTOL = 5e-4            # ‖Δθ − Δθ_core‖ / ‖Δθ_core‖: rounding, amplified by Adam, stays below 5e-5 here


def _flat(model: torch.nn.Module) -> Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _gap(got: torch.nn.Module, want: torch.nn.Module, start: Tensor) -> float:
    """How far one update is from another, relative to the second: ‖Δθ_got − Δθ_want‖ / ‖Δθ_want‖."""
    moved = _flat(want) - start
    return ((_flat(got) - start - moved).norm() / moved.norm()).item()


def _weights_after_three_steps(sol, max_grad_norm: float) -> None:
    from ladder.core import update

    start = _flat(load_model())
    mine, _, _ = _update(sol, 3, max_grad_norm)
    r = {k: v for k, v in rollout().items() if k != "old_logp"}
    core = core_policy(load_model())
    cfg = core_config(3)
    cfg.max_grad_norm = max_grad_norm
    update(core, core_batch(r), CountingAdam(core.model.parameters(), lr=1e-3), cfg)
    gap = _gap(mine, core.model, start)
    if gap <= UPDATE_RTOL:
        return
    stale = core_policy(load_model())            # the same three steps, π_old recorded again before each
    optimizer = CountingAdam(stale.model.parameters(), lr=1e-3)
    cfg.mu = 1
    for _ in range(3):
        update(stale, core_batch(r), optimizer, cfg)
    if _gap(mine, stale.model, start) <= UPDATE_RTOL:
        raise Broken("μ = 3: π_old was recorded again before each step (the ratio is always 1, nothing is ever "
                     "clipped); record it once, before the first optimiser step")
    raise Broken(f"μ = 3, Adam(lr = 1e-3), max_grad_norm {max_grad_norm:g}: the weights moved ‖Δθ − Δθ_core‖ / "
                 f"‖Δθ_core‖ = {gap:.2g} away from core.update's (> {UPDATE_RTOL:g}; π_old recorded once before the "
                 f"first step, with no graph? zero_grad before each backward? the gradient norm clipped?)")


def train_keeps_a_frozen_reference(sol) -> None:
    """π_ref is a frozen copy made before the first step: the KL to it is 0 at the first step and grows after."""
    task = tiny_task()
    out = sol.train(task.model, task.tokenizer, task.train, steps=3, seed=SEED)
    history = out[1] if isinstance(out, tuple) and len(out) == 2 else None
    if not isinstance(history, list) or len(history) != 3 or \
            not all(isinstance(h, dict) and "kl" in h for h in history):
        raise Broken("train(steps = 3) should return (model, history) with one dict per step, each with its \"kl\"")
    kl = [float(h["kl"]) for h in history]
    if not (abs(kl[0]) < 1e-4 and max(kl[1:]) > 1e-5):
        raise Broken(f"train(steps = 3, seed = {SEED}): history's kl {[f'{k:.2g}' for k in kl]}; expected about 0 at "
                     f"the first step (π_θ = π_ref), then > 0 as π_θ moves (π_ref a frozen copy, not the live model?)")


def train_learns(sol) -> None:
    """After train(steps = 16, seed = 0) the greedy held-out accuracy is at least 0.9 (about 0.6 before)."""
    task = tiny_task()
    out = sol.train(task.model, task.tokenizer, task.train, steps=STEPS, seed=SEED)
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], torch.nn.Module)):
        raise Broken(f"train should return (model, history), got {type(out).__name__}")
    model, history = out
    if not isinstance(history, list) or len(history) != STEPS:
        raise Broken(f"train(steps = {STEPS}) should return a history of {STEPS} entries, got "
                     f"{len(history) if isinstance(history, list) else type(history).__name__}")
    after = greedy_accuracy(model.eval(), task.tokenizer, task.held_out)
    if after < THRESHOLD:
        before = greedy_accuracy(load_model(), task.tokenizer, task.held_out)
        raise Broken(f"steps = {STEPS}, seed = {SEED}: greedy accuracy on {len(task.held_out)} held-out sums "
                     f"{before:.3f} → {after:.3f}, expected ≥ {THRESHOLD}")
