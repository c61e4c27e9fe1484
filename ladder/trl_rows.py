"""The row of ``ladder.trl.map`` (``Mapping``) and the small functions its rows use to compute a TRL value from
a ladder ``Config`` (``same("lr")``: the option itself; ``const(x)``; ``on_cuda``, ``optim``, ``peft``, ...).

The vocabulary the map and the rungs share: a rung's spec declares its own TRL rows (``TRLRow``, ``param_rows``)
beside its options (``ladder.specs``), and ``ladder.trl`` gathers them into the map."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ladder.specs import option_value


@dataclass(frozen=True)
class Mapping:
    trl_class: str
    trl_field: str | None
    ladder_rung: str
    ladder_option: str | None
    core_function: str | None
    note: str = ""
    value: Callable[[Any], Any] | None = field(default=None, compare=False, repr=False)
    applies: Callable[[Any], bool] | None = field(default=None, compare=False, repr=False)

    def applies_to(self, cfg) -> bool:
        return self.applies is None or bool(self.applies(cfg))


# TRL ≤ 0.11's PPOConfig (trl/trainer/ppo_config.py of the classic PPOTrainer): the names the rows below
# use, recorded here because no installed TRL (1.x) has the class to check them against.
CLASSIC_PPO_CONFIG_FIELDS = frozenset((
    "exp_name", "seed", "log_with", "task_name", "model_name", "query_dataset", "reward_model",
    "remove_unused_columns", "tracker_kwargs", "accelerator_kwargs", "project_kwargs", "tracker_project_name",
    "push_to_hub_if_best_kwargs", "steps", "learning_rate", "adap_kl_ctrl", "init_kl_coef", "kl_penalty", "target",
    "horizon", "gamma", "lam", "cliprange", "cliprange_value", "vf_coef", "batch_size", "forward_batch_size",
    "mini_batch_size", "gradient_accumulation_steps", "world_size", "ppo_epochs", "max_grad_norm",
    "optimize_cuda_cache", "optimize_device_cache", "early_stopping", "target_kl", "compare_steps", "ratio_threshold",
    "use_score_scaling", "use_score_norm", "score_clip",
))
CLASSIC = ("PPOConfig", "PPOTrainer")  # rows named after TRL ≤ 0.11, not checkable against TRL 1.x


# --- values: a grpo Config → the GRPOConfig value -----------------------------------------------

def same(option: str) -> Callable[[Any], Any]:
    def value(cfg):
        return option_value(cfg, option)

    value.__qualname__ = value.__name__ = f"same_{option}"
    return value


def const(constant) -> Callable[[Any], Any]:
    def value(cfg):
        return constant

    return value


def optimizer_steps(cfg, updates: int) -> int:
    """ladder counts updates (P·G sampled completions, μ passes × M minibatches); TRL counts optimiser
    steps, μ·M of them per generation batch (with gradient_accumulation_steps = 1)."""
    return updates * cfg.mu * cfg.num_minibatches


def on_cuda(cfg) -> bool:
    return str(cfg.device).startswith("cuda")


def reward_weights(cfg) -> list[float]:
    """TRL's reward_weights: the grpo rung's weighted reward columns, in order (``Rewards.column_weights``)."""
    return list(cfg.rewards.column_weights().values())


def optim(cfg) -> str:
    optim = cfg.efficiency.optim
    paged = optim == "paged_adamw_8bit" or (optim == "auto" and cfg.adapter.qlora and on_cuda(cfg))
    return "paged_adamw_8bit" if paged else "adamw_torch"


def peft(cfg) -> bool:
    return cfg.adapter.lora or cfg.adapter.qlora


def agent(cfg) -> bool:
    """An agent rung's Config (its rows apply to it alone; a grpo Config has no --max-tool-calls)."""
    return hasattr(cfg, "max_tool_calls")


# --- the rows of a spec's params (``ladder.specs.Param``), declared with the spec -----------------------------

@dataclass(frozen=True)
class TRLRow:
    """A param's TRL name: ``GRPOConfig.{field}`` (None: no TRL equivalent, ``note`` says what to do instead).
    ``always``: the row gives TRL its value in every run (the param's default when its spec is not the run's)."""

    field: str | None
    core_function: str | None
    note: str
    always: bool = False


def param_rows(params, rows: dict, applies: Callable[[Any], bool], rung: str = "grpo",
               trl_class: str = "GRPOConfig") -> tuple[Mapping, ...]:
    """The map's rows of ``params`` (flag → ``TRLRow`` in ``rows``; a param without one has none), each applying
    where ``applies`` (the spec is the run's) unless its row is ``always``."""
    out = []
    for p in params:
        row = rows.get(p.flag)
        if row is not None:
            out.append(Mapping(trl_class, row.field, rung, p.flag, row.core_function, row.note,
                               None if row.field is None else same(p.flag), None if row.always else applies))
    return tuple(out)
