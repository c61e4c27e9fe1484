"""GRPO's rollout: sample G completions per prompt, score them, and shape the batch before the core
sees it — dynamic sampling (keep only groups with a reward spread) and the overlong handling.

These choices decide *which* completions make up a batch; none of them changes the update, so they
live here, in the rung, and not in ladder.core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor

from ladder.domains import MAX_PASSES, count
from ladder.rewards import overlong_penalty, score
from ladder.rungs.grpo.scoring import OVERLONG
from ladder.specs import Param, switched
from ladder.trl_rows import TRL


@dataclass(frozen=True)
class DynamicSampling:
    """DAPO's dynamic sampling, on with --dynamic-sampling: at most ``max_rounds`` rounds of P prompts per update."""

    max_rounds: int = 4


# ``Config.dynamic_sampling``: a ``DynamicSampling`` with --dynamic-sampling, None without it.
DYNAMIC_SAMPLING = switched("dynamic_sampling", "dynamic_sampling", "drop groups whose rewards are all equal (no "
                            "signal) and sample further prompts until the update has P informative groups (DAPO)",
                            DynamicSampling, (
    Param("max_sampling_rounds", DynamicSampling, "max_rounds", "dynamic sampling: at most this many rounds of P "
          "prompts per update; then the update is filled with uninformative groups", count(1, MAX_PASSES),
          trl=(TRL(None, note="dynamic sampling's budget", applies=lambda cfg: cfg.dynamic_sampling is not None),)),),
                            trl=(TRL(None, note="DAPO's dynamic sampling (drop groups without a reward spread, sample "
                                     "more prompts): not in GRPOTrainer; its frac_reward_zero_std metric counts those "
                                     "groups", applies=lambda cfg: cfg.dynamic_sampling is not None),))


@dataclass
class Rollout:
    """This process's sampled groups: G adjacent rows per prompt."""

    prompt_ids: Tensor     # [n, P] left-padded
    prompt_mask: Tensor    # [n, P]
    completion: Tensor     # [n, T] right-padded
    mask: Tensor           # [n, T] 1 up to and including EOS
    rewards: Tensor        # [n] r_i = Σ_f w_f · f(completion_i) (+ p · the overlong penalty)
    per_function: dict     # name → [n], unweighted (the overlong penalty at p = 1)
    truncated: Tensor      # [n] bool: reached --max-new-tokens without EOS
    texts: list
    questions: list
    sampling_logp: Tensor | None = None  # [n, T] log π_sampler of each token, recorded while sampling (or None)
    # A multi-turn rollout's (ladder.rungs.agent) — None for one completion per prompt:
    attention_mask: Tensor | None = None  # [n, T] 1 on the model's and the environment's tokens (mask: the model's)
    turn: Tensor | None = None            # [n, T] the model turn of each token (−1: the environment's, pad)
    turn_rewards: Tensor | None = None    # [n, K] each model turn's reward (the trajectory's added to the last)
    stats: dict | None = None             # name → [n], logged as its mean (tool calls, turns, …)
    token_rewards: Tensor | None = None   # [n, T] a reward per completion token (the distill rung's teacher's)

    def __len__(self) -> int:
        return len(self.rewards)

    def groups(self, index: Tensor, group_size: int) -> Rollout:
        """The rollout made of the given groups (indices over groups, not rows)."""
        rows = (index[:, None] * group_size + torch.arange(group_size)).reshape(-1)
        picked = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                picked[f.name] = None
            elif isinstance(value, Tensor):
                picked[f.name] = value[rows.to(value.device)]
            elif isinstance(value, dict):
                picked[f.name] = {k: v[rows] for k, v in value.items()}
            else:
                picked[f.name] = [value[i] for i in rows.tolist()]
        return replace(self, **picked)


def _pad_to(x: Tensor, width: int, value, left: bool) -> Tensor:
    pad = x.new_full((x.shape[0], width - x.shape[1]), value)
    return torch.cat([pad, x] if left else [x, pad], dim=1)


def concat(rollouts: list[Rollout], pad_token_id: int) -> Rollout:
    """Rows of several rollouts in one: prompts left-padded, completions right-padded to one width."""
    if len(rollouts) == 1:
        return rollouts[0]
    P = max(r.prompt_ids.shape[1] for r in rollouts)
    T = max(r.completion.shape[1] for r in rollouts)
    return Rollout(
        prompt_ids=torch.cat([_pad_to(r.prompt_ids, P, pad_token_id, left=True) for r in rollouts]),
        prompt_mask=torch.cat([_pad_to(r.prompt_mask, P, 0, left=True) for r in rollouts]),
        completion=torch.cat([_pad_to(r.completion, T, pad_token_id, left=False) for r in rollouts]),
        mask=torch.cat([_pad_to(r.mask, T, 0, left=False) for r in rollouts]),
        rewards=torch.cat([r.rewards for r in rollouts]),
        per_function={k: torch.cat([r.per_function[k] for r in rollouts]) for k in rollouts[0].per_function},
        truncated=torch.cat([r.truncated for r in rollouts]),
        texts=[t for r in rollouts for t in r.texts], questions=[q for r in rollouts for q in r.questions],
        sampling_logp=_cat_padded([r.sampling_logp for r in rollouts], T, 0.0),
        attention_mask=_cat_padded([r.attention_mask for r in rollouts], T, 0.0),
        turn=_cat_padded([r.turn for r in rollouts], T, -1),
        turn_rewards=_cat_padded([r.turn_rewards for r in rollouts],
                                 max(r.turn_rewards.shape[1] for r in rollouts) if rollouts[0].turn_rewards is not None
                                 else 0, 0.0),
        stats=None if rollouts[0].stats is None else {k: torch.cat([r.stats[k] for r in rollouts])
                                                      for k in rollouts[0].stats},
        token_rewards=_cat_padded([r.token_rewards for r in rollouts], T, 0.0))


def _cat_padded(parts: list[Tensor | None], width: int, value) -> Tensor | None:
    """The parts' rows in one tensor, each right-padded to ``width`` with ``value`` (None if the rollouts have none)."""
    if parts[0] is None:
        return None
    return torch.cat([_pad_to(x, width, value, left=False) for x in parts])


def sample(policy, tokenizer, cfg, problems: list[dict], prompts: list[str], weights: dict,
           functions: dict[str, Callable] | None, device, record_logp: bool = False) -> Rollout:
    """G completions of each problem (from its text in ``prompts``), scored: r_i = Σ_f w_f · f(completion_i) −
    overlong penalty. ``record_logp``: keep the sampler's own log-probs too (``Rollout.sampling_logp``)."""
    G = cfg.group_size
    enc = tokenizer(prompts, return_tensors="pt", padding=True).to(device)
    prompt_ids = enc.input_ids.repeat_interleave(G, dim=0)
    prompt_mask = enc.attention_mask.repeat_interleave(G, dim=0)
    generation = cfg.generation
    completion, mask, *sampling_logp = policy.generate(
        prompt_ids, prompt_mask, generation.max_new_tokens, tokenizer.pad_token_id, tokenizer.eos_token_id,
        do_sample=True, top_p=generation.top_p, min_new_tokens=generation.min_new_tokens, record_logp=record_logp)
    mask = mask.to(device)
    texts = tokenizer.batch_decode(torch.where(mask.bool(), completion, tokenizer.pad_token_id),
                                   skip_special_tokens=True)
    answers = [p["answer"] for p in problems for _ in range(G)]
    rewards, per_function = score(texts, answers, weights, functions, seconds=cfg.reward_timeout)
    lengths = mask.sum(1).cpu()
    rewards, per_function = with_overlong_penalty(rewards, per_function, lengths, cfg)
    truncated = ~(completion == tokenizer.eos_token_id).any(1).cpu() & (lengths >= generation.max_new_tokens)
    return Rollout(prompt_ids, prompt_mask, completion, mask, rewards, per_function, truncated, texts,
                   [p["question"] for p in problems for _ in range(G)], *sampling_logp)


def with_overlong_penalty(rewards: Tensor, per_function: dict, lengths: Tensor, cfg) -> tuple[Tensor, dict]:
    """With ``--overlong-buffer``, r_i + p · R(L_i): DAPO's soft overlong penalty R of length L_i at p = 1 (TRL's
    ``get_soft_overlong_punishment``), one more reward column ("overlong") whose weight is --overlong-penalty p
    (``reward_column_weights``), as in the exported script's ``reward_weights``."""
    if not cfg.rewards.overlong_buffer:
        return rewards, per_function
    limit = cfg.generation.max_new_tokens
    buffer = round(cfg.rewards.overlong_buffer * limit)
    p = column_weights({}, cfg)[OVERLONG]
    weighted = overlong_penalty(lengths, limit, buffer, p)                     # p · R(L_i)
    return rewards + weighted, {**per_function, OVERLONG: overlong_penalty(lengths, limit, buffer)}


def column_weights(reward_weights: dict[str, float], cfg) -> dict[str, float]:
    """Name → w_f of every weighted reward column: the step's reward functions' (``reward_weights``), then
    --overlong-penalty p for the overlong column (``cfg.rewards.column_weights``, the one place a weight is
    decided)."""
    return cfg.rewards.column_weights(reward_weights)


def reward_column_weights(names: list[str], reward_weights: dict[str, float], cfg) -> Tensor:
    """[F]: the weight w_f of each reward column of a rollout (``per_function``'s names), so that Σ_f w_f · f_i is
    r_i: ``column_weights``', and 1 for any other column (an environment's own reward)."""
    weights = column_weights(reward_weights, cfg)
    return torch.tensor([float(weights.get(name, 1.0)) for name in names])


def informative(rewards: Tensor, group_size: int) -> Tensor:
    """[groups] bool: the groups whose rewards are not all equal (only they carry a signal)."""
    grouped = rewards.view(-1, group_size)
    return (grouped != grouped[:, :1]).any(dim=1)


def dynamic_sample(first: Rollout, sample_more: Callable[[bool], Rollout | None], group_size: int,
                   max_rounds: int, all_done: Callable[[bool], bool], pad_token_id: int) -> tuple[Rollout, int, int]:
    """DAPO's dynamic sampling: keep the groups with a reward spread, sample further rounds until
    this process has as many informative groups as it first had groups, or ``max_rounds`` rounds
    ran (then uninformative groups fill the rest).

    ``sample_more(wanted)`` draws the next round's prompts (every process draws, so the prompt order
    stays the same everywhere) and samples them only if ``wanted``; ``all_done(mine)`` is True once
    every process is done. Returns (rollout, rounds, completions sampled here).
    """
    need = len(first) // group_size
    kept, spare, generated, rounds = [], [], 0, 0
    current: Rollout | None = first
    while True:
        if current is not None:
            generated += len(current)
            keep = informative(current.rewards, group_size)
            kept.append(current.groups(keep.nonzero().flatten(), group_size))
            spare.append(current.groups((~keep).nonzero().flatten(), group_size))
        rounds += 1
        have = sum(len(r) for r in kept) // group_size
        if all_done(have >= need) or rounds >= max_rounds:
            break
        current = sample_more(have < need)
    pool = concat(kept + spare, pad_token_id)  # informative groups first, then the fill
    return pool.groups(torch.arange(need), group_size), rounds, generated
