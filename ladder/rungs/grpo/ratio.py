"""The importance ratio π_θ/π_old and its clip range — one spec, its flags.

    Ratio(level, clip_eps, clip_eps_high)
        level          token: one ratio per token (GRPO) | sequence: the geometric mean of the token ratios (GSPO)
        clip_eps       ε: the ratio clipped below at 1 − ε (PPO's ε, TRL's epsilon)
        clip_eps_high  ε_high: clipped above at 1 + ε_high (None: ε, symmetric; decided once, by ``settle.eps_high``)

``Config.ratio`` holds it, built from ``--ratio-level``, ``--clip-eps`` (formerly ``--clip-eps-low``) and
``--clip-eps-high``; ``--loss-type`` is listed between the first two (``loss_types``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder import core
from ladder.core.update import RATIO_LEVELS
from ladder.domains import OneOf, interval
from ladder.specs import FixedSpec, Param
from ladder.trl_rows import RLOO, SAME, TRL


@dataclass(frozen=True)
class Ratio:
    level: str = "token"
    clip_eps: float = 0.2
    clip_eps_high: float | None = None


PARAMS = (
    Param("ratio_level", Ratio, "level", "importance ratio per token (GRPO) or per sequence (GSPO: the geometric mean "
          "of the token ratios; use ε ≈ 3e-4/4e-4, as --algo gspo does)", OneOf(RATIO_LEVELS),
          trl=(TRL("importance_sampling_level", "sequence_log_ratio", "token (GRPO) | sequence (GSPO)", SAME),)),
    Param("clip_eps", Ratio, "clip_eps", "ε: the ratio is clipped below at 1 − ε (and above at 1 + --clip-eps-high); "
          "PPO's ε, TRL's epsilon", interval(0, 1, open_low=True, open_high=True), aliases=("--clip-eps-low",),
          trl=(TRL("epsilon", "clipped_surrogate", "ratio clipped below at 1 − ε", SAME),
               TRL("epsilon", "clipped_surrogate", "RLOOTrainer clips one ratio of summed log-probs per completion, "
                   "ladder per token (tests/test_trl_parity_grpo pins the difference)", cls=RLOO))),
    Param("clip_eps_high", Ratio, "clip_eps_high", "ε_high: the ratio clipped above at 1 + ε_high (default: "
          "--clip-eps; 0.28 is DAPO's clip-higher; TRL's epsilon_high)",
          interval(0, 1, open_low=True, open_high=True),
          trl=(TRL("epsilon_high", "clipped_surrogate", "ratio clipped above at 1 + ε_high", SAME,
                   lambda cfg: not isinstance(cfg.objective, core.CISPO)),
               TRL("epsilon_high", "clipped_surrogate", cls=RLOO))),
)

OPTION = FixedSpec("ratio", Ratio, PARAMS)
