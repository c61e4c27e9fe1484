"""The agent rung's real setting — Qwen/Qwen2.5-0.5B-Instruct on GSM8K with a ``calculate`` tool (``--env gsm8k``) —
offline: a tiny random Qwen2 saved with Qwen2.5's own chat template (``agent_helpers.QWEN2_5_CHAT_TEMPLATE``, its
tool markers single tokens, ``<|im_end|>`` its EOS) and a local GSM8K-format file. The weights are random: these
check the mechanics (Qwen2.5's call format read, its rendering of a tool's reply fed, a --qlora run that finishes
and writes its files), not learning.
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from agent_helpers import (
    QWEN2_5_CHAT_TEMPLATE,
    QWEN2_5_SPECIAL,
    call_text,
    ids,
    qwen2_5_tokenizer,
    random_model,
    save_random_model,
    scripted_policy,
    trl_suffix_ids,
    turn,
)
from cli_helpers import run_cli
from lm_helpers import GSM8K_ROWS, read_metrics

from ladder import run as ladder_run
from ladder.rungs import agent
from ladder.rungs.agent.rollout import multi_turn
from ladder.tasks import agent_envs, tool_calls

QWEN = "Qwen/Qwen2.5-0.5B-Instruct"


def qwen_reply(*contents: str) -> str:
    """Qwen2.5's rendering of consecutive tool replies after the model's end of turn: one user turn holding them."""
    responses = "".join(f"\n<tool_response>\n{c}\n</tool_response>" for c in contents)
    return f"\n<|im_start|>user{responses}<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def tok():
    return qwen2_5_tokenizer()


@pytest.fixture(scope="module")
def qwen_files(tmp_path_factory, tok):
    """The tiny Qwen2.5-templated model (context 2048: Qwen2.5's tool preamble is long in a tiny vocabulary) and a
    GSM8K-format .jsonl (question, answer ending '#### N')."""
    root = tmp_path_factory.mktemp("qwen2.5")
    (root / "gsm8k.jsonl").write_text("\n".join(json.dumps(r) for r in GSM8K_ROWS))
    return {"model": save_random_model(root / "model", tok, context=2048), "dataset": str(root / "gsm8k.jsonl")}


def test_the_template_is_qwen2_5s(tok):
    """The template is the text TRL 1.16 ships as Qwen2.5's (and recognises the model by); its markers are single
    tokens and ``<|im_end|>`` ends a turn."""
    trl = pytest.importorskip("trl", minversion="1.16")
    from pathlib import Path

    assert QWEN2_5_CHAT_TEMPLATE == (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    assert "<tools>" in QWEN2_5_CHAT_TEMPLATE and "<tool_call>" in QWEN2_5_CHAT_TEMPLATE
    assert tok.eos_token == "<|im_end|>" and all(len(ids(tok, m)) == 1 for m in QWEN2_5_SPECIAL)


def test_the_default_agent_is_the_real_preset():
    cfg = agent.Config()
    assert (cfg.model, cfg.env) == (QWEN, "gsm8k") and agent.environment(cfg) is agent_envs.GSM8KCalculator


@pytest.mark.parametrize("contents", [["5"], ["5", "{'error': 'only numbers, + - * / and brackets are allowed'}"]],
                         ids=["one reply", "two replies"])
def test_the_tool_suffix_is_trls_on_qwen2_5(tok, contents):
    """``tool_calls.suffix_ids`` on Qwen2.5's template = TRL 1.16's ``_get_tool_suffix_ids``; replies in a row share
    one user turn."""
    pytest.importorskip("trl", minversion="1.16")
    messages = [{"role": "tool", "name": "calculate", "content": c} for c in contents]
    assert tool_calls.suffix_ids(tok, messages) == trl_suffix_ids(tok, messages)
    assert tok.decode(tool_calls.suffix_ids(tok, messages)) == qwen_reply(*contents)


def test_multi_turn_reads_qwen2_5_calls_and_feeds_its_replies(tok):
    """A scripted model writing Qwen2.5's calls (one, then two in one turn, one of them bad): each is run, the
    replies are Qwen2.5's rendering (``<tool_response>`` inside a user turn) and the model answers after them."""
    calculator = agent_envs.GSM8KCalculator()
    tools = tool_calls.tool_schemas(calculator)
    questions = [r["question"] for r in GSM8K_ROWS[:2]]
    texts = [agent.chat_prompt(tok, {"question": q}, agent_envs.GSM8K_PROMPT, tools, None) for q in questions]
    enc = tok(texts, return_tensors="pt", padding=True)
    turns = [[turn(tok, call_text("calculate", expression="2 + 3")), turn(tok, "2+3=5\n#### 5")],
             [turn(tok, call_text("calculate", expression="(12 + 3) * 2") + "\n"
                   + call_text("calculate", expression="abs(-3)")), turn(tok, "#### 15")]]
    policy = scripted_policy(random_model(tok, context=2048), tok, turns)
    envs = [agent_envs.GSM8KCalculator() for _ in questions]
    t = multi_turn(policy, tok, envs, enc.input_ids, enc.attention_mask, 160, 5, do_sample=False)
    environment = (t.attention_mask - t.mask).bool()
    replies = [tok.decode(t.completion[row][environment[row]]) for row in range(2)]
    assert replies == [qwen_reply("5"), qwen_reply("30", "{'error': 'only numbers, + - * / and brackets are allowed'}")]
    assert t.tool_calls.tolist() == [1, 2] and t.tool_failures.tolist() == [0, 1] and t.turns.tolist() == [2, 2]
    assert t.answers == ["2+3=5\n#### 5", "#### 15"] and not t.truncated.any()
    for row in range(2):  # the model's turns exactly as drawn, around the reply
        model_tokens = t.completion[row][t.mask[row].bool()].tolist()
        assert model_tokens == turns[row][0] + turns[row][1]


def test_the_real_preset_runs_offline_with_qlora(qwen_files, tmp_path):
    """``--env gsm8k`` (the default) on the Qwen2.5-templated model and the local GSM8K file, 4-bit base + LoRA,
    nothing downloaded: it finishes and writes its files."""
    out = tmp_path / "run"
    args = ["agent", "--model", qwen_files["model"], "--dataset", qwen_files["dataset"], "--qlora", "--steps", "2",
            "--prompts-per-step", "2", "--group-size", "2", "--max-new-tokens", "48", "--eval-size", "2",
            "--print-samples", "0", "--no-progress", "--out", str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = run_cli(*args, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((out / "config.json").read_text())
    assert config["qlora"] and config["env"] == "gsm8k" and config["model"] == qwen_files["model"]
    records = read_metrics(out)
    assert [r["step"] for r in records] == [1, 2] and "eval_accuracy" in records[-1]
    assert all(key in records[0] for key in ("agent/tool_calls", "agent/turns", "agent/env_tokens"))
    assert (out / "summary.json").exists() and (out / "adapter" / "adapter_model.safetensors").exists()


def test_the_real_preset_trains_on_qwen2_5_tool_calls(qwen_files, tok, spy_grpo_update, monkeypatch, tmp_path):
    """The same --qlora run with its model scripted to call ``calculate`` and answer: the batch holds Qwen2.5's
    reply, attended and out of the loss; the metrics count one call and its tokens per trajectory."""
    call = turn(tok, call_text("calculate", expression="2 + 3"))
    real = agent.multi_turn

    def scripted(policy, tokenizer, envs, *args, **kwargs):
        turns = [[call, turn(tok, "#### 5")] for _ in envs]
        return real(scripted_policy(policy.model, tokenizer, turns, policy.temperature), tokenizer, envs, *args,
                    **kwargs)

    monkeypatch.setattr(agent.recipe, "multi_turn", scripted)
    out = tmp_path / "run"
    code = ladder_run.main(["agent", "--model", qwen_files["model"], "--dataset", qwen_files["dataset"], "--qlora",
                            "--steps", "2", "--prompts-per-step", "2", "--group-size", "2", "--max-new-tokens", "64",
                            "--eval-size", "2", "--print-samples", "0", "--no-progress", "--out", str(out)])
    assert code == 0
    reply = len(ids(tok, qwen_reply("5")))
    records = read_metrics(out)
    assert [(r["agent/tool_calls"], r["agent/turns"], r["agent/env_tokens"]) for r in records] == [(1, 2, reply)] * 2
    batch = spy_grpo_update[0][1]
    assert torch.equal((batch.attention_mask - batch.mask).sum(1), torch.full((4,), float(reply)))
    assert tok.decode(batch.actions[0][(batch.attention_mask - batch.mask)[0].bool()]) == qwen_reply("5")
