"""The rules that relate several of grpo's options (and the agent rung's, which shares them): each refusal one line,
before any model loads. An option's own domain is checked where it is declared (``grpo_options.Config``)."""

from __future__ import annotations

from ladder.rungs.grpo.options import LOSS_TYPES, Config, eps_high, reward_weights
from ladder.rungs.protocol import check_minibatches
from ladder.runtime.errors import UsageError


def validate(cfg: Config) -> None:
    """Refuse combinations that make no sense, before any model loads (each option's own domain is
    checked when the Config is built)."""
    check_minibatches(cfg.prompts_per_step * cfg.group_size, cfg.num_minibatches,
                      f"{cfg.prompts_per_step} prompts × {cfg.group_size} completions")
    _validate_combinations(cfg)
    _validate_objectives(cfg)
    reward_weights(cfg)


def _validate_combinations(cfg: Config) -> None:
    if cfg.kl_in == "reward" and cfg.kl_correction == "on":
        raise UsageError("--kl-correction weighs the KL term of the loss; with --kl-in reward the KL is a constant "
                         "in the reward, taken on π_old, and needs no correction: drop --kl-correction (or say off)")
    if cfg.ref_sync_every and cfg.kl_coef == 0:
        raise UsageError("--ref-sync-every refreshes π_ref, but --kl-coef 0 never uses it; set --kl-coef > 0 "
                         "or drop --ref-sync-every")
    if cfg.advantage == "rloo" and cfg.scale_rewards == "group":
        raise UsageError("--advantage rloo takes --scale-rewards none or batch; dividing by the group's std turns "
                         "it into GRPO's advantage times G/(G−1)")
    if cfg.ratio_level == "sequence" and cfg.loss_type == "cispo":
        raise UsageError("--loss-type cispo weighs every token by its own ratio; --ratio-level sequence is GSPO's "
                         "clipped objective (--algo gspo)")
    if cfg.delta is not None:
        if LOSS_TYPES[cfg.loss_type][0] != "clipped":
            raise UsageError(f"--delta caps the clipped surrogate's ratio; --loss-type {cfg.loss_type} has no clip")
        if cfg.delta <= 1.0 + eps_high(cfg):
            raise UsageError(f"--delta must exceed 1 + --clip-eps-high = {1.0 + eps_high(cfg):g}, got {cfg.delta}")
    if cfg.sampler_clip_min is not None and cfg.sampler_clip_max is not None and \
            cfg.sampler_clip_min >= cfg.sampler_clip_max:
        raise UsageError(f"--sampler-clip-min {cfg.sampler_clip_min:g} must be below --sampler-clip-max "
                         f"{cfg.sampler_clip_max:g}")
    if cfg.overlong_buffer and int(cfg.overlong_buffer * cfg.max_new_tokens) < 1:
        raise UsageError(f"--overlong-buffer {cfg.overlong_buffer} of --max-new-tokens {cfg.max_new_tokens} is "
                         f"less than one token")


def _validate_objectives(cfg: Config) -> None:
    if cfg.loss_type == "vespo" and cfg.ratio_level == "sequence":
        raise UsageError("--loss-type vespo computes its own sequence weight from the token ratios; use "
                         "--ratio-level token")
    if cfg.loss_type == "vespo" and cfg.sampler_correction.startswith("sequence"):
        raise UsageError("--loss-type vespo folds a per-token π_old/π_sampler into its sequence weight: use "
                         "--sampler-correction token_truncate or token_mask")
    if cfg.multi_objective_aggregation == "normalize_then_sum":
        if cfg.advantage == "rloo" or cfg.kl_in == "reward":
            raise UsageError("--multi-objective-aggregation normalize_then_sum normalises each reward function's "
                             "scores: it needs --advantage group and --kl-in loss")
    if cfg.adaptive_entropy and cfg.entropy_coef_min > cfg.entropy_coef_max:
        raise UsageError(f"--entropy-coef-min {cfg.entropy_coef_min:g} must not exceed --entropy-coef-max "
                         f"{cfg.entropy_coef_max:g}")
    if cfg.adaptive_entropy and not cfg.entropy_coef_min <= cfg.entropy_coef <= cfg.entropy_coef_max:
        raise UsageError(f"--entropy-coef {cfg.entropy_coef:g} is --adaptive-entropy's starting c_H: it must lie in "
                         f"[--entropy-coef-min, --entropy-coef-max] = [{cfg.entropy_coef_min:g}, "
                         f"{cfg.entropy_coef_max:g}]")
    for flags, needs, used in UNUSED_WITHOUT:
        given = [f"--{name.replace('_', '-')}" for name in flags if getattr(cfg, name) != _default(name)]
        if given and not used(cfg):
            raise UsageError(f"{', '.join(given)} {'has' if len(given) == 1 else 'have'} no effect without {needs}")


# Options that only one choice reads, the choice, and whether this run makes it: set without it, they are refused.
UNUSED_WITHOUT = (
    (("sapo_temperature_pos", "sapo_temperature_neg"), "--loss-type sapo", lambda cfg: cfg.loss_type == "sapo"),
    (("vespo_k_pos", "vespo_lambda_pos", "vespo_k_neg", "vespo_lambda_neg"), "--loss-type vespo",
     lambda cfg: cfg.loss_type == "vespo"),
    (("cispo_max_weight",), "--loss-type cispo", lambda cfg: cfg.loss_type == "cispo"),
    (("entropy_target", "entropy_coef_min", "entropy_coef_max", "entropy_coef_delta"), "--adaptive-entropy",
     lambda cfg: cfg.adaptive_entropy),
    (("scale_rewards",), "--multi-objective-aggregation sum_then_normalize (normalize_then_sum whitens over the "
     "batch itself)", lambda cfg: cfg.multi_objective_aggregation == "sum_then_normalize"),
)


def _default(name: str):
    return Config.__dataclass_fields__[name].default
