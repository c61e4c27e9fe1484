"""Notebook 6's bookkeeping widgets: TRL's names on ladder's, TRL's schedule on μ and M, and the parity view
(TRL's GRPOTrainer built offline; needs trl ≥ 1.16, skipped otherwise)."""

import math

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import pytest  # noqa: E402

from ladder import core, viz  # noqa: E402
from ladder.viz import trl_loss_parity, trl_map_schedule  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------ the map
def test_map_table_has_every_row_of_trl_map():
    from ladder.trl import map as trl_map

    text = viz.trl_map_markdown()
    for cls in trl_map_schedule.MAP_CLASSES:
        rows = trl_map.rows(cls)
        assert f"({len(rows)} rows)" in text and len(trl_map_schedule.trl_map_rows(cls)) == len(rows) > 5
        for r in rows:
            if r.core_function is not None:
                assert hasattr(core, r.core_function), r.core_function    # every core function named exists
    assert "| `num_iterations` | grpo `--mu` | `core.update` |" in text


# ------------------------------------------------------------------------------------- the schedule
def test_schedule_of_trls_own_diagram():
    """grpo_trainer.py's figure: 2 processes × 3 rows, G = 2, gas = 2, spg = 4, num_iterations = 1."""
    s = viz.trl_schedule(num_iterations=1, steps_per_generation=4, gradient_accumulation_steps=2,
                         per_device_train_batch_size=3, num_processes=2, num_generations=2, optimizer_steps=4)
    assert s["generation_batch_size"] == 24 and s["generate_every"] == 4
    micro = s["micro"]
    assert [m.step for m in micro] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [m.generation for m in micro] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [m.slice for m in micro] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert [m.old_version for m in micro] == [0, 0, 0, 0, 2, 2, 2, 2]   # generated at global steps 0 and 2
    assert [m.stale for m in micro] == [0, 0, 1, 1, 0, 0, 1, 1]        # the second step of each uses an old π_old
    assert s["computes_old_logp"] and s["off_policy"]
    lad = s["ladder"]
    assert lad["exact"] and (lad["mu"], lad["num_minibatches"], lad["prompts_per_step"]) == (1, 2, 12)


@pytest.mark.parametrize("case,expected", [
    (dict(), (1, 1, 1, False)),                                                           # TRL's defaults
    (dict(num_iterations=2, steps_per_generation=1, gradient_accumulation_steps=2), (1, 1, 1, False)),
    (dict(num_iterations=4, steps_per_generation=2), (4, 2, 2, True)),
    (dict(num_iterations=3, steps_per_generation=4, gradient_accumulation_steps=4), (3, 1, 4, True)),
    (dict(num_iterations=2, steps_per_generation=1, gradient_accumulation_steps=4), (1, 1, 2, False)),  # 2 gens/step
    (dict(num_iterations=4, steps_per_generation=1, gradient_accumulation_steps=2), (2, 1, 1, True)),
], ids=["defaults", "iterations-inside-one-step", "mu4-M2", "spg=gas", "two-generations-per-step",
        "mu2-from-accumulation"])
def test_schedule_hand_cases(case, expected):
    s = viz.trl_schedule(per_device_train_batch_size=8, num_generations=8, **case)
    lad = s["ladder"]
    assert (lad["mu"], lad["num_minibatches"], lad["prompts_per_step"], s["computes_old_logp"]) == expected
    assert lad["records_old_logp"] == s["computes_old_logp"]     # ladder records π_old exactly when TRL does


def test_schedule_without_a_ladder_equivalent():
    s = viz.trl_schedule(steps_per_generation=3, gradient_accumulation_steps=2, optimizer_steps=3)
    assert not s["ladder"]["exact"] and "straddles" in s["ladder"]["reason"] and s["ladder_steps"] is None
    # step 1 takes the last slice of generation 0 and the first of generation 1
    assert [(m.generation, m.slice) for m in s["micro"] if m.step == 1] == [(0, 2), (1, 0)]
    s = viz.trl_schedule(num_iterations=2, steps_per_generation=3, gradient_accumulation_steps=2, optimizer_steps=3)
    assert not s["ladder"]["exact"] and "the end of one pass" in s["ladder"]["reason"]
    # one generation per 3 steps, but step 1 takes slice 2 of the first pass and slice 0 of the second
    assert [(m.generation, m.slice, m.iteration) for m in s["micro"] if m.step == 1] == [(0, 2, 0), (0, 0, 1)]


def test_schedule_rules_agree_on_a_grid():
    """TRL's skip rule (gas mod generate_every = 0) is the timeline's own answer, and wherever ladder has an
    equivalent, ladder's schedule (updates × μ × M) gives every optimiser step the π_old TRL gives it."""
    for ni in range(1, 5):
        for spg in range(1, 7):
            for gas in range(1, 7):
                s = viz.trl_schedule(ni, spg, gas, per_device_train_batch_size=4, num_generations=2,
                                     optimizer_steps=2 * math.lcm(spg * ni, gas))
                assert s["computes_old_logp"] == s["off_policy"], (ni, spg, gas)
                if s["ladder"]["exact"]:
                    lad = s["ladder"]
                    assert lad["records_old_logp"] == s["computes_old_logp"], (ni, spg, gas)
                    assert lad["rows"] == lad["prompts_per_step"] * lad["group_size"]
                    for st in s["ladder_steps"]:
                        versions = {m.old_version for m in s["micro"] if m.step == st["step"]}
                        assert versions == {st["old_version"]}, (ni, spg, gas, st)


def test_generation_batch_size_is_resolved_as_grpoconfig_does():
    s = viz.trl_schedule(gradient_accumulation_steps=3, per_device_train_batch_size=4, num_generations=4)
    assert (s["steps_per_generation"], s["generation_batch_size"]) == (3, 12)     # spg defaults to gas
    s = viz.trl_schedule(generation_batch_size=32, per_device_train_batch_size=8, num_generations=4)
    assert s["steps_per_generation"] == 4
    with pytest.raises(ValueError, match="can not be both"):
        viz.trl_schedule(steps_per_generation=2, generation_batch_size=16)
    with pytest.raises(ValueError, match="divisible by the global batch"):
        viz.trl_schedule(generation_batch_size=12, per_device_train_batch_size=8)
    with pytest.raises(ValueError, match="divisible by num_generations"):
        viz.trl_schedule(per_device_train_batch_size=3, num_generations=2)


def test_schedule_view_controls():
    view = viz.schedule_view(num_iterations=2, steps_per_generation=4, gradient_accumulation_steps=2)
    assert isinstance(view, ipywidgets.VBox) and view.image.value[:8] == PNG
    assert set(view.controls) == {"num_iterations", "steps_per_generation", "gradient_accumulation_steps",
                                  "per_device_train_batch_size"}
    assert view.data["ladder"]["mu"] == 2 and view.data["ladder"]["num_minibatches"] == 2
    view.controls["steps_per_generation"].value = 3
    assert not view.data["ladder"]["exact"] and "the end of one pass" in view.data["summary"]   # ni = 2, gas = 2
    view.controls["steps_per_generation"].value = 2
    view.controls["gradient_accumulation_steps"].value = 4
    view.controls["num_iterations"].value = 1
    assert not view.data["computes_old_logp"] and view.data["ladder"]["generations_per_update"] == 2
    view.controls["per_device_train_batch_size"].value = 16
    assert view.data["generation_batch_size"] == 32 and view.data["ladder"]["prompts_per_step"] == 8


# ------------------------------------------------------------------------------------------- parity
@pytest.fixture(scope="module")
def parity():
    pytest.importorskip("trl", minversion="1.16")
    view = viz.parity_view("grpo")
    yield view
    from accelerate.state import AcceleratorState, GradientState

    trl_loss_parity.parity_bench.cache_clear()       # the trainer's accelerate state goes: later tests start clean
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


def test_parity_view_every_loss_type_matches_trl(parity):
    assert parity.image.value[:8] == PNG
    for loss_type in trl_loss_parity.PARITY_LOSS_TYPES:
        parity.controls["loss_type"].value = loss_type
        for level in ("token", "sequence"):
            parity.controls["level"].value = level
            parity.controls["correction"].value = level == "token"
            d = parity.data
            assert d["loss_type"] == loss_type and d["level"] == level and d["same_by_design"]
            # the bound of trl_helpers.close: float32 rounding grows with the largest entry (luspo sums tokens)
            assert d["loss_diff"] < 1e-5 and d["max_grad_diff"] < 1e-6 + 1e-5 * d["max_grad"], \
                (loss_type, level, d["summary"])
            assert d["max_grad"] > 0.1 and d["num_params"] > 10
    parity.controls["level"].value = "token"
    parity.controls["correction"].value = True


def test_parity_view_shows_the_deliberate_difference(parity):
    parity.controls["loss_type"].value = "grpo"
    parity.controls["level"].value = "sequence"
    parity.controls["correction"].value = True
    d = parity.data
    assert not d["same_by_design"] and d["loss_diff"] > 1e-6 and "by design" in d["summary"]
    parity.controls["level"].value = "token"
    assert parity.data["max_grad_diff"] < 1e-5
