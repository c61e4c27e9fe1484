"""The run an ``--overwrite`` start replaces: set aside, never lost, until the new run starts training.

    .replacing   the run being set aside: part of it may still be in DIR
    .replaced    all of it set aside, until the new run starts training
    .discarded   the replaced run once the new one trains, on its way out

``set_aside`` moves the replaced run's files into .replacing and renames it .replaced once all are there;
``discard`` removes it for good once the new run trains; ``put_back`` returns it to the directory as it was when
the new run never trains, by this process or, when that was killed, by the next command on the directory before
anything else. Each step is a rename or a whole write (``ladder.runtime.whole_files``), so a kill at any moment leaves a
state that ``put_back`` (or, for .discarded, ``clear_discarded``) finishes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ladder.runtime.whole_files import write_whole

REPLACING = ".replacing"
REPLACED = ".replaced"
DISCARDED = ".discarded"


def set_aside(directory: Path, paths: list[Path], run_files: tuple[str, ...]) -> Path:
    """Move the run files among ``paths`` (names in ``run_files``, nothing else: the lock stays, this run holds it)
    into .replacing, then rename it .replaced: that name says all of them are there. config.json is copied, not
    moved, so that the directory reads as a run at every moment; the new run's config replaces it whole. Returns
    the .replaced directory."""
    aside, replaced = directory / REPLACING, directory / REPLACED
    aside.mkdir()
    for path in paths:
        if path.name == "config.json":
            write_whole(aside / path.name, path.read_bytes())
        elif path.name in run_files:
            os.replace(path, aside / path.name)
    os.replace(aside, replaced)
    return replaced


def put_back(directory: Path, run_files: tuple[str, ...], leftovers: tuple[str, ...]) -> None:
    """The run set aside, back in ``directory`` as it was; nothing if none is. From .replaced, the files the start
    wrote (names in ``run_files``) go first (its config.json is replaced whole below), and the rename to .replacing
    marks that they are gone; from .replacing, what is there moves back (the rest never left), but for
    ``leftovers`` (a copy of config.json a kill cut short). A kill at any step leaves a state that this finishes."""
    if (directory / REPLACED).is_dir():
        for path in directory.iterdir():
            if path.name in run_files and path.name != "config.json":
                _remove(path)
        os.replace(directory / REPLACED, directory / REPLACING)
    aside = directory / REPLACING
    if aside.is_dir():
        for path in aside.iterdir():
            if path.name in leftovers:
                path.unlink()
            else:
                os.replace(path, directory / path.name)
        aside.rmdir()


def discard(directory: Path, replaced: Path) -> None:
    """The replaced run goes for good: renamed .discarded in one step, then removed (a removal a kill cuts short,
    ``clear_discarded`` ends)."""
    clear_discarded(directory)
    os.replace(replaced, directory / DISCARDED)
    clear_discarded(directory)


def clear_discarded(directory: Path) -> None:
    shutil.rmtree(directory / DISCARDED, ignore_errors=True)


def config_path(directory: Path) -> Path:
    """The config.json of the run in ``directory``: of the run set aside, if there is one."""
    path = directory / "config.json"
    for aside in (REPLACED, REPLACING):
        if (directory / aside / "config.json").is_file():
            path = directory / aside / "config.json"
    return path


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
