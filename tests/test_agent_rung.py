"""The agent rung through ``python -m ladder.run agent``: the tiny preset end to end; an environment of the user's
(``--env FILE.py:Class``) that works, that fails mid-run (one line, exit 1, the run kept) or that is not one (one
line, exit 2, nothing written); ``--credit turn`` and ``--train-env-tokens`` seen in the batch ``core.update`` gets.

Except the one preset run, the runs use a random tiny Qwen2 with the tiny model's tokenizer (``agent_helpers``);
where a run needs tool calls, its rollout's model is scripted (``agent_helpers.ScriptedLM``: the real forward and
cache, the next token forced) to call ``multiply`` and then answer.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import torch
from agent_helpers import call_text, ids, save_random_model, scripted_policy, tiny_tokenizer, turn
from cli_helpers import run_cli
from lm_helpers import read_metrics

from ladder.rungs import agent

USER_ENVS = '''
class Scored:
    """Scores every trajectory 0.25 (its reward column is named after the class)."""

    def reset(self, **problem):
        return " Think."

    def get_reward(self):
        return 0.25


class BreaksOnReset:
    """Resets fine LIMIT times (the held-out evaluation before training, the first update), then raises."""

    resets = 0

    def reset(self, **problem):
        BreaksOnReset.resets += 1
        if BreaksOnReset.resets > LIMIT:
            raise RuntimeError("the sandbox\\nwent away")


class BreaksOnReward:
    rewards = 0

    def reset(self, **problem):
        return None

    def get_reward(self):
        BreaksOnReward.rewards += 1
        if BreaksOnReward.rewards > LIMIT:
            raise KeyError("score")
        return 0.0


def not_a_class(**problem):
    return None
'''
EVAL_SIZE, PROMPTS, GROUP = 2, 2, 2
LIMIT = EVAL_SIZE + PROMPTS * GROUP  # the held-out evaluation before training and the first update


@pytest.fixture(scope="module")
def random_agent_model(tmp_path_factory):
    return save_random_model(tmp_path_factory.mktemp("random-agent"), tiny_tokenizer())


@pytest.fixture(scope="module")
def user_envs(tmp_path_factory):
    path = tmp_path_factory.mktemp("envs") / "my_envs.py"
    path.write_text(f"LIMIT = {LIMIT}\n" + USER_ENVS)
    return path


def small(model, out, *more):
    """Two updates of 2 problems × 2 trajectories on the tiny preset's settings, with ``model``."""
    return ["agent", "--preset", "tiny", "--model", model, "--steps", "2", "--prompts-per-step", PROMPTS,
            "--group-size", GROUP, "--max-new-tokens", "64", "--eval-size", EVAL_SIZE, "--print-samples", "0",
            "--no-progress", "--out", out, *more]


def one_line(result: subprocess.CompletedProcess, code: int) -> str:
    assert result.returncode == code, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


@pytest.fixture
def calls_multiply(monkeypatch):
    """The rung's rollout on a scripted model: each trajectory calls ``multiply(a=12, b=34)``, reads the reply and
    answers ``#### 7``, ``#### 77`` or ``#### 777`` by row (answers of three lengths: a reward spread).
    Returns what the environment's reply adds (its token count)."""
    tok = tiny_tokenizer()
    call = turn(tok, call_text("multiply", a=12, b=34))
    real = agent.multi_turn

    def scripted(policy, tokenizer, envs, *args, **kwargs):
        turns = [[call, turn(tok, "#### " + "7" * (1 + row % 3))] for row in range(len(envs))]
        return real(scripted_policy(policy.model, tokenizer, turns, policy.temperature), tokenizer, envs, *args,
                    **kwargs)

    monkeypatch.setattr(agent.recipe, "multi_turn", scripted)
    reply = "\n<|im_start|>user\n<tool_response>\n408\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    return {"call": len(call), "reply": len(ids(tok, reply))}


def test_the_tiny_preset_end_to_end(tmp_path):
    """``--preset tiny`` for 3 updates as a user runs it: the agent's curves and the held-out accuracy logged."""
    out = tmp_path / "run"
    result = run_cli("agent", "--preset", "tiny", "--steps", "3", "--eval-size", "16", "--out", out, "--no-progress",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    records = read_metrics(out)
    assert [r["step"] for r in records] == [1, 2, 3]
    for key in ("agent/tool_calls", "agent/turns", "agent/env_tokens", "agent/tool_failures", "reward"):
        assert all(key in r for r in records), key
    assert all(r["agent/turns"] >= 1 for r in records)
    assert 0.0 <= records[-1]["eval_accuracy"] <= 1.0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rung"] == "agent" and summary["steps"] == 3


def test_a_users_environment_with_get_reward(cli, random_agent_model, user_envs, tmp_path):
    """``--env FILE.py:Class``: its problems are --task's, its reset's text joins the question, its get_reward is a
    reward column named after the class (weight 1, beside the reward functions)."""
    out = tmp_path / "run"
    result = cli(*small(random_agent_model, out, "--env", f"{user_envs}:Scored", "--task", "arithmetic"))
    assert result.returncode == 0, result.stderr[-3000:]
    records = read_metrics(out)
    assert [r["rewards/Scored/mean"] for r in records] == [0.25, 0.25]
    for r in records:
        assert r["reward"] == pytest.approx(0.25 + r["rewards/correctness/mean"])


@pytest.mark.parametrize("env,method,error", [("BreaksOnReset", "reset", "RuntimeError: the sandbox went away"),
                                              ("BreaksOnReward", "get_reward", "KeyError: 'score'")])
def test_an_environment_failing_mid_run_stops_it_in_one_line(cli, random_agent_model, user_envs, tmp_path, env,
                                                              method, error):
    """An environment that raises at the second update: one line naming it, exit 1, no traceback; the run
    directory is kept with the first update and its checkpoint."""
    out = tmp_path / "run"
    result = cli(*small(random_agent_model, out, "--env", f"{user_envs}:{env}", "--task", "arithmetic",
                        "--checkpoint-every", "1"))
    line = one_line(result, 1)
    assert line.startswith(f"ladder: stopped: environment {env}.{method} raised {error}; the run so far is kept, "
                           f"continue with: python -m ladder.run agent --resume")
    assert [r["step"] for r in read_metrics(out)] == [1]
    assert (out / "checkpoint.pt").exists() and (out / "config.json").exists()


def test_the_generate_loop_is_refused_for_an_agent(cli, random_agent_model, tmp_path):
    """An agent's turns are sampled by its multi-turn loop: ``--sampler-loop generate`` is one line, nothing written."""
    out = tmp_path / "run"
    line = one_line(cli(*small(random_agent_model, out, "--sampler-loop", "generate")), 2)
    assert "--sampler-loop generate" in line and "multi-turn loop" in line, line
    assert not out.exists()


@pytest.mark.parametrize("env,needle", [("nosuch", "is neither a built-in (calculator, guess, gsm8k)"),
                                        ("{envs}:not_a_class", "is not a class with a reset method"),
                                        ("{envs}:Missing", "cannot load"),
                                        ("{dir}/nofile.py:Scored", "cannot load")])
def test_an_environment_that_is_not_one_is_refused_before_anything_is_written(cli, random_agent_model, user_envs,
                                                                              tmp_path, env, needle):
    out = tmp_path / "run"
    spec = env.format(envs=user_envs, dir=tmp_path)
    line = one_line(cli(*small(random_agent_model, out, "--env", spec, "--task", "arithmetic")), 2)
    assert "--env" in line and needle in line, line
    assert not out.exists()


def test_the_loss_mask_leaves_the_environments_tokens_out(cli, random_agent_model, calls_multiply, spy_grpo_update,
                                                          tmp_path):
    """A tool call in every trajectory: the batch's attention mask covers the reply, its loss mask does not; the
    advantage is the trajectory's on every model token (--credit trajectory) and 0 on the reply."""
    result = cli(*small(random_agent_model, tmp_path / "run", "--env", "calculator"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(spy_grpo_update) == 2
    batch = spy_grpo_update[0][1]
    env_tokens = batch.attention_mask - batch.mask
    assert (env_tokens.sum(1) == calls_multiply["reply"]).all() and (env_tokens >= 0).all()
    assert (batch.advantages[env_tokens.bool()] == 0).all()
    metrics = read_metrics(tmp_path / "run")
    assert [r["agent/env_tokens"] for r in metrics] == [calls_multiply["reply"]] * 2
    assert [r["agent/tool_calls"] for r in metrics] == [1.0, 1.0]


def test_train_env_tokens_puts_the_reply_in_the_loss(cli, random_agent_model, calls_multiply, spy_grpo_update,
                                                     tmp_path):
    """--train-env-tokens (the mistake, to see it): the loss mask is the attention mask, the reply included."""
    result = cli(*small(random_agent_model, tmp_path / "run", "--env", "calculator", "--train-env-tokens"))
    assert result.returncode == 0, result.stderr[-3000:]
    batch = spy_grpo_update[0][1]
    assert torch.equal(batch.mask, batch.attention_mask)
    answers = batch.mask.sum(1) - calls_multiply["call"] - calls_multiply["reply"]
    assert (answers >= 3).all() and (answers <= 6).all()  # "#### 7…" and its end of turn: the rest is the reply


def test_credit_turn_gives_each_turn_its_own_advantage(cli, random_agent_model, calls_multiply, spy_grpo_update,
                                                       grpo_files, tmp_path):
    """--credit turn with rewards that differ by row: the call's tokens and the answer's get different advantages,
    each constant over its turn, and the reply none."""
    result = cli(*small(random_agent_model, tmp_path / "run", "--env", "calculator", "--credit", "turn",
                        "--reward-funcs", grpo_files["length"]))
    assert result.returncode == 0, result.stderr[-3000:]
    batch = spy_grpo_update[0][1]
    advantages, call = batch.advantages, calls_multiply["call"]
    first, second = advantages[:, :call], advantages[:, call + calls_multiply["reply"]:]
    assert (first == first[:, :1]).all()
    assert (advantages[:, call:call + calls_multiply["reply"]] == 0).all()
    last = batch.mask[:, call + calls_multiply["reply"]:].bool()
    assert all((second[i][last[i]] == second[i][last[i]][0]).all() for i in range(len(second)))
    assert (first[:, 0] - second[:, 0]).abs().max() > 0.1 and second[:, 0].abs().max() > 0.1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_rung_runs_on_a_gpu(cli, random_agent_model, calls_multiply, grpo_files, tmp_path):
    """--device cuda with tool calls and --credit turn: the trajectory's tensors (completion, both masks, the
    sampler's log-probs, the turns) meet the prompts on one device."""
    out = tmp_path / "run"
    result = cli(*small(random_agent_model, out, "--env", "calculator", "--device", "cuda", "--credit", "turn",
                        "--reward-funcs", grpo_files["length"]))
    assert result.returncode == 0, result.stderr[-3000:]
    assert [r["agent/env_tokens"] for r in read_metrics(out)] == [calls_multiply["reply"]] * 2


def test_the_environments_turn_rewards_are_logged_per_trajectory():
    """``agent/turn_reward``: each trajectory's mean turn reward (the game: its guesses that kept to the replies),
    0 for a trajectory that made no rewarded turn; nothing for an environment without ``turn_rewards``."""
    from ladder.tasks import agent_envs

    games = [agent_envs.GuessingGame() for _ in range(3)]
    for game in games:
        game.reset(question="Guess my number from 1 to 10.", answer="7", secret=7)
    games[0].guess(5)  # "higher: 6 to 10"
    games[0].guess(3)  # ruled out by that reply
    games[1].guess(7)
    assert agent.turn_reward_stats(games)["agent/turn_reward"].tolist() == [0.5, 1.0, 0.0]
    calculator = agent_envs.Calculator()
    calculator.reset()
    assert agent.turn_reward_stats([calculator]) == {}
