"""Notebook 10's lab and widget: the three KLs of a short distill run, the teacher's reward on a forgotten carry, the
generalized JSD's fits, and the two gradient identities enumerated — each checked for what the notebook says of it.

Two updates of the tiny distill preset held in memory (seconds); the rest is arithmetic on small tensors.
"""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from ladder import core  # noqa: E402
from ladder.viz import distill_lab as lab  # noqa: E402
from ladder.viz import distill_views as views  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def kls():
    return lab.three_kls(updates=2)


def test_each_kl_is_measured_on_its_own_batch_and_the_anchor_starts_at_zero(kls):
    assert len(kls.trust) == len(kls.anchor_k1) == len(kls.target) == len(kls.records) == 2
    assert abs(kls.anchor_k1[0]) < 1e-5 and abs(kls.anchor_k3[0]) < 1e-5   # batch 1 sampled by π_ref itself
    assert all(kl > 0 for kl in kls.trust)                                # ρ·k3 ≥ 0, and each step moved π_θ
    assert kls.target == [r["distill/reverse_kl"] for r in kls.records]   # the rung's own number
    assert all(r["clip_frac"] == 0 for r in kls.records)                  # μ = 1, one minibatch: ρ = 1 in the step
    assert kls.recipe.step.rollout.__class__.__name__ != "KeptBatches"   # the rung's rollout put back


def test_the_teacher_blames_the_forgotten_carry_most_and_gamma_sets_the_credit(kls):
    forgot, carried = lab.forgot_and_carried(kls.recipe)
    assert not forgot.correct and carried.correct
    assert forgot.pieces[forgot.carry].strip() == "0" and carried.pieces[carried.carry].strip() == "1"
    assert int(forgot.rewards.argmin()) == forgot.carry
    assert float(forgot.rewards[:lab.first_line(forgot.pieces)].abs().max()) < 0.5   # the units' line: agreed
    for s in (forgot, carried):
        torch.testing.assert_close(s.returns_0, s.rewards)
        torch.testing.assert_close(s.returns_1[0], s.rewards.sum())
        torch.testing.assert_close(s.returns_1, s.rewards.flip(0).cumsum(0).flip(0))
    assert forgot.grpo_advantage < 0 < carried.grpo_advantage                      # one number per completion


def test_the_carry_is_the_last_digit_before_the_second_lines_equals_sign():
    pieces = ["7", " +", " ", "8", " =", " ", "1", "5", "\n", "4", " +", " ", "3", " +", " ", "0", " =", " ", "7", "\n"]
    assert lab.carry_position(pieces) == 15 and lab.first_line(pieces) == 8
    assert lab.carry_position(["#", "#", " ", "7", "5"]) is None


def _is_local_minimum(landscape: torch.Tensor, ij: tuple[int, int]) -> bool:
    i, j = ij
    around = landscape[max(i - 1, 0):i + 2, max(j - 1, 0):j + 2]
    return bool((around >= landscape[i, j]).all())


def test_forward_kl_covers_both_modes_and_reverse_kl_seeks_the_one_it_starts_near():
    fits = lab.jsd_fits()
    forward, reverse = fits["fits"][0.0], fits["fits"][1.0]
    assert forward["left start"]["centre"] == forward["right start"]["centre"] == forward["best"]["centre"]
    assert abs(forward["left start"]["left_mass"] - fits["p_left_mass"]) < 0.1      # mass on both sides
    assert reverse["left start"]["left_mass"] > 0.99 and reverse["right start"]["left_mass"] < 0.01
    assert abs(reverse["left start"]["centre"] - 8) <= 0.5 and abs(reverse["right start"]["centre"] - 21) <= 0.5
    assert reverse["best"]["centre"] == reverse["left start"]["centre"]             # the larger mode is the best
    for at in fits["fits"].values():
        for name in lab.STARTS:
            assert _is_local_minimum(at["landscape"], at[name]["path"][-1])
            assert at[name]["path"][0] == lab.grid_point(*lab.STARTS[name])
    torch.testing.assert_close(reverse["left start"]["value"],
                               float(core.generalized_jsd(lab.bump_logits(8.0, 2.0), lab.two_mode_teacher(), 1.0)))


def test_the_policy_gradient_is_the_reverse_kl_gradient_and_gamma_zero_is_gkds():
    grads = lab.enumerated_gradients()
    torch.testing.assert_close(grads["pg_1"], grads["minus_kl"], rtol=0, atol=1e-12)
    torch.testing.assert_close(grads["pg_0"], grads["minus_gkd"], rtol=0, atol=1e-12)
    last = grads["position"] == grads["T"] - 1
    torch.testing.assert_close(grads["pg_1"][last], grads["pg_0"][last], rtol=0, atol=1e-12)
    assert (grads["pg_1"] - grads["pg_0"])[grads["position"] == 0].abs().max() > 1e-3
    assert len(grads["position"]) == sum(grads["V"] ** (t + 1) for t in range(grads["T"]))


def test_the_views_draw_and_the_slider_moves_between_the_two_kls(kls):
    assert views.three_kls_figure(kls).startswith(PNG)
    assert views.teacher_reward_figure(*lab.forgot_and_carried(kls.recipe)).startswith(PNG)
    assert views.gradient_figure(lab.enumerated_gradients()).startswith(PNG)
    view = views.jsd_view(lab.jsd_fits())
    assert view.data["beta"] == 0.0 and view.data["left start"]["centre"] == view.data["right start"]["centre"]
    view.controls["beta"].value = 1.0
    assert view.data["beta"] == 1.0 and view.data["left start"]["centre"] < view.data["right start"]["centre"]
    assert bytes(view.image.value).startswith(PNG) and "β = 1" in view.data["summary"]


# --- section 4: the comparison study read back (ladder.viz.distill_study) ----------------------------------------
def _run(arm, seed, evals, flops_per_update, reverse_kl=0.03, forward_kl=0.01):
    records = [{"step": k, "compute/flops": k * flops_per_update} for k in range(1, 11)]
    return {"arm": arm, "seed": seed, "variant": "native", "evals": evals, "records": records, "teacher_accuracy": 1.0,
            "probe": {"student_samples_reverse_kl": reverse_kl, "teacher_samples_reverse_kl": -forward_kl,
                      "student_samples_correct": 0.8, "teacher_samples_correct": 0.98}}


def test_the_study_says_only_what_held_on_every_run():
    from ladder.viz import distill_study as study
    fast, slow = [[0, 0.6], [5, 0.95], [10, 0.97]], [[0, 0.6], [5, 0.8], [10, 0.92]]
    runs = [_run("a", 0, fast, 1e9), _run("b", 0, slow, 1e9), _run("a", 1, fast, 1e9), _run("b", 1, fast, 1.05e9)]
    results = {"arms": {"a": "arm A", "b": "arm B"}, "runs": runs}
    assert study.curve(runs[0]) == ([0.0, 5.0, 10.0], [0.6, 0.95, 0.97], [0, 5, 10])
    assert study.reached(runs[1]) == 10.0 and study.reached(_run("c", 0, [[0, 0.5]], 1e9)) is None
    assert study.held_everywhere(results, study.reached, "got there cheaper") == []   # seed 1: 5 against 5.25, < 10 %
    assert study.paired(results, "a", "b", study.reached) == {"lower": 1, "same": 1, "higher": 0}
    runs[3] = _run("b", 1, slow, 1e9)
    assert study.held_everywhere(results, study.reached, "got there cheaper") == [
        "arm A got there cheaper than arm B on every one of 2 runs"]
    assert study.own_over_teacher(results) == pytest.approx((3.0, 3.0))
    assert study.spread([0.91, 0.97]) == "0.91 … 0.97" and study.spread([0.5, 0.501]) == "0.50"


def test_the_shipped_study_has_every_arm_seed_and_variant_and_draws():
    from ladder.viz import distill_study as study
    from ladder.viz._widget import render_png
    results = study.seed_study()
    arms = list(results["arms"])
    assert {(r["arm"], r["seed"], r["variant"]) for r in results["runs"]} == {
        (a, s, v) for a in arms for s in (0, 1, 2) for v in ("native", "avx2", "no-simd")}
    assert render_png(study.figure(results["runs"], results["arms"])).startswith(PNG)
