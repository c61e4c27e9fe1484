"""The non-finite guard around an optimiser step: a step is taken only from a finite loss and gradient, and undone
if it leaves a weight non-finite, so that a bad minibatch changes nothing.

    before   loss and ‖g‖ finite (‖g‖ finite ⇔ every gradient finite)        else: skip, zero the gradients
    save     every weight and optimiser-state tensor the step changes, copied into buffers kept from step to step
    step     optimizer.step()
    check    min_i θ_i and max_i θ_i finite (a NaN propagates to both)        else: put back what was saved

The save is a copy into memory allocated once per optimiser, not a fresh snapshot per step: the same bytes move,
but nothing is allocated, page-faulted or freed at every step.
"""

from __future__ import annotations

import weakref

import torch
from torch import Tensor

_BUFFERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # optimiser → the save's buffers


def all_finite(tensors: list[Tensor]) -> bool:
    """No NaN or ±inf anywhere: each tensor's smallest and largest entries are finite (both propagate a NaN), read
    back in one synchronisation. (One pass of min/max per tensor: torch's ∞-norm over a list is ~20× slower on a
    CPU.)"""
    extremes = [torch.stack(torch.aminmax(t)) for t in tensors if t.numel()]
    return not extremes or bool(torch.isfinite(torch.stack(extremes)).all().item())


def _state_tensors(optimizer: torch.optim.Optimizer, params: list[Tensor]) -> list[Tensor]:
    return [v for p in params if p in optimizer.state for v in optimizer.state[p].values() if torch.is_tensor(v)]


def _buffers_for(optimizer: torch.optim.Optimizer, live: list[Tensor]) -> list[Tensor]:
    """Buffers shaped like ``live``: the ones kept for this optimiser, or new ones when the tensors changed."""
    kept = _BUFFERS.get(optimizer)
    if kept is None or len(kept) != len(live) or any(
            b.shape != t.shape or b.dtype != t.dtype or b.device != t.device for b, t in zip(kept, live)):
        kept = [torch.empty_like(t) for t in live]
        _BUFFERS[optimizer] = kept
    return kept


def step_keeping_weights_finite(optimizer: torch.optim.Optimizer, params: list[Tensor]) -> bool:
    """``optimizer.step()``, undone if it leaves any weight non-finite: the weights and the optimiser's state are
    put back as they were before it. Returns whether the step was kept."""
    live = [p.detach() for p in params] + _state_tensors(optimizer, params)
    saved = _buffers_for(optimizer, live)
    torch._foreach_copy_(saved, live)
    before = {p: dict(optimizer.state[p]) for p in params if p in optimizer.state}   # its entries, as objects
    optimizer.step()
    if all_finite([p.detach() for p in params]):
        return True
    with torch.no_grad():
        torch._foreach_copy_(live, saved)   # the weights, and the state's tensors as they were, in place
    for p in params:
        if p in before:
            optimizer.state[p] = before[p]  # those tensors again, should the step have put new ones in their place
        else:
            optimizer.state.pop(p, None)    # the step made this state: it had none
    return False


def step_if_finite(optimizer: torch.optim.Optimizer, params: list[Tensor], loss: Tensor, grad_norm: Tensor
                   ) -> dict[str, float]:
    """The optimiser step, after ``backward`` and the gradient clip — unless the loss or the gradient is not
    finite, or the step would leave a weight non-finite (it is undone): then nothing changes and the
    step is skipped. Returns ``{"grad_norm": ‖g‖ before clipping (when finite), "skipped_steps": 0 or 1}``."""
    record = {}
    skipped = not (torch.isfinite(loss).item() and torch.isfinite(grad_norm).item())
    if not skipped:
        record["grad_norm"] = grad_norm.item()
        skipped = not step_keeping_weights_finite(optimizer, params)
    if skipped:
        optimizer.zero_grad(set_to_none=True)
    record["skipped_steps"] = float(skipped)
    return record
