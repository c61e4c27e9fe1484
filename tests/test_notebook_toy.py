"""Notebooks 0–3: the numbers behind notebook 2's bridge from REINFORCE to PPO, and the course's conventions."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from notebook_helpers import closing_self_check_questions

from ladder.viz import cartpole_lab

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
TOY = ["0_the_ladder", "1_reinforce_cartpole", "2_ppo_cartpole", "3_three_policies_and_kl"]


@pytest.fixture(scope="module")
def bridge():
    return cartpole_lab.surrogate_vs_reinforce(steps=4)


def test_at_r_1_the_surrogate_gradient_is_reinforces(bridge):
    # π_θ = π_old before the first step: r = 1 up to float32 rounding. log π_old was computed at the rollout, in
    # batches of another shape, whose kernels may round differently (a few ulps of a log-prob, ~1e-7 each); 1e-5 is
    # a hundred times that and a thousand times below what one real step does (the next test: std of r > 0.01).
    assert np.abs(bridge["ratios"][0] - 1.0).max() <= 1e-5
    # the gradients then differ by (r − 1) · Â ∇log π per sample: 1e-5 relative, summed over samples that partly
    # cancel; one real step parts them by more than 1e-3 of the scale (the next test)
    assert bridge["max_abs_diff"][0] <= 1e-4 * bridge["pg_grad_max"][0]
    assert bridge["cosine"][0] == pytest.approx(1.0, abs=1e-5)
    assert bridge["norm_ratio"][0] == pytest.approx(1.0, abs=1e-5)
    assert bridge["norm_ratio_is"][0] == pytest.approx(1.0, abs=1e-5)
    assert bridge["removed_share"][0] == 0.0


@pytest.mark.trained
def test_after_a_step_the_two_gradients_part(bridge):
    assert np.std(bridge["ratios"][1]) > 0.01                # one real step moved π_θ
    assert bridge["max_abs_diff"][1] > 1e-3 * bridge["pg_grad_max"][1]
    assert bridge["cosine"][-1] < 0.9 and bridge["norm_ratio"][-1] < 0.9
    # the ratio alone keeps the direction; the clip is what turns it
    assert bridge["cosine_is"][-1] > 0.95 > bridge["cosine"][-1]


@pytest.mark.trained
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


# ------------------------------------------------------------------------------------ the conventions
def _cells(name: str) -> list[dict]:
    cells = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())["cells"]
    return [{"type": c["cell_type"], "text": "".join(c["source"])} for c in cells]


@pytest.mark.parametrize("name", TOY)
def test_opening_says_what_the_learner_will_do_and_how_long(name):
    first = _cells(name)[0]
    assert first["type"] == "markdown"
    bullets = [ln for ln in first["text"].splitlines() if re.match(r"^[*-] ", ln)]
    opening = first["text"].split("\n## ")[0]
    assert 2 <= len([b for b in bullets if b in opening]) <= 4
    assert re.search(r"\d+\s*minutes", opening)


@pytest.mark.parametrize("name", TOY)
def test_every_widget_has_a_prediction_before_and_its_answer_after(name):
    cells = _cells(name)
    widgets = [i for i, c in enumerate(cells) if c["type"] == "code" and re.search(r"viz\.\w+_view\(", c["text"])]
    for i in widgets:
        assert cells[i - 1]["type"] == "markdown" and cells[i - 1]["text"].startswith("**Predict first.**"), i
        after = "".join(c["text"] for c in cells[i + 1:i + 4] if c["type"] == "markdown")
        assert "<details><summary>Answer</summary>" in after, f"{name}: no answer after the widget of cell {i}"
    if name in ("2_ppo_cartpole", "3_three_policies_and_kl"):
        assert widgets


@pytest.mark.parametrize("name", TOY)
def test_closing_self_check_asks_predictions_and_reasons_checked_by_the_code(name):
    closing_self_check_questions(_cells(name))
