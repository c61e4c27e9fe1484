"""Why the learner's update ends away from ``core.update``: each optimiser step's gradient against the core's.

``RecordingAdam`` keeps, at each step, the weights it is about to change and the gradient it is handed. For each
step the grader computes the core's gradient of GRPO's loss at those weights (π_old: the weights before the first
step), clipped to max_grad_norm, and names what the learner's gradient is instead: the core's direction with a
norm that ignores max_grad_norm (a hard-coded clip), or the core's plus the previous step's (no zero_grad).
"""

from __future__ import annotations

import torch
from torch import Tensor

GRAD_RTOL = 1e-3              # ‖g − g_core‖ / ‖g_core‖ of one step: float32 rounding stays far below


class RecordingAdam(torch.optim.Adam):
    """Adam that counts its steps and keeps, for each, the weights before it and the gradient it was handed."""

    def __init__(self, params, lr: float):
        super().__init__(params, lr=lr)
        self.steps, self.weights, self.grads = 0, [], []

    def step(self, closure=None):
        self.steps += 1
        params = [p for group in self.param_groups for p in group["params"]]
        self.weights.append(torch.cat([p.detach().flatten() for p in params]).clone())
        self.grads.append(torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad.detach()).flatten()
                                     for p in params]).clone())
        return super().step(closure)


def _relative(got: Tensor, want: Tensor) -> float:
    return ((got - want).norm() / want.norm().clamp(min=1e-12)).item()


def _direction(got: Tensor, want: Tensor) -> float:
    """How far apart two gradients point: ‖g/‖g‖ − w/‖w‖‖."""
    return _relative(got / got.norm().clamp(min=1e-12), want / want.norm().clamp(min=1e-12))


def core_gradient(r: dict, weights: Tensor) -> Tensor:
    """The core's gradient of GRPO's loss (unclipped) at ``weights``, π_old the rollout's ``old_logp``."""
    from ladder.core import compute_loss

    from .capstone_grpo_oracle import core_batch, core_config, core_policy
    from .capstone_grpo_task import load_model

    model = load_model()
    torch.nn.utils.vector_to_parameters(weights, model.parameters())
    loss, _, _ = compute_loss(core_policy(model), core_batch(r), core_config())
    loss.backward()
    return torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad).flatten() for p in model.parameters()])


def _clipped(g: Tensor, max_norm: float) -> Tensor:
    return g * min(1.0, max_norm / (g.norm().item() + 1e-6))


def _cause(got: Tensor, raw: Tensor, previous: Tensor | None, max_grad_norm: float) -> str | None:
    """What one step's gradient ``got`` is instead of the core's ``raw`` clipped (None: nothing known)."""
    want = _clipped(raw, max_grad_norm)
    if previous is not None and _direction(got, raw + previous) <= GRAD_RTOL:
        return ("its gradient is the core's plus the previous step's: the gradients pile up over the passes "
                "(optimizer.zero_grad() before each backward)")
    if _direction(got, raw) <= GRAD_RTOL:
        if got.norm() < want.norm():
            return (f"its gradient has the core's direction but norm {got.norm():.4g}, where max_grad_norm = "
                    f"{max_grad_norm:g} gives {want.norm():.4g}: a clip norm that ignores max_grad_norm (hard-coded?)")
        return (f"its gradient has the core's direction but norm {got.norm():.4g}, where max_grad_norm = "
                f"{max_grad_norm:g} gives {want.norm():.4g} (the gradient norm clipped to max_grad_norm?)")
    return None


def step_cause(r: dict, optimizer: RecordingAdam, max_grad_norm: float) -> str | None:
    """'step 2: its gradient is …' at the first step whose gradient is not the core's, when ``_cause`` names why;
    None otherwise."""
    previous = None
    for k, (weights, got) in enumerate(zip(optimizer.weights, optimizer.grads), 1):
        raw = core_gradient(r, weights)
        if _relative(got, _clipped(raw, max_grad_norm)) > GRAD_RTOL:
            cause = _cause(got, raw, previous, max_grad_norm)
            return f"step {k}: {cause}" if cause else None
        previous = got
    return None
