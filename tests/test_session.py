"""The run session every rung shares (``ladder.runtime.session``, ``ladder.runtime.runlog``): one run per directory,
checkpoints of named parts with every generator, and the faults around a run that end in one line."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import held_run
import pytest
import torch
from cli_helpers import run_cli

from ladder import run as ladder_run
from ladder.rungs import cartpole
from ladder.runtime import checkpoint_file, loop
from ladder.runtime.runlog import RunLog, RunStopped, UsageError, rng_state, set_rng_state
from ladder.runtime.session import RunSession


def _cfg(tmp_path, **overrides) -> cartpole.Config:
    values = {**cartpole.PRESETS["tiny"], "out": str(tmp_path / "run"), "progress": False, "checkpoint_every": 1000}
    return cartpole.Config(**{**values, **overrides})


def _cli(*args, cwd, env=None) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, env=env)


def _logged(run: RunSession, record: dict) -> None:
    """One update done and its record written, as the loop does."""
    run.count_update()
    run.log(record)


# --- one run per directory -------------------------------------------------------------------------

def test_a_second_start_on_a_directory_in_use_is_refused_and_touches_nothing(tmp_path):
    cfg = _cfg(tmp_path)
    with RunSession(cfg, "cartpole") as first:
        first.resume()
        _logged(first, {"x": 1.0})
        for second in (cfg, replace(cfg, overwrite=True), replace(cfg, resume=cfg.out)):
            with pytest.raises(UsageError, match=rf"in use by another run \(process {os.getpid()}\)"):
                RunSession(second, "cartpole")
        assert (tmp_path / "run" / "config.json").exists() and first.records()[0]["x"] == 1.0
        _logged(first, {"x": 2.0})  # the holder goes on writing
    assert [r["x"] for r in RunLog(cfg.out, "cartpole", {}, resume=True).records()] == [1.0, 2.0]


def test_the_lock_of_a_finished_or_killed_run_is_taken_over(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".lock").write_text("999999\n")  # a lock file no process holds
    log = RunLog(tmp_path / "run", "cartpole", {})
    assert (tmp_path / "run" / ".lock").read_text() == f"{os.getpid()}\n"
    log.close()


def test_a_refused_start_does_not_remove_the_directory_another_run_created(tmp_path):
    """Two starts on the same new --out: the refused one must not remove what the other one created."""
    cfg = _cfg(tmp_path)
    with RunSession(cfg, "cartpole"):
        with pytest.raises(UsageError):
            with RunSession(cfg, "cartpole"):
                pass
        assert (tmp_path / "run" / "config.json").exists()


def test_bad_input_during_a_run_removes_the_directory_this_run_created(tmp_path):
    with pytest.raises(UsageError, match="bad reward"):
        with RunSession(_cfg(tmp_path), "cartpole") as run:
            run.resume()
            raise UsageError("bad reward")
    assert not (tmp_path / "run").exists()


def test_two_processes_on_one_new_directory_one_runs_one_is_refused(tmp_path):
    """The first run is held at its first record (the directory and its lock exist) until the second was refused."""
    out = tmp_path / "run"
    args = ["cartpole", "--preset", "tiny", "--no-stop-on-solve", "--total-steps", "2000", "--out", str(out),
            "--no-progress"]
    first = held_run.start(args, "log", tmp_path)
    try:
        held = held_run.wait_until_held(first)
        second = _cli(*args, cwd=tmp_path) if held else None
    finally:
        stdout, stderr = first.communicate(input="go\n", timeout=300)  # lets the first run go on
    assert held and first.returncode == 0, stderr[-2000:]
    assert second.returncode == 2 and second.stderr.strip().splitlines() == [
        f"ladder: error: --out {out} is in use by another run (process {first.pid}); wait for it to finish, "
        f"or choose another --out"]
    assert (out / "summary.json").exists()  # the first run finished untouched


# --- resume ----------------------------------------------------------------------------------------

def test_resume_before_the_first_checkpoint_starts_the_metrics_again(tmp_path):
    cfg = _cfg(tmp_path)
    with RunSession(cfg, "cartpole") as run:  # interrupted before its first checkpoint
        run.resume()
        for _ in range(5):
            _logged(run, {})
    with RunSession(replace(cfg, resume=cfg.out), "cartpole") as run:
        assert run.resume() == {} and run.step == 0
        for _ in range(3):
            _logged(run, {})
        assert [r["step"] for r in run.records()] == [1, 2, 3]


def test_a_checkpoint_restores_its_named_parts_and_the_generators(tmp_path):
    cfg = _cfg(tmp_path, checkpoint_every=2)
    net, gen = torch.nn.Linear(2, 2), torch.Generator().manual_seed(5)
    with RunSession(cfg, "cartpole") as run:
        run.resume({"net": net, "gen": gen, "counters": None})
        _logged(run, {})
        _logged(run, {})
        run.checkpoint(net=net, gen=gen, counters={"seen": 7})
        want = (net.weight.detach().clone(), torch.rand(3, generator=gen), torch.rand(3))
        _logged(run, {})  # after the checkpoint: cut back on resume
    torch.nn.init.zeros_(net.weight)
    with RunSession(replace(cfg, resume=cfg.out), "cartpole") as run:
        saved = run.resume({"net": net, "gen": gen, "counters": None})
        assert saved["counters"] == {"seen": 7} and run.step == 2 and len(run.records()) == 2
        assert torch.equal(net.weight, want[0])
        assert torch.equal(torch.rand(3, generator=gen), want[1]) and torch.equal(torch.rand(3), want[2])


def test_the_cuda_generators_are_saved_and_restored(monkeypatch):
    """A GPU resume is exact only if every CUDA device's generator comes back too."""
    devices = {"state": [torch.tensor([1, 2, 3], dtype=torch.uint8)]}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [s.clone() for s in devices["state"]])
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: devices.update(state=list(states)))
    saved = rng_state()
    devices["state"] = [torch.tensor([9, 9, 9], dtype=torch.uint8)]
    set_rng_state(saved)
    assert torch.equal(devices["state"][0], torch.tensor([1, 2, 3], dtype=torch.uint8))


# --- faults around a run: one line -----------------------------------------------------------------

def test_ctrl_c_while_the_options_are_read_ends_without_a_traceback(monkeypatch, capsys):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(ladder_run, "make_config", interrupted)
    assert ladder_run.main(["cartpole"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"


def test_an_out_that_cannot_be_written_is_one_line(tmp_path):
    result = _cli("cartpole", "--preset", "tiny", "--out", "/proc/ladder-cannot-write-here", cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "cannot write there" in result.stderr and not Path("/proc/ladder-cannot-write-here").exists()


def test_a_full_disk_while_checkpointing_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    saves, real_save = [], torch.save

    def save(obj, path, *args, **kwargs):
        saves.append(path)
        if len(saves) > 1:
            path.write(b"partial")  # torch.save writes into an open file
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(checkpoint_file.torch, "save", save)
    cfg = _cfg(tmp_path, checkpoint_every=1, stop_on_solve=False)
    with pytest.raises(RunStopped, match=r"the last good checkpoint is kept \(the disk is full\)"):
        cartpole.train(cfg)
    monkeypatch.setattr(checkpoint_file.torch, "save", real_save)
    run_dir = tmp_path / "run"
    assert not (run_dir / "checkpoint.pt.tmp").exists()
    assert torch.load(run_dir / "checkpoint.pt", weights_only=False)["step"] == 1
    assert RunLog(run_dir, "cartpole", {}, resume=True).lock is not None  # released: resumable at once


def test_an_unusable_model_cache_is_one_line(tmp_path):
    not_a_directory = tmp_path / "cache"
    not_a_directory.write_text("")
    env = {**os.environ, "LADDER_CACHE": str(not_a_directory), "LADDER_BUILD_TINY": "1"}  # not the shipped copy
    result = _cli("grpo", "--preset", "tiny", "--out", str(tmp_path / "run"), cwd=tmp_path, env=env)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "LADDER_CACHE" in result.stderr and not (tmp_path / "run").exists()


def test_a_run_in_memory_takes_the_updates_of_the_run_on_disk_and_writes_nothing(tmp_path, monkeypatch):
    """``loop.in_memory`` (a notebook's lab): the recipe driven update by update through ``loop.one_update`` gives the
    records the same run writes to metrics.jsonl, and no file appears anywhere."""
    monkeypatch.chdir(tmp_path)
    cfg = cartpole.Config(total_steps=1024, num_envs=4, num_steps=64, eval_every=512, eval_episodes=2, seed=3,
                          progress=False, out=str(tmp_path / "disk"))
    cartpole.train(cfg)
    written = [json.loads(line) for line in (tmp_path / "disk" / "metrics.jsonl").read_text().splitlines()]
    session, recipe = loop.in_memory(replace(cfg, out=None), cartpole.NAME, cartpole.build)
    while not loop.finished(session, recipe):
        loop.one_update(session, recipe)
    kept = session.records()
    assert len(kept) == len(written) == 4
    for mine, theirs in zip(kept, written):
        assert {k: v for k, v in mine.items() if k != "wall_s"} == {k: v for k, v in theirs.items() if k != "wall_s"}
    assert "eval_return_mean" in kept[-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk"]
