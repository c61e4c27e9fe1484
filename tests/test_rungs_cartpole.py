"""The CartPole rungs: they learn, they go through ladder.core.update, they honour the run contract.

The command line's errors and presets: tests/test_cli.py; the run directory: tests/test_runlog.py; the
non-finite guard: tests/test_guard.py."""

import json
import signal

import held_run
import numpy as np
import pytest
import torch
from cli_helpers import run_cli

import ladder.core
from ladder.rungs import cartpole, reinforce


def _returns(out):
    return [r["episode_return"] for r in map(json.loads, open(out / "metrics.jsonl")) if r["episode_return"]]


@pytest.fixture
def spy_update(monkeypatch):
    """Replace ladder.core.update by a wrapper that records who called it and delegates."""
    calls = []
    real = ladder.core.update

    def spy(policy, batch, optimizer, cfg, *args, **kwargs):
        calls.append((type(policy).__name__, tuple(batch.actions.shape), cfg.objective))
        return real(policy, batch, optimizer, cfg, *args, **kwargs)

    monkeypatch.setattr(ladder.core, "update", spy)
    return calls


@pytest.mark.trained
def test_ppo_cartpole_learns_through_core_update(tmp_path, spy_update):
    cfg = cartpole.Config(out=str(tmp_path), total_steps=6_000, stop_on_solve=False, eval_every=3_000,
                          progress=False)
    summary = cartpole.train(cfg)
    returns = _returns(tmp_path)
    assert np.mean(returns[-5:]) > np.mean(returns[:5]) + 10
    assert len(spy_update) == -(-6_000 // (cfg.num_envs * cfg.num_steps))
    assert all(c[2] == "clipped" for c in spy_update)
    assert summary["env_steps"] >= 6_000
    for name in ("metrics.jsonl", "summary.json", "curves.png", "checkpoint.pt", "config.json"):
        assert (tmp_path / name).exists(), name
    assert {"solved", "env_steps", "wall_s", "eval_return_mean"} <= set(json.loads((tmp_path / "summary.json")
                                                                                  .read_text()))


@pytest.mark.trained
def test_reinforce_learns_through_core_update(tmp_path, spy_update):
    cfg = reinforce.Config(out=str(tmp_path), total_steps=5_000, stop_on_solve=False, eval_every=100_000,
                           progress=False)
    reinforce.train(cfg)
    returns = _returns(tmp_path)
    assert np.mean(returns[-4:]) > np.mean(returns[:4]) + 10
    assert spy_update and all(c[2] == "reinforce" for c in spy_update)
    record = json.loads(open(tmp_path / "metrics.jsonl").readline())
    assert record["ratio_min"] == record["ratio_max"] == 1.0  # one pass, one minibatch: π_θ = π_old


def test_reinforce_value_baseline_trains_a_critic(tmp_path):
    cfg = reinforce.Config(out=str(tmp_path), total_steps=2_000, baseline="value", progress=False,
                           eval_every=100_000)
    reinforce.train(cfg)
    records = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert all("value_loss" in r for r in records)


def test_same_seed_same_metrics(tmp_path):
    def run(out):
        cartpole.train(cartpole.Config(out=str(out), total_steps=2_048, eval_every=1_024, progress=False))
        drop = lambda r: {k: v for k, v in r.items() if k != "wall_s"}  # noqa: E731
        return [drop(json.loads(line)) for line in open(out / "metrics.jsonl")]

    assert run(tmp_path / "a") == run(tmp_path / "b")


def _metrics(path):
    drop = lambda r: {k: v for k, v in r.items() if k != "wall_s"}  # noqa: E731
    return [drop(json.loads(line)) for line in open(path / "metrics.jsonl")]


def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    """Kill a run with SIGKILL right after a checkpoint lands; --resume finishes it exactly."""
    args = ["cartpole", "--total-steps", "8192", "--no-stop-on-solve", "--eval-every", "2048",
            "--checkpoint-every", "3", "--no-progress"]
    assert run_cli(*args, "--out", str(tmp_path / "full"), cwd=tmp_path).returncode == 0

    cut = tmp_path / "cut"
    proc = held_run.start([*args, "--out", str(cut)], "checkpoint", tmp_path)  # held once the checkpoint landed
    held = held_run.wait_until_held(proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert held and proc.returncode == -signal.SIGKILL and not (cut / "summary.json").exists()

    resumed = run_cli("cartpole", "--resume", str(cut), "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert _metrics(cut) == _metrics(tmp_path / "full")
    full_weights = torch.load(tmp_path / "full" / "policy.pt")
    for name, tensor in torch.load(cut / "policy.pt").items():
        assert torch.equal(tensor, full_weights[name]), name

