"""The GRPO rung's options: one ``Config``, the ``tiny`` preset and the ``--algo`` bundles (the rules that relate
several options are in ``ladder.rungs.grpo.rules``).

A group of options that one part of the rung reads is a typed spec that part owns, held by one field and set by
flags of its own (``ladder.specs``): ``objective`` (``loss_types``), ``kl`` (``kl_to_ref``), ``sampler``,
``reference_refresh``, ``entropy_control`` and ``entropy`` (``entropy_control``), ``advantages``, ``rewards``
(``scoring``), ``dynamic_sampling`` (``rollout``), ``problems``, ``ratio``, ``optimisation``, ``generation``,
``efficiency``, and the language-model rungs' ``adapter`` (``ladder.rungs.lm_options``). A choice is the class its
field holds (a tagged union: ``Dapo(delta=None)`` is ``--loss-type dapo``, ``entropy_control=None`` no
``--adaptive-entropy``), its flag read off it. The flags, their help and domains, the
refusal of a flag that only an unchosen spec reads, config.json and the TRL rows come from the specs;
``Config(kl_coef=0.0, loss_type="sapo")`` takes a flag's name too. Every auto, and every default that depends on
another option, is decided once, by ``settle``.

The design space of GRPO-style training, each choice a flag (and a short function in ladder.core):

    advantage      group (GRPO: r − mean, ÷ std)  |  rloo (leave-one-out baseline)
    KL to π_ref    in the loss: β·(π_θ/π_old)·k3 by default (DeepSeek-V3.2's importance-corrected KL,
                   TRL 1.16's default), plain β·k3 as DeepSeekMath wrote it with --kl-correction off
                   |  in the reward (one KL per completion)
    π_ref          fixed  |  refreshed: every N updates π_ref ← α·π_θ + (1 − α)·π_ref
    ratio          per token (GRPO)  |  per sequence (GSPO)
    policy loss    clipped surrogate (ε_low, ε_high, optional δ)  |  CISPO
    aggregation    grpo | bnpo | dr_grpo | dapo   (core.aggregate's mode; its constant: grpo.loss_normaliser)
                   --loss-type's objectives, their flags and TRL rows: ladder.rungs.grpo.loss_types
    batch shaping  dynamic sampling, truncated completions masked, soft overlong penalty
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import MAX_EXAMPLES, MAX_PASSES, MAX_ROWS, MAX_STEPS, Text, count, int_range, interval
from ladder.options import option
from ladder.rewards import TIME_LIMIT_S as REWARD_TIME_LIMIT_S
from ladder.rungs.grpo import advantage_spec as advantage_settings
from ladder.rungs.grpo import efficiency as efficiency_settings
from ladder.rungs.grpo import entropy_control as entropy_settings
from ladder.rungs.grpo import generation as generation_settings
from ladder.rungs.grpo import kl_to_ref as kl_settings
from ladder.rungs.grpo import loss_types, scoring, settle
from ladder.rungs.grpo import optimisation as optimisation_settings
from ladder.rungs.grpo import problems as problem_settings
from ladder.rungs.grpo import ratio as ratio_settings
from ladder.rungs.grpo import reference_refresh as reference_refresh_settings
from ladder.rungs.grpo import sampler as sampler_settings
from ladder.rungs.grpo.advantage_spec import NormalizeThenSum, SumThenNormalize
from ladder.rungs.grpo.efficiency import GRPOEfficiency
from ladder.rungs.grpo.entropy_control import AdaptiveEntropy, EntropyBonus
from ladder.rungs.grpo.generation import GRPOGeneration
from ladder.rungs.grpo.kl_to_ref import KLToReference
from ladder.rungs.grpo.optimisation import Optimisation
from ladder.rungs.grpo.problems import Problems
from ladder.rungs.grpo.ratio import Ratio
from ladder.rungs.grpo.reference_refresh import ReferenceRefresh
from ladder.rungs.grpo.rollout import DYNAMIC_SAMPLING, DynamicSampling
from ladder.rungs.grpo.sampler import Sampler
from ladder.rungs.grpo.scoring import Rewards
from ladder.rungs.grpo.settle import dequantize_once as dequantize_once  # (re-exported: decided in settle)
from ladder.rungs.grpo.settle import optimizer_name as optimizer_name
from ladder.rungs.grpo.settle import release_memory as release_memory
from ladder.rungs.lm_options import LMOptions
from ladder.specs import accepts_flags
from ladder.tasks import math_problems
from ladder.trl_rows import GRPO_TRAINER, RLOO, SAME, SCHEDULE, TRL, optimizer_steps

STEPS_TRL = (
    TRL("max_steps", note="TRL counts optimiser steps: --steps × μ × M (one ladder update = one generation batch)",
        value=lambda cfg: optimizer_steps(cfg, cfg.steps)),
    TRL("num_train_epochs", note="not set: max_steps > 0 overrides epochs (ladder reshuffles the problems whenever "
        "it runs out)"),
    TRL("max_steps", note="as GRPOConfig's: --steps × μ × M", cls=RLOO),
)
PROMPTS_TRL = (
    TRL("per_device_train_batch_size", "update", "P·G/M completions per optimiser step (ladder's --prompts-per-step "
        "× --group-size ÷ --num-minibatches); ladder's P is the total over all processes, TRL's batch is per device: "
        "the script divides by WORLD_SIZE", lambda cfg: cfg.prompts_per_step * cfg.group_size // cfg.num_minibatches),
    TRL("per_device_train_batch_size", "update", "as GRPOConfig's: P·G/M", cls=RLOO),
)

# --algo: the flags each method's paper sets (explicit flags still win; see the README's table). The KL term is
# not among them: --algo grpo keeps the default β·(π_θ/π_old)·k3 (TRL 1.16's); DeepSeekMath's plain k3 is
# --kl-correction off.
ALGOS = {
    "grpo": dict(loss_type="grpo", advantage="group", scale_rewards="group", kl_in="loss", ratio_level="token"),
    "dr_grpo": dict(loss_type="dr_grpo", scale_rewards="none", kl_coef=0.0),
    "dapo": dict(loss_type="dapo", clip_eps=0.2, clip_eps_high=0.28, kl_coef=0.0, dynamic_sampling=True,
                 mask_truncated=True, overlong_buffer=0.2, overlong_penalty=1.0),
    "gspo": dict(ratio_level="sequence", loss_type="grpo", clip_eps=3e-4, clip_eps_high=4e-4, kl_coef=0.0,
                 num_minibatches=4),
    "cispo": dict(loss_type="cispo", cispo_max_weight=5.0, scale_rewards="batch", kl_coef=0.0),
    "rloo": dict(advantage="rloo", scale_rewards="none", kl_in="reward", kl_estimator="k1", kl_coef=0.03),
    "sapo": dict(loss_type="sapo", sapo_temperature_pos=1.0, sapo_temperature_neg=1.05),
    "luspo": dict(loss_type="luspo", ratio_level="sequence", clip_eps=3e-4, clip_eps_high=4e-4, kl_coef=0.0),
    "vespo": dict(loss_type="vespo", ratio_level="token", kl_coef=0.0),
    "gdpo": dict(multi_objective_aggregation="normalize_then_sum"),
}


@accepts_flags
@dataclass
class GRPOOptions(LMOptions):
    """grpo's options, the rungs built on its update share them (the distill rung's Config extends these); ``Config``
    adds --export-trl, for the runs a TRL script reproduces (grpo's and the agent's)."""

    model: str = option("Qwen/Qwen2.5-0.5B-Instruct", "causal LM: hub id or local directory", Text(),
                        trl=(TRL("model", note="a hub id or a local directory; @tiny-math is ladder's cached tiny "
                                 "model (math_problems.resolve_math_model)", cls=GRPO_TRAINER),))
    problems: Problems = option(Problems(), "the problems trained and evaluated on: the task, its data, the system "
                                            "prompt, the held-out and training sizes; its flags are the spec's "
                                            "fields (problems)", spec=problem_settings.OPTION)
    generation: GRPOGeneration = option(GRPOGeneration(), "LMOptions' and grpo's own: how completions are sampled; "
                                                          "its flags are the spec's fields (generation)",
                                        spec=generation_settings.OPTION)
    efficiency: GRPOEfficiency = option(GRPOEfficiency(), "LMOptions' and grpo's own: what changes the run's memory "
                                                          "and time, never its numbers; its flags are the spec's "
                                                          "fields (efficiency)", spec=efficiency_settings.OPTION)
    steps: int = option(200, "updates (each: P prompts × G completions)", count(1, MAX_STEPS), trl=STEPS_TRL)
    max_completions: int = option(0, "also stop once this many completions have been sampled (0: no limit); "
                                     "a budget that compares methods fairly when dynamic sampling samples more",
                                     count(0, MAX_EXAMPLES),
                                 trl=(TRL(None, note="a budget of sampled completions: use max_steps",
                                          applies=lambda cfg: cfg.max_completions > 0),))
    prompts_per_step: int = option(4, "P: prompts per update (at most 65536)", int_range(1, 65536),
                                   trl=PROMPTS_TRL)
    group_size: int = option(8, "G: completions sampled per prompt (at least 2: advantages compare them; at most "
                                "1024)", int_range(2, 1024),
                            trl=(TRL("num_generations", "group_relative", "G completions per prompt", SAME),
                                 TRL("num_generations", "leave_one_out", "G completions per prompt", cls=RLOO)))
    mu: int = option(1, "μ: optimisation passes over each batch", count(1, MAX_PASSES),
                     trl=(TRL("num_iterations", "update", "μ passes over each generation batch (TRL keeps the "
                              "micro-batches of the first pass; ladder reshuffles)", SAME),
                          TRL("num_iterations", "update", "as GRPOConfig's", cls=RLOO)))
    num_minibatches: int = option(1, "shuffled minibatches per pass (each one optimiser step)", count(1, MAX_ROWS),
                                  trl=(TRL("steps_per_generation", "update", SCHEDULE, SAME),
                                       TRL("steps_per_generation", "update", "as GRPOConfig's", cls=RLOO)))
    optimisation: Optimisation = option(Optimisation(), "the learning rate, its warmup and the gradient-norm clip; "
                                                        "its flags are the spec's fields (optimisation)",
                                        spec=optimisation_settings.OPTION)
    advantages: SumThenNormalize | NormalizeThenSum = option(
        SumThenNormalize(), "how rewards become Â: its class is --multi-objective-aggregation, its flags the class's "
                            "fields (advantages)", spec=advantage_settings.OPTION)
    ratio: Ratio = option(Ratio(), "the importance ratio π_θ/π_old, per token or per sequence, and its clip range; "
                                   "its flags are the spec's fields (ratio)", spec=ratio_settings.OPTION)
    objective: loss_types.LossSpec = option(loss_types.Grpo(), "the objective with its parameters: its class is "
                                                               "--loss-type (loss_types.Dapo, …), its flags the "
                                                               "class's fields (loss_types)", spec=loss_types.OPTION)
    entropy: EntropyBonus = option(EntropyBonus(), "the entropy bonus −c_H·mean H and the tokens it and the policy "
                                                   "term keep; its flags are the spec's fields (entropy_control)",
                                   spec=entropy_settings.BONUS)
    entropy_control: AdaptiveEntropy | None = option(None, "the controller of c_H: --adaptive-entropy holds one (None: "
                                                           "c_H fixed), its flags the spec's fields (entropy_control)",
                                                     spec=entropy_settings.OPTION)
    kl: KLToReference = option(KLToReference(), "β·KL(π_θ‖π_ref): its coefficient, place, estimator and correction; "
                                                "its flags are the spec's fields (kl_to_ref)", spec=kl_settings.OPTION)
    reference_refresh: ReferenceRefresh | None = option(None, "π_ref refreshed every --ref-sync-every N updates (None: "
                                                              "π_ref fixed); its flags are the spec's fields "
                                                              "(reference_refresh)",
                                                        spec=reference_refresh_settings.OPTION)
    sampler: Sampler = option(Sampler(), "π_sampler: the weights sampled from and the correction for them; its "
                                         "flags are the spec's fields (sampler)", spec=sampler_settings.OPTION)
    dynamic_sampling: DynamicSampling | None = option(None, "DAPO's dynamic sampling, held with --dynamic-sampling "
                                                            "(None: off); its flags are the spec's fields (rollout)",
                                                      spec=DYNAMIC_SAMPLING)
    mask_truncated: bool = option(False, "completions that reach --max-new-tokens without EOS take no part in the "
                                         "loss (DAPO's overlong filtering)",
                                  trl=(TRL("mask_truncated_completions", note="completions cut at the length limit "
                                           "take no part in the loss (ladder: grpo_rollout)", value=SAME),
                                       TRL("mask_truncated_completions", cls=RLOO)))
    rewards: Rewards = option(Rewards(), "how a completion is scored: the reward functions, their weights, DAPO's "
                                         "overlong penalty; its flags are the spec's fields (scoring)",
                              spec=scoring.OPTION)
    reward_timeout: float = option(REWARD_TIME_LIMIT_S, "the seconds each call of a reward function (on a whole "
                                                         "batch) may take before the run stops with one line "
                                                         "naming it", interval(0, 86400, open_low=True),
                                  trl=(TRL(None, note="TRL puts no time limit on a reward function's call (one that "
                                           "hangs holds the training); the script's reward functions run without "
                                           "one"),))
    max_staleness: int = option(0, "k: each update trains on completions drawn by the policy as it was k updates "
                                   "earlier (π_rollout, an asynchronous trainer's lag without its threads; fewer at "
                                   "the start). π_old is still the trainer's own forward; --sampler-correction "
                                   "weighs π_old/π_rollout (0: no lag; at most 1000: the run holds k + 1 copies "
                                   "of the trained weights)", int_range(0, 1000),
                                 trl=(TRL(None, "sampler_weights", "GRPOTrainer samples with the current weights. "
                                          "trl.experimental.async_grpo produces rollouts while training goes on, so "
                                          "each batch is some updates stale, by timing rather than by a fixed k; "
                                          "ladder's lag is exact and seeded. Correct it with "
                                          "vllm_importance_sampling_* as --sampler-correction does",
                                          applies=lambda cfg: cfg.max_staleness > 0),))
    print_samples: int = option(25, "every N updates, print one question → completion → reward and append all "
                                    "the update's completions (rewards, advantage, cut off or not) to "
                                    "OUT/completions.jsonl (0: never)", count(0, MAX_STEPS),
                                trl=(TRL("log_completions", note="not set: TRL logs a table of completions every "
                                         "logging step; ladder every N updates (OUT/completions.jsonl)"),
                                     TRL(None, note="see log_completions")))
    eval_every: int = option(25, "greedy held-out accuracy every N updates (0: only before and after)",
                             count(0, MAX_STEPS),
                             trl=(TRL("eval_steps", note="not set: TRL's evaluation samples and scores completions; "
                                      "ladder's is greedy held-out accuracy (run `python -m ladder.run eval --adapter "
                                      "OUTPUT_DIR`)"),
                                  TRL(None, note="see eval_steps")))

    # What the flags of the choices say, read off the spec that each field holds (no field of their own):
    @property
    def loss_type(self) -> str:
        """--loss-type: the class of ``objective``."""
        return self.objective.loss_type

    @property
    def max_new_tokens(self) -> int:
        """--max-new-tokens of ``generation`` (read so by the exercises and solutions: ex20's grpo_step)."""
        return self.generation.max_new_tokens

    @property
    def multi_objective_aggregation(self) -> str:
        """--multi-objective-aggregation: the class of ``advantages``."""
        return advantage_settings.OPTION.tag(self.advantages)

    @property
    def adaptive_entropy(self) -> bool:
        """--adaptive-entropy: an ``entropy_control`` held."""
        return self.entropy_control is not None

    @property
    def ref_sync_every(self) -> int:
        """--ref-sync-every: N of ``reference_refresh`` (0: none held, π_ref fixed)."""
        return reference_refresh_settings.every(self)

    # What a rung adds to the rules of ``settle`` (the agent's Config says its own):
    def model_source(self) -> str:
        """--model as a local path or hub id (ladder's tiny model: its directory)."""
        return math_problems.resolve_math_model(self.model)

    def chosen_system_prompt(self) -> str:
        """--system-prompt, or the task's."""
        return math_problems.system_prompt(self.problems.task, self.problems.system_prompt)

    def sampler_before_settling(self) -> Sampler:
        """The sampler as given, its auto for ``settle`` to decide."""
        return self.sampler


@accepts_flags
@dataclass
class Config(GRPOOptions):
    export_trl: str | None = option(None, "write this run as a runnable TRL script (trl.GRPOTrainer) to this file "
                                          "and exit: nothing is trained, no run directory is created", Text(),
                                  trl=(TRL(None, note="the switch that writes this script"),))


# The tiny preset's model imitates a tutor who forgets to carry (see arithmetic.build_tiny_math_model):
# greedy accuracy starts near the share of sums without a carry and GRPO lifts it by teaching the carry.
# A preset pins --sampler-dtype: what it learns does not depend on the CPU it runs on.
PRESETS = {
    "tiny": dict(model="@tiny-math", task="arithmetic", lora=True, lora_r=16, lora_alpha=32, steps=60,
                 prompts_per_step=8, group_size=8, lr=1e-3, warmup_steps=10, temperature=1.0, max_new_tokens=28,
                 kl_coef=0.04, eval_every=10, eval_size=200, print_samples=10, threads=1, sampler_dtype="same"),
}


def reward_weights(cfg: Config) -> dict[str, float]:
    """Name → weight w_f of each reward function (``--reward-weights``)."""
    return cfg.rewards.function_weights()


def sampler(cfg: Config) -> Sampler:
    """--sampler-dtype and --sampler-correction as the run will decide ``auto`` (``settle.settle_known``: on --device,
    from the model's config; auto is left where that config cannot be read here)."""
    return settle.settle_known(cfg).sampler


def _shown(option: str):
    def value(cfg: Config):
        return settle.resolved(cfg)[option]

    value.__qualname__ = value.__name__ = f"settled_{option}"
    return value


# Options whose value is decided when the run starts (--print-config): each read off ``settle``'s settled run.
RESOLVED = {option: _shown(option) for option in settle.SHOWN}
