"""Exercise 26 — the Bradley–Terry loss: how a reward model learns from pairs (reward-model).

Goes with notebook 9, section “1 · From preferences to a reward: Bradley–Terry”.

A labeller is shown two completions of one prompt x and says which is better: y_w (chosen) ≻ y_l (rejected). No
one writes down a number. Bradley and Terry (1952) model the choice as a coin weighted by a hidden score r: the
wider the gap, the surer the choice,

    P(y_w ≻ y_l | x) = σ(r(x, y_w) − r(x, y_l))            σ(z) = 1 / (1 + e^(−z))

and a reward model r_φ (a language model with a scalar head) is fitted by maximum likelihood over N pairs:

    L_BT = −(1/N) · Σ_i log σ(r_w,i − r_l,i − m_i)         m_i: an optional margin (None: 0), which asks for a
                                                           gap of at least about m_i before the pair stops pulling
    ∂L_BT/∂r_w,i = −σ(−(r_w,i − r_l,i − m_i)) / N           large while the pair is ranked wrong, small once right

(A margin per pair comes with the data — TRL's RewardTrainer reads a ``margin`` column, e.g. how strongly the labeller
preferred y_w; ladder's reward-model rung passes none.)

Only differences of scores enter: r_φ + c ranks every pair as r_φ does and has the same loss, so a reward model's
scores have no zero of their own. Use ``torch.nn.functional.logsigmoid`` rather than ``torch.log(torch.sigmoid(·))``:
in float32 σ(z) is 0 below z ≈ −88.7 (where e^(−z) overflows) and its log is −inf; logsigmoid stays finite.

    chosen_rewards    [N]  r_φ(x_i, y_w,i), with its graph
    rejected_rewards  [N]  r_φ(x_i, y_l,i), with its graph
    margin            [N]  m_i, a constant, or None
    result            []   L_BT, a scalar, differentiable in both rewards

Worked example: three pairs whose gaps are 2, 0 and −2 (the last ranked wrong):

    >>> chosen = torch.tensor([2.0, 0.0, -1.0], requires_grad=True)
    >>> rejected = torch.tensor([0.0, 0.0, 1.0])
    >>> loss = bradley_terry_loss(chosen, rejected)
    >>> round(loss.item(), 4)       # (−log σ(2) − log σ(0) − log σ(−2)) / 3 = (0.1269 + 0.6931 + 2.1269) / 3
    0.9823
    >>> loss.backward()
    >>> chosen.grad                 # −σ(−Δ)/3: the pair ranked wrong pulls hardest
    tensor([-0.0397, -0.1667, -0.2936])
    >>> round(bradley_terry_loss(torch.tensor([2.0]), torch.tensor([0.0]), torch.tensor([1.0])).item(), 4)
    0.3133

``core.update`` reaches it through the objective ``"bradley_terry"`` (``ladder.core.BradleyTerry``), which reads a
``[2B, 1]`` batch of pairs: row 2i the chosen sequence's score, row 2i + 1 the rejected one's.

Mirrors ``ladder.core.bradley_terry_loss``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run reward-model --preset tiny --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
import torch.nn.functional as F  # noqa: F401,N812 - F.logsigmoid
from torch import Tensor


def bradley_terry_loss(chosen_rewards: Tensor, rejected_rewards: Tensor, margin: Tensor | None = None) -> Tensor:
    """L_BT = −mean log σ(r_w − r_l − m) over the pairs (m: a margin per pair, None: 0)."""
    raise NotImplementedError
