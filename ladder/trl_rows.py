"""TRL's names as an option declares them (``TRL``), the row of ``ladder.trl.map`` made from them (``Mapping``), and
the small functions a declaration uses to compute a TRL value from a ladder ``Config`` (``const(x)``, ``on_cuda``,
``optim``, ``peft``, ``optimizer_steps``, ...).

An option says its TRL names where it is declared — a field, ``option(..., trl=(TRL(...), ...))``, or a spec's flag,
``Param(..., trl=...)`` — and a rung's declaration (``Rung.trl``) says the TRL settings it has no flag for;
``ladder.trl.map`` generates the map from them, naming each row's option as its flag does (no name is written twice).

    TRL("num_generations", core="group_relative", note="G completions per prompt", value=SAME, cls=(GRPO, RLOO))

This module imports nothing of ladder's: the options' module (``ladder.options``) and the specs declare with it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

GRPO = "GRPOConfig"
GRPO_TRAINER = "GRPOTrainer"
RLOO = "RLOOConfig"
PPO = "PPOConfig"            # TRL ≤ 0.11's (see CLASSIC)
PPO_TRAINER = "PPOTrainer"   # TRL ≤ 0.11's
REWARD = "RewardConfig"
DPO = "DPOConfig"
PAIRS = (REWARD, DPO)
GKD = "GKDConfig"            # trl.experimental.gkd's (the distill rung's export)
GKD_TRAINER = "GKDTrainer"   # its __init__'s parameters
SAME = "same"  # TRL(..., value=SAME): the TRL value is the option's own
SCHEDULE = ("ladder: each update samples P·G completions and makes μ passes over them, each pass a fresh "
            "shuffle into M minibatches, one optimiser step each. TRL: a generation batch of "
            "per_device_train_batch_size × steps_per_generation × processes completions is shuffled once "
            "and cut into steps_per_generation micro-batches, reused in the same order for num_iterations "
            "passes; one optimiser step per gradient_accumulation_steps micro-batches. With "
            "gradient_accumulation_steps = 1, steps_per_generation = M, per_device_train_batch_size = P·G/M "
            "every TRL step sees one ladder minibatch; only the reshuffle between passes differs (none for μ = 1)")


@dataclass(frozen=True)
class TRL:
    """One TRL name of the option that declares it (or, in ``Rung.trl``, of none).

    ``field``: the name in ``cls`` (None: TRL has no equivalent, ``note`` says what to do instead); ``core``: the
    ``ladder.core`` attribute that computes it; ``value``: the TRL value that reproduces a run (a function of its
    Config, SAME: the option's value, None: the row gives none); ``applies``: whether the row concerns a run (None:
    whenever the run reads the option); ``always``: the row gives its value even where the option's spec is not the
    run's (the param's default); ``cls``: the TRL class, or several (a row for each that the rung maps)."""

    field: str | None
    core: str | None = None
    note: str = ""
    value: Callable[[Any], Any] | str | None = None
    applies: Callable[[Any], bool] | None = None
    cls: str | tuple[str, ...] = GRPO
    always: bool = False

    def classes(self) -> tuple[str, ...]:
        return self.cls if isinstance(self.cls, tuple) else (self.cls,)


@dataclass(frozen=True)
class Mapping:
    """A row of ``ladder.trl.map``: ``trl_class.trl_field`` ↔ ``--ladder_option`` of ``ladder_rung`` (None: no
    flag) → ``ladder.core.core_function``. ``config``: the rung's Config, whose runs (and its subclasses') the row
    concerns."""

    trl_class: str
    trl_field: str | None
    ladder_rung: str
    ladder_option: str | None
    core_function: str | None
    note: str = ""
    value: Callable[[Any], Any] | None = field(default=None, compare=False, repr=False)
    applies: Callable[[Any], bool] | None = field(default=None, compare=False, repr=False)
    config: type | None = field(default=None, compare=False, repr=False)

    def applies_to(self, cfg) -> bool:
        if self.config is not None and not isinstance(cfg, self.config):
            return False
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
    """An agent rung's Config (a grpo Config has no --max-tool-calls)."""
    return hasattr(cfg, "max_tool_calls")


def trl_output_dir(cfg) -> str:
    """GRPOConfig's output_dir: OUT-trl (OUT's default, the run's)."""
    return (cfg.out or f"runs/{'agent' if agent(cfg) else 'grpo'}-seed{cfg.seed}") + "-trl"
