"""Notebook 6b's numbers: the objectives' derivatives in the ratio, and GDPO against summing first (no model)."""

import math

import pytest
import torch

from ladder.viz import objective_lab as lab


@pytest.mark.parametrize("adv", [1.0, -1.0])
def test_every_objective_has_the_slope_minus_advantage_at_r_1(adv):
    slopes = lab.pushing_at(1.0, adv)
    assert set(slopes) == set(lab.OBJECTIVES)
    for name, slope in slopes.items():
        assert slope == pytest.approx(-adv, abs=1e-9), name


def test_the_clip_lets_go_outside_its_band_and_the_others_do_not():
    up, down = lab.pushing_at(1.5, 1.0), lab.pushing_at(0.5, -1.0)
    for name in lab.OBJECTIVES[:2]:
        assert up[name] == 0.0 and down[name] == 0.0
    for name in lab.OBJECTIVES[2:]:
        assert up[name] < 0.0 < down[name]


def test_the_soft_gate_slope_is_4_sigma_1_minus_sigma():
    tau, r = 2.5, 1.7
    sigma = 1.0 / (1.0 + math.exp(-tau * (r - 1.0)))
    assert lab.pushing_at(r, 1.0, tau_pos=tau)["SAPO gate"] == pytest.approx(-4 * sigma * (1 - sigma), rel=1e-9)


def test_vespo_slope_is_phi_over_r():
    k, lam, r = 2.0, 3.0, 0.8
    phi = math.exp(lam + k * math.log(r) - lam * r)
    assert lab.pushing_at(r, 1.0, k_pos=k, lambda_pos=lam)["VESPO φ(w)"] == pytest.approx(-phi / r, rel=1e-6)


def test_gdpo_does_not_care_about_a_reward_scale_and_the_sum_does():
    rewards = lab.example_rewards(groups=4, group_size=4, seed=0)
    rescaled = rewards * torch.tensor([1.0, 10.0], dtype=rewards.dtype)
    before, after = lab.gdpo_advantages(rewards), lab.gdpo_advantages(rescaled)
    torch.testing.assert_close(before["normalize_then_sum"], after["normalize_then_sum"], atol=1e-4, rtol=1e-4)
    assert (before["sum_then_normalize"] - after["sum_then_normalize"]).abs().max() > 0.05
    length_says = after["corr"]["sum_then_normalize"][1]
    assert length_says > before["corr"]["sum_then_normalize"][1]
    assert after["corr"]["sum_then_normalize"][0] < after["corr"]["normalize_then_sum"][0]
