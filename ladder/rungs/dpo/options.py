"""The DPO rung's options: one ``Config`` (the preference rungs' ``PreferenceOptions`` and its own), the ``tiny``
preset, and the rules between options, the preference rungs' (``validate``)."""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import MAX_COEF, MAX_ROWS, MAX_TOKENS, Text, count, int_range, learning_rate, positive
from ladder.options import option
from ladder.rungs import preference_options
from ladder.rungs.preference_options import DEFAULT_MODEL, PreferenceOptions
from ladder.tasks import tiny_preferences
from ladder.trl_rows import DPO, SAME, TRL


@dataclass
class Config(PreferenceOptions):
    model: str = option(DEFAULT_MODEL, "policy: causal LM hub id or directory ('tiny': the project's tiny review "
                                       "GPT-2); π_ref is its starting point", Text())
    batch_size: int = option(8, "pairs per update B (at most 65536)", int_range(1, 65536),
                             trl=preference_options.BATCH_TRL)
    lr: float = option(1e-6, "AdamW learning rate (TRL's DPO default)", learning_rate(), trl=preference_options.LR_TRL)
    beta: float = option(0.1, "β: the KL-regularised objective's coefficient, the implicit reward's scale",
                         positive(MAX_COEF),
                         trl=(TRL("beta", "dpo_loss", "β of the implicit reward β·log π_θ/π_ref", SAME, cls=DPO),))
    num_eval_prompts: int = option(32, "held-out prompts whose sampled completions measure KL and the true reward "
                                       "(with --eval-pairs 0, the training pairs' prompts; 0: no sampling)",
                                   count(0, MAX_ROWS))
    max_new_tokens: int = option(128, "length limit of the sampled completions (tokens)", count(1, MAX_TOKENS))
    true_reward: str = option("none", "the true reward of the sampled completions, where the task knows it: "
                                      "'tiny-preferences' (the tiny task's r*)", choices=tiny_preferences.TRUE_REWARDS)
    chunk_size: int = option(64, "positions per chunk of the lm_head / log-softmax", count(1, MAX_TOKENS))


PRESETS = {"tiny": {"model": "tiny", "dataset": "tiny", "steps": 120, "batch_size": 32, "lr": 1e-4,
                    "eval_every": 20, "eval_pairs": 500, "num_eval_prompts": 64, "max_new_tokens": 32,
                    "true_reward": "tiny-preferences", "threads": 1}}
ALGOS: dict = {}
RESOLVED: dict = {}


validate = preference_options.validate
