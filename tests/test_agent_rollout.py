"""The agent's multi-turn rollout (``agent_rollout.multi_turn``): one trajectory per row in token ids on one cache.

Driven by a scripted policy (``agent_helpers.ScriptedLM``: a random tiny Qwen2's real forward and cache, its next
token forced from a script) so that the model calls tools on cue, and by the random model sampling on its own.
Checked: the two masks (the environment's tokens attended, not trained on; pad neither), the model's tokens kept
as drawn (never decoded and re-encoded), every token through the model once with the cache continued, the
log-probs recorded while sampling equal to one full forward of prompt + trajectory with the two masks, the
environment's faults answered as errors the model reads, the token budget, TRL's rendering of a tool's reply,
and the per-turn credit.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from agent_helpers import call_text, ids, random_model, scripted_policy, tiny_tokenizer, trl_suffix_ids, turn

from ladder import core
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
from ladder.rungs import agent
from ladder.rungs.agent.rollout import multi_turn, trajectory_tensors, turn_index
from ladder.tasks import agent_envs, tool_calls

SYSTEM = agent_envs.CALCULATOR_PROMPT


class Workshop(agent_envs.Calculator):
    """The calculator, with one more tool that always raises."""

    def explode(self, a: int) -> str:
        """Always fails.

        Args:
            a: anything
        """
        raise RuntimeError(f"the tool broke on {a}")


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return random_model(tok).eval()


def prompts(tok, questions: list[str], env_class=agent_envs.Calculator):
    """Left-padded chat prompts with the environment's tools."""
    tools = tool_calls.tool_schemas(env_class())
    texts = [agent.chat_prompt(tok, {"question": q}, SYSTEM, tools, None) for q in questions]
    return tok(texts, return_tensors="pt", padding=True)


def play(model, tok, turns, questions, budget=96, max_tool_calls=2, env_class=agent_envs.Calculator):
    """``multi_turn`` with the scripted policy (greedy: the script's tokens): (trajectories, the ScriptedLM, enc)."""
    enc = prompts(tok, questions, env_class)
    policy = scripted_policy(model, tok, turns)
    envs = [env_class() for _ in questions]
    trajectories = multi_turn(policy, tok, envs, enc.input_ids, enc.attention_mask, budget, max_tool_calls,
                              do_sample=False)
    return trajectories, policy.model, enc


def env_text(tok, trajectories, row: int) -> str:
    """The environment's tokens of a row, decoded (attention 1, mask 0)."""
    environment = (trajectories.attention_mask[row] - trajectories.mask[row]).bool()
    return tok.decode(trajectories.completion[row][environment])


def reply(content: str) -> str:
    """The tiny template's rendering of one tool reply after the model's end of turn."""
    return f"\n<|im_start|>user\n<tool_response>\n{content}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


# --- the [B, T] rows ------------------------------------------------------------------------------------------

def test_trajectory_tensors_on_hand_made_segments():
    """Segments in order, right-padded: mask 1 on the model's, attention 1 on every segment, both 0 on pad."""
    segments = [[("model", [5, 6]), ("env", [7, 8, 9]), ("model", [10])],
                [("model", [11])],
                [("model", [12, 13]), ("env", [14])]]
    completion, mask, attention = trajectory_tensors(segments, pad_token_id=0)
    assert completion.tolist() == [[5, 6, 7, 8, 9, 10], [11, 0, 0, 0, 0, 0], [12, 13, 14, 0, 0, 0]]
    assert mask.tolist() == [[1, 1, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0]]
    assert attention.tolist() == [[1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]]
    assert turn_index(mask).tolist() == [[0, 0, -1, -1, -1, 1], [0, -1, -1, -1, -1, -1], [0, 0, -1, -1, -1, -1]]
    assert turn_index(torch.tensor([[0.0, 1, 1, 0, 1, 0, 1]])).tolist() == [[-1, 0, 0, -1, 1, -1, 2]]


# --- a scripted trajectory ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def scripted(model, tok):
    """Three rows: a call then the answer; the answer at once; two calls in two turns, then the answer."""
    turns = [[turn(tok, call_text("multiply", a=12, b=34)), turn(tok, "#### 408")],
             [turn(tok, "#### 99")],
             [turn(tok, call_text("multiply", a=5, b=6)), turn(tok, call_text("multiply", a=30, b=2)),
              turn(tok, "#### 60")]]
    trajectories, lm, enc = play(model, tok, turns, ["What is 12 * 34?", "What is 9 * 11?", "What is 5 * 6 * 2?"])
    return SimpleNamespace(turns=turns, trajectories=trajectories, lm=lm, enc=enc)


def test_the_environment_is_attended_and_not_trained_on(scripted, tok):
    """Model turns (mask 1, attention 1), the environment's replies as the template renders them (mask 0,
    attention 1), pad (0, 0); turns, tool calls and answers counted."""
    t, turns = scripted.trajectories, scripted.turns
    replies = {0: ["408"], 1: [], 2: ["30", "60"]}
    for row, model_turns in enumerate(turns):
        expected, mask = [], []
        for k, ids_k in enumerate(model_turns):
            expected += ids_k
            mask += [1] * len(ids_k)
            if k < len(replies[row]):
                env_ids = ids(tok, reply(replies[row][k]))
                expected += env_ids
                mask += [0] * len(env_ids)
        n = len(expected)
        assert t.completion[row, :n].tolist() == expected
        assert t.mask[row, :n].tolist() == mask and t.attention_mask[row, :n].tolist() == [1] * n
        assert (t.mask[row, n:] == 0).all() and (t.attention_mask[row, n:] == 0).all()
        assert (t.completion[row, n:] == tok.pad_token_id).all()
        assert t.env_tokens[row].item() == n - sum(mask)
        assert t.turn[row, :n].tolist() == turn_index(torch.tensor([mask]))[0].tolist()
        assert t.sampling_logp[row, n:].abs().sum() == 0 and t.sampling_logp[row][t.mask[row] == 0].abs().sum() == 0
    assert env_text(tok, t, 2) == reply("30") + reply("60")
    assert t.answers == ["#### 408", "#### 99", "#### 60"]
    assert t.turns.tolist() == [2, 1, 3] and t.tool_calls.tolist() == [1, 0, 2]
    assert t.tool_failures.tolist() == [0, 0, 0] and t.truncated.tolist() == [False, False, False]


def test_every_token_goes_through_the_model_once_on_the_cache(scripted, tok):
    """The prompts once (the prefill), then each row's trajectory once, in order, on the cache: a step feeds the
    model's token and, where it ended a turn of calls, the environment's whole reply with it, as one chunk; a row
    whose trajectory has ended leaves the batch."""
    t, lm, enc = scripted.trajectories, scripted.lm, scripted.enc
    rows, prompts_read = lm.fed[0]
    assert rows == [0, 1, 2]
    assert prompts_read == [r[m.bool()].tolist() for r, m in zip(enc.input_ids, enc.attention_mask)]
    lengths = t.attention_mask.sum(1).long().tolist()
    for b, n in enumerate(lengths):
        read = [token for rows, tokens in lm.fed[1:] for r, row_tokens in zip(rows, tokens) if r == b
                for token in row_tokens]
        assert read == t.completion[b, :n - 1].tolist()   # the token that ends a trajectory needs no forward
    reply_408 = [tok.eos_token_id] + ids(tok, reply("408"))
    assert any(r == 0 and row_tokens == reply_408 for rows, tokens in lm.fed for r, row_tokens in zip(rows, tokens))
    forwards_with = [sum(b in rows for rows, _ in lm.fed[1:]) for b in range(3)]
    assert forwards_with[1] == lengths[1] - 1 < forwards_with[0] < lengths[0] - 1   # the reply: one forward, not 15
    assert len(lm.fed) - 1 == max(forwards_with)


def test_logprobs_on_the_cache_equal_one_full_forward_with_two_masks(scripted, model, tok):
    """The real model's log π at each drawn token, on the cache as the rollout fed it, = one forward of prompt +
    trajectory (``lm_batch`` with the completion's attention mask): cache, positions and attention are right,
    across the environment's tokens and the chunks' pad."""
    t, lm, enc = scripted.trajectories, scripted.lm, scripted.enc
    on_cache = torch.full_like(t.mask, torch.nan)
    for rows, positions, logp in lm.real_logp:
        for i, (b, position) in enumerate(zip(rows, positions)):
            if position < t.completion.shape[1]:
                on_cache[b, position] = logp[i, t.completion[b, position]]
    batch = lm_batch(enc.input_ids, enc.attention_mask, t.completion, t.mask, tok.pad_token_id,
                     completion_attention_mask=t.attention_mask)
    with torch.no_grad():
        full = CausalLMPolicy(model, temperature=1.0).evaluate(batch)[0]
    model_tokens = t.mask.bool()
    torch.testing.assert_close(on_cache[model_tokens], full[model_tokens], rtol=1e-5, atol=1e-5)
    # the comparison can fail: the environment's tokens left unattended give other log-probs after them
    one_mask = lm_batch(enc.input_ids, enc.attention_mask, t.completion, t.mask, tok.pad_token_id)
    with torch.no_grad():
        unseen = CausalLMPolicy(model, temperature=1.0).evaluate(one_mask)[0]
    assert (unseen[model_tokens] - on_cache[model_tokens]).abs().max() > 1e-3


def test_sampling_logp_equals_one_full_forward(model, tok):
    """The random model sampling on its own (τ = 0.7, no top-p cut, prompts of different lengths shared by groups):
    each prompt goes through the model once and each token once; the log π_sampler recorded as each token was
    drawn = the policy's full forward, to float32 tolerance (under a top-p cut it is log p − log Z_t:
    test_sampler_top_p)."""
    policy = CausalLMPolicy(model, temperature=0.7)
    enc = prompts(tok, ["What is 12 * 34?", "What is 56 * 78? Use the tool."])
    prompt_ids, prompt_mask = enc.input_ids.repeat_interleave(3, 0), enc.attention_mask.repeat_interleave(3, 0)
    envs = [agent_envs.Calculator() for _ in range(len(prompt_ids))]
    fed = []
    hook = model.register_forward_pre_hook(lambda _, args, kwargs: fed.append(kwargs["input_ids"].shape),
                                           with_kwargs=True)
    try:
        t = multi_turn(policy, tok, envs, prompt_ids, prompt_mask, 24, 2, do_sample=True, top_p=1.0,
                       generator=torch.Generator().manual_seed(0))
    finally:
        hook.remove()
    # each distinct prompt encoded once, then the rows still going, one token each (no tool call was written)
    rows = [shape[0] for shape in fed[1:]]
    assert fed[0] == enc.input_ids.shape and {shape[1] for shape in fed[1:]} == {1}
    assert rows[0] == len(prompt_ids) and rows == sorted(rows, reverse=True)
    assert len(fed) - 1 == t.completion.shape[1] - 1
    batch = lm_batch(prompt_ids, prompt_mask, t.completion, t.mask, tok.pad_token_id,
                     completion_attention_mask=t.attention_mask)
    with torch.no_grad():
        full = policy.evaluate(batch)[0]
    drawn = t.mask.bool()
    assert drawn.sum() > 20 and len(set(map(tuple, t.completion.tolist()))) > 1
    torch.testing.assert_close(t.sampling_logp[drawn], full[drawn], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("temperature", [1e-45, 1e-300, 1e30, 1e300])
def test_any_positive_temperature_samples_with_finite_logprobs(model, tok, temperature):
    """z / τ overflows for a tiny τ (and τ rounds to 0 or inf in float32): the draw still has finite log-probs, and
    as τ → 0 sampling is the greedy trajectory, each token of probability 1."""
    enc = prompts(tok, ["What is 12 * 34?", "What is 56 * 78? Use the tool."])
    envs = [agent_envs.Calculator() for _ in range(2)]
    args = (tok, envs, enc.input_ids, enc.attention_mask, 12, 1)
    sampled = multi_turn(CausalLMPolicy(model, temperature=temperature), *args, do_sample=True, top_p=0.9,
                         generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(sampled.sampling_logp).all() and sampled.mask.sum() > 0
    if temperature < 1:
        greedy = multi_turn(CausalLMPolicy(model, temperature=1.0), *args, do_sample=False)
        assert torch.equal(sampled.completion, greedy.completion)
        assert sampled.sampling_logp.abs().max() == 0


def test_the_models_tokens_are_never_retokenized(model, tok):
    """A turn drawn character by character (a split that re-encoding its text would merge) stays exactly as drawn,
    and its tool call is still read from the text."""
    word = next(w for w in sorted(tok.get_vocab()) if w.isalpha() and len(w) >= 5)
    split = [tok.convert_tokens_to_ids(c) for c in word]
    assert ids(tok, tok.decode(split)) != split  # re-encoding would change them
    call = ids(tok, '<tool_call>\n{"name": "multiply", "arguments": {"a": 2, "b": 3}}\n</tool_call>')
    turns = [[split + call + [tok.eos_token_id], split + [tok.eos_token_id]]]
    t, _, _ = play(model, tok, turns, ["What is 2 * 3?"])
    first, second = turns[0]
    env = ids(tok, reply("6"))
    assert t.completion[0].tolist() == first + env + second
    assert t.tool_calls.tolist() == [1] and t.answers == [word]


# --- faults are the model's to read ---------------------------------------------------------------------------

def test_a_tool_fault_is_a_reply_never_an_exception(model, tok):
    """A tool that raises, a malformed call, an unknown tool, wrong arguments, a call past --max-tool-calls: each
    answered with TRL's ``{'error': ...}``, counted as a failure; the model reads it and answers."""
    answer = turn(tok, "#### 1")
    cases = [(call_text("explode", a=7), "{'error': 'the tool broke on 7'}"),
             ("<tool_call>\n{not json}\n</tool_call>", "{'error': 'malformed tool call"),
             (call_text("divide", a=1, b=2), "{'error': 'Tool divide not found.'}"),
             (call_text("multiply", x=1), "{'error': "),
             (call_text("multiply", a=1, b=2), "{'error': 'no tool calls left")]
    turns = [[turn(tok, text), answer] for text, _ in cases]
    turns[-1].insert(1, turn(tok, call_text("multiply", a=3, b=4)))  # a second calling turn: past TRL's count of 1
    questions = [f"Question {i}?" for i in range(len(cases))]
    t, _, _ = play(model, tok, turns, questions, budget=160, max_tool_calls=1, env_class=Workshop)
    for row, (_, error) in enumerate(cases):
        assert f"<tool_response>\n{error}" in env_text(tok, t, row), env_text(tok, t, row)
    assert "multiply() got an unexpected keyword argument 'x'" in env_text(tok, t, 3)
    assert env_text(tok, t, 4).startswith(reply("2").removesuffix("<|im_start|>assistant\n").split("<|im_end|>")[0])
    assert t.tool_calls.tolist() == [1, 1, 1, 1, 2] and t.tool_failures.tolist() == [1, 1, 1, 1, 1]
    assert t.answers == ["#### 1"] * len(cases) and t.turns.tolist() == [2, 2, 2, 2, 3]
    assert not t.truncated.any()


def test_the_token_budget_truncates(model, tok):
    """A turn longer than --max-new-tokens: the trajectory is the budget's tokens, truncated, with no answer (a
    half-written turn is none: a reward must not score a number it happened to write)."""
    long_turn = ids(tok, "#### " + "1234567890" * 4) + [tok.eos_token_id]
    t, _, _ = play(model, tok, [[long_turn]], ["What is 1 * 1?"], budget=12)
    assert t.completion.shape[1] == 12 and t.completion[0].tolist() == long_turn[:12]
    assert t.truncated.tolist() == [True] and t.mask.sum() == 12 and t.answers == [""]


def test_a_reply_that_does_not_fit_ends_the_trajectory(model, tok):
    """A call of L tokens whose reply has S: with fewer than L + S tokens in the budget the reply is dropped and
    the trajectory ends there, truncated (TRL drops a reply past max_completion_length); with L + S + 1 the reply
    is fed and the model writes one more token."""
    call = turn(tok, call_text("multiply", a=12, b=34))
    S = len(ids(tok, reply("408")))
    turns = [[call, turn(tok, "#### 408")]]
    dropped, _, _ = play(model, tok, turns, ["What is 12 * 34?"], budget=len(call) + S - 1)
    assert dropped.completion[0].tolist() == call and dropped.truncated.tolist() == [True]
    assert dropped.env_tokens.tolist() == [0] and dropped.tool_calls.tolist() == [1]
    fed, _, _ = play(model, tok, turns, ["What is 12 * 34?"], budget=len(call) + S + 1)
    assert fed.env_tokens.tolist() == [S] and fed.completion.shape[1] == len(call) + S + 1
    assert fed.truncated.tolist() == [True] and fed.turns.tolist() == [1]


# --- the environment's tokens as TRL renders them --------------------------------------------------------------

@pytest.mark.parametrize("messages", [
    [{"role": "tool", "name": "multiply", "content": "408"}],
    [{"role": "tool", "name": "multiply", "content": "30"}, {"role": "tool", "name": "explode",
                                                             "content": "{'error': 'the tool broke on 7'}"}],
], ids=["one reply", "two replies"])
def test_the_tool_suffix_is_trls(tok, messages):
    """``tool_calls.suffix_ids`` = TRL 1.16's ``_get_tool_suffix_ids`` on the tiny template (Qwen2.5's own template:
    test_agent_real_preset)."""
    pytest.importorskip("trl", minversion="1.16")
    assert tool_calls.suffix_ids(tok, messages) == trl_suffix_ids(tok, messages)
    each = "".join(f"<|im_start|>user\n<tool_response>\n{m['content']}\n</tool_response><|im_end|>\n" for m in messages)
    assert tok.decode(tool_calls.suffix_ids(tok, messages)) == "\n" + each + "<|im_start|>assistant\n"


# --- per-turn credit ------------------------------------------------------------------------------------------

TURN_REWARDS = torch.tensor([[1.0, 5.0], [3.0, 0.0], [2.0, 2.0], [0.0, 0.0]])  # two groups of G = 2
PRESENT = torch.tensor([[True, True], [True, False], [True, True], [True, False]])
# by hand: group 1 holds {1, 5, 3}: mean 3, std 2 → r̃ = (−1, 1), (0); Â_k = Σ_{j≥k} r̃_j = (0, 1), (0).
# group 2 holds {2, 2, 0}: mean 4/3, std √(4/3) → r̃ = (1/√3, 1/√3), (−2/√3); Â = (2/√3, 1/√3), (−2/√3).
S3 = 1 / math.sqrt(3)
BY_HAND = torch.tensor([[0.0, 1.0], [0.0, 0.0], [2 * S3, S3], [-2 * S3, 0.0]])


def test_group_relative_turns_by_hand():
    got = core.group_relative_turns(TURN_REWARDS, PRESENT, group_size=2)
    torch.testing.assert_close(got, BY_HAND, rtol=0, atol=1e-3)  # ε = 1e-4 in the std


def test_turn_credit_gives_each_turns_tokens_its_advantage():
    """``agent.turn_credit``: every token of model turn k gets Â_k; the environment's tokens and pad get 0."""
    turn = torch.tensor([[0, 0, -1, -1, 1, 1], [0, 0, 0, -1, -1, -1], [0, -1, 1, 1, -1, -1], [0, 0, -1, -1, -1, -1]])
    rollout = SimpleNamespace(turn=turn, turn_rewards=TURN_REWARDS)
    got = agent.turn_credit(rollout, torch.zeros(4), SimpleNamespace(group_size=2))
    expected = torch.where(turn >= 0, BY_HAND.gather(1, turn.clamp(min=0)), 0.0)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-3)
    assert got[0, 4] > 0.9 and got[0, 2] == 0 and got[3, 0] < -1.0


def test_turn_rewards_add_the_trajectorys_reward_to_its_last_turn():
    """``agent.per_turn_rewards``: the environment's per-turn rewards (cut to the turns there are; 0 without
    ``turn_rewards``), the trajectory's reward added to its last turn."""
    class Graded:
        def __init__(self, given):
            self.turn_rewards = given

    turn = torch.tensor([[0, -1, 1, -1, 2], [0, 0, -1, -1, -1], [0, -1, 1, 1, -1]])
    envs = [Graded([0.5, 0.0, 1.0, 9.0]), Graded([]), agent_envs.Calculator()]
    got = agent.per_turn_rewards(SimpleNamespace(turn=turn), envs, torch.tensor([1.0, 2.0, 3.0]))
    assert got.tolist() == [[0.5, 0.0, 2.0], [2.0, 0.0, 0.0], [0.0, 3.0, 0.0]]
