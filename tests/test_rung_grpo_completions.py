"""OUT/completions.jsonl: every --print-samples updates, the update's completions with each reward function's
score, the advantage and whether each was cut off — read back as a script would, and kept exact over a resume."""

import pytest
import torch

from ladder import core
from ladder.rungs import grpo
from ladder.runtime.runlog import read_completions

SETTINGS = {**grpo.PRESETS["tiny"], "steps": 4, "print_samples": 2, "eval_size": 8, "eval_every": 0,
            "checkpoint_every": 1, "progress": False}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("completions") / "run"
    cfg = grpo.Config(**SETTINGS, out=str(out))
    grpo.train(cfg)
    return cfg, out


def test_every_print_samples_updates_all_completions_are_logged(finished):
    cfg, out = finished
    rows = read_completions(out)
    B = cfg.prompts_per_step * cfg.group_size
    assert [r["step"] for r in rows] == [2] * B + [4] * B
    assert [r["group"] for r in rows[:B]] == [i // cfg.group_size for i in range(B)]
    assert set(rows[0]) == {"step", "group", "question", "completion", "reward", "rewards", "advantage", "length",
                            "truncated"}
    assert all(len({r["question"] for r in rows[g:g + cfg.group_size]}) == 1 for g in range(0, 2 * B, cfg.group_size))


def test_each_row_holds_its_reward_functions_its_advantage_and_its_cut_off(finished):
    cfg, out = finished
    rows, weights = read_completions(out), grpo.reward_weights(cfg)
    assert set(rows[0]["rewards"]) == set(weights)
    for r in rows:
        assert r["reward"] == pytest.approx(sum(weights[f] * r["rewards"][f] for f in weights), abs=1e-6)
        assert not r["truncated"] or r["length"] == cfg.max_new_tokens
        assert 1 <= r["length"] <= cfg.max_new_tokens
    for step in (2, 4):
        update = [r for r in rows if r["step"] == step]
        rewards = torch.tensor([r["reward"] for r in update])
        advantages = grpo.group_advantages(rewards, cfg)
        assert torch.allclose(torch.tensor([r["advantage"] for r in update]), advantages, atol=1e-5)
        assert torch.allclose(advantages, core.group_relative(rewards, cfg.group_size, grpo.advantage_spec.scale(cfg)))


def test_a_resumed_run_logs_the_same_completions_as_one_that_was_not_stopped(finished, tmp_path):
    """Stopped after update 4 was logged but before its checkpoint: the resume drops update 4's rows (the
    checkpoint has not seen it) and samples them again, the same."""
    cfg, out = finished
    first = grpo.Config(**{**SETTINGS, "steps": 4}, out=str(tmp_path / "run"))
    grpo.train(first)
    (tmp_path / "run" / "summary.json").unlink()  # the last checkpoint is update 3's
    assert [r["step"] for r in read_completions(tmp_path / "run")][-1] == 4
    grpo.train(grpo.Config(**{**SETTINGS, "steps": 4}, out=str(tmp_path / "run"), resume=str(tmp_path / "run")))
    assert read_completions(tmp_path / "run") == read_completions(out)


def test_no_completions_log_without_print_samples(tmp_path):
    assert read_completions(tmp_path) == []
