"""The command line (``python -m ladder.run``): bad input is one line on stderr and exit code 2, and a
preset fills only the options not given."""

import pytest
from cli_helpers import run_main

from ladder.rungs import cartpole


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
def test_bad_input_is_one_line_exit_2(tmp_path, args, needle, monkeypatch, capsys):
    """Through the command line's main in this process (tests/test_bad_inputs.py starts a fresh one per case)."""
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    returncode, stderr = run_main(*args, "--out", str(out), capsys=capsys) if args[0] != "nosuchrung" else \
        run_main(*args, capsys=capsys)
    assert returncode == 2, stderr
    assert needle in stderr
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert not out.exists()


def test_preset_fills_only_the_options_not_given():
    from ladder.run import make_config
    from ladder.rungs import grpo

    cfg = make_config("grpo", grpo, ["--preset", "tiny"])
    assert cfg.model == grpo.PRESETS["tiny"]["model"] and cfg.optimisation.lr == grpo.PRESETS["tiny"]["lr"]
    # a flag given with the default's value still wins over the preset
    cfg = make_config("grpo", grpo, ["--preset", "tiny", "--lr", str(grpo.Config().optimisation.lr)])
    assert cfg.optimisation.lr == grpo.Config().optimisation.lr
    cfg = make_config("cartpole", cartpole, ["--preset", "tiny", "--total-steps", "100000"])
    assert cfg.total_steps == 100_000

