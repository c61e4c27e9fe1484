"""``--use-exercises``: the learner's implemented functions go into the core, and come out again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import ladder.core
from ladder import run
from ladder.core import SamplerOptions, UpdateConfig
from ladder.core.swappable import IMPLEMENTATIONS
from ladder.graders import EXERCISES, ORIGINALS
from ladder.graders.cases_loop import small_policy_and_batch
from ladder.graders.swap import use_exercises
from ladder.runtime.runlog import without_timings

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
pytestmark = pytest.mark.usefixtures("solutions_graded_once")   # solutions/ graded once, not at every swap


def write_stubs(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for e in EXERCISES:
        (directory / f"{e.stem}.py").write_text(f"def {e.function}(*args, **kwargs):\n    raise NotImplementedError\n")
    return directory


def bindings() -> dict[str, object]:
    """What the one table every call goes through holds now, for each swapped exercise."""
    return {e.stem: IMPLEMENTATIONS[e.function] for e in EXERCISES if e.swap}


def test_solutions_are_swapped_in_and_restored():
    before = bindings()
    assert before == {e.stem: ORIGINALS[e.function] for e in EXERCISES if e.swap}
    lines = []
    with use_exercises(SOLUTIONS, say=lines.append) as swapped:
        assert len(swapped) == sum(e.swap for e in EXERCISES)
        for stem, fn in bindings().items():
            assert fn.__module__ == f"_ladder_exercise_{stem}", stem
        assert IMPLEMENTATIONS["kl_estimate"].__module__ == "_ladder_exercise_ex08_kl_corrected"  # ex08 completes ex07
    assert bindings() == before
    assert len(lines) == 1 and "using your discounted_returns (ex01)" in lines[0] and "kl_estimate (ex08)" in lines[0]


def test_stubs_are_left_out(tmp_path):
    before, lines = bindings(), []
    with use_exercises(write_stubs(tmp_path), say=lines.append) as swapped:
        assert swapped == [] and bindings() == before
    assert lines == [f"--use-exercises ({tmp_path}): nothing implemented yet, training with the core's functions"]


def test_only_the_implemented_ones_and_a_failing_one_is_flagged(tmp_path):
    write_stubs(tmp_path)
    shutil.copy(SOLUTIONS / "ex03_gae.py", tmp_path)
    (tmp_path / "ex04_whiten.py").write_text("def whiten(x, mask=None, shift_mean=True, eps=1e-8):\n"
                                             "    return x\n")
    lines = []
    with use_exercises(tmp_path, say=lines.append):
        assert IMPLEMENTATIONS["gae"] is not ORIGINALS["gae"] and IMPLEMENTATIONS["whiten"] is not ORIGINALS["whiten"]
        assert IMPLEMENTATIONS["aggregate"] is ORIGINALS["aggregate"]
    assert IMPLEMENTATIONS["gae"] is ORIGINALS["gae"] and IMPLEMENTATIONS["whiten"] is ORIGINALS["whiten"]
    others = [e.function for e in EXERCISES if e.swap and e.function not in ("gae", "whiten")]
    assert lines == [f"--use-exercises ({tmp_path}): using your gae (ex03), whiten (ex04, FAILS its grader); "
                     f"the core's own {', '.join(others)}. A run that learns is no proof that they are right; "
                     "pytest exercises/ is"]


def test_a_run_names_only_the_functions_its_rung_calls(tmp_path):
    lines = []
    with use_exercises(SOLUTIONS, say=lines.append, rung="cartpole") as swapped:
        assert IMPLEMENTATIONS["gae"] is not ORIGINALS["gae"]
        assert IMPLEMENTATIONS["group_relative"] is ORIGINALS["group_relative"]      # grpo's, not cartpole's
    names = {r.exercise for r in swapped}
    assert names == {"ex03_gae", "ex04_whiten", "ex05_clipped_surrogate", "ex06_value_loss", "ex11_aggregate",
                     "ex17_compute_loss", "ex18_update"}
    assert lines[0].startswith(f"--use-exercises ({SOLUTIONS}): cartpole trains with your gae (ex03), whiten (ex04)")
    assert "group_relative" not in lines[0] and "the core's own" not in lines[0]


def test_an_import_inside_a_learners_function_finds_their_own_earlier_exercise(tmp_path):
    """``from ex17_compute_loss import compute_loss`` inside ``update``: the learner's ex17, in the grader and
    in a run (without that: ModuleNotFoundError, or under ``pytest exercises/`` the stub in exercises/)."""
    for e in EXERCISES:
        shutil.copy(SOLUTIONS / f"{e.stem}.py", tmp_path)
    late = tmp_path / "ex18_update.py"
    inside = "    from ex17_compute_loss import compute_loss\n    M = cfg.num_minibatches\n"
    late.write_text(late.read_text().replace("from ex17_compute_loss import compute_loss\n", "").replace(
        "    M = cfg.num_minibatches\n", inside))
    lines = []
    with use_exercises(tmp_path, say=lines.append, rung="cartpole") as swapped:
        assert {r.exercise: r.status for r in swapped}["ex18_update"] == "passed"
        assert run.main(["cartpole", "--total-steps", "1024", "--eval-every", "1024", "--no-progress",
                         "--out", str(tmp_path / "run")]) == 0


def test_the_cores_loss_weighs_its_sampler_with_the_swapped_in_weights(tmp_path):
    """compute_loss → sampler_correction → core.sampler_weights, looked up in ladder.core: the learner's."""
    write_stubs(tmp_path)
    (tmp_path / "ex21_sampler_weights.py").write_text(      # every weight 0: the policy term vanishes
        "import torch\n\n\ndef sampler_weights(old_logp, sampling_logp, mask, mode, clip_min=None, clip_max=3.0):\n"
        "    return torch.zeros_like(old_logp)\n")
    policy, batch = small_policy_and_batch(15, critic=False, sampling=True)
    cfg = UpdateConfig(sampler=SamplerOptions("token_truncate"))
    core_loss = ladder.core.compute_loss(policy, batch, cfg)[1]["loss_pg"]
    lines = []
    with use_exercises(tmp_path, say=lines.append, rung="grpo"):
        assert ladder.core.compute_loss(policy, batch, cfg)[1]["loss_pg"] == 0.0 != core_loss
    assert "sampler_weights (ex21, FAILS its grader)" in lines[0]
    assert ladder.core.compute_loss(policy, batch, cfg)[1]["loss_pg"] == core_loss


def test_a_stub_an_exercise_calls_is_named(tmp_path):
    write_stubs(tmp_path)
    shutil.copy(SOLUTIONS / "ex19_masked_gae.py", tmp_path)          # it calls ex03's gae, still a stub here
    from ladder.graders.grading import grade_file
    result = grade_file(tmp_path, {e.stem: e for e in EXERCISES}["ex19_masked_gae"])
    assert result.message == "not implemented yet: it calls gae() of ex03_gae.py, a stub still"


def test_restored_even_when_training_raises():
    with pytest.raises(RuntimeError), use_exercises(SOLUTIONS, say=lambda line: None):
        raise RuntimeError("boom")
    assert IMPLEMENTATIONS["gae"] is ORIGINALS["gae"]


def _metrics(out: Path) -> list[dict]:
    return [without_timings(json.loads(line)) for line in open(out / "metrics.jsonl")]


RUNS = {"cartpole": ["--total-steps", "2048", "--eval-every", "1024"],
        "reinforce": ["--total-steps", "1500", "--eval-every", "1024"],
        "ppo-sentiment": ["--preset", "tiny", "--steps", "2"],
        "grpo": ["--preset", "tiny", "--steps", "2", "--eval-every", "0", "--eval-size", "8"],
        "grpo --algo gspo": ["--preset", "tiny", "--steps", "2", "--eval-every", "0", "--eval-size", "8",
                             "--algo", "gspo"],
        "grpo --algo rloo": ["--preset", "tiny", "--steps", "2", "--eval-every", "0", "--eval-size", "8",
                             "--algo", "rloo"],
        "grpo --sampler-dtype bfloat16": ["--preset", "tiny", "--steps", "2", "--eval-every", "0", "--eval-size", "8",
                                          "--sampler-dtype", "bfloat16", "--sampler-correction", "token_truncate",
                                          "--sampler-clip-max", "1.01"]}


@pytest.mark.parametrize("run_name", RUNS)
def test_training_with_the_solutions_is_exactly_the_core(run_name, tmp_path, monkeypatch, capsys):
    rung = run_name.split()[0]
    args = [rung, *RUNS[run_name], "--no-progress", "--seed", "3"]
    assert run.main([*args, "--out", str(tmp_path / "core")]) == 0
    monkeypatch.setenv("LADDER_EXERCISES", str(SOLUTIONS))
    capsys.readouterr()
    assert run.main([*args, "--out", str(tmp_path / "mine"), "--use-exercises"]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"--use-exercises ({SOLUTIONS}): {rung} trains with your "), said
    assert "the core's own" not in said.splitlines()[0]             # every function it calls is the learner's
    assert _metrics(tmp_path / "mine") == _metrics(tmp_path / "core")
    assert json.loads((tmp_path / "mine" / "config.json").read_text())["use_exercises"] is True


def test_a_swapped_in_bug_changes_training(tmp_path, monkeypatch):
    bug = write_stubs(tmp_path / "bug")
    (bug / "ex05_clipped_surrogate.py").write_text(          # the sign flipped: gradient ascent on the loss
        "import torch\n\n\ndef clipped_surrogate(ratio, advantages, clip_eps_low, clip_eps_high=None, delta=None):\n"
        "    clipped = torch.clamp(ratio, 1 - clip_eps_low, 1 + clip_eps_low)\n"
        "    return torch.min(ratio * advantages, clipped * advantages)\n")
    args = ["cartpole", "--total-steps", "1024", "--eval-every", "1024", "--no-progress"]
    assert run.main([*args, "--out", str(tmp_path / "core")]) == 0
    monkeypatch.setenv("LADDER_EXERCISES", str(bug))
    assert run.main([*args, "--out", str(tmp_path / "mine"), "--use-exercises"]) == 0
    assert _metrics(tmp_path / "mine") != _metrics(tmp_path / "core")


def test_missing_directory_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LADDER_EXERCISES", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit) as exit_:
        run.main(["cartpole", "--out", str(tmp_path / "run"), "--use-exercises", "--no-progress"])
    assert exit_.value.code == 2
    assert "no exercises directory" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
