"""``core.guard``: a step that would leave a weight non-finite is undone — weights and optimiser state as they were —
produced for real (a learning rate that overflows float32), and the save reuses its buffers from step to step."""

from __future__ import annotations

import pytest
import torch

from ladder.core import guard


def weights_and_grads(seed: int = 0) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.randn(5, 3, generator=g)), torch.nn.Parameter(torch.randn(7, generator=g))]
    for p in params:
        p.grad = torch.randn(p.shape, generator=g) + 10.0
    return params


def snapshot(params, optimizer):
    return ([p.detach().clone() for p in params],
            [{k: v.clone() if torch.is_tensor(v) else v for k, v in optimizer.state[p].items()} for p in params])


@pytest.mark.parametrize("make", [lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: torch.optim.AdamW(ps, lr=0.1),
                                  lambda ps: torch.optim.AdamW(ps, lr=0.1, fused=True)], ids=["sgd", "adamw", "fused"])
def test_an_overflowing_step_is_undone_weights_and_state(make):
    params = weights_and_grads()
    optimizer = make(params)
    assert guard.step_keeping_weights_finite(optimizer, params)                 # a sane step: kept
    weights, state = snapshot(params, optimizer)
    adam = isinstance(optimizer, torch.optim.AdamW)
    for group in optimizer.param_groups:
        group["lr"] = 1e37 if adam else 3e38                                    # lr · g overflows float32
    if adam:
        with torch.no_grad():
            for p in params:
                p.fill_(-3.4e38)                                                # Adam's step is ~lr: from the edge
    weights, state = snapshot(params, optimizer)
    assert not guard.step_keeping_weights_finite(optimizer, params)             # it would leave ±inf: undone
    for p, before in zip(params, weights):
        assert torch.equal(p.detach(), before)
    for p, before in zip(params, state):
        now = optimizer.state[p]
        assert set(now) == set(before)
        for k, v in before.items():
            assert torch.equal(now[k], v) if torch.is_tensor(v) else now[k] == v


def test_a_first_step_that_overflows_leaves_no_state_behind():
    params = weights_and_grads()
    optimizer = torch.optim.SGD(params, lr=3e38, momentum=0.9)
    before = [p.detach().clone() for p in params]
    assert not guard.step_keeping_weights_finite(optimizer, params)
    assert all(torch.equal(p.detach(), b) for p, b in zip(params, before))
    assert all(p not in optimizer.state or not optimizer.state[p] for p in params)


def test_the_save_reuses_its_buffers():
    params = weights_and_grads()
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    guard.step_keeping_weights_finite(optimizer, params)   # the state appears in this step
    guard.step_keeping_weights_finite(optimizer, params)
    kept = guard._BUFFERS[optimizer]
    guard.step_keeping_weights_finite(optimizer, params)
    assert guard._BUFFERS[optimizer] is kept


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("where", [0, 500, 99_999])
def test_all_finite_sees_one_bad_entry_anywhere(bad, where):
    x = torch.randn(100_000)
    assert guard.all_finite([torch.zeros(0), x])
    x[where] = bad
    assert not guard.all_finite([torch.randn(3), x])
