"""The failure gallery (``ladder.doctor.gallery``) diagnosed for real: each entry's broken run, a seeded tiny run a
flag or two away from its healthy preset, triggers its signature and no other problem; the fixed run triggers none
of it; every rung's tiny preset (grpo, ppo-sentiment and agent shortened to 8 updates) is healthy.

Each run takes about 10 s on one core. The runs are cached under pytest's base temporary directory, shared by the
xdist workers of one session (a run is renamed into place when complete), so a run two tests need is made once."""

from __future__ import annotations

from pathlib import Path

import pytest

from ladder.doctor import diagnose, read_run
from ladder.doctor.gallery import GALLERY, PRESETS, run_gallery_entry, run_healthy
from ladder.doctor.signatures import WORDING

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One directory for the whole session: under xdist, each worker's base temp has the session's as parent."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if base.name.startswith("popen-gw") else base
    return root / "doctor-gallery"


def problems(run_dir: Path) -> list[str]:
    return [f.name for f in diagnose(read_run(run_dir)) if f.severity == "problem"]


def names(run_dir: Path) -> list[str]:
    return [f.name for f in diagnose(read_run(run_dir))]


def test_every_entry_names_a_signature_and_changes_flags():
    for name, failure in GALLERY.items():
        assert failure.signature in WORDING, name
        assert failure.fix and failure.why, name
        assert failure.rung in PRESETS, name


@pytest.mark.parametrize("name", sorted(GALLERY))
def test_broken_run_is_diagnosed_and_the_fix_clears_it(cache, name):
    failure = GALLERY[name]
    broken = run_gallery_entry(name, cache)
    found = names(broken)
    assert failure.signature in found, (name, found)
    expected = [failure.signature] if WORDING[failure.signature].severity == "problem" else []
    assert problems(broken) == expected, (name, found)
    fixed = run_gallery_entry(name, cache, fixed=True)
    assert failure.signature not in names(fixed), (name, names(fixed))
    assert problems(fixed) == [], (name, names(fixed))


@pytest.mark.parametrize("rung", sorted(PRESETS))
def test_every_tiny_preset_is_healthy(cache, rung):
    run_dir = run_healthy(rung, cache)
    assert read_run(run_dir).rung == rung
    assert problems(run_dir) == [], (rung, names(run_dir))


def test_runs_are_cached_by_configuration(cache):
    """The truncation entry's fix restores the preset's token budget: the same configuration, the same run."""
    assert run_gallery_entry("truncation", cache, fixed=True) == run_healthy("grpo", cache)
    assert run_gallery_entry("truncation", cache) != run_healthy("grpo", cache)
