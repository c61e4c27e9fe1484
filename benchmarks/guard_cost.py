"""What the non-finite guard costs on top of the optimiser step, on the tiny GRPO model's weights.

TRL (and every trainer that steps unguarded) pays only ``optimizer.step()``; ladder's ``core.guard`` also saves
what the step changes and checks the weights after it. Three ways are timed on the same tensors, interleaved:

    step            AdamW (fused) alone: the peer's cost
    guard, clone    the save as it was: a fresh copy of every weight and state tensor per step (``clone``), the check
                    an ∞-norm over the list (``torch._foreach_norm(·, inf)``)
    guard           ``core.guard.step_keeping_weights_finite``: the save into buffers kept across steps, the check
                    min/max per tensor

The weights are the tiny GRPO benchmark model's shapes (``grpo_vs_trl.py``: hidden 256, 4 layers, 400-token
vocabulary, ~4.3M parameters) with random gradients, on one thread; medians of ``--repeats`` rounds of 20 steps.

    python benchmarks/guard_cost.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch

from ladder.core import guard

SHAPES = [(1024, 256)] * 12 + [(256, 256)] * 16 + [(400, 256)]  # the MLPs, the attention, the tied lm_head


def clone_guard(optimizer: torch.optim.Optimizer, params: list[torch.Tensor]) -> bool:
    """The guard before ``core.guard``: a fresh snapshot each step, the ∞-norm check."""
    saved = [p.detach().clone() for p in params]
    state = {p: {k: v.clone() if torch.is_tensor(v) else v for k, v in optimizer.state[p].items()}
             for p in params if p in optimizer.state}
    optimizer.step()
    if bool(torch.isfinite(torch.stack(torch._foreach_norm([p.detach() for p in params], math.inf))).all()):
        return True
    with torch.no_grad():
        for p, before in zip(params, saved):
            p.copy_(before)
    for p in params:
        optimizer.state[p] = state.get(p, {})
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(shape) * 0.02) for shape in SHAPES]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    optimizer = torch.optim.AdamW(params, lr=1e-5, fused=True)
    optimizer.step()
    ways = {"step": optimizer.step, "guard, clone": lambda: clone_guard(optimizer, params),
            "guard": lambda: guard.step_keeping_weights_finite(optimizer, params)}
    times = {name: [] for name in ways}
    for _ in range(args.repeats):
        for name, way in ways.items():
            start = time.perf_counter()
            for _ in range(20):
                way()
            times[name].append((time.perf_counter() - start) / 20 * 1000)
    n = sum(p.numel() for p in params)
    print(f"# {n / 1e6:.1f}M parameters, AdamW (fused), 1 thread, median of {args.repeats} x 20 steps")
    for name, ms in times.items():
        print(f"{name:>13}: {statistics.median(ms):6.2f} ms per step")
    step = statistics.median(times["step"])
    for name in ("guard, clone", "guard"):
        print(f"{name} costs {statistics.median(times[name]) - step:.2f} ms on top of the step")


if __name__ == "__main__":
    main()
