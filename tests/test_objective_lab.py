"""Notebook 6b's numbers: the objectives' derivatives in the ratio, and GDPO against summing first (no model)."""

import math

import pytest
import torch

from ladder.viz import objective_lab as lab
from ladder.viz import objective_runs


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
    assert lab.pushing_at(r, 1.0, k_pos=k, lambda_pos=lam)["VESPO φ(ρ_seq)"] == pytest.approx(-phi / r, rel=1e-6)


def test_gdpo_does_not_care_about_a_reward_scale_and_the_sum_does():
    rewards = lab.example_rewards(groups=4, group_size=4, seed=0)
    rescaled = rewards * torch.tensor([1.0, 10.0], dtype=rewards.dtype)
    before, after = lab.gdpo_advantages(rewards), lab.gdpo_advantages(rescaled)
    torch.testing.assert_close(before["normalize_then_sum"], after["normalize_then_sum"], atol=1e-4, rtol=1e-4)
    assert (before["sum_then_normalize"] - after["sum_then_normalize"]).abs().max() > 0.05
    length_says = after["corr"]["sum_then_normalize"][1]
    assert length_says > before["corr"]["sum_then_normalize"][1]
    assert after["corr"]["sum_then_normalize"][0] < after["corr"]["normalize_then_sum"][0]


def test_vespo_pushes_hardest_at_k_minus_1_over_lambda_and_harder_than_the_clip_below_1():
    k, lam = 2.0, 3.0
    found = lab.vespo_against_clip(lab.objective_curves(1.0, k_pos=k, lambda_pos=lam))
    peak = (k - 1) / lam
    assert found["peak_r"] == pytest.approx(peak, abs=0.01)
    assert found["peak_push"] == pytest.approx(-math.exp(lam) * peak ** (k - 1) * math.exp(-lam * peak), rel=1e-3)
    assert found["vespo_first"] == pytest.approx(-math.exp(lam) * 0.3 ** (k - 1) * math.exp(-lam * 0.3), rel=1e-6)
    assert found["clip_first"] == pytest.approx(-1.0)
    assert found["harder_below_1"]
    assert not lab.vespo_against_clip(lab.objective_curves(1.0, k_pos=k, lambda_pos=0.5))["harder_below_1"]


def test_gdpo_ranks_both_right_answers_above_both_wrong_ones_and_the_sum_does_not():
    correct, length = [1.0, 1.0, 0.0, 0.0], [10.0, -10.0, 20.0, -20.0]    # exercise 25's worked example
    rewards = torch.tensor(list(zip(correct, length)), dtype=torch.float64)
    rank = lab.rank_in_group(lab.gdpo_advantages(rewards, group_size=4), group=0)
    assert (rank["wrong_score"], rank["right_score"]) == (20.0, -10.0)
    assert rank["sum_then_normalize"]["wrong"] > rank["sum_then_normalize"]["right"]
    assert not rank["sum_then_normalize"]["right_above_wrong"]
    assert rank["normalize_then_sum"]["right"] > rank["normalize_then_sum"]["wrong"]
    assert rank["normalize_then_sum"]["right_above_wrong"]


def test_the_staleness_table_takes_the_max_of_maxima_and_the_mean_of_shares():
    def record(lag, w_max, frac):
        return {"sampling/staleness": lag, "sampler/logp_diff_mean": 0.1, "sampler/logp_diff_max": 1.0,
                "sampler/is_ratio_min": 0.5, "sampler/is_ratio_max": w_max, "sampler/corrected_frac": frac}

    runs = {2: [record(1, 9.0, 0.9), record(2, 1.2, 0.02), record(2, 1.1, 0.0)]}
    row = objective_runs.staleness_markdown(runs).splitlines()[-1].split("|")[1:-1]
    assert [c.strip() for c in row] == ["2", "2", "0.1", "1", "0.5", "1.2", "0.01"]


def test_the_bundles_table_says_vespo_reads_its_own_sequence_ratio():
    rows = {row.split(" | ")[0].strip("| "): row for row in objective_runs.bundles_markdown().splitlines()[2:]}
    assert "Π_t ρ_t" in rows["vespo"] and "ratio_level=token" in rows["vespo"]
    assert "one per token" in rows["grpo"] and "Π_t" not in rows["grpo"]
    assert objective_runs.ratio_read("clipped", "sequence") == "s_i, one per completion"
