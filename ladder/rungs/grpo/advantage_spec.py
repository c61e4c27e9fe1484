"""grpo's advantages: how the rewards of a group become Â, each way a spec with its flags.

    SumThenNormalize(estimator, scale)   Â from r_i = Σ_f w_f·r_f within its group: ``--advantage`` group
                                         (r − mean, GRPO) or rloo (leave-one-out), ``--scale-rewards`` ÷ the
                                         group's std, the batch's, or none
    NormalizeThenSum()                   GDPO: each r_f normalised within its group, then Σ_f w_f·ř_f whitened over
                                         the batch (``core.decoupled_group_relative``): it needs the group baseline
                                         and scales by itself, so --advantage rloo and --scale-rewards are refused

``Config.advantages`` holds one, its class the choice that ``--multi-objective-aggregation`` names.
``estimator(cfg)`` and ``scale(cfg)`` are what a run uses (None with normalize_then_sum).
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import OneOf
from ladder.specs import Param, UnionSpec, choice_param
from ladder.trl_rows import RLOO, SAME, TRL


@dataclass(frozen=True)
class SumThenNormalize:
    estimator: str = "group"   # --advantage
    scale: str = "group"       # --scale-rewards

    def conflict(self) -> str | None:
        if self.estimator == "rloo" and self.scale == "group":
            return ("--advantage rloo takes --scale-rewards none or batch; dividing by the group's std turns it into "
                    "GRPO's advantage times G/(G−1)")
        return None


@dataclass(frozen=True)
class NormalizeThenSum:
    pass


AGGREGATIONS = {"sum_then_normalize": SumThenNormalize, "normalize_then_sum": NormalizeThenSum}
PARAMS = {
    SumThenNormalize: (
        Param("advantage", SumThenNormalize, "estimator", "group: Â_i = (r_i − mean_group) / scale (GRPO); rloo: "
              "Â_i = r_i − mean of the other G − 1 rewards (leave-one-out)", OneOf(("group", "rloo")),
              trl=(TRL(None, "leave_one_out", "GRPOTrainer has no leave-one-out advantage; with the same "
                       "--scale-rewards none it is the group advantage × G/(G−1), i.e. a learning rate × G/(G−1) "
                       "(batch: whitened the same way). TRL's RLOOTrainer has it",
                       applies=lambda cfg: estimator(cfg) == "rloo"),)),
        Param("scale_rewards", SumThenNormalize, "scale", "advantage scale: group std | batch std | none (rloo: none "
              "| batch, which whitens Â over the batch)", OneOf(("group", "batch", "none")),
              trl=(TRL("scale_rewards", "group_relative", "group | batch | none", SAME, always=True),
                   TRL("normalize_advantages", "leave_one_out", "True ↔ --scale-rewards batch (Â whitened over the "
                       "batch), False ↔ none", cls=RLOO, always=True)))),
    NormalizeThenSum: (),
}
GDPO_NEEDS = ("--multi-objective-aggregation normalize_then_sum normalises each reward function's scores: it needs "
              "--advantage group and --kl-in loss")


def _refusal(flags: str, value) -> str:
    """SumThenNormalize's flags under normalize_then_sum: GDPO's baseline is the group's; it scales by itself."""
    if "--advantage" in flags.split(", "):
        return GDPO_NEEDS
    return (f"{flags} {'has' if ', ' not in flags else 'have'} no effect without --multi-objective-aggregation "
            "sum_then_normalize (normalize_then_sum whitens over the batch itself)")


def _name(spec) -> str | None:
    return next((name for name, cls in AGGREGATIONS.items() if type(spec) is cls), None)


CHOICE = choice_param(
    "multi_objective_aggregation", "with several reward functions: sum_then_normalize (Â from Σ_f w_f·r_f) or "
    "normalize_then_sum (GDPO: each r_f normalised within its group, then Σ_f w_f·ř_f whitened over the batch; "
    "--scale-rewards does not apply)", OneOf(AGGREGATIONS), "sum_then_normalize",
    (TRL("multi_objective_aggregation", "decoupled_group_relative", "sum_then_normalize (group_relative of Σ_f "
         "w_f·r_f) | normalize_then_sum (GDPO)", SAME),))
OPTION = UnionSpec("advantages", CHOICE, AGGREGATIONS.get, _name, lambda: PARAMS,
                   lambda cls: "--multi-objective-aggregation sum_then_normalize",
                   refusals=lambda: {SumThenNormalize: _refusal}, before="reward_timeout")  # after the rewards


def estimator(cfg) -> str | None:
    """--advantage as this run uses it: group or rloo (None with normalize_then_sum, GDPO's own)."""
    return getattr(cfg.advantages, "estimator", None)


def scale(cfg) -> str | None:
    """--scale-rewards as this run uses it (None with normalize_then_sum, which whitens over the batch itself)."""
    return getattr(cfg.advantages, "scale", None)


def decoupled(cfg) -> bool:
    """GDPO's normalize_then_sum: each reward function normalised within its group first."""
    return isinstance(cfg.advantages, NormalizeThenSum)
