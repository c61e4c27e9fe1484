"""``--multi-objective-aggregation``: how several reward functions become one advantage, each way a spec with its flags.

    SumThenNormalize(scale)   Â from r_i = Σ_f w_f·r_f, normalised within its group (GRPO, RLOO); ``scale`` is
                              ``--scale-rewards``: ÷ the group's std, the batch's, or none
    NormalizeThenSum()        GDPO: each r_f normalised within its group, then Σ_f w_f·ř_f whitened over the batch
                              (``core.decoupled_group_relative``): it scales by itself, so --scale-rewards is refused

``Config.reward_scaling`` holds the chosen spec (None: its defaults); ``scale(cfg)`` is the --scale-rewards a run
uses (None with normalize_then_sum).
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.cli import OneOf
from ladder.specs import ChosenSpec, Param
from ladder.trl.row import TRLRow, param_rows


@dataclass(frozen=True)
class SumThenNormalize:
    scale: str = "group"


@dataclass(frozen=True)
class NormalizeThenSum:
    pass


AGGREGATIONS = {"sum_then_normalize": SumThenNormalize, "normalize_then_sum": NormalizeThenSum}
PARAMS = {
    SumThenNormalize: (Param("scale_rewards", SumThenNormalize, "scale", "advantage scale: group std | batch std | "
                             "none (rloo: none | batch, which whitens Â over the batch)",
                             OneOf(("group", "batch", "none"))),),
    NormalizeThenSum: (),
}
TRL = {"scale_rewards": TRLRow("scale_rewards", "group_relative", "group | batch | none", always=True)}

OPTION = ChosenSpec("reward_scaling", "multi_objective_aggregation", AGGREGATIONS.get, lambda: PARAMS,
                    lambda cls: "--multi-objective-aggregation sum_then_normalize (normalize_then_sum whitens over "
                                "the batch itself)")


def scale(cfg) -> str | None:
    """--scale-rewards as this run uses it (None with normalize_then_sum, which whitens over the batch itself)."""
    return getattr(OPTION.resolve(cfg), "scale", None)


def trl_rows() -> tuple:
    return param_rows(PARAMS[SumThenNormalize], TRL, lambda cfg: True)
