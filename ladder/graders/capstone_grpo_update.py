"""Capstone II's properties of the loss and the update, against ``ladder.core`` on the same weights.

The grader builds one rollout itself (3 prompts × G = 2 completions sampled by ``generate``; π_old and
π_ref a little away from π_θ; junk where the mask is 0) and hands the same batch to the learner's
function and to the core's: ``core.compute_loss`` / ``core.update`` on ``CausalLMPolicy`` with GRPO's
configuration (clipped surrogate, β·k3 not importance-corrected, mean over tokens then completions).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .capstone_grpo_oracle import BETA, CLIP_EPS, TEMPERATURE, core_batch, core_config, core_policy
from .capstone_grpo_steps import RecordingAdam, step_cause
from .capstone_grpo_task import (
    Broken,
    load_model,
    load_tokenizer,
    prompt_batch,
    reference_logp,
    sampled_completions,
)

JUNK = 1e4                    # on padding: exp(1e4) is inf, and inf · 0 is NaN — select, never multiply


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


def _differs(got: torch.nn.Module, want: torch.nn.Module, what: str, rtol: float, atol: float) -> str | None:
    """'the gradient of model.layers.0…: differs by up to 3e-4', or None when every tensor is close."""
    for (name, a), (_, b) in zip(got.named_parameters(), want.named_parameters()):
        x, y = (a.grad, b.grad) if what == "gradient" else (a, b)
        x = torch.zeros_like(a) if x is None else x.detach()
        y = torch.zeros_like(b) if y is None else y.detach()
        if not torch.allclose(x, y, rtol=rtol, atol=atol):
            return f"the {what} of {name} differs by up to {(x - y).abs().max().item():.2g}"
    return None


def written_out_loss(r: dict, variant: str = "") -> Tensor:
    """GRPO's loss on the grader's rollout and the tiny model's weights, written out (no graph):

        L = (1/N) Σ_i (1/|o_i|) Σ_{t real} [ −min(ρ_t Â_i, clip(ρ_t, 1 − ε, 1 + ε) Â_i) + β (e^{ℓ_t} − 1 − ℓ_t) ]

    ρ_t = π_θ(c_t) / π_old(c_t) and ℓ_t = log π_ref(c_t) − log π_θ(c_t). A ``variant`` (one of ``MISREADINGS``)
    is a learner's other loss: "swap" ℓ_t = log π_θ − log π_ref; "rho" β·ρ_t·k3; "tokens" one mean over all
    the batch's real tokens; "columns" each completion's mean over all T columns."""
    mask = r["completion_mask"].bool()
    logp = reference_logp(load_model(), r["prompt_ids"], r["prompt_mask"], r["completion_ids"],
                          r["completion_mask"], TEMPERATURE)
    advantages = r["advantages"][:, None]
    ratio = torch.exp(torch.where(mask, logp - r["old_logp"], 0.0))
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - CLIP_EPS, 1 + CLIP_EPS) * advantages)
    log_ref_ratio = torch.where(mask, r["ref_logp"] - logp, 0.0)
    if variant == "swap":
        log_ref_ratio = -log_ref_ratio
    k3 = torch.expm1(log_ref_ratio) - log_ref_ratio
    per_token = torch.where(mask, -surrogate + BETA * (ratio if variant == "rho" else 1.0) * k3, 0.0)
    if variant == "tokens":
        return per_token.sum() / mask.sum()
    if variant == "columns":
        return per_token.mean(1).mean()
    return (per_token.sum(1) / mask.sum(1)).mean()


MISREADINGS = {   # variant of written_out_loss → what the learner's loss is
    "swap": "k3 with the KL's direction swapped: ℓ_t = log π_θ(c_t) − log π_ref(c_t) in place of "
            "ℓ_t = log π_ref(c_t) − log π_θ(c_t)",
    "rho": "k3 weighted by ρ_t = π_θ/π_old (the grpo rung's default): the contract wants plain k3",
    "tokens": "one token mean over all the batch's tokens: GRPO's mean is over each completion's tokens, then "
              "over the completions",
    "columns": "each completion's mean over all T columns, padding included: divide by its real tokens |o_i|",
}


def _misreading(r: dict, got: Tensor, want: Tensor) -> str:
    """'; that is k3 weighted by ρ_t …' when ``got`` is one of ``MISREADINGS``' losses (and the written-out loss is
    the core's, ``want``); else ''."""
    if not torch.isclose(written_out_loss(r), want.detach(), rtol=1e-5, atol=1e-6):
        return ""
    for variant, cause in MISREADINGS.items():
        if torch.isclose(got.detach(), written_out_loss(r, variant), rtol=1e-5, atol=1e-6):
            return f"; that is {cause}"
    return ""


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
        raise Broken(f"{where}: loss {got.item():.6g}, expected {want.item():.6g}{_misreading(r, got, want)}")
    if not got.requires_grad:
        raise Broken(f"{where}: the right loss, but with no graph: the gradient cannot reach the model")
    got.backward()
    bad = _differs(mine, core.model, "gradient", 1e-4, 1e-6)
    if bad:
        raise Broken(f"{where}: the right loss, but {bad}")


def _update(sol, mu: int, max_grad_norm: float = 1.0) -> tuple[torch.nn.Module, RecordingAdam, object]:
    """(the model after ``sol.update`` with μ passes on the grader's rollout, the optimiser, what it returned)."""
    r = {k: v for k, v in rollout().items() if k != "old_logp"}
    model = load_model()
    optimizer = RecordingAdam(model.parameters(), lr=1e-3)
    losses = sol.update(model, optimizer, r, mu, CLIP_EPS, BETA, TEMPERATURE, max_grad_norm)
    return model, optimizer, losses


def _shown(value) -> str:
    """A returned value in a message: a list by its items' types ('[Tensor, Tensor]'), anything else its repr."""
    if isinstance(value, list):
        return "[" + ", ".join(type(x).__name__ for x in value) + "]"
    return repr(value)[:80]


def update_mu_steps(sol) -> None:
    """One call of update is exactly μ optimiser steps (no minibatches), and returns the μ losses as Python floats."""
    for mu in (1, 3):
        _, optimizer, losses = _update(sol, mu)
        if optimizer.steps != mu:
            raise Broken(f"update with μ = {mu} took {optimizer.steps} optimiser step(s), expected {mu}")
        if not isinstance(losses, list) or len(losses) != mu or not all(isinstance(x, float) for x in losses):
            raise Broken(f"update with μ = {mu} should return a list of its {mu} losses as Python floats "
                         f"(loss.item()), got {_shown(losses)}")


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
    mine, recorded, _ = _update(sol, 3, max_grad_norm)
    r = {k: v for k, v in rollout().items() if k != "old_logp"}
    core = core_policy(load_model())
    cfg = core_config(3)
    cfg.max_grad_norm = max_grad_norm
    update(core, core_batch(r), RecordingAdam(core.model.parameters(), lr=1e-3), cfg)
    gap = _gap(mine, core.model, start)
    if gap <= UPDATE_RTOL:
        return
    stale = core_policy(load_model())            # the same three steps, π_old recorded again before each
    optimizer = RecordingAdam(stale.model.parameters(), lr=1e-3)
    cfg.mu = 1
    for _ in range(3):
        update(stale, core_batch(r), optimizer, cfg)
    if _gap(mine, stale.model, start) <= UPDATE_RTOL:
        raise Broken("μ = 3: π_old was recorded again before each step (the ratio is always 1, nothing is ever "
                     "clipped); record it once, before the first optimiser step")
    where = f"μ = 3, Adam(lr = 1e-3), max_grad_norm {max_grad_norm:g}"
    r["old_logp"] = reference_logp(load_model(), r["prompt_ids"], r["prompt_mask"], r["completion_ids"],
                                   r["completion_mask"], TEMPERATURE)
    cause = step_cause(r, recorded, max_grad_norm)
    if cause:
        raise Broken(f"{where}, {cause}")
    raise Broken(f"{where}: the weights moved ‖Δθ − Δθ_core‖ / ‖Δθ_core‖ = {gap:.2g} away from core.update's "
                 f"(> {UPDATE_RTOL:g}; π_old recorded once before the first step, with no graph?)")
