"""``ladder.core.reference``: the soft update that moves π_ref towards π_θ."""

from __future__ import annotations

import copy

import pytest
import torch
from core_update_helpers import LinearPolicy, params_of, same_params, single_thread  # noqa: F401 (autouse fixture)

from ladder.core import soft_update

# --------------------------------------------------------------------------- soft_update


def test_soft_update_alpha_one_zero_and_half():
    policy, start = LinearPolicy(seed=30), LinearPolicy(seed=31)
    theta = params_of(policy)

    ref = copy.deepcopy(start)
    soft_update(ref.parameters(), policy.parameters(), 1.0)
    assert same_params(params_of(ref), theta)                  # an exact copy

    ref = copy.deepcopy(start)
    soft_update(ref.parameters(), policy.parameters(), 0.0)
    assert same_params(params_of(ref), params_of(start))       # bit-identical

    ref = copy.deepcopy(start)
    soft_update(ref.parameters(), policy.parameters(), 0.5)
    for r, a, b in zip(ref.parameters(), start.parameters(), theta):
        assert torch.allclose(r, (a + b) / 2, atol=1e-7, rtol=0)
    assert same_params(params_of(policy), theta)               # π_θ itself untouched


def test_soft_update_rejects_mismatched_lists():
    ref, policy = LinearPolicy(seed=32), LinearPolicy(seed=33, critic=False)
    before = params_of(ref)
    with pytest.raises(ValueError):
        soft_update(ref.parameters(), policy.parameters(), 0.5)
    assert same_params(params_of(ref), before)
