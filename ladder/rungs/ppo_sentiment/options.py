"""The RLHF-PPO rung's options: one ``Config`` (the language-model rungs' ``LMOptions`` and its own), the ``tiny``
preset, the rules between options (``validate``), and what they make: the ``core.UpdateConfig`` (``update_config``)
and β's controller (``kl_controller``)."""

from __future__ import annotations

from dataclasses import dataclass

from ladder import core
from ladder.domains import (
    MAX_EXAMPLES,
    MAX_PASSES,
    MAX_ROWS,
    MAX_SCALE,
    MAX_STEPS,
    MAX_TOKENS,
    Text,
    coefficient,
    count,
    int_range,
    interval,
    learning_rate,
    positive,
    probability,
)
from ladder.options import option
from ladder.rungs import lm_options
from ladder.rungs.lm_options import (
    EFFICIENCY_PLACED,
    Efficiency,
    Generation,
    LMOptions,
    efficiency_params,
    generation_params,
)
from ladder.rungs.protocol import check_minibatches
from ladder.runtime.runlog import UsageError
from ladder.specs import FixedSpec, accepts_flags
from ladder.tasks import review_models, review_prompts, sentiment_rewards, tiny_preferences
from ladder.trl_rows import PPO, PPO_TRAINER, TRL


@accepts_flags
@dataclass
class Config(LMOptions):
    model: str = option(review_models.DEFAULT_MODEL, "policy: causal LM hub id or directory ('tiny': the project's "
                                                     "tiny review model, shipped with the package)", Text(),
                        trl=(TRL("model_name", note="tracking only in TRL; the articles load lvwerra/gpt2-imdb",
                                 cls=PPO),))
    reward_model: str = option(sentiment_rewards.DEFAULT_REWARD_MODEL, "reward: sequence-classifier id or directory "
                                                                       "(its POSITIVE logit), a reward model with one "
                                                                       "label (r_φ: OUT/reward_model of the "
                                                                       "reward-model rung), or 'vader'", Text(),
                               trl=(TRL("reward_model", note="tracking only in TRL; the articles score with "
                                        "lvwerra/distilbert-imdb's POSITIVE logit", cls=PPO),))
    true_reward: str = option("none", "also log a reward the task knows to be true beside the reward model's score, "
                                      "as true_reward_mean: 'tiny-preferences' (the tiny preference task's r*, "
                                      "which its labeller only approximates)", choices=tiny_preferences.TRUE_REWARDS)
    dataset: str = option(review_prompts.DEFAULT_DATASET, "prompts: dataset id, a local .jsonl/.json/.csv/.txt file "
                                                          "of reviews, or 'bundled' (review openings shipped with "
                                                          "ladder)", Text(),
                          trl=(TRL("query_dataset", note="tracking only in TRL; the articles use imdb", cls=PPO),))
    max_prompts: int = option(25_000, "use at most this many reviews of --dataset", count(1, MAX_EXAMPLES))
    min_prompt_tokens: int = option(2, "shortest review prefix used as a prompt (tokens)", count(1, MAX_TOKENS))
    max_prompt_tokens: int = option(8, "longest review prefix used as a prompt (tokens)", count(1, MAX_TOKENS))
    steps: int = option(200, "PPO updates (each one batch of fresh completions)", count(1, MAX_STEPS),
                        aliases=("--num-updates",),
                        trl=(TRL("steps", note="counts samples: ppo epochs = ceil(steps / batch_size), so ladder's "
                                 "steps = TRL's steps / batch_size", cls=PPO),))
    batch_size: int = option(128, "completions per update B (at most 65536)", int_range(1, 65536),
                             trl=(TRL("batch_size", note="completions per PPOTrainer.step / update", cls=PPO),))
    num_minibatches: int = option(4, "shuffled minibatches per pass", count(1, MAX_ROWS),
                                  trl=(TRL("mini_batch_size", "update", "num_minibatches = batch_size / "
                                           "(mini_batch_size × gradient_accumulation_steps)", cls=PPO),
                                       TRL("gradient_accumulation_steps", "update", "ladder accumulates nothing: one "
                                           "optimiser step per minibatch (see mini_batch_size)", cls=PPO)))
    mu: int = option(4, "μ: optimisation passes over each batch", count(1, MAX_PASSES),
                     trl=(TRL("ppo_epochs", "update", "μ passes over each batch", cls=PPO),))
    forward_batch_size: int = option(32, "rows per gradient-free forward (π_old, π_ref, V_old, reward model)",
                                     count(1, MAX_ROWS))
    generation: Generation = option(Generation(max_new_tokens=16), "LMOptions', 16 tokens a completion",
                                    spec=FixedSpec("generation", Generation, generation_params(max_new_tokens=16)))
    top_k: int = option(0, "top-k sampling (0: off)", count(0, MAX_TOKENS))
    lr: float = option(1.41e-5, "Adam learning rate", learning_rate(),
                       trl=(TRL("learning_rate", note="the articles' 1.41e-5 is ladder's default", cls=PPO),))
    clip_eps: float = option(0.2, "PPO clip ε of the ratio π_θ/π_old", interval(0, 1, open_low=True, open_high=True),
                             trl=(TRL("cliprange", "clipped_surrogate", "PPO's ε", cls=PPO),
                                  TRL("loss", "clipped_surrogate", "policy loss", cls=PPO_TRAINER)))
    value_clip: float = option(0.2, "clip of V around V_old in the value loss", positive(MAX_SCALE),
                               trl=(TRL("cliprange_value", "value_loss", "V clipped around V_old", cls=PPO),
                                    TRL("loss", "value_loss", "clipped value loss", cls=PPO_TRAINER)))
    value_coef: float = option(0.1, "value-loss coefficient c_v", coefficient(),
                               trl=(TRL("vf_coef", "value_loss", "c_v of the value loss in core.update", cls=PPO),))
    max_grad_norm: float | None = option(1.0, "gradient-norm clip", positive(MAX_SCALE),
                                         trl=(TRL("max_grad_norm", "update", cls=PPO),))
    gamma: float = option(1.0, "discount γ over completion tokens", probability(), trl=(TRL("gamma", "gae", cls=PPO),))
    gae_lambda: float = option(0.95, "GAE λ", probability(),
                               trl=(TRL("lam", "gae", cls=PPO),
                                    TRL("compute_advantages", "gae", "GAE, then Â whitened", cls=PPO_TRAINER)))
    kl_coef: float = option(0.2, "β: initial (adaptive) or fixed coefficient of the KL penalty in the reward",
                            coefficient(),
                            trl=(TRL("init_kl_coef", "kl_penalized_rewards", "β of −β·KL_t in the per-token reward "
                                     "(the adaptive controller's start)", cls=PPO),
                                 TRL("compute_rewards", "kl_penalized_rewards", "r_t = −β·KL_t + [t = last]·score",
                                     cls=PPO_TRAINER)))
    adaptive_kl: bool = option(True, "steer β towards --kl-target (Ziegler et al. 2019); off: fixed β",
                               trl=(TRL("adap_kl_ctrl", "AdaptiveKLController", "off: FixedKLController", cls=PPO),
                                    TRL("kl_ctl", "AdaptiveKLController", "updated after every step with the batch's "
                                        "mean KL", cls=PPO_TRAINER)))
    kl_target: float = option(6.0, "target of the mean per-sequence KL(π‖π_ref)", positive(MAX_SCALE),
                              trl=(TRL("target", "AdaptiveKLController", "target per-sequence KL", cls=PPO),))
    kl_horizon: float = option(10_000.0, "horizon of the adaptive controller (in completions)", positive(MAX_EXAMPLES),
                               trl=(TRL("horizon", "AdaptiveKLController", "in completions", cls=PPO),))
    kl_estimator: str = option("k1", "per-token KL estimator in the reward", choices=("k1", "k2", "k3"),
                               trl=(TRL("kl_penalty", "kl_estimate", "'kl' ↔ k1, 'mse' ↔ k2 (½ℓ²); 'abs' and 'full' "
                                        "have no ladder estimator", cls=PPO),))
    ref_sync_every: int = option(0, "refresh π_ref every N updates: π_ref ← α·π_θ + (1 − α)·π_ref (0: never)",
                                 count(0, MAX_STEPS))
    ref_mixup: float = option(0.6, "α of the π_ref refresh, in [0, 1]", probability())
    efficiency: Efficiency = option(Efficiency(chunk_size=64), "LMOptions', 64 positions per chunk",
                                    spec=FixedSpec("efficiency", Efficiency, efficiency_params(chunk_size=64),
                                                   placed=EFFICIENCY_PLACED))
    print_samples: int = option(10, "print a few prompt → completion → score lines every N updates (0: never)",
                                count(0, MAX_STEPS), aliases=("--sample-every",))
    num_samples: int = option(3, "lines printed each --print-samples", count(0, MAX_ROWS))
    num_eval_prompts: int = option(16, "prompts in the before/after table (same prompts and sampling seed)",
                                   count(0, MAX_ROWS))


PRESETS = {
    "tiny": {"model": "tiny", "reward_model": "vader", "dataset": "bundled", "steps": 100, "batch_size": 64,
             "num_minibatches": 2, "lr": 5e-5, "threads": 1, "print_samples": 20},
}
ALGOS: dict = {}
RESOLVED = lm_options.RESOLVED


def validate(cfg: Config) -> None:
    """Rules that relate several options (each option's domain is checked when the Config is built)."""
    check_minibatches(cfg.batch_size, cfg.num_minibatches, f"a batch of {cfg.batch_size} completions")
    if cfg.min_prompt_tokens > cfg.max_prompt_tokens:
        raise UsageError("need --min-prompt-tokens ≤ --max-prompt-tokens")
    if cfg.ref_sync_every and cfg.kl_coef == 0:
        raise UsageError("--ref-sync-every refreshes π_ref, but --kl-coef 0 never uses it; set --kl-coef > 0")


def update_config(cfg: Config) -> core.UpdateConfig:
    """The KL to π_ref lives in the reward here, so the loss has none (kl_coef = 0)."""
    return core.UpdateConfig(mu=cfg.mu, num_minibatches=cfg.num_minibatches, objective="clipped",
                             clip_eps_low=cfg.clip_eps, value_coef=cfg.value_coef, value_clip=cfg.value_clip,
                             entropy_coef=0.0, kl_coef=0.0, normalize_advantages=False,
                             max_grad_norm=cfg.max_grad_norm)


def kl_controller(cfg: Config) -> core.FixedKLController:
    if cfg.adaptive_kl:
        return core.AdaptiveKLController(cfg.kl_coef, cfg.kl_target, cfg.kl_horizon)
    return core.FixedKLController(cfg.kl_coef)
