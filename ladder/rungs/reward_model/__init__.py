"""Rung 6, the reward model: r_φ(x, y) from preference pairs — the first step of every RLHF pipeline.

Each update, on the same ``ladder.core`` as every other rung:

    B pairs (x, y_w, y_l) drawn from the training pairs                       tasks.preference_pairs
    batch  = [x + y_w; x + y_l] as 2B rows, each pair kept whole (rows_per_group 2)   policies.scalar_head
    L_BT   = −mean log σ(r_φ(x, y_w) − r_φ(x, y_l))                           core.update, objective "bradley_terry"

r_φ is the model's backbone with a scalar head on its last real token (``AutoModelForSequenceClassification``,
one label: the model TRL's ``RewardTrainer`` trains), full or with ``--lora`` adapters. Every ``--eval-every``
updates the held-out pairs are scored: their accuracy, mean margin and calibration (``rungs.preference_eval``), and
on the tiny task — whose true preference is known — the accuracy against the truth and how much r_φ pays for
length, the labeller's spurious pull. ``--preset tiny`` learns the tiny task offline on a CPU in a minute or two.

metrics.jsonl, one line per update: loss, accuracy and margin of the batch; eval_accuracy, eval_margin,
eval_calibration_error, eval_score_accuracy, eval_length_corr when evaluated. summary.json adds the final
calibration table; OUT/reward_model holds the model (with ``--lora``, the adapters merged into the backbone) and its
tokenizer, which ``ppo-sentiment --reward-model`` loads.
"""

# The package: the recipe the loop runs (``BradleyTerry``), ``train`` and the declaration ``RUNG`` (``recipe``), the
# options (``options``), and r_φ itself (``model``): loaded with the pairs (``load``) and scoring held-out pairs
# (``score_pairs``). What it shares with the DPO rung is in ``ladder.rungs.preference_*``.

from ladder.rungs.reward_model.model import load, score_pairs
from ladder.rungs.reward_model.options import ALGOS, PRESETS, RESOLVED, Config, validate
from ladder.rungs.reward_model.recipe import CURVES, NAME, RUNG, BradleyTerry, build, train

__all__ = ["ALGOS", "CURVES", "NAME", "PRESETS", "RESOLVED", "RUNG", "BradleyTerry", "Config", "build", "load",
           "score_pairs", "train", "validate"]
