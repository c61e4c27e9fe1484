"""The optimiser's step size and its clip — one spec, its flags.

    Optimisation(lr, warmup_steps, max_grad_norm)
        lr             the learning rate (the loop's ``LearningRate``: linear warmup, then constant)
        warmup_steps   updates over which the rate rises linearly to lr (0: none)
        max_grad_norm  the gradient-norm clip of every optimiser step (``core.UpdateConfig``)

``Config.optimisation`` holds it, built from ``--lr``, ``--warmup-steps`` and ``--max-grad-norm``. Which optimiser
(``--optim``) is ``efficiency``'s: it changes memory, not the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import MAX_SCALE, MAX_STEPS, count, learning_rate, positive
from ladder.specs import FixedSpec, Param
from ladder.trl_rows import RLOO, SAME, TRL, optimizer_steps


@dataclass(frozen=True)
class Optimisation:
    lr: float = 1e-5
    warmup_steps: int = 0
    max_grad_norm: float = 1.0


PARAMS = (
    Param("lr", Optimisation, "lr", "learning rate", learning_rate(),
          trl=(TRL("learning_rate", value=SAME), TRL("learning_rate", cls=RLOO))),
    Param("warmup_steps", Optimisation, "warmup_steps", "linear learning-rate warmup over the first N updates (0: "
          "none)", count(0, MAX_STEPS),
          trl=(TRL("lr_scheduler_type", note="ladder keeps the rate constant after the warmup; TRL's default decays "
                   "it linearly to 0", value=lambda cfg: "constant_with_warmup" if cfg.optimisation.warmup_steps
                   else "constant"),
               TRL("warmup_steps", note="× μ × M optimiser steps; TRL's first step has rate 0, ladder's lr/N",
                   value=lambda cfg: optimizer_steps(cfg, cfg.optimisation.warmup_steps)))),
    Param("max_grad_norm", Optimisation, "max_grad_norm", "gradient-norm clip", positive(MAX_SCALE),
          trl=(TRL("max_grad_norm", "update", "gradient-norm clip per optimiser step", SAME),
               TRL("max_grad_norm", "update", cls=RLOO))),
)

OPTION = FixedSpec("optimisation", Optimisation, PARAMS)
