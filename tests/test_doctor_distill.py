"""The doctor on real distill runs (rung 7, on-policy distillation): the tiny preset, shortened to 6 updates, is
healthy — none of the doctor's problems, the ones that read grpo's groups included (a teacher's per-token rewards
leave every group's reward alike) — and the same run taught by a copy of the student's own weights is a teacher with
nothing to teach (``nothing_to_teach``), and nothing else.

The two runs take about 5 s on one core, ladder's libraries imported once (``warm_start``). Both are cached as the
gallery's runs are (``ladder.run_cache.cached_run`` in ``gallery.default_cache()``), keyed by their configuration and
ladder's source; the copy of the student lies beside them, named by a hash of the student's files."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from ladder.doctor import diagnose, read_run
from ladder.doctor.gallery import default_cache
from ladder.doctor.signatures import T
from ladder.run_cache import cached_run
from ladder.tasks.math_problems import TINY_MODEL, resolve_math_model

pytestmark = [pytest.mark.timeout(600), pytest.mark.trained]

# The tiny preset, shortened: one evaluation at the end, of 10 problems; the healthy run 6 updates (thirds of 2: every
# trend signature reads it, Thresholds.min_points_trend), the self-taught one 3 (nothing_to_teach reads the first 3).
SHORT = ("--preset", "tiny", "--eval-size", "10", "--eval-every", "0", "--print-samples", "0", "--no-progress",
         "--threads", "1", "--seed", "0")


def student_copy(cache: Path) -> Path:
    """The tiny student's directory copied elsewhere (``load_teacher`` refuses the student's own path, not a copy),
    once per content of the student's files."""
    student = Path(resolve_math_model(TINY_MODEL))
    digest = hashlib.sha256()
    for path in sorted(p for p in student.rglob("*") if p.is_file()):
        digest.update(path.relative_to(student).as_posix().encode() + b"\0" + path.read_bytes())
    copy = cache / f"distill-student-copy-{digest.hexdigest()[:16]}"
    if not copy.exists():
        cache.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{copy.name}-", dir=cache))
        shutil.copytree(student, scratch / "model")
        try:
            os.rename(scratch / "model", copy)
        except OSError:  # another process put its copy there first: the same bytes
            pass
        shutil.rmtree(scratch, ignore_errors=True)
    return copy


@pytest.fixture(scope="module")
def healthy() -> Path:
    return cached_run("distill", [*SHORT, "--steps", "6"], default_cache())


@pytest.fixture(scope="module")
def self_taught() -> Path:
    cache = default_cache()
    return cached_run("distill", [*SHORT, "--steps", str(T.min_points), "--teacher", str(student_copy(cache))], cache)


def problems(run_dir: Path) -> list[str]:
    return [f.name for f in diagnose(read_run(run_dir)) if f.severity == "problem"]


def test_a_healthy_distill_run_has_no_problem(healthy):
    run = read_run(healthy)
    assert run.rung == "distill"
    assert problems(healthy) == [], [f.name for f in diagnose(run)]
    kl = run.get("distill/reverse_kl").values
    assert min(kl[:T.min_points]) >= 10 * T.taught_kl, kl  # far from a teacher with nothing to teach


def test_a_copy_of_the_student_as_teacher_has_nothing_to_teach(self_taught):
    run = read_run(self_taught)
    assert problems(self_taught) == ["nothing_to_teach"]
    found = next(f for f in diagnose(run) if f.name == "nothing_to_teach")
    assert found.metric == "distill/reverse_kl" and max(found.values) < T.taught_kl
    assert "the teacher" in found.saw and "--teacher" in found.change
    assert found.section.startswith("notebooks/10_learning_from_a_teacher.ipynb")
    # every reward 0, no gradient: the student is still its teacher's copy, the same greedy answers
    assert run.get("eval_accuracy").values[-1] == run.get("teacher_accuracy").values[-1]
