"""Exercise 27 — the DPO loss: the reward model folded into the policy (dpo).

Goes with notebook 9, section “4 · DPO: the reward was in the policy all along”.

RLHF maximises E[r(x, y)] − β·KL(π_θ‖π_ref). Its optimum has a closed form, π*(y|x) = π_ref(y|x)·exp(r(x, y)/β) / Z(x),
so the reward can be read off the optimal policy: r(x, y) = β·log π*(y|x)/π_ref(y|x) + β·log Z(x). Put π_θ in the
place of π* and that reward into exercise 26's Bradley–Terry likelihood: Z(x) is the same for y_w and y_l and
cancels. What is left needs no reward model and no sampling — only log-probs of the pairs' completions:

    r̂(x, y)  = β · (log π_θ(y|x) − log π_ref(y|x))         the implicit reward; log π(y|x) = Σ_t log π(y_t | x, y_<t)
    L_DPO    = −(1/N) · Σ_i log σ(r̂(x_i, y_w,i) − r̂(x_i, y_l,i))        over N pairs

Its gradient is a policy gradient on the pairs' fixed completions, weighted by how wrong the pair still is:

    ∂L_DPO/∂log π_θ(y_w,i) = −β·σ(r̂_l,i − r̂_w,i) / N,    ∂L_DPO/∂log π_θ(y_l,i) = +β·σ(r̂_l,i − r̂_w,i) / N

π_ref's log-probs are constants (no gradient). Use ``torch.nn.functional.logsigmoid`` (exercise 26).

    chosen_logp        [N]  log π_θ(y_w,i | x_i), summed over the completion's tokens, with its graph
    rejected_logp      [N]  log π_θ(y_l,i | x_i), with its graph
    ref_chosen_logp    [N]  log π_ref(y_w,i | x_i), a constant
    ref_rejected_logp  [N]  log π_ref(y_l,i | x_i), a constant
    beta               β > 0
    result             []   L_DPO, a scalar, differentiable in the two log π_θ

Worked example, β = ½: in the first pair π_θ already favours y_w over π_ref (r̂_w = ¼, r̂_l = −¼), in the second it
favours y_l (r̂_w = 0, r̂_l = ½):

    >>> chosen = torch.tensor([-10.0, -12.0], requires_grad=True)
    >>> rejected = torch.tensor([-11.0, -9.0], requires_grad=True)
    >>> ref_chosen, ref_rejected = torch.tensor([-10.5, -12.0]), torch.tensor([-10.5, -10.0])
    >>> loss = dpo_loss(chosen, rejected, ref_chosen, ref_rejected, 0.5)
    >>> round(loss.item(), 4)       # (−log σ(0.5) − log σ(−0.5)) / 2 = (0.4741 + 0.9741) / 2
    0.7241
    >>> loss.backward()
    >>> chosen.grad                 # −β·σ(r̂_l − r̂_w)/2: the pair ranked wrong pulls harder
    tensor([-0.0944, -0.1556])
    >>> rejected.grad
    tensor([0.0944, 0.1556])

At the start π_θ = π_ref: every r̂ is 0 and the loss is log 2, whatever β.

``core.update`` reaches it through the objective ``ladder.core.DPO(beta)``, which sums each row's token log-probs
(``sequence_logp``) in a ``[2B, T]`` batch of pairs: row 2i the chosen completion, row 2i + 1 the rejected one.

Mirrors ``ladder.core.dpo_loss``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run dpo --preset tiny --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
import torch.nn.functional as F  # noqa: F401,N812 - F.logsigmoid
from torch import Tensor


def dpo_loss(chosen_logp: Tensor, rejected_logp: Tensor, ref_chosen_logp: Tensor, ref_rejected_logp: Tensor,
             beta: float) -> Tensor:
    """L_DPO = −mean log σ(r̂_w − r̂_l), r̂ = β·(log π_θ − log π_ref) of each completion."""
    raise NotImplementedError
