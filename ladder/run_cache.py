"""Runs made once per machine and code version: ``python -m ladder.run RUNG FLAGS`` kept in a cache directory, so
that a notebook, the doctor's gallery and the tests that read the same run share it.

    cached_run(rung, flags, cache_dir) -> the run's directory      (made at the first call, then reused)
    run_gallery_entry(name)            -> a gallery entry's broken (or fixed) run  (``ladder.doctor.gallery``)
    run_healthy(rung)                  -> a rung's healthy tiny run, the one the gallery's entries break

A run's entry is keyed by its whole configuration as ``ladder.run`` resolves it (preset, flags, defaults; not where
it is written), by a hash of the ladder package's source, the versions of the libraries that compute it and the
variables that choose torch's CPU kernels, so a run made by other code, or rounded otherwise, is never reused. It is
made in a scratch directory and renamed into place when complete (an entry is whole or absent); a lock file makes a
second process that wants the same run wait for the first. Each run is forked from ``warm_start``'s server.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from ladder.doctor import gallery
from ladder.runtime import warm_start


@functools.cache
def source_hash() -> str:
    """sha256 over every ``ladder/**/*.py`` (its path in the package, then its bytes), sorted by path: the code
    that makes a run, so a change to any of it makes every run anew."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


# What else decides a run's numbers: the libraries that compute it, and the variables that choose torch's CPU kernels
# (another instruction set rounds differently: a result made under one is not reused under another).
LIBRARIES = ("torch", "transformers", "peft", "accelerate", "bitsandbytes", "gymnasium", "numpy")
KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "OMP_NUM_THREADS")


def made_by() -> dict:
    """The code and setting a cached result depends on: ladder's source, the libraries' versions, the kernel
    variables."""
    from importlib import metadata

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {"source": source_hash(), "libraries": {name: version(name) for name in LIBRARIES},
            "kernels": {name: os.environ.get(name) for name in KERNEL_VARIABLES}}


def config_key(rung: str, flags: list[str]) -> str:
    """A hash of the run's whole configuration as ``ladder.run`` resolves it (preset, flags, defaults) and of what
    made it (``made_by``): two flag lists that give the same run with the same code share one cache entry."""
    from ladder import run
    from ladder.specs import options_dict

    cfg = options_dict(run.make_config(rung, run.load_rung(rung), [*flags, "--out", "-"]))
    for transient in ("out", "progress", "overwrite"):
        cfg.pop(transient, None)
    text = json.dumps({"rung": rung, "made_by": made_by(), **cfg}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cached_run(rung: str, flags: list[str], cache_dir: str | os.PathLike) -> Path:
    """The run of ``python -m ladder.run RUNG FLAGS`` under ``cache_dir``: run once (one thread), then reused."""
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    key = config_key(rung, flags)
    final = cache / f"{rung}-{key}"
    with open(cache / f".{rung}-{key}.lock", "w") as lock:  # another process making this run: wait for it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (final / "summary.json").exists():
            _make_run(rung, flags, final)
    return final


def _make_run(rung: str, flags: list[str], final: Path) -> None:
    """Run into a scratch directory beside ``final``, then rename it into place."""
    scratch = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    out = scratch / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = warm_start.run_command([rung, *flags, "--out", str(out)], env=env)
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise RuntimeError(f"ladder.run {rung} {' '.join(flags)} failed (exit {done.returncode}): "
                           f"{done.stderr.strip().splitlines()[-1:]}")
    (out / "cached_flags.json").write_text(json.dumps({"rung": rung, "flags": flags}))
    if final.exists():  # a run left incomplete by an interrupted rename
        shutil.rmtree(final)
    out.rename(final)
    shutil.rmtree(scratch, ignore_errors=True)


# --- the doctor's failure gallery: its runs, kept in gallery.default_cache() ---------------------------------------

def run_gallery_entry(name: str, cache_dir: str | os.PathLike | None = None, fixed: bool = False,
                      seed: int = 0) -> Path:
    """The run directory of gallery entry ``name`` (its broken run, or with ``fixed`` its fixed one), under
    ``cache_dir`` (default: ``gallery.default_cache()``)."""
    rung, flags = gallery.entry_flags(name, fixed, seed)
    return _gallery_run(rung, flags, cache_dir)


def run_healthy(rung: str, cache_dir: str | os.PathLike | None = None, seed: int = 0, extra: tuple[str, ...] = ()
                ) -> Path:
    """The run directory of a rung's healthy (shortened) tiny preset, with ``extra`` flags after it (a later flag
    wins: ``("--max-new-tokens", "16")``), under ``cache_dir`` (default: ``gallery.default_cache()``)."""
    return _gallery_run(rung, [*gallery.healthy_flags(rung, seed), *extra], cache_dir)


def _gallery_run(rung: str, flags: list[str], cache_dir: str | os.PathLike | None) -> Path:
    """``cached_run`` of a gallery run, its data files written into the cache and their directory into its flags."""
    cache = Path(cache_dir or gallery.default_cache())
    return cached_run(rung, gallery.with_data(flags, cache), cache)
