"""Exercise 28 — the teacher's reward: every sampled token scored against a stronger model (distill).

Goes with notebook 10, section “1 · The teacher's reward on every token”.

On-policy distillation: the student π_θ samples a completion y of a prompt x, as in GRPO; then a frozen, stronger
teacher π_teacher reads the same tokens and says how likely it finds each one. The reward of token t is how much
more the teacher likes it than the student does:

    r_t = −(log π_θ(y_t | x, y_<t) − log π_teacher(y_t | x, y_<t))          on a real token; 0 on padding

It is exercise 7's k1 estimate of the reverse KL, negated, with π_teacher in π_ref's place:
r_t = −k1(log π_θ, log π_teacher). Where GRPO's rule reward gives a completion one number, every token gets its own.
Summed without discount (``distill --discount 1``, γ = 1: G_t = Σ_{t' ≥ t} r_t'), the policy gradient is, in
expectation over the student's samples, the sequence-level reverse KL's:

    E_{y ~ π_θ}[ Σ_t ∇log π_θ(y_t | y_<t) · G_t ] = −∇ KL(π_θ ‖ π_teacher)      over whole completions

so the student moves to where the teacher puts its mass (mode-seeking), on the prefixes it reaches itself. Minus the
sum of a row's rewards, Σ_t (log π_θ − log π_teacher), is that KL's one-sample estimate (it can be negative).
The reward is a number, not a path for gradients: the rung computes both log-probs without grad.

    logp          [B, T]  log π_θ(y_t) of each sampled token (the student's, π_old when it sampled)
    teacher_logp  [B, T]  log π_teacher(y_t) of the same tokens
    mask          [B, T]  1 on the completion's real tokens, 0 on padding
    result        [B, T]  r_t, 0 on padding — whatever logp and teacher_logp hold there (junk, nan, −inf)

Worked example: two completions, the second one token shorter (its padding holds junk and nan). The student is
sure of the second row's first token (−0.1) where the teacher is not (−2.3): −2.2. It doubts the first row's second
token (−2.0) that the teacher likes (−0.5): +1.5:

    >>> logp = torch.tensor([[-0.5, -2.0, -1.0], [-0.1, -3.0, 7.0]])
    >>> teacher_logp = torch.tensor([[-0.7, -0.5, -1.3], [-2.3, -2.6, float("nan")]])
    >>> mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    >>> rewards = distillation_rewards(logp, teacher_logp, mask)
    >>> rewards
    tensor([[-0.2000,  1.5000, -0.3000],
            [-2.2000,  0.4000,  0.0000]])
    >>> -rewards.sum(dim=1)         # Σ_t (log π_θ − log π_teacher): each completion's k1 estimate of the reverse KL
    tensor([-1.0000,  1.8000])

Multiplying by the mask is not enough: nan · 0 is nan. Keep the result's dtype that of the log-probs (the two come
in the same dtype).

``distill`` calls it on every rollout (``ladder.rungs.distill.teacher.scored_by``), then credits each token with
``discounted_returns(rewards, mask, --discount)`` (exercise 1): with no baseline subtracted, the token's advantage
Â_t is that return G_t (γ = 0, the default: Â_t = r_t).

Mirrors ``ladder.core.distillation_rewards``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run distill --preset tiny --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def distillation_rewards(logp: Tensor, teacher_logp: Tensor, mask: Tensor) -> Tensor:
    """r_t = −(log π_θ − log π_teacher)(y_t) on each real token, 0 on padding."""
    raise NotImplementedError
