"""Notebooks 0–3: the numbers behind notebook 2's bridge from REINFORCE to PPO, and the course's conventions."""


import numpy as np
import pytest

from ladder.viz import cartpole_lab



@pytest.fixture(scope="module")
def bridge():
    return cartpole_lab.surrogate_vs_reinforce(steps=4)


def test_at_r_1_the_surrogate_gradient_is_reinforces(bridge):
    assert np.all(bridge["ratios"][0] == 1.0)                # π_θ = π_old before the first step
    assert bridge["max_abs_diff"][0] <= 1e-6
    assert bridge["cosine"][0] == pytest.approx(1.0, abs=1e-6)
    assert bridge["norm_ratio"][0] == pytest.approx(1.0, abs=1e-6)
    assert bridge["removed_share"][0] == 0.0


def test_after_a_step_the_two_gradients_part(bridge):
    assert np.std(bridge["ratios"][1]) > 0.01                # one real step moved π_θ
    assert bridge["max_abs_diff"][1] > 1e-4
    assert bridge["cosine"][-1] < 0.9 and bridge["norm_ratio"][-1] < 0.9
    # the ratio alone keeps the direction; the clip is what turns it
    assert bridge["cosine_is"][-1] > 0.95 > bridge["cosine"][-1]


def test_removed_samples_are_exactly_those_of_the_clip_condition(bridge):
    adv, eps = bridge["advantages"], bridge["clip_eps"]
    for ratios, removed in zip(bridge["ratios"], bridge["removed"]):
        condition = ((adv > 0) & (ratios > 1 + eps)) | ((adv < 0) & (ratios < 1 - eps))
        assert np.array_equal(removed, condition)
    assert bridge["removed_share"][-1] > 0.02
    assert bridge["removed_share"] == pytest.approx([float(np.mean(r)) for r in bridge["removed"]])


def test_step_k_is_pass_k_of_mu_passes(bridge):
    run = cartpole_lab.mu_passes(4)
    assert bridge["removed_share"][1:] == pytest.approx(run["clip_frac_after"])
    assert np.allclose(bridge["ratios"][-1], run["ratios"][-1])

