"""Rung 6, DPO: fit the policy to preference pairs directly, with no reward model and no sampling.

The KL-regularised objective max E[r] − β·KL(π_θ‖π_ref) has the optimum π*(y|x) ∝ π_ref(y|x)·exp(r(x, y)/β), so the
reward it implies is r(x, y) = β·log π*(y|x)/π_ref(y|x) + β·log Z(x); in the Bradley–Terry likelihood of a pair
Z(x) cancels, and DPO fits π_θ in the place of π*. Each update, on the same ``ladder.core`` as every other rung:

    B pairs (x, y_w, y_l) drawn from the training pairs                    tasks.preference_pairs
    batch  = [x + y_w; x + y_l] as 2B rows, each pair kept whole            policies.dpo_batch
    log π_ref of every completion token, once                               π_ref: a frozen copy, or the adapter off
    L_DPO  = −mean log σ(β·[log π_θ/π_ref (y_w) − log π_θ/π_ref (y_l)])     core.update, objective DPO(β)

Every ``--eval-every`` updates: the held-out pairs ranked by the implicit reward r̂ = β·log π_θ/π_ref (accuracy,
margin, calibration: ``rungs.preference_eval``), and completions sampled from π_θ on held-out prompts — their
KL(π_θ‖π_ref) summed over the completion (the same quantity as ppo-sentiment's kl_ref) and, where the task knows
it (``--true-reward``), the true reward they reach. ``--preset tiny`` runs the tiny preference task offline on a CPU
in a minute or two; the RM + PPO route on the same pairs is ``reward-model`` then ``ppo-sentiment --reward-model``.

metrics.jsonl, one line per update: loss, rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins,
logps/chosen, logps/rejected (TRL's names), kl_ref_token_k3; when evaluated eval_accuracy, eval_margin,
eval_calibration_error, eval_score_accuracy, eval_length_corr, sample_kl, response_length, and with a true reward
true_reward_mean, words_mean, hedged_share, padded_share. OUT/policy holds the trained model (or adapter).
"""

# The package: the recipe the loop runs (``DirectPreference``), ``train`` and the declaration ``RUNG`` (``recipe``),
# the options (``options``), and π_θ beside π_ref (``policy``): loaded with the pairs (``load``), log π_ref of a batch
# (``with_reference``) and the implicit reward of pairs (``implicit_rewards``). What it shares with the reward-model
# rung is in ``ladder.rungs.preference_*``.

from ladder.policies.dpo_batch import dpo_batch
from ladder.rungs.dpo.options import ALGOS, PRESETS, RESOLVED, Config, validate
from ladder.rungs.dpo.policy import implicit_rewards, load, with_reference
from ladder.rungs.dpo.recipe import CURVES, NAME, RUNG, DirectPreference, build, train

__all__ = ["ALGOS", "CURVES", "NAME", "PRESETS", "RESOLVED", "RUNG", "Config", "DirectPreference", "build",
           "dpo_batch", "implicit_rewards", "load", "train", "validate", "with_reference"]
