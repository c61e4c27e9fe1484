"""The CartPole rungs: they learn, they go through ladder.core.update, they honour the run contract."""

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

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


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "ladder.run", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def _metrics(path):
    drop = lambda r: {k: v for k, v in r.items() if k != "wall_s"}  # noqa: E731
    return [drop(json.loads(line)) for line in open(path / "metrics.jsonl")]


def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    """Kill a run with SIGKILL right after a checkpoint lands; --resume finishes it exactly."""
    args = ["cartpole", "--total-steps", "8192", "--no-stop-on-solve", "--eval-every", "2048",
            "--checkpoint-every", "3", "--no-progress"]
    assert _cli(*args, "--out", str(tmp_path / "full"), cwd=tmp_path).returncode == 0

    cut = tmp_path / "cut"
    proc = subprocess.Popen([sys.executable, "-m", "ladder.run", *args, "--out", str(cut)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (cut / "checkpoint.pt").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (cut / "summary.json").exists(), "the run finished before it could be killed"

    resumed = _cli("cartpole", "--resume", str(cut), "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert _metrics(cut) == _metrics(tmp_path / "full")
    full_weights = torch.load(tmp_path / "full" / "policy.pt")
    for name, tensor in torch.load(cut / "policy.pt").items():
        assert torch.equal(tensor, full_weights[name]), name


@pytest.mark.parametrize("args, needle", [
    (["nosuchrung"], "unknown rung"),
    (["cartpole", "--preset", "huge"], "unknown preset"),
    (["cartpole", "--mu", "0"], "--mu"),
    (["cartpole", "--clip-eps", "1.5"], "--clip-eps"),
    (["cartpole", "--lr", "-1"], "--lr"),
    (["cartpole", "--num-minibatches", "3"], "minibatches"),
    (["cartpole", "--env-id", "NoSuchEnv-v9"], "--env-id"),
    (["cartpole", "--mu", "two"], "invalid int value"),
    (["reinforce", "--baseline", "median"], "invalid choice"),
    (["reinforce", "--resume", "nowhere"], "config.json"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, args, needle):
    out = tmp_path / "out"
    result = _cli(*args, "--out", str(out), cwd=tmp_path) if args[0] != "nosuchrung" else _cli(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not out.exists()


def test_finished_run_is_not_overwritten(tmp_path):
    out = tmp_path / "run"
    args = ["reinforce", "--out", str(out), "--total-steps", "300", "--no-progress"]
    assert _cli(*args, cwd=tmp_path).returncode == 0
    again = _cli(*args, cwd=tmp_path)
    assert again.returncode == 2 and "--overwrite" in again.stderr
    assert _cli(*args, "--overwrite", cwd=tmp_path).returncode == 0


def test_resume_of_another_rung_is_refused(tmp_path):
    out = tmp_path / "run"
    cartpole.train(cartpole.Config(out=str(out), total_steps=512, checkpoint_every=1, progress=False))
    (out / "summary.json").unlink()
    result = _cli("reinforce", "--resume", str(out), cwd=tmp_path)
    assert result.returncode == 2 and "'cartpole' run" in result.stderr


def test_corrupt_checkpoint_is_refused(tmp_path):
    out = tmp_path / "run"
    cartpole.train(cartpole.Config(out=str(out), total_steps=512, checkpoint_every=1, progress=False))
    (out / "summary.json").unlink()
    (out / "checkpoint.pt").write_bytes(b"not a checkpoint")
    result = _cli("cartpole", "--resume", str(out), cwd=tmp_path)
    assert result.returncode == 2 and "corrupt" in result.stderr


def test_preset_fills_only_the_options_not_given():
    from ladder.run import make_config
    from ladder.rungs import grpo

    cfg = make_config("grpo", grpo, ["--preset", "tiny"])
    assert cfg.model == grpo.PRESETS["tiny"]["model"] and cfg.lr == grpo.PRESETS["tiny"]["lr"]
    # a flag given with the default's value still wins over the preset
    cfg = make_config("grpo", grpo, ["--preset", "tiny", "--lr", str(grpo.Config.lr)])
    assert cfg.lr == grpo.Config.lr
    cfg = make_config("cartpole", cartpole, ["--preset", "tiny", "--total-steps", "100000"])
    assert cfg.total_steps == 100_000


def test_non_finite_losses_warn_once_then_stop_the_run(tmp_path, monkeypatch, capsys):
    """Every loss NaN: weights untouched, one warning, and a one-line stop after N updates in a row."""
    from ladder import run

    update_module = sys.modules["ladder.core.update"]
    real = update_module.compute_loss

    def nan_loss(*args, **kwargs):
        loss, stats, tensors = real(*args, **kwargs)
        return loss * float("nan"), stats, tensors

    monkeypatch.setattr(update_module, "compute_loss", nan_loss)
    out = tmp_path / "run"
    code = run.main(["cartpole", "--out", str(out), "--total-steps", "100000", "--max-nonfinite-updates", "3",
                     "--checkpoint-every", "1", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out.count("non-finite") == 1  # warned once
    assert len(captured.err.strip().splitlines()) == 1 and "3 updates in a row" in captured.err
    records = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert len(records) == 2 and all(r["skipped_steps"] == 15 for r in records)  # μ = 15 passes, 1 minibatch
    initial = cartpole.MLPActorCritic if hasattr(cartpole, "MLPActorCritic") else None
    assert initial is None or (out / "checkpoint.pt").exists()


def test_guard_counts_only_updates_whose_every_step_was_skipped():
    from ladder.runlog import NonFiniteGuard, RunStopped

    warnings = []
    guard = NonFiniteGuard(patience=2, out="x", warn=warnings.append)
    assert guard([{"skipped_steps": 0.0}], steps_per_pass=2) == 0
    assert guard([{"skipped_steps": 1.0}, {"skipped_steps": 2.0}], steps_per_pass=2) == 3  # one step got through
    assert guard([{"skipped_steps": 2.0}], steps_per_pass=2) == 2
    with pytest.raises(RunStopped, match="2 updates in a row"):
        guard([{"skipped_steps": 2.0}], steps_per_pass=2)
    assert len(warnings) == 1
