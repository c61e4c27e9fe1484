"""A flag the settled run will not read is refused, after settling, in one line with exit code 2: the bounds of the
sampler's weight where auto settles on the trainer's own weights (no weight computed), and reinforce's value-loss
coefficient without a critic to weigh. Through the command line's own main, in this process."""

from __future__ import annotations

import pytest
from cli_helpers import run_main

from ladder.rungs.grpo import settle

TINY = ["grpo", "--preset", "tiny", "--steps", "1", "--eval-size", "8", "--eval-every", "0", "--print-samples", "0",
        "--no-progress"]
NO_WEIGHT = "which this run never computes: --sampler-dtype auto settled on the trainer's own weights (same)"


@pytest.mark.parametrize("args, needle", [
    (["--sampler-dtype", "auto", "--sampler-clip-min", "0.5"], "--sampler-clip-min bounds the weight w = "
                                                               "π_old/π_sampler, " + NO_WEIGHT),
    (["--sampler-dtype", "auto", "--sampler-clip-max", "2", "--print-config"], "--sampler-clip-max bounds "),
    (["--sampler-dtype", "auto", "--sampler-clip-min", "0.5", "--sampler-clip-max", "2", "--print-config"],
     "--sampler-clip-min and --sampler-clip-max bound the weight"),
    (["--sampler-clip-min", "0.5", "--print-config"], "--sampler-dtype same with --sampler-correction auto is none"),
    (["--sampler-correction", "none", "--sampler-clip-max", "2", "--print-config"],
     "which this run never computes: --sampler-correction none; give --sampler-correction"),
])
def test_a_sampler_bound_the_settled_run_never_reads_is_refused(args, needle, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, err = run_main(*TINY, "--out", str(tmp_path / "run"), *args, capsys=capsys)
    assert code == 2 and err.startswith("ladder: error: ") and needle in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args", [["--sampler-dtype", "auto", "--sampler-correction", "token_truncate",
                                   "--sampler-clip-max", "2"],
                                  ["--sampler-dtype", "auto"], ["--sampler-clip-max", "3.0"]])
def test_a_bound_that_is_read_or_left_at_its_default_is_not(args, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, err = run_main(*TINY, *args, "--print-config", capsys=capsys)
    assert code == 0, err


def test_settle_refuses_it_for_every_caller(tmp_path):
    """The refusal is settle's, whoever settles: the run, --print-config, --export-trl, a lab's build."""
    from ladder import run
    from ladder.rungs import grpo
    from ladder.runtime.errors import UsageError

    cfg = run.make_config("grpo", grpo, ["--preset", "tiny", "--sampler-dtype", "auto", "--sampler-clip-min", "0.5"])
    with pytest.raises(UsageError, match="--sampler-clip-min bounds the weight"):
        settle.settle_known(cfg)
    assert settle.settle(cfg, None).sampler == cfg.sampler  # the model unknown: nothing settled, nothing refused


@pytest.mark.parametrize("args, ok", [
    (["--value-coef", "0.1"], False), (["--baseline", "none", "--value-coef", "0.1"], False),
    (["--baseline", "value", "--value-coef", "0.1"], True), ([], True), (["--value-coef", "0.5"], True),
])
def test_reinforce_value_coef_without_a_value_baseline_is_refused(args, ok, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, err = run_main("reinforce", "--preset", "tiny", *args, "--print-config", capsys=capsys)
    if ok:
        assert code == 0, err
        return
    baseline = args[args.index("--baseline") + 1] if "--baseline" in args else "whiten"
    assert code == 2 and err.strip() == (
        "ladder: error: --value-coef weighs the value loss of the critic V(s_t) that --baseline value learns; "
        f"--baseline {baseline} has none: drop --value-coef (or use --baseline value)"), err
    code, err = run_main("reinforce", "--preset", "tiny", *args, "--out", str(tmp_path / "run"), capsys=capsys)
    assert code == 2 and "--value-coef weighs the value loss" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
