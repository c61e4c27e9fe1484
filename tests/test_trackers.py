"""``--report-to``: each tracker, offline, holds what metrics.jsonl holds (read back from its own files)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_cli

from ladder.runtime import trackers

RUN = ["reinforce", "--total-steps", "1200", "--eval-every", "100000", "--no-progress", "--checkpoint-every", "1"]
KEYS = ("episode_return", "grad_norm")


def _run(tmp_path: Path, *args, out="run") -> subprocess.CompletedProcess:
    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio"), "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config"), "WANDB_CACHE_DIR": str(tmp_path / "wandb-cache"),
           "WANDB_DATA_DIR": str(tmp_path / "wandb-data")}
    return run_cli(*RUN, "--out", str(tmp_path / out), *args, cwd=tmp_path, env=env)


def _metrics(run_dir: Path) -> dict[int, dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return {r["step"]: r for r in map(json.loads, lines)}


def _assert_same(logged: dict[int, dict], run_dir: Path) -> None:
    metrics = _metrics(run_dir)
    assert sorted(logged) == sorted(metrics) and len(metrics) >= 2
    for step, record in metrics.items():
        for key in KEYS:
            assert logged[step][key] == pytest.approx(record[key], rel=1e-6), (step, key)


def _tensorboard(run_dir: Path) -> dict[int, dict]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    logged: dict[int, dict] = {}
    for key in KEYS:
        for event in events.Scalars(key):
            logged.setdefault(event.step, {})[key] = event.value
    return logged


def _trackio(tmp_path: Path, run_name: str) -> dict[int, dict]:
    code = ("import json, sys; from trackio.sqlite_storage import SQLiteStorage; "
            "print(json.dumps(SQLiteStorage.get_logs('ladder', sys.argv[1]), default=str))")
    out = subprocess.run([sys.executable, "-c", code, run_name], capture_output=True, text=True, check=True,
                         env={**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio")})
    return {r["step"]: r for r in json.loads(out.stdout.splitlines()[-1])}


def _wandb_records(path: Path):
    """The records of a wandb transaction log (``run-ID.wandb``): a 7-byte header (":W&B", magic, version),
    then LevelDB-log blocks of 32 KiB whose chunks (crc32c, length, type) carry protobuf ``Record``s."""
    from wandb.proto import wandb_internal_pb2

    data, block, offset, pending = path.read_bytes(), 32768, 7, b""
    assert data[:4] == b":W&B"
    while offset + 7 <= len(data):
        if block - offset % block < 7:  # a block's tail too short for a chunk header is padding
            offset += block - offset % block
            continue
        length, kind = struct.unpack("<HB", data[offset + 4:offset + 7])
        chunk, offset = data[offset + 7:offset + 7 + length], offset + 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk  # FULL, FIRST | MIDDLE, LAST
        if kind in (1, 4) and pending:
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def _wandb(run_dir: Path) -> tuple[dict[int, dict], dict]:
    [log] = (run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    logged, config = {}, {}
    for record in _wandb_records(log):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            logged[items.pop("_step")] = items
        elif kind == "run":  # the run's start carries its config
            config.update({item.key: json.loads(item.value_json) for item in record.run.config.update})
    return logged, config


def test_tensorboard_alias_and_choice_write_the_same_scalars(tmp_path):
    from ladder import run

    for out, flag in (("alias", ["--tensorboard"]), ("choice", ["--report-to", "tensorboard"])):
        assert run.main([*RUN, "--out", str(tmp_path / out), *flag]) == 0   # in this process: no new interpreter
        _assert_same(_tensorboard(tmp_path / out), tmp_path / out)


def test_trackio_offline_holds_every_update(tmp_path):
    result = _run(tmp_path, "--report-to", "trackio", out="tracked")
    assert result.returncode == 0, result.stderr
    _assert_same(_trackio(tmp_path, "tracked"), tmp_path / "tracked")


def test_wandb_offline_holds_every_update_and_the_config_and_a_resume_continues_the_run(tmp_path):
    result = _run(tmp_path, "--report-to", "wandb", out="tracked")
    assert result.returncode == 0, result.stderr
    logged, config = _wandb(tmp_path / "tracked")
    _assert_same(logged, tmp_path / "tracked")
    assert config["total_steps"] == 1200 and config["rung"] == "reinforce"

    run_id = (tmp_path / "tracked" / "wandb" / "run_id").read_text()
    (tmp_path / "tracked" / "summary.json").unlink()  # as if it had been interrupted after its last checkpoint
    again = run_cli("reinforce", "--resume", str(tmp_path / "tracked"), "--no-progress", cwd=tmp_path,
                    env={**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
                         "WANDB_CONFIG_DIR": str(tmp_path / "wc")})
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "tracked" / "wandb" / "run_id").read_text() == run_id
    assert len(list((tmp_path / "tracked" / "wandb").glob(f"offline-run-*-{run_id}"))) == 2


def test_a_missing_tracker_package_is_one_line_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(trackers.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(trackers.UsageError, match=r'--report-to trackio needs the trackio package: pip install '
                                                  r'trackio \(or pip install -e "\.\[trackers\]"'):
        trackers.open_tracker("trackio", tmp_path, {}, resume=False)
    assert list(tmp_path.iterdir()) == []


def test_wandb_without_an_account_or_offline_mode_is_one_line_exit_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    result = subprocess.run([sys.executable, "-m", "ladder.run", *RUN, "--out", str(tmp_path / "run"),
                             "--report-to", "wandb"], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                            stdin=subprocess.DEVNULL, env={**env, "HOME": str(tmp_path / "home"),
                                                           "WANDB_CONFIG_DIR": str(tmp_path / "wc")})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "WANDB_MODE=offline logs without an account" in result.stderr
    assert not (tmp_path / "run").exists()


def test_only_finite_numbers_reach_a_tracker():
    assert trackers.numbers({"step": 3, "a": 1, "b": 2.5, "c": None, "d": "text", "e": float("nan"), "f": True}) == \
        {"a": 1, "b": 2.5}
