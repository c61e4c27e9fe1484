"""The grpo rung warns once, in one line on stderr, when most completions are cut off at --max-new-tokens."""

import json

import pytest
from cli_helpers import run_cli

from ladder.rungs import grpo

WARNING = "of completions were cut off at --max-new-tokens"


def _tiny_run(tmp_path, *args):
    result = run_cli("grpo", "--preset", "tiny", "--steps", "6", "--eval-size", "8", "--eval-every", "0",
                     "--print-samples", "0", "--no-progress", "--out", str(tmp_path / "run"), *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    return result, [r["completions/clipped_ratio"] for r in records]


def test_cut_off_completions_warn_exactly_once_on_stderr(tmp_path):
    """Two tokens cut off every answer of the tiny preset: six updates above one half, one warning."""
    result, clipped = _tiny_run(tmp_path, "--max-new-tokens", "2")
    assert clipped == [1.0] * 6
    lines = [line for line in result.stderr.splitlines() if WARNING in line]
    assert lines == ["warning: 100% of completions were cut off at --max-new-tokens 2 over the last 3 updates "
                     "(no final answer, reward 0); raise --max-new-tokens or use --mask-truncated"], result.stderr
    assert WARNING not in result.stdout


@pytest.mark.trained
def test_a_normal_tiny_run_does_not_warn(tiny_grpo_run):
    result, out = tiny_grpo_run   # eight updates of the tiny preset
    clipped = [json.loads(line)["completions/clipped_ratio"] for line in open(out / "metrics.jsonl")]
    assert len(clipped) == 8 and max(clipped) <= 0.5
    assert WARNING not in result.stderr + result.stdout


@pytest.mark.parametrize("shares, warnings", [
    ([0.6, 0.7, 0.8], 1),            # three updates in a row above one half
    ([0.6, 0.7, 0.5, 0.9, 0.9], 0),  # one half is not above it: the count starts again
    ([0.9] * 10, 1),                 # once, however long it lasts
    ([0.9, 0.9, 0.1, 0.9, 0.9, 0.9], 1),
])
def test_cut_off_watch_counts_updates_in_a_row(shares, warnings):
    said = []
    watch = grpo.CutOffWatch(64, said.append)
    for share in shares:
        watch({"completions/clipped_ratio": share})
    assert len(said) == warnings


def test_cut_off_watch_names_the_mean_share_of_the_last_updates():
    said = []
    watch = grpo.CutOffWatch(256, said.append)
    for share in (0.2, 0.6, 0.7, 0.8):
        watch({"completions/clipped_ratio": share})
    assert said == ["warning: 70% of completions were cut off at --max-new-tokens 256 over the last 3 updates "
                    "(no final answer, reward 0); raise --max-new-tokens or use --mask-truncated"]


def test_completion_length_defaults():
    """512 for the real grpo run (TRL's max_completion_length; 256 cuts off over half of Qwen2.5-0.5B-Instruct's
    GSM8K answers) and for eval, which measures accuracy as grpo does; the presets keep their own."""
    from ladder import run
    from ladder.rungs import lm_eval, ppo_sentiment

    assert run.make_config("grpo", grpo, []).generation.max_new_tokens == 512
    assert run.make_config("grpo", grpo, ["--preset", "tiny"]).generation.max_new_tokens == 28
    assert run.make_config("eval", lm_eval, []).max_new_tokens == 512
    assert run.make_config("ppo-sentiment", ppo_sentiment, []).generation.max_new_tokens == 16
