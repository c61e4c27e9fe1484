"""The agent exercises (22: a trajectory's two masks, 23: the multi-turn rollout): the solutions pass their graders,
each planted bug is caught by the property it breaks, and ``agent --use-exercises`` samples with the learner's
functions, reached through the swappable table, and trains exactly as with the core's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from planted_bugs_agent import CAUGHT_BY, PLANTED_AGENT

from ladder import run
from ladder.core.swappable import IMPLEMENTATIONS
from ladder.graders import EXERCISES, ORIGINALS, swap
from ladder.graders.grading import grade, grade_file
from ladder.runtime.runlog import without_timings

ROOT = Path(__file__).resolve().parents[1]
BY_STEM = {e.stem: e for e in EXERCISES}
AGENT = ["--preset", "tiny", "--steps", "2", "--eval-every", "0", "--eval-size", "8", "--prompts-per-step", "2",
         "--group-size", "4", "--no-progress"]
# Appended to a copy of a solution: each call the run makes writes what it was called on (the grader's own calls
# are wiped after grading, below), so the test sees that the rung reached the learner's function.
SPY = '''

import functools as _functools

_solution = {name}


@_functools.wraps(_solution)
def {name}(*args, **kwargs):
    with open(__file__ + ".calls", "a") as calls:
        calls.write({what} + "\\n")
    return _solution(*args, **kwargs)
'''


@pytest.mark.parametrize("stem", ["ex22_trajectory_tensors", "ex23_multi_turn"])
def test_the_solution_passes_its_grader(stem):
    result = grade_file(ROOT / "solutions", BY_STEM[stem])
    assert result.passed, result.message
    assert result.checks == result.cases >= 9


@pytest.mark.parametrize("stem, label", [(s, label) for s, bugs in PLANTED_AGENT.items() for label in bugs])
def test_a_planted_bug_is_caught_by_the_property_it_breaks(stem, label):
    result = grade(PLANTED_AGENT[stem][label], BY_STEM[stem])
    assert result.status == "failed", f"{stem}: the grader let '{label}' pass"
    first = result.message.splitlines()[0]
    assert first.startswith("case ") and CAUGHT_BY[stem][label] in first, (label, result.message)
    assert "input" in result.message


def test_at_least_six_planted_bugs_each():
    assert all(len(PLANTED_AGENT[stem]) >= 6 for stem in ("ex22_trajectory_tensors", "ex23_multi_turn"))


def _learner(directory: Path) -> Path:
    """The two solutions, each wrapped in a spy that notes its calls."""
    directory.mkdir()
    for stem, name, what in (("ex22_trajectory_tensors", "trajectory_tensors",
                              'str(len(args[0] if args else kwargs["trajectories"]))'),
                             ("ex23_multi_turn", "multi_turn",
                              'type((args[2] if len(args) > 2 else kwargs["envs"])[0]).__name__')):
        source = (ROOT / "solutions" / f"{stem}.py").read_text()
        (directory / f"{stem}.py").write_text(source + SPY.format(name=name, what=what))
    return directory


def test_agent_use_exercises_samples_with_the_learners_rollout_and_trains_as_the_core(tmp_path, monkeypatch,
                                                                                     capsys):
    learner = _learner(tmp_path / "mine")
    real = swap.grade_file

    def graded_then_forgotten(directory, exercise):   # the grader's own calls are not the run's
        result = real(directory, exercise)
        for calls in Path(directory).glob("*.calls"):
            calls.unlink()
        return result

    monkeypatch.setattr(swap, "grade_file", graded_then_forgotten)
    monkeypatch.setenv("LADDER_EXERCISES", str(learner))
    assert run.main(["agent", *AGENT, "--out", str(tmp_path / "core")]) == 0
    assert run.main(["agent", *AGENT, "--use-exercises", "--out", str(tmp_path / "mine_run")]) == 0
    announced = capsys.readouterr().out
    assert "agent trains with your trajectory_tensors (ex22), multi_turn (ex23)" in announced
    assert set((learner / "ex23_multi_turn.py.calls").read_text().split()) == {"Calculator"}
    assert set((learner / "ex22_trajectory_tensors.py.calls").read_text().split()) == {"8"}   # 2 problems × 4
    assert IMPLEMENTATIONS["multi_turn"] is ORIGINALS["multi_turn"]                               # put back after

    def metrics(out: Path) -> list[dict]:
        return [without_timings(json.loads(line)) for line in (out / "metrics.jsonl").read_text().splitlines()]

    assert metrics(tmp_path / "mine_run") == metrics(tmp_path / "core")


def test_the_core_rollout_reaches_a_learners_trajectory_tensors_through_the_table(tmp_path, monkeypatch):
    """With exercise 22 alone done, the rung's own multi_turn calls the learner's trajectory_tensors."""
    learner = _learner(tmp_path / "mine")
    (learner / "ex23_multi_turn.py").unlink()
    shutil.copy(ROOT / "exercises" / "ex23_multi_turn.py", learner)   # the stub: not implemented yet
    monkeypatch.setenv("LADDER_EXERCISES", str(learner))
    assert run.main(["agent", *AGENT, "--steps", "1", "--use-exercises", "--out", str(tmp_path / "run")]) == 0
    assert "8" in (learner / "ex22_trajectory_tensors.py.calls").read_text().split()


def test_no_call_of_the_agent_rung_escapes_the_swap(tmp_path):
    """Every function the agent rung's exercises name is called through the table (the core's own raise)."""
    from test_exercises_escape import spies_in_place_of_the_core

    from ladder.graders.swap import calls

    runs = [["--credit", "turn"],
            ["--algo", "rloo", "--kl-in", "reward", "--kl-coef", "0.04", "--ref-sync-every", "1",
             "--loss-type", "sapo"],
            ["--ratio-level", "sequence", "--sampler-dtype", "bfloat16", "--sampler-correction", "token_truncate"],
            ["--algo", "gdpo"]]
    with spies_in_place_of_the_core() as counts:
        for i, args in enumerate(runs):
            assert run.main(["agent", *AGENT, "--steps", "1", *args, "--out", str(tmp_path / f"run{i}")]) == 0
    missed = sorted({e.function for e in calls("agent")} - set(counts))
    assert not missed, f"agent never called {missed} through ladder's namespace"


def test_with_every_solution_swapped_in_the_agent_rung_trains_exactly_as_the_core(tmp_path, monkeypatch, capsys):
    """All the agent rung's exercises (the GRPO ones, exercise 20's step among them, and 22, 23) from solutions/:
    the same metrics as the core's, per-turn credit on the guessing game. Grading is the graders' test; here each
    solution is taken as it is (grading exercise 20 alone trains 16 GRPO steps)."""
    from ladder.graders import load
    from ladder.graders.grading import Result

    def taken_as_it_is(directory, exercise):
        function = getattr(load(Path(directory) / f"{exercise.stem}.py"), exercise.function)
        return Result(exercise.stem, "passed", function=function)

    monkeypatch.setattr(swap, "grade_file", taken_as_it_is)
    args = ["agent", *AGENT, "--env", "guess", "--credit", "turn", "--max-new-tokens", "96", "--max-tool-calls", "3"]
    assert run.main([*args, "--out", str(tmp_path / "core")]) == 0
    monkeypatch.setenv("LADDER_EXERCISES", str(ROOT / "solutions"))
    capsys.readouterr()
    assert run.main([*args, "--use-exercises", "--out", str(tmp_path / "mine")]) == 0
    said = capsys.readouterr().out.splitlines()[0]
    assert "agent trains with your" in said and "grpo_step (ex20)" in said and "multi_turn (ex23)" in said, said
    assert "the core's own" not in said                            # every function it calls is the learner's

    def metrics(out: Path) -> list[dict]:
        return [without_timings(json.loads(line)) for line in (out / "metrics.jsonl").read_text().splitlines()]

    assert metrics(tmp_path / "mine") == metrics(tmp_path / "core")
