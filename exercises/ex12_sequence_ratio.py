"""Exercise 12 — GSPO's sequence-level importance ratio (Zheng et al. 2025; the grpo rung's GSPO).

Goes with notebook 6, section “3 · Tokens: who loses the gradient”.

PPO and GRPO weigh each token by its own ratio ρ_t = π_θ(a_t)/π_old(a_t) and clip token by token.
GSPO gives a whole completion one ratio s_i, the geometric mean of its token ratios, so that the
clip keeps or drops the completion as a whole. As a log, it is the mean token log-ratio:

    log s_i = (1/|y_i|) Σ_t m_t · (log π_θ(a_t) − log π_old(a_t))        |y_i| = Σ_t m_t
    s_i     = (π_θ(y_i) / π_old(y_i))^(1/|y_i|)

    logp      [B, T]  log π_θ(a_t), differentiated
    old_logp  [B, T]  log π_old(a_t), of the policy that sampled the batch
    mask      [B, T]  1 for real tokens (right-padded; a row may be empty)
    result    [B, 1]  log s_i, one per completion (2-D, so that it broadcasts over the tokens)

Divide by the row's real tokens |y_i|, not by T. A row without real tokens gets log s = 0 (s = 1),
not nan. Padding may hold anything, inf and nan included: it must reach neither the result nor
its gradient. Select the real entries (``torch.where``) rather than multiplying by the mask.

Worked example: row 0 has two real tokens, log-ratios 0.2 and −0.4, so log s = −0.1; row 1 is empty.

    >>> logp = torch.tensor([[-1.0, -2.0, 7.0], [7.0, 7.0, 7.0]])
    >>> old_logp = torch.tensor([[-1.2, -1.6, float("nan")], [0.0, 0.0, 0.0]])
    >>> sequence_log_ratio(logp, old_logp, torch.tensor([[1., 1., 0.], [0., 0., 0.]]))
    tensor([[-0.1000],
            [ 0.0000]])

Mirrors ``ladder.core.sequence_log_ratio``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run grpo --preset tiny --qlora --algo gspo --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def sequence_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """log s_i = the mean of log π_θ − log π_old over row i's real tokens, [B, 1]; 0 for an empty row."""
    raise NotImplementedError
