"""The inputs every exercise is graded on: hand-picked cases first, then seeded random ones.

Hand cases are the ones a label can explain (γ = 0, an episode ending mid-row, a group whose
rewards are all equal, padding holding nan); random cases vary shapes, masks and options.
Padding holds junk on purpose, so an ignored mask shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

OUTPUTS = {"gae": ("advantages", "returns"), "masked_gae": ("advantages", "returns"),
           "kl_penalized_rewards": ("rewards", "kl"), "kl_in_reward": ("rewards", "kl"),
           "trajectory_tensors": ("completion", "mask", "attention_mask")}
JUNK = 7.0  # what padding holds when it has to stay finite


@dataclass
class Case:
    label: str
    inputs: dict                 # keyword arguments of the function
    grad: tuple[str, ...] = ()   # inputs whose gradient is compared
    updates: tuple[str, ...] = ()              # inputs changed in place (the function returns None): compared after
    raises: type[Exception] | None = None      # the core rejects these inputs: the learner's must raise this too
    check: Callable[[Callable, Callable], None] | None = None  # compares by running both (raises Mismatch)

    def describe(self) -> str:
        return "  ".join(f"{k}={fmt(v)}" for k, v in self.inputs.items())


class Mismatch(Exception):
    """One case went wrong; the message says how."""


def fmt(x) -> str:
    """A small tensor as a nested list rounded to 4 decimals (a list of them, each so); anything else as its repr."""
    if isinstance(x, Tensor):
        x = x.detach()
        return str(_round(x.tolist() if x.is_floating_point() else x.long().tolist()))
    if isinstance(x, torch.nn.Module):
        return f"<{type(x).__name__}>"
    if type(x).__name__ == "Batch":
        return f"<Batch of {len(x)} rows × {x.actions.shape[1]}>"
    if isinstance(x, list) and x and all(isinstance(v, Tensor) for v in x):
        return "[" + ", ".join(fmt(v) for v in x) + "]"
    return repr(x)


def _round(v):
    return [_round(u) for u in v] if isinstance(v, list) else round(v, 4) if isinstance(v, float) else v


def t(x) -> Tensor:
    return torch.tensor(x, dtype=torch.float32)


def lengths_mask(lengths: list[int], T: int) -> Tensor:
    """[B, T] right-padded mask: row b has ``lengths[b]`` real steps."""
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).float()


def padded(x: Tensor, mask: Tensor, fill: float = JUNK) -> Tensor:
    return torch.where(mask.bool(), x, fill)


def shapes(g: torch.Generator, n: int = 5, empty_rows: bool = True):
    """n random (B, T, mask) with B ≤ 3 and T ≤ 6, rows of random length (maybe 0)."""
    for _ in range(n):
        B, T = (int(torch.randint(lo, hi, (), generator=g)) for lo, hi in ((1, 4), (1, 7)))
        lengths = torch.randint(0 if empty_rows else 1, T + 1, (B,), generator=g)
        lengths[0] = T  # at least one full row
        yield B, T, lengths_mask(lengths.tolist(), T)


def pick(g: torch.Generator, options):
    return options[int(torch.randint(len(options), (), generator=g))]


def randn(g: torch.Generator, *shape, scale: float = 1.0) -> Tensor:
    return scale * torch.randn(*shape, generator=g)


def discounted_returns() -> list[Case]:
    cases = [
        Case("three rewards of 1, γ = 0.5", dict(rewards=t([[1, 1, 1]]), mask=torch.ones(1, 3), gamma=0.5)),
        Case("γ = 0: each step keeps only its own reward", dict(rewards=t([[1, 2, 3]]), mask=torch.ones(1, 3),
                                                                  gamma=0.0)),
        Case("γ = 1: plain sums to the end", dict(rewards=t([[1, 2, 3]]), mask=torch.ones(1, 3), gamma=1.0)),
        Case("padded rows: padding holds junk, adds nothing and gets G = 0",
             dict(rewards=t([[1, 2, JUNK, JUNK], [3, JUNK, JUNK, JUNK]]), mask=lengths_mask([2, 1], 4), gamma=0.9)),
        Case("an empty row", dict(rewards=t([[JUNK, JUNK], [1, 1]]), mask=lengths_mask([0, 2], 2), gamma=0.9)),
    ]
    g = torch.Generator().manual_seed(1)
    for B, T, mask in shapes(g):
        cases.append(Case(f"random {B}×{T} with padding", dict(rewards=padded(randn(g, B, T), mask), mask=mask,
                                                               gamma=pick(g, (0.5, 0.9, 0.99)))))
    return cases


def pg_loss() -> list[Case]:
    cases = [Case("−Â · log π for three actions", dict(logp=t([[-0.5, -1.0, -2.0]]), advantages=t([[2, -1, 0]])),
                  grad=("logp",))]
    g = torch.Generator().manual_seed(2)
    for B, T, _ in shapes(g, 4):
        cases.append(Case(f"random {B}×{T}", dict(logp=-3 * torch.rand(B, T, generator=g),
                                                  advantages=randn(g, B, T)), grad=("logp",)))
    return cases


def gae() -> list[Case]:
    ones3, zeros3, halves = torch.ones(1, 3), torch.zeros(1, 3), t([[0.5, 0.5, 0.5]])
    cases = [
        Case("one step, last_values omitted (no bootstrap)", dict(rewards=t([[1.0]]), values=t([[0.5]]),
                                                                  dones=t([[0.0]]), gamma=0.9, lam=0.95)),
        Case("λ = 0: Â_t is the one-step TD error δ_t",
             dict(rewards=ones3, values=halves, dones=zeros3, gamma=0.9, lam=0.0, last_values=t([2.0]))),
        Case("λ = 1: Â_t is the discounted return (bootstrapped) minus V(s_t)",
             dict(rewards=ones3, values=halves, dones=zeros3, gamma=0.9, lam=1.0, last_values=t([2.0]))),
        Case("an episode ends after step 1 (d_1 = 1): nothing flows back across it",
             dict(rewards=ones3, values=t([[0.5, 0.4, 0.3]]), dones=t([[0, 1, 0]]), gamma=0.9, lam=0.95,
                  last_values=t([1.0]))),
        Case("two rows cut off by the rollout, bootstrapped from last_values",
             dict(rewards=t([[1, 0], [0, 1]]), values=t([[0.2, 0.4], [0.1, 0.3]]), dones=torch.zeros(2, 2),
                  gamma=0.99, lam=0.9, last_values=t([1.0, -1.0]))),
        Case("the last step is done: last_values is not used",
             dict(rewards=ones3, values=halves, dones=t([[0, 0, 1]]), gamma=0.9, lam=0.9, last_values=t([5.0]))),
    ]
    g = torch.Generator().manual_seed(3)
    for B, T, _ in shapes(g, 5):
        inputs = dict(rewards=randn(g, B, T), values=randn(g, B, T),
                      dones=(torch.rand(B, T, generator=g) < 0.25).float(),
                      gamma=pick(g, (0.9, 0.99)), lam=pick(g, (0.8, 0.95)))
        if pick(g, (True, False)):
            inputs["last_values"] = randn(g, B)
        cases.append(Case(f"random {B}×{T} with episode ends", inputs))
    return cases


def whiten() -> list[Case]:
    nan = float("nan")
    cases = [
        Case("[1, 2, 3] → [−1, 0, 1]: the variance divides by n − 1", dict(x=t([[1, 2, 3]]))),
        Case("padding (here nan) is ignored and comes back as 0",
             dict(x=t([[1, 2, nan], [3, nan, nan]]), mask=lengths_mask([2, 1], 3))),
        Case("all equal: zero spread gives 0, not nan (ε guards the division)", dict(x=t([[2, 2, 2]]))),
        Case("a single real entry", dict(x=t([[5, JUNK]]), mask=lengths_mask([1], 2))),
        Case("shift_mean=False adds the mean back", dict(x=t([[1, 2, 3, 6]]), shift_mean=False)),
        Case("a larger ε", dict(x=t([[1, 2, 3]]), eps=1.0)),
    ]
    g = torch.Generator().manual_seed(4)
    for B, T, mask in shapes(g, 5, empty_rows=False):
        fill = pick(g, (JUNK, nan))
        cases.append(Case(f"random {B}×{T} with padding", dict(x=padded(randn(g, B, T, scale=3.0) + 1, mask, fill),
                                                               mask=mask, shift_mean=pick(g, (True, False)))))
    return cases


def clipped_surrogate() -> list[Case]:
    cases = [
        Case("inside [1 − ε, 1 + ε] both branches agree", dict(ratio=t([[0.9, 1.1]]), advantages=t([[1, -1]]),
                                                               clip_eps_low=0.2), grad=("ratio",)),
        Case("Â > 0: the gain stops growing at ρ = 1 + ε", dict(ratio=t([[1.5, 0.5]]), advantages=t([[1, 1]]),
                                                               clip_eps_low=0.2), grad=("ratio",)),
        Case("Â < 0: the gain stops growing at ρ = 1 − ε", dict(ratio=t([[0.5, 1.5]]), advantages=t([[-1, -1]]),
                                                               clip_eps_low=0.2), grad=("ratio",)),
        Case("clip-higher: ε_low = 0.2 below, ε_high = 0.28 above",
             dict(ratio=t([[0.7, 0.75, 1.25, 1.3]]), advantages=t([[-1, -1, 1, 1]]), clip_eps_low=0.2,
                  clip_eps_high=0.28), grad=("ratio",)),
        Case("clip_eps_high=None means ε_high = ε_low",
             dict(ratio=t([[0.7, 1.3]]), advantages=t([[-2, 2]]), clip_eps_low=0.2, clip_eps_high=None),
             grad=("ratio",)),
        Case("two-sided (c = 2): with Â < 0 the unclipped branch stops at min(ρ, c) = 2; under c, or Â > 0, as before",
             dict(ratio=t([[3.0, 2.5, 1.5, 3.0]]), advantages=t([[-2, -0.5, -1, 1]]), clip_eps_low=0.2, delta=2.0),
             grad=("ratio",)),
        Case("two-sided with clip-higher: c = 1.5 above 1 + ε_high = 1.28",
             dict(ratio=t([[1.4, 1.7, 0.6]]), advantages=t([[-1, -3, -1]]), clip_eps_low=0.2, clip_eps_high=0.28,
                  delta=1.5), grad=("ratio",)),
        Case("delta=None: no cap, a large ρ with Â < 0 keeps growing",
             dict(ratio=t([[3.0, 0.5]]), advantages=t([[-2, -1]]), clip_eps_low=0.2, delta=None), grad=("ratio",)),
    ]
    g = torch.Generator().manual_seed(5)
    for B, T, _ in shapes(g, 6):
        inputs = dict(ratio=torch.exp(randn(g, B, T, scale=0.5)), advantages=randn(g, B, T),
                      clip_eps_low=pick(g, (0.1, 0.2)))
        if pick(g, (True, False)):
            inputs["clip_eps_high"] = pick(g, (0.2, 0.28, 0.4))
        if pick(g, (True, False)):
            inputs["delta"] = pick(g, (1.5, 2.0))
        cases.append(Case(f"random {B}×{T}" + (f", c = {inputs['delta']}" if "delta" in inputs else ""), inputs,
                          grad=("ratio",)))
    return cases


def value_loss() -> list[Case]:
    cases = [
        Case("no clip: ½ (V − R)²", dict(values=t([[1, 2]]), old_values=t([[0, 0]]), returns=t([[0, 3]])),
             grad=("values",)),
        Case("clip 0.2: V moved 0.5 towards its target — held at 0.7, the clipped error is the larger",
             dict(values=t([[1.0, 0.5]]), old_values=t([[0.5, 0.5]]), returns=t([[2.0, 0.0]]), clip=0.2),
             grad=("values",)),
        Case("clip 0.2: V overshot its target — the unclipped error is the larger",
             dict(values=t([[1.0]]), old_values=t([[0.5]]), returns=t([[0.6]]), clip=0.2), grad=("values",)),
    ]
    g = torch.Generator().manual_seed(6)
    for B, T, _ in shapes(g, 5):
        values = randn(g, B, T)
        inputs = dict(values=values, old_values=values + randn(g, B, T, scale=0.3), returns=randn(g, B, T),
                      clip=pick(g, (None, 0.2, 0.5)))
        cases.append(Case(f"random {B}×{T}", inputs, grad=("values",)))
    return cases


def kl_random(g: torch.Generator, B: int, T: int) -> dict:
    logp = -3 * torch.rand(B, T, generator=g)
    return dict(logp=logp, ref_logp=logp + randn(g, B, T, scale=0.5))


def kl_estimators() -> list[Case]:
    logp, ref = t([[-1.0, -2.0, -0.5]]), t([[-1.5, -1.0, -0.5]])
    cases = [Case(f"{k} on three tokens", dict(logp=logp, ref_logp=ref, estimator=k), grad=("logp",))
             for k in ("k1", "k2", "k3")]
    cases.append(Case("estimator omitted: k3", dict(logp=logp, ref_logp=ref), grad=("logp",)))
    cases.append(Case("an unknown estimator: a ValueError, not a silent fallback",
                      dict(logp=logp, ref_logp=ref, estimator="k4"), raises=ValueError))
    g = torch.Generator().manual_seed(7)
    for B, T, _ in shapes(g, 3):
        for k in ("k1", "k2", "k3"):
            cases.append(Case(f"random {B}×{T}, {k}", dict(**kl_random(g, B, T), estimator=k), grad=("logp",)))
    return cases


def kl_corrected() -> list[Case]:
    logp, ref = t([[-1.0, -2.0, -0.5]]), t([[-1.5, -1.0, -0.5]])
    cases = [
        Case("π_θ = π_old: the weight is 1 (its gradient is not 0)",
             dict(logp=logp, ref_logp=ref, estimator="k3", old_logp=logp.clone()), grad=("logp",)),
        Case("π_θ has moved from π_old: each estimate weighted by π_θ/π_old",
             dict(logp=logp, ref_logp=ref, estimator="k3", old_logp=t([[-1.2, -1.5, -0.9]])), grad=("logp",)),
        Case("old_logp omitted: the plain estimate of exercise 7", dict(logp=logp, ref_logp=ref, estimator="k2"),
             grad=("logp",)),
        Case("an unknown estimator, with old_logp: a ValueError, not a silent fallback",
             dict(logp=logp, ref_logp=ref, estimator="k4", old_logp=t([[-1.2, -1.5, -0.9]])), raises=ValueError),
    ]
    g = torch.Generator().manual_seed(8)
    for B, T, _ in shapes(g, 3):
        for k in ("k1", "k2", "k3"):
            inputs = kl_random(g, B, T)
            inputs.update(estimator=k, old_logp=inputs["logp"] + randn(g, B, T, scale=0.2))
            cases.append(Case(f"random {B}×{T}, {k}, with old_logp", inputs, grad=("logp",)))
    return cases


def kl_penalized_rewards() -> list[Case]:
    mask = lengths_mask([3, 2], 3)
    old = padded(t([[-1.0, -2.0, -0.5], [-0.3, -0.7, 0]]), mask)
    ref = padded(t([[-1.5, -1.0, -0.5], [-0.2, -1.0, 0]]), mask, -JUNK)  # junk that would give KL ≠ 0
    cases = [
        Case("score on each row's last real token, −β·KL on every token (estimator omitted: k1)",
             dict(scores=t([1.0, -1.0]), old_logp=old, ref_logp=ref, mask=mask, kl_coef=0.1)),
        Case("k3 and a larger β", dict(scores=t([1.0, -1.0]), old_logp=old, ref_logp=ref, mask=mask, kl_coef=0.5,
                                       estimator="k3")),
        Case("an empty row gets no score and no KL",
             dict(scores=t([2.0, 1.0]), old_logp=t([[JUNK, JUNK], [-1.0, -1.0]]), ref_logp=t([[JUNK, 0], [-2.0, -1.0]]),
                  mask=lengths_mask([0, 2], 2), kl_coef=0.1)),
        Case("an unknown estimator: a ValueError, not a silent fallback",
             dict(scores=t([1.0, -1.0]), old_logp=old, ref_logp=ref, mask=mask, kl_coef=0.1, estimator="k4"),
             raises=ValueError),
    ]
    g = torch.Generator().manual_seed(9)
    for B, T, mask in shapes(g, 5):
        kl = kl_random(g, B, T)
        inputs = dict(old_logp=padded(kl["logp"], mask), ref_logp=padded(kl["ref_logp"], mask, -JUNK))
        cases.append(Case(f"random {B}×{T} with padding", dict(scores=randn(g, B), **inputs, mask=mask,
                                                               kl_coef=pick(g, (0.05, 0.2)),
                                                               estimator=pick(g, ("k1", "k2", "k3")))))
    return cases


TOY_CASES = {
    "ex01_discounted_returns": discounted_returns, "ex02_reinforce_loss": pg_loss, "ex03_gae": gae,
    "ex04_whiten": whiten, "ex05_clipped_surrogate": clipped_surrogate, "ex06_value_loss": value_loss,
    "ex07_kl_estimators": kl_estimators, "ex08_kl_corrected": kl_corrected, "ex09_kl_rewards": kl_penalized_rewards,
}
