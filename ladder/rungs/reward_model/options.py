"""The reward-model rung's options: one ``Config`` (the preference rungs' ``PreferenceOptions`` and its own), the
``tiny`` preset, and the rules between options, the preference rungs' (``validate``)."""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import MAX_ROWS, Text, count
from ladder.options import option
from ladder.rungs import preference_options
from ladder.rungs.preference_options import DEFAULT_MODEL, PreferenceOptions
from ladder.trl_rows import REWARD, TRL


@dataclass
class Config(PreferenceOptions):
    model: str = option(DEFAULT_MODEL, "the reward model's backbone: hub id or directory ('tiny': the project's "
                                       "tiny review GPT-2); a scalar head is added on it", Text())
    forward_batch_size: int = option(64, "pairs per gradient-free forward of the evaluation", count(1, MAX_ROWS))
    dtype: str = option("float32", "the dtype r_φ loads and trains in, whatever its checkpoint is stored in "
                                   "(float32: TRL's RewardTrainer's)", choices=("float32", "bfloat16"),
                        trl=(TRL("model_init_kwargs", note="the dtype r_φ loads in",
                                 value=lambda cfg: {"dtype": cfg.dtype}, cls=REWARD),))


PRESETS = {"tiny": {"model": "tiny", "dataset": "tiny", "steps": 120, "batch_size": 32, "lr": 3e-4,
                    "eval_every": 20, "eval_pairs": 500, "threads": 1}}
ALGOS: dict = {}
RESOLVED: dict = {}


validate = preference_options.validate
