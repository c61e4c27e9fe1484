"""How grpo scores a completion: the reward functions, their weights and DAPO's soft overlong penalty — one spec.

    Rewards(overlong_buffer, overlong_penalty, funcs, weights)
        function_weights()   name → w_f of each reward function (``--reward-weights``; default all 1)
        column_weights()     the weight of every weighted reward column: w_f, then the overlong column's p with a
                             buffer — the one place a weight is decided (the rollout's r_i, GDPO's columns and TRL's
                             ``reward_weights`` all read it)

``Config.rewards`` holds it, built from ``--overlong-buffer``, ``--overlong-penalty``, ``--reward-funcs`` and
``--reward-weights``; ``--overlong-penalty`` without a buffer is refused (it would weigh nothing).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ladder import rewards
from ladder.domains import Text, coefficient, interval
from ladder.specs import FixedSpec, Param
from ladder.trl_rows import GRPO_TRAINER, RLOO, TRL, reward_weights

OVERLONG = "overlong"  # the overlong penalty's reward column: R(L_i) at p = 1, weighed by --overlong-penalty p


@dataclass(frozen=True)
class Rewards:
    overlong_buffer: float = 0.0         # the last fraction of --max-new-tokens where the reward falls (0: off)
    overlong_penalty: float = 1.0        # p: the penalty at --max-new-tokens
    funcs: str = "correctness,format"    # --reward-funcs
    weights: str | None = None           # --reward-weights (None: all 1)

    def function_weights(self) -> dict[str, float]:
        """Name → weight w_f of each reward function."""
        return rewards.weights(self.funcs, self.weights)

    def column_weights(self, function_weights: dict[str, float] | None = None) -> dict[str, float]:
        """Name → w_f of every weighted reward column: the functions' (``function_weights``, or this spec's own),
        then the overlong penalty's p with a buffer (TRL's ``reward_weights``, in this order)."""
        own = self.function_weights() if function_weights is None else function_weights
        return {**own, **({OVERLONG: self.overlong_penalty} if self.overlong_buffer else {})}

    def conflict(self) -> str | None:
        unused = self.overlong_penalty != _default("overlong_penalty") and not self.overlong_buffer
        return "--overlong-penalty has no effect without --overlong-buffer" if unused else None


def _default(name: str):
    return {f.name: f.default for f in dataclasses.fields(Rewards)}[name]


OVERLONG_TRL = "trl.rewards"  # DAPO's overlong punishment, one more reward function of GRPOTrainer's


def _with_buffer(cfg) -> bool:
    return cfg.rewards.overlong_buffer > 0


FUNCS_TRL = (TRL("reward_funcs", note="ladder's fn(completions, answers) wrapped as TRL's fn(completions, answer, "
                 "**columns)", cls=GRPO_TRAINER),)
PARAMS = (
    Param("overlong_buffer", Rewards, "overlong_buffer", "DAPO's soft overlong penalty: the last fraction of "
          "--max-new-tokens in which the reward falls linearly to −penalty (0: off; DAPO 0.2)",
          interval(0, 1, open_high=True),
          trl=(TRL("get_soft_overlong_punishment", note="DAPO's soft overlong punishment as one more reward function "
                   "(soft_punish_cache = buffer × L_max)", applies=_with_buffer, cls=OVERLONG_TRL),)),
    Param("overlong_penalty", Rewards, "overlong_penalty", "p: the penalty at --max-new-tokens with --overlong-buffer, "
          "the weight of the overlong reward column (TRL: its entry in reward_weights)", coefficient(),
          trl=(TRL("get_soft_overlong_punishment", note="its weight in reward_weights", applies=_with_buffer,
                   cls=OVERLONG_TRL),)),
    Param("reward_funcs", Rewards, "funcs", "reward functions, comma-separated: built-in names (correctness, format) "
          "or FILE.py:FUNCTION or MODULE:FUNCTION, each called as fn(completions, answers) -> list of floats", Text(),
          trl=FUNCS_TRL),
    Param("reward_weights", Rewards, "weights", "one weight per reward function, comma-separated (default: all 1)",
          Text(), trl=(TRL("reward_weights", note="one weight per reward function (+ --overlong-penalty for the "
                           "overlong reward)", value=reward_weights),
                       TRL("reward_weights", cls=RLOO))),
)
OPTION = FixedSpec("rewards", Rewards, PARAMS)


def option_with_funcs(funcs: str, help: str, trl: tuple = FUNCS_TRL) -> FixedSpec:
    """The same spec with another default, help and TRL names for ``--reward-funcs`` (the agent rung's)."""
    params = tuple(dataclasses.replace(p, help=help, own_default=funcs, trl=trl) if p.flag == "reward_funcs" else p
                   for p in PARAMS)
    return FixedSpec("rewards", Rewards, params)
