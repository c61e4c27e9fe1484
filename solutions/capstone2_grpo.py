"""Solution to capstone II — GRPO on the tiny instruct model, one file: sampler, reward, loss, update, loop.

    sample           a KV-cached decode loop: log π_old of every sampled token, at the temperature τ
    completion_logp  log π_θ(c_t | prompt, c_<t) from one forward of prompt + completion (the shift by one)
    reward           1 if the number after the last '####' is the answer, else 0
    group_advantages Â_i = (r_i − mean of its group) / (std + ε)        (exercise 10)
    grpo_loss        clipped surrogate + β·k3(π_θ‖π_ref), mean over tokens, then over completions
    update           π_old recorded, then μ optimiser steps on one rollout
    train            the loop: prompts → G completions each → rewards → Â → update
"""

from __future__ import annotations

import copy
import random
import re

import torch
from ex10_group_relative import group_relative
from ex16_token_logp import token_logp
from torch import Tensor

FINAL_ANSWER = re.compile(r"####\s*([-+]?\d+)")


def positions_of(attention_mask: Tensor) -> Tensor:
    """Position ids that skip left padding: a row's first real token is position 0 (rotary embeddings, as here,
    give the same attention numbered by column; absolute ones, as GPT-2's, need these)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


@torch.no_grad()
def sample(model, prompt_ids: Tensor, prompt_mask: Tensor, max_new_tokens: int, temperature: float,
           eos_token_id: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Completions of left-padded prompts: (ids [B, T] long, mask [B, T] float, log π [B, T] float32), T ≤
    max_new_tokens; each row ends at its first EOS (a real token), after which the mask and log π are 0."""
    B = prompt_ids.shape[0]
    attention = prompt_mask.long()
    positions = positions_of(attention)
    out = model(input_ids=prompt_ids, attention_mask=attention, position_ids=positions, use_cache=True)
    finished = torch.zeros(B, dtype=torch.bool)
    tokens, logps, masks = [], [], []
    for _ in range(max_new_tokens):
        logp_all = torch.log_softmax(out.logits[:, -1].float() / temperature, dim=-1)     # [B, V] at τ
        token = torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(-1)
        token = torch.where(finished, eos_token_id, token)                                # filler after EOS
        tokens.append(token)
        logps.append(torch.where(finished, 0.0, logp_all.gather(-1, token[:, None]).squeeze(-1)))
        masks.append((~finished).float())
        finished = finished | (token == eos_token_id)
        if finished.all():
            break
        attention = torch.cat([attention, torch.ones(B, 1, dtype=attention.dtype)], dim=1)
        positions = positions[:, -1:] + 1
        out = model(input_ids=token[:, None], attention_mask=attention, position_ids=positions,
                    cache=out.cache, use_cache=True)
    return torch.stack(tokens, 1), torch.stack(masks, 1), torch.stack(logps, 1)


def completion_logp(model, prompt_ids: Tensor, prompt_mask: Tensor, completion_ids: Tensor, completion_mask: Tensor,
                    temperature: float) -> Tensor:
    """log π_θ(c_t | prompt, c_<t) at τ, [B, T] float32, 0 where completion_mask is 0.

    The logits at position P − 1 + t predict completion token t (P: the padded prompt's length)."""
    P = prompt_ids.shape[1]
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attention = torch.cat([prompt_mask.long(), completion_mask.long()], dim=1)
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions_of(attention)).logits
    return token_logp(logits[:, P - 1:], ids[:, P - 1:], completion_mask, temperature)    # [B, T] (exercise 16)


def reward(completions: list[str], answers: list[str]) -> Tensor:
    """r_i = 1 if the integer after the last '####' of completion i equals answer i, else 0; [N] float32."""
    rewards = []
    for completion, answer in zip(completions, answers):
        finals = FINAL_ANSWER.findall(completion)
        rewards.append(float(bool(finals) and int(finals[-1]) == int(answer)))
    return torch.tensor(rewards)


def group_advantages(rewards: Tensor, group_size: int) -> Tensor:
    """Â_i = (r_i − mean(r_group)) / (std(r_group) + 1e-4), the G completions of a prompt adjacent; [N]."""
    return group_relative(rewards, group_size)


def grpo_loss(model, rollout: dict, clip_eps: float, beta: float, temperature: float) -> Tensor:
    """L = mean_i (1/|o_i|) Σ_t [ −min(ρ_t Â_i, clip(ρ_t, 1 ± ε) Â_i) + β·k3_t ],

        ρ_t  = π_θ(c_t)/π_old(c_t),     ℓ_t = log π_ref(c_t) − log π_θ(c_t),
        k3_t = e^{ℓ_t} − 1 − ℓ_t = π_ref/π_θ − log(π_ref/π_θ) − 1      (estimates KL(π_θ‖π_ref), ≥ 0)
    """
    logp = completion_logp(model, rollout["prompt_ids"], rollout["prompt_mask"], rollout["completion_ids"],
                           rollout["completion_mask"], temperature)
    mask = rollout["completion_mask"].bool()
    advantages = rollout["advantages"][:, None]                                      # one Â per completion
    ratio = torch.exp(torch.where(mask, logp - rollout["old_logp"], 0.0))
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip_eps, 1 + clip_eps) * advantages)
    log_ref_ratio = torch.where(mask, rollout["ref_logp"] - logp, 0.0)
    k3 = torch.expm1(log_ref_ratio) - log_ref_ratio
    per_token = torch.where(mask, -surrogate + beta * k3, 0.0)
    per_completion = per_token.sum(1) / mask.sum(1).clamp(min=1)                    # mean over its tokens
    return per_completion.mean()                                                     # then over completions


def update(model, optimizer: torch.optim.Optimizer, rollout: dict, mu: int, clip_eps: float, beta: float,
           temperature: float, max_grad_norm: float = 1.0) -> list[float]:
    """μ optimiser steps on one rollout, π_old recorded once before the first; returns the μ losses."""
    with torch.no_grad():                                # π_old: the weights as they are now, no graph
        old_logp = completion_logp(model, rollout["prompt_ids"], rollout["prompt_mask"], rollout["completion_ids"],
                                   rollout["completion_mask"], temperature)
    rollout = {**rollout, "old_logp": old_logp}
    losses = []
    for _ in range(mu):
        loss = grpo_loss(model, rollout, clip_eps, beta, temperature)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        losses.append(loss.item())
    return losses


def make_rollout(model, ref_model, tokenizer, problems: list[dict], group_size: int, max_new_tokens: int,
                 temperature: float, generator: torch.Generator) -> tuple[dict, Tensor]:
    """G completions of each problem, with their rewards, Â and log π_ref: (rollout, rewards [N])."""
    rows = [p for p in problems for _ in range(group_size)]                        # a prompt's G copies adjacent
    prompts, answers = [p["prompt"] for p in rows], [p["answer"] for p in rows]
    enc = tokenizer(prompts, return_tensors="pt", padding=True)                     # left-padded
    ids, mask, logp = sample(model, enc.input_ids, enc.attention_mask, max_new_tokens, temperature,
                             tokenizer.eos_token_id, generator)
    texts = tokenizer.batch_decode(torch.where(mask.bool(), ids, tokenizer.pad_token_id), skip_special_tokens=True)
    rewards = reward(texts, answers)
    rollout = dict(prompt_ids=enc.input_ids, prompt_mask=enc.attention_mask, completion_ids=ids,
                   completion_mask=mask, advantages=group_advantages(rewards, group_size))
    with torch.no_grad():
        rollout["ref_logp"] = completion_logp(ref_model, enc.input_ids, enc.attention_mask, ids, mask, temperature)
    log_ref_ratio = torch.where(mask.bool(), rollout["ref_logp"] - logp, 0.0)        # ℓ_t: log π_ref − log π_old
    k3 = torch.expm1(log_ref_ratio) - log_ref_ratio
    rollout["kl"] = (k3.sum() / mask.sum()).item()                                   # mean per real token
    return rollout, rewards


def train(model, tokenizer, problems: list[dict], steps: int = 20, seed: int = 0, prompts_per_step: int = 8,
          group_size: int = 8, mu: int = 2, lr: float = 1e-4, beta: float = 0.04, clip_eps: float = 0.2,
          temperature: float = 1.0, max_new_tokens: int = 28) -> tuple[torch.nn.Module, list[dict]]:
    """GRPO: ``steps`` rollouts of prompts_per_step × G completions, each followed by μ optimiser steps.
    Returns (the trained model, one dict per step: mean reward, losses, KL to π_ref). Every random choice comes
    from ``seed`` (the prompts from ``rng``, the draws from ``generator``); the contract's functions are called
    by their module-level names."""
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    ref_model = copy.deepcopy(model).requires_grad_(False)          # π_ref: frozen before any step
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    history = []
    for step in range(steps):
        rollout, rewards = make_rollout(model, ref_model, tokenizer, rng.sample(problems, prompts_per_step),
                                        group_size, max_new_tokens, temperature, generator)
        losses = update(model, optimizer, rollout, mu, clip_eps, beta, temperature)
        history.append({"step": step, "reward": rewards.mean().item(), "kl": rollout["kl"], "losses": losses})
    return model, history
