"""The failure gallery (``ladder.doctor.gallery``) diagnosed for real: each entry's broken run, a seeded tiny run a
flag or two away from its healthy preset, triggers its signature and no other problem; the fixed run triggers none
of it; every rung's tiny preset (grpo, ppo-sentiment and agent shortened to 8 updates) is healthy.

Each run takes about 10 s on one core. The runs are cached in ``gallery.default_cache()`` ($LADDER_CACHE/gallery),
keyed by configuration and by the package's source: the xdist workers, the gallery notebook run beside them and the
next pytest run share them (a run is renamed into place when complete, a lock makes a second process wait for it), so a
run several need is made once, and a run made by other code is never reused."""

from __future__ import annotations

from pathlib import Path

import pytest

from ladder.doctor import diagnose, read_run
from ladder.doctor.gallery import GALLERY, PRESETS, default_cache, healthy_flags
from ladder.doctor.signatures import WORDING
from ladder.run_cache import config_key, run_gallery_entry, run_healthy

pytestmark = [pytest.mark.timeout(600), pytest.mark.notebook_runs]  # notebook 8 makes the runs


@pytest.fixture(scope="module")
def cache() -> Path:
    """The cache the notebook uses too."""
    return default_cache()


def problems(run_dir: Path) -> list[str]:
    return [f.name for f in diagnose(read_run(run_dir)) if f.severity == "problem"]


def names(run_dir: Path) -> list[str]:
    return [f.name for f in diagnose(read_run(run_dir))]


def test_every_entry_names_a_signature_and_changes_flags():
    for name, failure in GALLERY.items():
        assert failure.signature in WORDING, name
        assert failure.fix and failure.why, name
        assert failure.rung in PRESETS, name


@pytest.mark.trained
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


@pytest.mark.trained
@pytest.mark.parametrize("rung", sorted(PRESETS))
def test_every_tiny_preset_is_healthy(cache, rung):
    run_dir = run_healthy(rung, cache)
    assert read_run(run_dir).rung == rung
    assert problems(run_dir) == [], (rung, names(run_dir))


def test_runs_are_cached_by_configuration(cache):
    """The truncation entry's fix restores the preset's token budget: the same configuration, the same run."""
    assert run_gallery_entry("truncation", cache, fixed=True) == run_healthy("grpo", cache)
    assert run_gallery_entry("truncation", cache) != run_healthy("grpo", cache)


def test_the_cache_key_holds_the_source(monkeypatch):
    """The same configuration made by other code is another run."""
    from ladder import run_cache

    flags = healthy_flags("grpo")
    key = config_key("grpo", flags)
    assert config_key("grpo", flags) == key
    monkeypatch.setattr(run_cache, "source_hash", lambda: "other code")
    assert config_key("grpo", flags) != key
    monkeypatch.undo()
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")  # other kernels round otherwise: another run
    assert config_key("grpo", flags) != key


def test_the_default_cache_follows_ladder_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("LADDER_CACHE", str(tmp_path))
    assert default_cache() == tmp_path / "gallery"
