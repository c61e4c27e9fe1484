"""Exercise 4 — advantage whitening (normalisation).

Scale advantages to zero mean and unit variance over the real entries, so the step size does not
depend on the reward scale. With n real entries (``mask = 1``):

    mean = Σ m·x / n
    var  = Σ m·(x − mean)² / (n − 1)        (sample variance; divide by 1 when n = 1)
    x̂    = (x − mean) / sqrt(var + ε)       (then + mean again when shift_mean is False)

and x̂ = 0 on padding.

    x           [B, T]  the values (padding may hold anything, even nan)
    mask        [B, T]  1 for real entries (None: all real)
    shift_mean  bool    False: rescale only, keep the mean
    eps         float   ε: keeps the division finite when every entry is equal
    result      [B, T]  x̂

Careful: nan · 0 is nan. Select the real entries (``torch.where`` or boolean indexing) rather than
multiplying by the mask.

    >>> whiten(torch.tensor([[1., 2., 3.]]))
    tensor([[-1.,  0.,  1.]])
    >>> whiten(torch.tensor([[1., 3., float("nan")]]), torch.tensor([[1., 1., 0.]]))
    tensor([[-0.7071,  0.7071,  0.0000]])
    >>> whiten(torch.tensor([[2., 2.]]))
    tensor([[0., 0.]])

Mirrors ``ladder.core.whiten``. Grade it: ``pytest exercises/``; once it passes,
``python -m ladder.run cartpole --use-exercises`` trains with it.
"""

from __future__ import annotations

import torch  # noqa: F401 - you will need it
from torch import Tensor


def whiten(x: Tensor, mask: Tensor | None = None, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """(x − mean) / sqrt(var + ε) over the real entries; 0 on padding."""
    raise NotImplementedError
