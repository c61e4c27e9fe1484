"""Exercise 4 — advantage whitening (normalisation).

Goes with notebook 1, section “A baseline”.

Whitening is met twice: notebook 1 whitens the returns as REINFORCE's baseline (``--baseline whiten``),
notebook 2 whitens PPO's GAE advantages per minibatch; the sheet is numbered with notebook 2's
exercises, after GAE. Scale advantages to zero mean and unit variance over the real entries. With n
real entries (``mask = 1``):

    mean = Σ m·x / n
    var  = Σ m·(x − mean)² / (n − 1)        (sample variance; divide by 1 when n = 1)
    x̂    = (x − mean) / sqrt(var + ε)       (then + mean again when shift_mean is False)

and x̂ = 0 on padding.

What whitening the advantages does to the policy gradient Σ Â · ∇log π (exercise 2) — two things,
and only the first leaves the expected gradient (nearly) as it was:

    − mean            a baseline. A b that does not depend on the sampled action changes nothing in
                      expectation: E[b · ∇log π] = b · Σ_a ∇π(a) = 0. (The batch mean is not quite
                      such a b: it holds each sample's own value, which scales that sample's
                      expected term by 1 − 1/n for n independent samples. Exercise 13's
                      leave-one-out baseline avoids that.)
    / sqrt(var + ε)   a rescaling. The batch's gradient keeps the direction of the mean-subtracted
                      one and is divided by sqrt(var + ε), a number measured on the batch itself,
                      so the expected gradient is rescaled. Under plain SGD that acts like a
                      learning rate set by the reward scale. Under Adam (every rung here) a constant
                      factor on the whole loss changes the step only through Adam's ε; what the
                      division does change is: every batch gets the same scale, so a batch of large
                      returns does not outweigh the others in Adam's running averages, nor do late
                      batches (longer episodes, larger returns) outweigh early ones; the policy
                      term's weight against the terms it is not applied to (value loss, entropy
                      bonus); and whether the gradient-norm clip (max_grad_norm) cuts the step.

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
