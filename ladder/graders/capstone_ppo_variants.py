"""Common wrong forms of Capstone I's gae and loss, recomputed: when a learner's answer is not the contract's,
the grader names the variant it equals (on every input it tried), or keeps the plain numbers when none does.

    gae_variant(m) -> str | None                    the wrong GAE the learner's gae computes, in words
    loss_variant(agent, mb, eps, c_v, c_H, loss)    the wrong loss whose value the learner's loss has
"""

from __future__ import annotations

from types import ModuleType

import torch
from torch import Tensor

from .capstone_ppo_cases import close, gae_cases

GAE_VARIANTS = {   # what is wrong, in words: the arguments of _gae that compute it
    "a truncation does not cut the trace (d_t = terminated only): use d_t = terminated or truncated": dict(cut=False),
    "a truncation is bootstrapped with 0, as a termination: V_next = final_values where truncated only": dict(
        truncated_next="zero"),
    "V_next = V(s_{t+1}) where truncated, the next episode's first obs: use final_values there": dict(
        truncated_next="next"),
    "terminated and truncated both set are bootstrapped with final_values: terminated wins (V_next = 0)": dict(
        both="truncated"),
    "the returns lack V, R_t = Â_t: R_t = Â_t + V(s_t)": dict(returns_with_values=False),
}


def _gae(c: dict, cut: bool = True, truncated_next: str = "final", both: str = "terminated",
         returns_with_values: bool = True) -> tuple[Tensor, Tensor]:
    """GAE as the contract says, or one of its variants (see GAE_VARIANTS)."""
    terminated, truncated, values = c["terminated"].bool(), c["truncated"].bool(), c["values"]
    following = torch.cat([values[:, 1:], c["last_values"][:, None]], dim=1)
    cut_off = {"final": c["final_values"], "zero": torch.zeros_like(values), "next": following}[truncated_next]
    next_values = torch.where(truncated, cut_off, following)
    ended = terminated & ~truncated if both == "truncated" else terminated
    next_values = torch.where(ended, 0.0, next_values)
    not_done = 1.0 - ((terminated | truncated) if cut else terminated).float()
    deltas = c["rewards"] + c["gamma"] * next_values - values
    advantages, running = torch.zeros_like(values), torch.zeros(len(values))
    for t in reversed(range(values.shape[1])):
        running = deltas[:, t] + c["gamma"] * c["lam"] * not_done[:, t] * running
        advantages[:, t] = running
    return advantages, advantages + values if returns_with_values else advantages


def gae_variant(m: ModuleType) -> str | None:
    """The variant of GAE that the learner's gae equals on every one of the grader's cases (None: none)."""
    cases = [c for _, c in gae_cases()]
    got = [m.gae(**{k: v.clone() if torch.is_tensor(v) else v for k, v in c.items()}) for c in cases]
    for words, variant in GAE_VARIANTS.items():
        if all(close(g[0], e[0]) and close(g[1], e[1]) for g, e in zip(got, (_gae(c, **variant) for c in cases))):
            return words
    return None


def _whitened(adv: Tensor, unbiased: bool = True) -> Tensor:
    return (adv - adv.mean()) / (adv.std(unbiased=unbiased) + 1e-8)


LOSS_VARIANTS = {   # what is wrong, in words: (how Â is taken, whether the ratio is inverted)
    "Â not whitened over the minibatch: Â ← (Â − mean Â) / (std Â + 1e-8) first": (lambda a: a, False),
    "the ratio inverted, π_old/π_θ: ρ = exp(log π_θ(a|s) − log π_old(a|s))": (_whitened, True),
    "Â whitened by the population std (÷ n): use torch's unbiased std (÷ (n − 1)), Â.std()": (
        lambda a: _whitened(a, unbiased=False), False),
}


@torch.no_grad()
def _loss(agent, mb: dict, eps: float, c_v: float, c_h: float, advantages, inverted: bool) -> float:
    """The contract's loss, or a variant: Â taken by ``advantages``, ρ = π_old/π_θ where ``inverted``."""
    _, logp, entropy, values = agent.get_action_and_value(mb["obs"], mb["actions"])
    adv = advantages(mb["advantages"])
    ratio = (mb["logp"] - logp if inverted else logp - mb["logp"]).exp()
    pg_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()
    return float(pg_loss + c_v * 0.5 * ((values - mb["returns"]) ** 2).mean() - c_h * entropy.mean())


def loss_variant(agent, mb: dict, eps: float, c_v: float, c_h: float, loss: float) -> str | None:
    """The variant of the loss whose value on this minibatch the learner's ``loss`` is (None: none)."""
    for words, (advantages, inverted) in LOSS_VARIANTS.items():
        if close(loss, _loss(agent, mb, eps, c_v, c_h, advantages, inverted)):
            return words
    return None
