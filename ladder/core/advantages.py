"""Advantage estimators: how much better was a_t than expected?

REINFORCE uses returns-to-go, PPO uses GAE with a critic, GRPO uses group-relative rewards
without one. All work on ``[B, T]`` tensors.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .batch import last_step_mask
from .swappable import swappable


@swappable
def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """Reward-to-go of each row, each row one whole trajectory (padding after its end).

        G_t = r_t + γ · G_{t+1},    G_{T-1} = r_{T-1}

    Padded steps (``mask = 0``) carry no reward and get G_t = 0.
    """
    rewards = torch.where(mask.bool(), rewards, 0.0)
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + gamma * running
        returns[:, t] = running
    return returns * mask


@swappable
def gae(rewards: Tensor, values: Tensor, dones: Tensor, gamma: float, lam: float,
        last_values: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016).

        δ_t = r_t + γ · V(s_{t+1}) · (1 − d_t) − V(s_t)
        Â_t = δ_t + γλ · (1 − d_t) · Â_{t+1}
        R_t = Â_t + V(s_t)                                    (the value target)

    ``dones[b, t] = 1`` when the trajectory ended after step t (no bootstrapping past it).
    ``last_values[b]`` = V(s_T) bootstraps a segment cut off at the edge of the rollout
    (None: zero, i.e. every row ends inside the tensor, as a completion does).
    Returns (advantages, returns), both [B, T].
    """
    B, T = rewards.shape
    if last_values is None:
        last_values = torch.zeros_like(values[:, 0])
    not_done = 1.0 - dones.to(rewards.dtype)
    next_values = torch.cat([values[:, 1:], last_values[:, None]], dim=1)
    deltas = rewards + gamma * next_values * not_done - values
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(T)):
        running = deltas[:, t] + gamma * lam * not_done[:, t] * running
        advantages[:, t] = running
    return advantages, advantages + values


@swappable
def masked_gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """GAE over the tokens of right-padded completions (RLHF-PPO's per-token rewards, rung 3).

    Each row is one episode that ends at its last real token: d_t = [t = last real token], so
    nothing is bootstrapped past it (V after EOS is 0), and padding never reaches a real token.

        Â, R = gae(r·m, V·m, d; γ, λ)        then both · m: 0 on padding

    (·m selects: padding may hold anything, NaN included.) With γ = λ = 1, Â_0 = Σ_t r_t − V_0: the first
    token's advantage is the whole row's reward minus its value. Returns (advantages, returns), both [B, T].
    """
    real = mask.bool()
    rewards, values = torch.where(real, rewards, 0.0), torch.where(real, values, 0.0)
    advantages, returns = gae(rewards, values, last_step_mask(mask.to(rewards.dtype)), gamma, lam)
    return torch.where(real, advantages, 0.0), torch.where(real, returns, 0.0)


@swappable
def group_relative(rewards: Tensor, group_size: int, scale: str = "group", eps: float = 1e-4) -> Tensor:
    """GRPO's advantage (DeepSeekMath): each completion's reward against its own group.

    ``rewards`` is [N] with N = num_prompts · G, the G completions of a prompt adjacent.

        Â_i = (r_i − mean(r_group)) / (std + ε)

    where std is the group's std (``scale="group"``), the whole batch's (``"batch"``), or 1
    (``"none"``, Dr. GRPO). A group whose rewards are all equal gets Â = 0 — no signal, no NaN.
    Returns [N]; every token of completion i shares Â_i.
    """
    if group_size < 2:
        raise ValueError(f"group_size must be at least 2, got {group_size}")
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not form groups of {group_size}")
    grouped = rewards.view(-1, group_size)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale == "group":
        std = grouped.std(dim=1, keepdim=True)
    elif scale == "batch":
        std = rewards.std()
    elif scale == "none":
        return centred.reshape(-1)
    else:
        raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    return (centred / (std + eps)).reshape(-1)


@swappable
def decoupled_group_relative(per_function: Tensor, weights: Tensor, group_size: int, eps: float = 1e-4) -> Tensor:
    """Several rewards, each normalised within its group before they are summed (GDPO, arXiv 2601.05242;
    TRL's ``multi_objective_aggregation="normalize_then_sum"``), then the sum whitened over the batch:

        ř_{i,f} = (r_{i,f} − mean_group(r_f)) / (std_group(r_f) + ε)      each reward function f alone
        s_i     = Σ_f w_f · ř_{i,f}
        Â_i     = (s_i − mean_batch(s)) / (std_batch(s) + ε)

    ``per_function`` [N, F] (the G completions of a prompt adjacent), ``weights`` [F]; std is the
    sample std (Bessel), as ``group_relative``'s. Summing first (``group_relative`` of Σ_f w_f r_f)
    lets the reward with the largest spread decide the advantage; normalising each first gives every
    reward function the same say within a group, and distinct reward combinations keep distinct
    advantages. Returns [N].
    """
    if group_size < 2:
        raise ValueError(f"group_size must be at least 2, got {group_size}")
    if per_function.shape[0] % group_size:
        raise ValueError(f"{per_function.shape[0]} rewards do not form groups of {group_size}")
    grouped = per_function.view(-1, group_size, per_function.shape[1])
    normalised = (grouped - grouped.mean(dim=1, keepdim=True)) / (grouped.std(dim=1, keepdim=True) + eps)
    summed = (normalised.reshape(per_function.shape) * weights.to(per_function.dtype)).sum(dim=1)
    return (summed - summed.mean()) / (summed.std() + eps)


@swappable
def group_relative_turns(turn_rewards: Tensor, turn_mask: Tensor, group_size: int, eps: float = 1e-4) -> Tensor:
    """Per-turn credit: DeepSeekMath's GRPO with process supervision, a turn of a multi-turn trajectory
    taking the place of a reasoning step.

    ``turn_rewards`` [N, K]: r_{i,k}, the reward of turn k of trajectory i (the trajectory's own reward
    added to its last turn); ``turn_mask`` [N, K]: 1 on the turns trajectory i has. Every reward of a
    group (all turns of its G trajectories) is normalised by the group's mean and std, and a turn's
    advantage is the sum of the normalised rewards from it on:

        r̃_{i,k} = (r_{i,k} − mean(R_group)) / (std(R_group) + ε)
        Â_{i,k} = Σ_{j ≥ k} r̃_{i,j}

    Returns [N, K] (0 on absent turns); every token of turn k of trajectory i gets Â_{i,k}.
    """
    if turn_rewards.shape[0] % group_size:
        raise ValueError(f"{turn_rewards.shape[0]} trajectories do not form groups of {group_size}")
    N, K = turn_rewards.shape
    present = turn_mask.to(turn_rewards.dtype)
    rewards, in_group = turn_rewards.reshape(-1, group_size * K), present.reshape(-1, group_size * K)  # a group a row
    count = in_group.sum(1, keepdim=True).clamp(min=1.0)
    mean = (rewards * in_group).sum(1, keepdim=True) / count
    std = ((((rewards - mean) * in_group) ** 2).sum(1, keepdim=True) / (count - 1).clamp(min=1.0)).sqrt()
    normalised = ((rewards - mean) / (std + eps) * in_group).view(N, K)
    return normalised.flip(1).cumsum(1).flip(1) * present


@swappable
def leave_one_out(rewards: Tensor, group_size: int, scale: str = "none", eps: float = 1e-4) -> Tensor:
    """RLOO's advantage (Kool et al. 2019; Ahmadian et al. 2024): the baseline of completion i is the
    mean reward of the *other* G − 1 completions of its prompt, so it does not depend on r_i itself.

        Â_i = r_i − (1/(G−1)) Σ_{j≠i} r_j  =  G/(G−1) · (r_i − mean(r_group))

    ``scale="batch"`` then whitens Â over the whole batch, (Â − mean Â)/(std Â + ε) (TRL's
    ``normalize_advantages``); ``"none"`` leaves it as is (the paper). Returns [N], groups adjacent.
    """
    if group_size < 2:
        raise ValueError(f"group_size must be at least 2, got {group_size}")
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not form groups of {group_size}")
    grouped = rewards.view(-1, group_size)
    baseline = (grouped.sum(dim=1, keepdim=True) - grouped) / (group_size - 1)
    advantages = (grouped - baseline).reshape(-1)
    if scale == "batch":
        return (advantages - advantages.mean()) / (advantages.std() + eps)
    if scale != "none":
        raise ValueError(f"scale must be 'none' or 'batch' for leave-one-out, got {scale!r}")
    return advantages


@swappable
def whiten(x: Tensor, mask: Tensor | None = None, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Normalise to zero mean and unit variance over the real entries.

        x̂ = (x − mean) / sqrt(var + ε)        (mean added back when ``shift_mean`` is False)

    Padded entries are returned as 0.
    """
    if mask is None:
        mask = torch.ones_like(x)
    real = mask.bool()
    x = torch.where(real, x, 0.0)
    n = real.sum()
    mean = x.sum() / n.clamp(min=1)
    var = torch.where(real, x - mean, 0.0).pow(2).sum() / (n - 1).clamp(min=1)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return torch.where(real, out, 0.0)
