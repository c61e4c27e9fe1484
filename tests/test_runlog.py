"""The run directory through the command line: a finished run is not overwritten, a resume is refused for
another rung's run and for a corrupt checkpoint (CartPole and REINFORCE as the rungs that run)."""

from cli_helpers import run_cli

from ladder.rungs import cartpole


def test_finished_run_is_not_overwritten(tmp_path):
    out = tmp_path / "run"
    args = ["reinforce", "--out", str(out), "--total-steps", "300", "--no-progress"]
    assert run_cli(*args, cwd=tmp_path).returncode == 0
    again = run_cli(*args, cwd=tmp_path)
    assert again.returncode == 2 and "--overwrite" in again.stderr
    assert run_cli(*args, "--overwrite", cwd=tmp_path).returncode == 0


def test_resume_of_another_rung_is_refused(tmp_path):
    out = tmp_path / "run"
    cartpole.train(cartpole.Config(out=str(out), total_steps=512, checkpoint_every=1, progress=False))
    (out / "summary.json").unlink()
    result = run_cli("reinforce", "--resume", str(out), cwd=tmp_path)
    assert result.returncode == 2 and "'cartpole' run" in result.stderr


def test_corrupt_checkpoint_is_refused(tmp_path):
    out = tmp_path / "run"
    cartpole.train(cartpole.Config(out=str(out), total_steps=512, checkpoint_every=1, progress=False))
    (out / "summary.json").unlink()
    (out / "checkpoint.pt").write_bytes(b"not a checkpoint")
    result = run_cli("cartpole", "--resume", str(out), cwd=tmp_path)
    assert result.returncode == 2 and "corrupt" in result.stderr



def test_curves_of_a_short_run_have_whole_step_ticks(tmp_path, monkeypatch):
    import matplotlib.figure

    from ladder.runtime.runlog import plot_curves

    seen = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda fig, *a, **k: seen.append(fig))
    plot_curves([{"step": s, "reward": 0.1 * s} for s in (1, 2, 3)], {"reward": "reward"}, tmp_path / "c.png")
    ticks = seen[0].axes[0].get_xticks()
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks)
