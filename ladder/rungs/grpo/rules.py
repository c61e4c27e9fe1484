"""The rules that relate several of grpo's options (and the agent rung's, which shares them): each refusal one line,
before any model loads. An option's own domain is checked where it is declared (``grpo_options.Config``)."""

from __future__ import annotations

from ladder.rungs.grpo import entropy_control, loss_types
from ladder.rungs.grpo.advantages import GDPO_NEEDS
from ladder.rungs.grpo.core_settings import eps_high
from ladder.rungs.grpo.options import Config, reward_weights
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
    if cfg.ref_sync_every and cfg.kl.coef == 0:
        raise UsageError("--ref-sync-every refreshes π_ref, but --kl-coef 0 never uses it; set --kl-coef > 0 "
                         "or drop --ref-sync-every")
    if cfg.ratio_level == "sequence" and cfg.loss_type == "cispo":
        raise UsageError("--loss-type cispo weighs every token by its own ratio; --ratio-level sequence is GSPO's "
                         "clipped objective (--algo gspo)")
    delta = getattr(loss_types.objective(cfg), "delta", None)  # the clipped objective's δ (no other has one)
    if delta is not None and delta <= 1.0 + eps_high(cfg):
        raise UsageError(f"--delta must exceed 1 + --clip-eps-high = {1.0 + eps_high(cfg):g}, got {delta}")
    buffer = cfg.rewards.overlong_buffer
    if buffer and int(buffer * cfg.max_new_tokens) < 1:
        raise UsageError(f"--overlong-buffer {buffer} of --max-new-tokens {cfg.max_new_tokens} is "
                         f"less than one token")


def _validate_objectives(cfg: Config) -> None:
    if cfg.loss_type == "vespo" and cfg.ratio_level == "sequence":
        raise UsageError("--loss-type vespo computes its own sequence weight from the token ratios; use "
                         "--ratio-level token")
    if cfg.loss_type == "vespo" and cfg.sampler.correction.startswith("sequence"):
        raise UsageError("--loss-type vespo folds a per-token π_old/π_sampler into its sequence weight: use "
                         "--sampler-correction token_truncate or token_mask")
    if cfg.multi_objective_aggregation == "normalize_then_sum" and cfg.kl.where == "reward":
        raise UsageError(GDPO_NEEDS)  # (--advantage rloo: refused as the advantages spec is built)
    control = entropy_control.settings(cfg)
    if control is not None and control.coef_min > control.coef_max:
        raise UsageError(f"--entropy-coef-min {control.coef_min:g} must not exceed --entropy-coef-max "
                         f"{control.coef_max:g}")
    if control is not None and not control.coef_min <= cfg.entropy_coef <= control.coef_max:
        raise UsageError(f"--entropy-coef {cfg.entropy_coef:g} is --adaptive-entropy's starting c_H: it must lie in "
                         f"[--entropy-coef-min, --entropy-coef-max] = [{control.coef_min:g}, "
                         f"{control.coef_max:g}]")
