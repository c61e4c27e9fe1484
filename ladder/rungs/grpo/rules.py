"""The rules that relate several of grpo's options (and the agent rung's, which shares them): each refusal one line,
before any model loads. An option's own domain is checked where it is declared (``grpo_options.Config``); what an
objective refuses of the other options is its own (``loss_types.register_objective``'s rules, asked here); a flag
the settled run would not read is refused as the run settles (``settle``)."""

from __future__ import annotations

from ladder.rungs.grpo import advantage_spec, entropy_control, loss_types
from ladder.rungs.grpo.advantage_spec import GDPO_NEEDS
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
    if cfg.reference_refresh is not None and cfg.kl.coef == 0:
        raise UsageError("--ref-sync-every refreshes π_ref, but --kl-coef 0 never uses it; set --kl-coef > 0 "
                         "or drop --ref-sync-every")
    refused = loss_types.refusal(cfg)  # the objective's own: cispo's and vespo's ratio level, the clip's δ, …
    if refused is not None:
        raise UsageError(refused)
    buffer = cfg.rewards.overlong_buffer
    if buffer and int(buffer * cfg.generation.max_new_tokens) < 1:
        raise UsageError(f"--overlong-buffer {buffer} of --max-new-tokens {cfg.generation.max_new_tokens} is "
                         f"less than one token")


def _validate_objectives(cfg: Config) -> None:
    if advantage_spec.decoupled(cfg) and cfg.kl.where == "reward":
        raise UsageError(GDPO_NEEDS)  # (--advantage rloo: refused as the advantages spec is built)
    control = entropy_control.settings(cfg)
    if control is not None and control.coef_min > control.coef_max:
        raise UsageError(f"--entropy-coef-min {control.coef_min:g} must not exceed --entropy-coef-max "
                         f"{control.coef_max:g}")
    if control is not None and not control.coef_min <= cfg.entropy.coef <= control.coef_max:
        raise UsageError(f"--entropy-coef {cfg.entropy.coef:g} is --adaptive-entropy's starting c_H: it must lie in "
                         f"[--entropy-coef-min, --entropy-coef-max] = [{control.coef_min:g}, "
                         f"{control.coef_max:g}]")
