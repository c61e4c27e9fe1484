"""The tiny models the package ships (``ladder/tasks/tiny_models``), and the build code that made them, which
must still produce a loadable model that has learnt something (here with a few training steps only)."""

from __future__ import annotations

import functools
import math
import random

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from ladder.tasks import (
    agent_envs,
    arithmetic,
    generated_reviews,
    rebuild_tiny,
    review_models,
    tiny_agent,
    tiny_lm,
    tool_calls,
)

# 40 steps of 8 examples (the shipped builds take 32 a step: the Qwen2 models' long chats then cost a second a step):
# enough to be well below guessing.
FAST = {review_models.TINY_MODEL_VERSION: functools.partial(review_models.build_tiny_sentiment_model, steps=40,
                                                              batch_size=8),
        arithmetic.TINY_MODEL_VERSION: functools.partial(arithmetic.build_tiny_math_model, sft_steps=40, batch_size=8),
        tiny_agent.TINY_MODEL_VERSION: functools.partial(tiny_agent.build_tiny_agent_model, sft_steps=40,
                                                         batch_size=8),
        tiny_agent.TINY_GUESS_VERSION: functools.partial(tiny_agent.build_tiny_guess_model, sft_steps=40,
                                                         batch_size=8)}


def _load(path):
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def _mean_loss(model, tokenizer, pairs: list[tuple[str, str]]) -> float:
    """Next-token cross-entropy of each target given its context (what ``tiny_lm.pretrain`` trains), per target
    token; an untrained model guesses, about log |V|."""
    losses = []
    with torch.no_grad():
        for context, target in pairs:
            head = tokenizer.encode(context)
            ids = torch.tensor([head + tokenizer.encode(target, add_special_tokens=False) + [tokenizer.eos_token_id]])
            labels = ids.clone()
            labels[0, :len(head)] = -100
            losses.append(model(input_ids=ids, labels=labels).loss.item())
    return sum(losses) / len(losses)


def _greedy(model, tokenizer, prompt: str, tokens: int = 24, skip_special_tokens: bool = True) -> str:
    enc = tokenizer([prompt], return_tensors="pt")
    out = model.generate(**enc, do_sample=False, max_new_tokens=tokens, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    return tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=skip_special_tokens)


def test_the_rungs_load_the_shipped_copies(monkeypatch, tmp_path):
    monkeypatch.setenv("LADDER_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LADDER_BUILD_TINY", raising=False)
    assert review_models.tiny_model_path() == tiny_lm.SHIPPED / review_models.TINY_MODEL_VERSION
    assert arithmetic.tiny_math_model() == tiny_lm.SHIPPED / arithmetic.TINY_MODEL_VERSION
    assert tiny_agent.tiny_agent_model() == tiny_lm.SHIPPED / tiny_agent.TINY_MODEL_VERSION
    assert tiny_agent.tiny_guess_model() == tiny_lm.SHIPPED / tiny_agent.TINY_GUESS_VERSION
    assert not (tmp_path / "cache").exists()  # nothing built, nothing written
    assert sorted(p.name for p in tiny_lm.SHIPPED.iterdir()) == sorted(rebuild_tiny.builders())
    size = sum(f.stat().st_size for f in tiny_lm.SHIPPED.rglob("*") if f.is_file())
    assert size < 15e6


def test_the_shipped_math_model_does_its_sums():
    model, tokenizer = _load(arithmetic.tiny_math_model())
    prompt = arithmetic.chat_prompt(tokenizer, "What is 23 + 41?", arithmetic.TINY_SYSTEM_PROMPT)
    completion = _greedy(model, tokenizer, prompt)
    assert arithmetic.extract_answer(completion) == 64 and arithmetic.format_reward([completion], ["64"]) == [1.0]


def _assert_same_model_and_tokenizer(model, tokenizer, shipped) -> None:
    """What the files mean, not how a release writes them (a version stamp, a serialised default): the same
    configuration once both are read by this transformers, the same parameters (names and shapes), the same
    vocabulary and special tokens, and the same ids for the same text."""
    def meaning(config) -> dict:
        return {k: v for k, v in config.to_dict().items() if k not in ("transformers_version", "_name_or_path")}

    ours, theirs = model.config, AutoConfig.from_pretrained(shipped)
    assert meaning(ours) == meaning(theirs)
    shipped_model, shipped_tokenizer = _load(shipped)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes == {k: tuple(v.shape) for k, v in shipped_model.state_dict().items()}
    assert tokenizer.get_vocab() == shipped_tokenizer.get_vocab()
    assert tokenizer.all_special_tokens == shipped_tokenizer.all_special_tokens
    text = "What is 23 + 41? The film was great, but the ending was slow."
    assert tokenizer.encode(text) == shipped_tokenizer.encode(text)


def test_a_release_that_restamps_a_config_is_still_the_same_model(tmp_path):
    """The comparison above ignores what a transformers release changes on its own (the version stamp) and
    catches what changes the model (a layer more)."""
    shipped = tiny_lm.SHIPPED / review_models.TINY_MODEL_VERSION
    model, tokenizer = _load(shipped)
    model.config.transformers_version = "99.0.0"
    _assert_same_model_and_tokenizer(model, tokenizer, shipped)
    bigger = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(shipped, n_layer=3))
    with pytest.raises(AssertionError):
        _assert_same_model_and_tokenizer(bigger, tokenizer, shipped)


@pytest.mark.trained
@pytest.mark.parametrize("name", sorted(FAST))
def test_the_build_code_still_makes_a_working_model(name, monkeypatch, tmp_path):
    """LADDER_BUILD_TINY=1: built into $LADDER_CACHE (a few steps here), loaded with from_pretrained like a hub id;
    the same architecture and tokenizer as the shipped copy, and well below guessing (log |V|) on its own task."""
    monkeypatch.setenv("LADDER_CACHE", str(tmp_path))
    monkeypatch.setenv("LADDER_BUILD_TINY", "1")
    path = tiny_lm.cached(name, FAST[name])
    assert path == tmp_path / name and tiny_lm.cached(name, None) == path  # built once, then reused
    model, tokenizer = _load(path)
    _assert_same_model_and_tokenizer(model, tokenizer, tiny_lm.SHIPPED / name)
    if name == review_models.TINY_MODEL_VERSION:
        pairs = [("", text) for text in generated_reviews.review_corpus(20, seed=1)]
    elif name == tiny_agent.TINY_MODEL_VERSION:
        pairs = tiny_agent.tutor_corpus(tokenizer, seed=1, n_calculator=10, n_guess=3)[:20]
    elif name == tiny_agent.TINY_GUESS_VERSION:
        pairs = tiny_agent.tutor_corpus(tokenizer, seed=1, n_calculator=0, n_guess=6, bare_replies=False)[:20]
    else:
        pairs = [(arithmetic.chat_prompt(tokenizer, p["question"], arithmetic.TINY_SYSTEM_PROMPT),
                  arithmetic.solution_text(p)) for p in arithmetic.train_eval_split()[1][:20]]
    assert _mean_loss(model, tokenizer, pairs) < 0.7 * math.log(len(tokenizer))  # 0.15–0.6 of it here
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id


def test_the_shipped_agent_model_calls_the_tool_with_the_questions_numbers():
    """The tiny tool-calling model, given the start of a call, copies the question's two factors into it."""
    model, tokenizer = _load(tiny_agent.tiny_agent_model())
    tools = tool_calls.tool_schemas(agent_envs.Calculator())
    copied = 0
    for problem in agent_envs.product_problems()[1][:10]:
        messages = [{"role": "system", "content": agent_envs.CALCULATOR_PROMPT},
                    {"role": "user", "content": problem["question"]}]
        prompt = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        start = '<tool_call>\n{"name": "multiply", "arguments": {"a": '
        a, b = problem["question"].removeprefix("What is ").rstrip("?").split(" * ")
        copied += _greedy(model, tokenizer, prompt + start, tokens=12).startswith(f'{a}, "b": {b}}}')
    assert copied >= 7


def test_the_shipped_guess_model_keeps_to_the_numbers_the_reply_leaves():
    """After one wrong guess and its reply ("higher: 6 to 10"), the guess model's next greedy guess is one the
    reply still allows, more often than not (its tutor kept to the replies on half its guesses, and guessed any
    number on the other half)."""
    model, tokenizer = _load(tiny_agent.tiny_guess_model())
    tools, rng, kept = tool_calls.tool_schemas(agent_envs.GuessingGame()), random.Random(0), 0
    for problem in agent_envs.guess_problems()[1][:10]:
        game, first = agent_envs.GuessingGame(), rng.choice([n for n in range(2, 10) if n != problem["secret"]])
        game.reset(**problem)
        messages = [{"role": "system", "content": agent_envs.GUESS_PROMPT},
                    {"role": "user", "content": problem["question"]}, tiny_agent.call("guess", n=first),
                    {"role": "tool", "name": "guess", "content": game.guess(first)}]
        prompt = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        calls = tool_calls.parse_tool_calls(_greedy(model, tokenizer, prompt, tokens=20, skip_special_tokens=False))
        second = calls[0]["arguments"].get("n") if calls and isinstance(calls[0], dict) else None
        kept += isinstance(second, int) and game.low <= second <= game.high
    assert kept >= 7


def _write_config(path):
    (path / "config.json").write_text("{}")


def test_rebuild_writes_every_model_and_drops_old_versions(monkeypatch, tmp_path):
    monkeypatch.setattr(rebuild_tiny, "builders", lambda: {name: _write_config for name in FAST})
    (tmp_path / "tiny-gpt2-sentiment-v0").mkdir()  # a version no longer used
    (tmp_path / "tiny-gpt2-sentiment-v0" / "config.json").write_text("{}")
    built = rebuild_tiny.rebuild(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FAST) == sorted(p.name for p in built)
    assert all((p / "config.json").exists() for p in built)
