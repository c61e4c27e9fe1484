"""Exercise 10 — group-relative advantages (GRPO, DeepSeekMath; rung 4).

Goes with notebook 5, section “Dropping the critic”.

GRPO needs no critic: it samples G completions per prompt and compares each one's reward with the
others of its group. The G completions of a prompt are adjacent in ``rewards``.

    Â_i = (r_i − mean(r_group)) / (std + ε)

    rewards     [N]    N = prompts · G
    group_size  int    G, at least 2, with N a multiple of G (otherwise: raise ValueError)
    scale       str    "group": std is the group's sample std (n − 1)
                       "batch": std is the sample std of all N rewards
                       "none":  no division at all, Â_i = r_i − mean (Dr. GRPO)
                       anything else: raise ValueError
    eps         float  ε, added to the std (not under the square root)
    result      [N]    Â_i

A group whose rewards are all equal teaches nothing: its Â is 0 (and not nan — that is what ε is for).
Worked example: rewards (1, 0, 0, 0), one group: mean 0.25, std 0.5, so Â ≈ (1.5, −0.5, −0.5, −0.5).

    >>> group_relative(torch.tensor([1., 0., 0., 0.]), group_size=4)
    tensor([ 1.4997, -0.4999, -0.4999, -0.4999])
    >>> group_relative(torch.tensor([1., 1., 0., 1.]), group_size=2, scale="none")
    tensor([ 0.0000,  0.0000, -0.5000,  0.5000])

Hint: ``rewards.view(-1, group_size)`` puts one group per row.
Mirrors ``ladder.core.group_relative``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run grpo --preset tiny --qlora --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def group_relative(rewards: Tensor, group_size: int, scale: str = "group", eps: float = 1e-4) -> Tensor:
    """Â_i = (r_i − mean of its group) / (std + ε)."""
    raise NotImplementedError
