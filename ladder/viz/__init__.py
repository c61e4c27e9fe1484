"""Widgets that show π_θ, π_old and π_ref at work, on numbers computed by ``ladder.core``.

Each view returns a ``View`` (an ``ipywidgets.VBox``): ``view.controls`` are its knobs,
``view.data`` the numbers of the last drawing, ``view.figure`` the matplotlib figure.

    clipped_objective_view   the clipped surrogate vs ρ (Â > 0, Â < 0), real ratios, clip fraction
    mu_view                  μ real passes on one CartPole batch: ratios, clipping, three KLs
    kl_estimators_view       k1 / k2 / k3 bias and variance against the exact KL
    group_advantages_view    GRPO's group-relative advantages under each reward scale
    kl_tradeoff_view         RLHF-PPO runs at fixed β: reward-model score vs KL to π_ref, samples before/after
    lm_mu_view               μ real passes on one GRPO batch of the tiny LM: ratios, clipping, three KLs
    schedule_view            TRL's GRPO schedule (generation batches, π_old per micro-step) and ladder's equivalent
    parity_view              TRL's GRPOTrainer._compute_loss vs core.compute_loss on the same model and tensors
    kl_gradient_view         the exact expected gradient of each way of putting the KL into training
    token_view               a tiny-GRPO batch as text, tokens coloured; token- vs sequence-level clipping
    league_view              the --algo bundles trained by the grpo rung at one budget of completions
    objective_view           clipped, CISPO, SAPO and VESPO: the loss and ∂L/∂ρ of one token against ρ
    entropy_mask_view        the top-q entropy tokens of the tiny model's completions (core.high_entropy_mask)
    staleness_view           --max-staleness k: the weight π_old/π_rollout of a rollout k updates stale
    sampler_view             a sampler that is not π_old: its weights π_old/π_sampler, and what C_max keeps
    exact_sampler_gradients  the exact bias and variance of the gradient under π_sampler, uncorrected and truncated
    preference_lab/_views    notebook 9: a reward model, PPO against it at two β, DPO; the optimum π*_β over samples
    Predict, Reason, tally   self-checks: a prediction or a reason, checked against what the code then computes
    check_computed           a piece the learner computes in a notebook, checked against the notebook's own
    SelfCheck                a notebook's closing questions, answered with numbers the notebook computed
"""

from ladder.patches import quiet_the_stack
from ladder.viz._widget import View

quiet_the_stack()  # a notebook imports ladder.viz first: no library's warning reaches its outputs (ladder.patches)
from ladder.viz.algo_league import league, league_view
from ladder.viz.cartpole_lab import fixed_batch, mu_passes
from ladder.viz.exact_kl_gradients import kl_gradient_view, kl_gradients
from ladder.viz.lm_lab import beta_sweep, fixed_grpo_batch, lm_mu_passes, ppo_run
from ladder.viz.lm_views import kl_tradeoff_view, lm_mu_view
from ladder.viz.objective_lab import entropy_mask_view, objective_view
from ladder.viz.objective_runs import staleness_view
from ladder.viz.sampler_lab import exact_sampler_gradients, four_policies
from ladder.viz.sampler_views import sampler_view
from ladder.viz.self_check import Predict, Reason, SelfCheck, check_computed, tally
from ladder.viz.token_clipping import gradient_mask, token_passes, token_view
from ladder.viz.trl_loss_parity import parity_view, trl_parity
from ladder.viz.trl_map_schedule import schedule_view, trl_map_markdown, trl_schedule
from ladder.viz.views import (
    clipped_objective_view,
    group_advantages_view,
    kl_estimator_stats,
    kl_estimators_view,
    mu_view,
)

__all__ = ["View", "fixed_batch", "mu_passes", "clipped_objective_view", "mu_view", "kl_estimators_view",
           "kl_estimator_stats", "group_advantages_view", "ppo_run", "beta_sweep", "kl_tradeoff_view",
           "fixed_grpo_batch", "lm_mu_passes", "lm_mu_view", "trl_map_markdown", "trl_schedule", "schedule_view",
           "trl_parity", "parity_view", "kl_gradients", "kl_gradient_view", "gradient_mask", "token_passes",
           "token_view", "league", "league_view", "four_policies", "exact_sampler_gradients", "sampler_view",
           "objective_view", "entropy_mask_view", "staleness_view", "SelfCheck", "Predict", "Reason", "tally",
           "check_computed"]
