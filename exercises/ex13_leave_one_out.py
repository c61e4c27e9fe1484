"""Exercise 13 — RLOO's leave-one-out advantages (Kool et al. 2019; Ahmadian et al. 2024; grpo rung).

Goes with notebook 6, section “4 · The league”.

Like GRPO (exercise 10), RLOO samples G completions per prompt and needs no critic. Its baseline
for completion i is the mean reward of the *other* G − 1 completions of the prompt, so that the
baseline does not depend on r_i itself (GRPO's group mean includes r_i). The G completions of a
prompt are adjacent in ``rewards``.

    Â_i = r_i − (1/(G−1)) Σ_{j≠i} r_j  =  G/(G−1) · (r_i − mean(r_group))

    rewards     [N]    N = prompts · G
    group_size  int    G, at least 2
    scale       str    "none":  Â as above (the paper)
                       "batch": Â whitened over all N, (Â − mean Â) / (std Â + ε), sample std
                                (n − 1), as TRL's normalize_advantages does
    eps         float  ε, added to the std (not under the square root)
    result      [N]    Â_i

Raise ValueError when group_size < 2 (there is no other completion), when N is not a multiple of
G, and for any other scale ("group" included: dividing by the group's std would make it GRPO's
advantage times G/(G−1)). All rewards equal with scale="batch" gives 0, not nan.

Worked example: rewards (1, 0, 0, 0), one group. The baseline of the first is 0, that of each
other one is 1/3: Â = (1, −1/3, −1/3, −1/3), which is 4/3 · (r − 0.25).

    >>> leave_one_out(torch.tensor([1., 0., 0., 0.]), group_size=4)
    tensor([ 1.0000, -0.3333, -0.3333, -0.3333])
    >>> leave_one_out(torch.tensor([0.5, 1., 3., 1.]), group_size=2)
    tensor([-0.5000,  0.5000,  2.0000, -2.0000])

Hint: the others' sum is the group's sum minus r_i; ``rewards.view(-1, group_size)`` puts one
group per row.
Mirrors ``ladder.core.leave_one_out``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run grpo --preset tiny --qlora --algo rloo --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def leave_one_out(rewards: Tensor, group_size: int, scale: str = "none", eps: float = 1e-4) -> Tensor:
    """Â_i = r_i − the mean reward of the other G − 1 completions of its prompt."""
    raise NotImplementedError
