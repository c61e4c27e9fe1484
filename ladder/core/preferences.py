"""Learning from preference pairs (prompt x, chosen y_w, rejected y_l): a reward model's Bradley–Terry loss, and DPO.

    Bradley–Terry   P(y_w ≻ y_l | x) = σ(r(x, y_w) − r(x, y_l)), fitted by
                    L_BT = −mean log σ(r(x, y_w) − r(x, y_l) − m)               (m: an optional margin per pair)
    DPO             the KL-regularised objective max E[r] − β·KL(π_θ‖π_ref) has the optimum
                    π*(y|x) ∝ π_ref(y|x)·exp(r(x, y)/β), so r(x, y) = β·log π*(y|x)/π_ref(y|x) + β·log Z(x);
                    in the Bradley–Terry likelihood Z(x) cancels between y_w and y_l, and with π_θ in place of π*:
                    r̂(x, y) = β·(log π_θ(y|x) − log π_ref(y|x))                (the implicit reward)
                    L_DPO = −mean log σ(r̂(x, y_w) − r̂(x, y_l))

log π(y|x) of a completion is the sum of its tokens' log-probs (``sequence_logp``); ``pair_statistics`` says how
many pairs a score ranks right, and by what margin. These are TRL 1.16's
``RewardTrainer`` loss and ``DPOTrainer``'s ``loss_type="sigmoid"`` (tests/test_trl_parity_preferences.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .swappable import swappable


def sequence_logp(token_logp: Tensor, mask: Tensor) -> Tensor:
    """``[B]`` log π(y|x) = Σ_t mask_t · log π(y_t | x, y_<t) of ``[B, T]`` token log-probs."""
    return (token_logp * mask).sum(dim=1)


@swappable
def bradley_terry_loss(chosen_rewards: Tensor, rejected_rewards: Tensor, margin: Tensor | None = None) -> Tensor:
    """L_BT = −mean log σ(r_w − r_l − m) over the ``[B]`` pairs (m: a margin per pair, None: 0)."""
    difference = chosen_rewards - rejected_rewards
    return -F.logsigmoid(difference if margin is None else difference - margin).mean()


def implicit_reward(logp: Tensor, ref_logp: Tensor, beta: float) -> Tensor:
    """``[B]`` r̂(x, y) = β·(log π_θ(y|x) − log π_ref(y|x)), DPO's reward of a completion."""
    return beta * (logp - ref_logp)


@swappable
def dpo_loss(chosen_logp: Tensor, rejected_logp: Tensor, ref_chosen_logp: Tensor, ref_rejected_logp: Tensor,
             beta: float) -> Tensor:
    """L_DPO = −mean log σ(r̂_w − r̂_l) over the ``[B]`` pairs, from sequence log-probs (``sequence_logp``) under π_θ
    and π_ref: r̂ = β·(log π_θ − log π_ref), ``implicit_reward``."""
    chosen_reward = implicit_reward(chosen_logp, ref_chosen_logp, beta)
    rejected_reward = implicit_reward(rejected_logp, ref_rejected_logp, beta)
    return -F.logsigmoid(chosen_reward - rejected_reward).mean()


@torch.no_grad()
def pair_statistics(chosen_scores: Tensor, rejected_scores: Tensor) -> dict[str, Tensor]:
    """What a batch of ``[B]`` pair scores says, detached: the pairs ranked right (``accuracy``: r_w > r_l) and the
    mean margin r_w − r_l."""
    difference = chosen_scores - rejected_scores
    return {"accuracy": (difference > 0).float().mean(), "margin": difference.mean()}
