"""GRPO's rollouts (``ladder.rungs.grpo.rollout``) on hand-made groups and tiny models (CPU, seeded):
dynamic sampling, the overlong penalty and truncated completions masked out of the loss."""

import pytest
import torch
from lm_helpers import grpo_config, one_thread_then_back, read_metrics  # noqa: F401 (autouse fixture)

from ladder import core, rewards
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, completion_mask
from ladder.rungs import grpo
from ladder.rungs.grpo import rollout as grpo_rollout
from ladder.rungs.grpo.rollout import Rollout

# ----------------------------------------------------------------------------------------------------------
# 1. Dynamic sampling


PAD = 0


def _rollout(rewards, tag, G=2, prompt_width=3, completion_width=4):
    """Hand-made groups: every row's tokens, text and question say where it came from."""
    n = len(rewards)
    rows = torch.arange(n)
    prompt_ids = 100 * tag + (rows // G)[:, None].repeat(1, prompt_width) + 1
    completion = 100 * tag + 10 + rows[:, None].repeat(1, completion_width)
    rewards = torch.tensor(rewards, dtype=torch.float32)
    return Rollout(prompt_ids=prompt_ids, prompt_mask=torch.ones(n, prompt_width, dtype=torch.long),
                   completion=completion, mask=torch.ones(n, completion_width), rewards=rewards,
                   per_function={"f": rewards.clone()}, truncated=rows % 2 == 0,
                   texts=[f"{tag}:{i}" for i in range(n)], questions=[f"{tag}:q{i // G}" for i in range(n)])


class Source:
    """sample_more: the prepared rounds in order; records what it was asked."""

    def __init__(self, *rounds):
        self.rounds, self.asked = list(rounds), []

    def __call__(self, wanted):
        self.asked.append(wanted)
        current = self.rounds.pop(0)
        return current if wanted else None


def _single(mine):
    return mine


def _informative(rollout, G=2):
    return grpo_rollout.informative(rollout.rewards, G).tolist()


def _groups(rollout, G=2):
    """(tag, group) of each group, checking that its G rows are adjacent and belong together."""
    out = []
    for g in range(len(rollout) // G):
        questions = rollout.questions[g * G:(g + 1) * G]
        texts = rollout.texts[g * G:(g + 1) * G]
        assert len(set(questions)) == 1, questions
        tag, first = texts[0].split(":")
        assert texts == [f"{tag}:{int(first) + i}" for i in range(G)] and int(first) % G == 0, texts
        out.append((int(tag), int(first) // G))
    return out


def test_dynamic_sampling_keeps_informative_groups_until_it_has_enough():
    first = _rollout([1, 0, 1, 1, 0, 0, 0, 1], tag=1)     # groups 0 and 3 informative
    source = Source(_rollout([2, 2, 0, 0, 1, 1, 1, 1], tag=2),  # none
                    _rollout([0, 1, 1, 0, 1, 1, 2, 3], tag=3),  # 0, 1 and 3: one more than needed
                    _rollout([0, 1] * 4, tag=4))
    rollout, rounds, generated = grpo_rollout.dynamic_sample(first, source, 2, 8, _single, PAD)
    assert (rounds, generated, source.asked) == (3, 24, [True, True])
    assert len(rollout) == len(first) and len(source.rounds) == 1
    assert _groups(rollout) == [(1, 0), (1, 3), (3, 0), (3, 1)]
    assert _informative(rollout) == [True] * 4  # no group without a spread
    assert torch.equal(rollout.rewards, torch.tensor([1., 0., 0., 1., 0., 1., 1., 0.]))
    assert torch.equal(rollout.per_function["f"], rollout.rewards)
    assert rollout.truncated.tolist() == [True, False] * 4
    assert torch.equal(rollout.completion[:, 0], torch.tensor([110, 111, 116, 117, 310, 311, 312, 313]))
    assert torch.equal(rollout.prompt_ids[:, 0], torch.tensor([101, 101, 104, 104, 301, 301, 302, 302]))


def test_dynamic_sampling_stops_at_once_when_every_group_is_informative():
    first = _rollout([0, 1, 1, 0], tag=1)
    source = Source()
    rollout, rounds, generated = grpo_rollout.dynamic_sample(first, source, 2, 4, _single, PAD)
    assert (rounds, generated, source.asked) == (1, 4, [])
    assert _groups(rollout) == [(1, 0), (1, 1)]


def test_dynamic_sampling_at_the_round_cap_fills_with_uninformative_groups():
    first = _rollout([1, 1, 0, 1, 0, 0], tag=1)  # group 1 informative
    source = Source(_rollout([3, 3, 3, 3, 0, 1], tag=2), _rollout([0, 1] * 3, tag=3))
    rollout, rounds, generated = grpo_rollout.dynamic_sample(first, source, 2, 2, _single, PAD)
    assert (rounds, generated, source.asked) == (2, 12, [True])
    assert len(rollout) == len(first)
    # the informative groups first, then the fill: the uninformative ones, in the order they came
    assert _groups(rollout) == [(1, 1), (2, 2), (1, 0)]
    assert _informative(rollout) == [True, True, False]


def test_dynamic_sampling_waits_for_the_other_processes_without_sampling():
    """Done here but not everywhere: further rounds are drawn (same prompt order) but not sampled or counted."""
    first = _rollout([0, 1, 1, 0], tag=1)
    others_done = iter([False, False, True])
    seen = []

    def all_done(mine):
        seen.append(mine)
        return next(others_done)

    source = Source(_rollout([0, 1] * 2, tag=2), _rollout([0, 1] * 2, tag=3))
    rollout, rounds, generated = grpo_rollout.dynamic_sample(first, source, 2, 5, all_done, PAD)
    assert (rounds, generated, source.asked, seen) == (3, 4, [False, False], [True, True, True])
    assert _groups(rollout) == [(1, 0), (1, 1)]


def test_rounds_of_different_widths_concatenate_with_left_padded_prompts_and_right_padded_completions():
    first = _rollout([1, 1, 0, 1], tag=1, prompt_width=3, completion_width=4)
    more = _rollout([0, 1, 2, 2], tag=2, prompt_width=5, completion_width=2)
    rollout, _, _ = grpo_rollout.dynamic_sample(first, Source(more), 2, 4, _single, PAD)
    assert _groups(rollout) == [(1, 1), (2, 0)]
    assert rollout.prompt_ids.shape == (4, 5) and rollout.completion.shape == (4, 4)
    assert rollout.prompt_ids[:2].tolist() == [[PAD, PAD, 102, 102, 102]] * 2
    assert rollout.prompt_mask[:2].tolist() == [[0, 0, 1, 1, 1]] * 2
    assert rollout.prompt_mask[2:].tolist() == [[1] * 5] * 2
    assert rollout.completion[2:].tolist() == [[210, 210, PAD, PAD], [211, 211, PAD, PAD]]
    assert rollout.mask[2:].tolist() == [[1, 1, 0, 0]] * 2
    assert rollout.completion[:2].tolist() == [[112] * 4, [113] * 4] and rollout.mask[:2].eq(1).all()

    joined = grpo_rollout.concat([first, more], PAD)
    assert len(joined) == 8 and joined.texts == first.texts + more.texts
    assert torch.equal(joined.prompt_ids[4:], more.prompt_ids) and torch.equal(joined.mask[:4], first.mask)
    assert torch.equal(joined.rewards, torch.cat([first.rewards, more.rewards]))


@pytest.mark.trained
def test_train_with_dynamic_sampling_updates_on_informative_groups(tmp_path, tiny_qwen, grpo_files, spy_grpo_update):
    P, G, cap = 2, 2, 3
    grpo.train(grpo_config(tmp_path, tiny_qwen, grpo_files["gsm8k"], steps=4, prompts_per_step=P, group_size=G,
                           reward_funcs=grpo_files["parity"], dynamic_sampling=True, max_sampling_rounds=cap,
                           kl_coef=0.0))
    records = read_metrics(tmp_path / "run")
    assert len(spy_grpo_update) == 4 and all(len(batch) == P * G for _, batch, *_ in spy_grpo_update)
    for r in records:
        assert 1 <= r["sampling/rounds"] <= cap
        assert r["sampling/completions"] == P * G * r["sampling/rounds"] >= P * G
        if r["sampling/rounds"] < cap:
            assert r["frac_reward_zero_std"] == 0
    assert [r["completions_total"] for r in records] == list(
        torch.tensor([r["sampling/completions"] for r in records]).cumsum(0).tolist())
    assert any(r["sampling/rounds"] > 1 for r in records)  # it had to sample more at least once
    assert any(r["sampling/rounds"] < cap for r in records)


# ----------------------------------------------------------------------------------------------------------
# 2. Overlong: the soft penalty, and truncated completions masked out of the loss


def test_overlong_penalty_by_hand():
    lengths = torch.arange(0, 11)
    penalty = rewards.overlong_penalty(lengths, max_tokens=10, buffer=4, penalty=2.0)
    expected = [0.0] * 7 + [-0.5, -1.0, -1.5, -2.0]  # 0 up to L_max − L_buf = 6, then linear to −p at 10
    assert penalty.tolist() == pytest.approx(expected)
    assert rewards.overlong_penalty(torch.tensor([12]), 10, 4, 2.0).tolist() == [-2.0]  # not beyond −p
    assert rewards.overlong_penalty(torch.tensor([9, 10]), 10, 1).tolist() == [0.0, -1.0]


def test_truncated_completions_take_no_part_in_the_loss(tmp_path, tiny_qwen, grpo_files, monkeypatch,
                                                         spy_grpo_update, spy_grpo_rollouts):
    """EOS is suppressed (min = max new tokens), then put back by hand in some rows: row 0 of a group stops
    after 2 tokens, row 3 ends with EOS exactly at --max-new-tokens; rows 1 and 2 are truncated."""
    T, G = 4, 4
    real_generate = CausalLMPolicy.generate
    eos = quant.load_tokenizer(tiny_qwen).eos_token_id

    def generate(self, *args, **kwargs):
        completion, _ = real_generate(self, *args, **kwargs)
        if kwargs.get("do_sample", True):
            assert completion.shape[1] == T and not (completion == eos).any()
            completion = completion.clone()
            completion[0::G, 1] = eos
            completion[3::G, T - 1] = eos
        return completion, completion_mask(completion, eos)

    monkeypatch.setattr(CausalLMPolicy, "generate", generate)
    grpo.train(grpo_config(tmp_path, tiny_qwen, grpo_files["gsm8k"], steps=1, group_size=G, max_new_tokens=T,
                           min_new_tokens=T, mask_truncated=True, overlong_buffer=0.5, overlong_penalty=1.0,
                           reward_funcs=grpo_files["length"]))
    (rollout,), ((_, batch, *_),) = spy_grpo_rollouts, spy_grpo_update
    truncated = torch.tensor([False, True, True, False] * 2)
    assert torch.equal(rollout.truncated, truncated)
    lengths = rollout.mask.sum(1)
    assert lengths.tolist() == [2, 4, 4, 4] * 2
    penalty = rewards.overlong_penalty(lengths, T, 2, 1.0)  # round(0.5 · 4) = 2 tokens of buffer
    assert penalty.tolist() == [0.0, -1.0, -1.0, -1.0] * 2
    assert torch.equal(rollout.per_function["overlong"], penalty)
    assert torch.allclose(rollout.rewards, rollout.per_function["length"] + penalty)

    advantages = core.group_relative(rollout.rewards, G, "group")  # from every row, the truncated ones too
    assert advantages[~truncated].abs().min() > 0
    assert batch.mask[truncated].eq(0).all() and batch.advantages[truncated].eq(0).all()
    assert torch.equal(batch.mask[~truncated], rollout.mask[~truncated])
    assert torch.allclose(batch.advantages[~truncated], advantages[~truncated, None] * rollout.mask[~truncated])
    record = read_metrics(tmp_path / "run")[0]
    assert record["completions/clipped_ratio"] == 0.5
    assert record["rewards/overlong/mean"] == pytest.approx(-0.75)
