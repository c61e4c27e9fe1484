"""Exercise 25 — GDPO: several rewards, each normalised within its group before they are summed (grpo --algo gdpo).

Goes with notebook 6b, section “2 · Two rewards of different scales: GDPO”.

With several reward functions — correctness 0 or 1, a length or format score in the tens — GRPO sums them
first and normalises the sum within each group (exercise 10): the reward with the largest spread then
decides the ranking, and a wrong answer with a good length can outrank a right one. GDPO (arXiv 2601.05242;
TRL's ``multi_objective_aggregation="normalize_then_sum"``) normalises each reward function within its
group first, so that each has the same say, then sums them with their weights and whitens the sum over the
whole batch:

    ř_{i,f} = (r_{i,f} − mean_group(r_f)) / (std_group(r_f) + ε)     each reward function f alone
    s_i     = Σ_f w_f · ř_{i,f}                                       the weights after normalising
    Â_i     = (s_i − mean_batch(s)) / (std_batch(s) + ε)              over all N completions

Both stds are the sample std (Bessel's n − 1, ``torch.std``'s default), as in exercise 10. A group in
which a reward is the same for every completion gets ř = 0 for it (0 / (0 + ε), not NaN). group_size < 2
(a sample std of one value is NaN) or N not a multiple of it: raise ValueError.

    per_function  [N, F]  r_{i,f}: N = prompts · G completions (the G of a prompt adjacent), F reward functions
    weights       [F]     w_f
    group_size    G
    eps           ε
    result        [N]     Â_i

Worked example: one group of four, correctness and a length score ten times larger. Summed first, the
wrong answer with length score +20 would get the largest advantage (``group_relative`` of the sum:
0.57, −0.52, 1.07, −1.12); normalised first, both right answers rank above both wrong ones:

    >>> correct = torch.tensor([1.0, 1.0, 0.0, 0.0])
    >>> length = torch.tensor([10.0, -10.0, 20.0, -20.0])
    >>> decoupled_group_relative(torch.stack([correct, length], dim=1), torch.tensor([1.0, 1.0]), 4)
    tensor([ 0.9996,  0.2250,  0.1623, -1.3869])

Mirrors ``ladder.core.decoupled_group_relative``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run grpo --preset tiny --algo gdpo --use-exercises`` trains with it (the rung's reward
functions are the F columns, the overlong penalty one more of weight 1).
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def decoupled_group_relative(per_function: Tensor, weights: Tensor, group_size: int, eps: float = 1e-4) -> Tensor:
    """Â [N]: each reward function normalised within its group, weighted, summed, whitened over the batch."""
    raise NotImplementedError
