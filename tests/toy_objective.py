"""A new objective in one file: −s·ρ·Â ("toy", a plain surrogate with a scale), with no clip.

It registers everything the grpo rung needs, and touches no other module:

    the objective     ``ScaledRatio``: a ``ladder.core`` spec (its parameter is its field, its term a method)
    its flag          ``--toy-scale`` with a domain (positive); its default is the field's
    its loss type     ``--loss-type toy``: the objective and an aggregation (a token mean)
    its TRL row       none: GRPOTrainer has no such loss, and the map says so (``--export-trl`` lists it)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from ladder import core
from ladder.domains import positive
from ladder.rungs.grpo import loss_types
from ladder.specs import Param
from ladder.trl_rows import TRL


@core.objective
@dataclass(frozen=True)
class ScaledRatio:
    """−s·ρ·Â: the surrogate whose gradient at ρ = 1 is s times the policy gradient."""

    name: ClassVar[str] = "scaled_ratio"
    folds_sampler_weight: ClassVar[bool] = False
    scale: float = 1.0

    def term(self, x: core.PolicyInputs, cfg) -> Tensor:
        return -self.scale * x.ratio * x.advantages


loss_types.register_objective(
    ScaledRatio,
    (Param("toy_scale", ScaledRatio, "scale", "s of the toy objective −s·ρ·Â", positive(),
           trl=(TRL(None, note="GRPOTrainer has no toy loss: its closest is loss_type bnpo with epsilon large enough "
                    "never to clip, and the learning rate × s"),)),))
loss_types.register_loss_type("toy", ScaledRatio, "token_mean", "−s·ρ·Â, a token mean, no clip", in_trl=False)
