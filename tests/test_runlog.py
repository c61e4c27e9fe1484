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

