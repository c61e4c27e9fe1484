"""``ladder.trl.map``'s rows for RewardConfig (the reward-model rung) and DPOConfig (the dpo rung): each with the value
that reproduces a run, from which ``ladder.trl.export_preferences`` writes its script.

A ladder update of B pairs in M minibatches is M optimiser steps of B / M pairs, so ``per_device_train_batch_size`` is
B / M and ``max_steps`` is ``--steps`` × M; ladder's learning rate is fixed and its AdamW has no weight decay; it does
not truncate, trains in float32 (TRL's default bf16 would run π_ref under bfloat16 autocast on a CPU) and turns dropout
off, as TRL does by default.
"""

from __future__ import annotations

from ladder.trl_rows import Mapping, const, same


def _pairs_per_step(cfg) -> int:
    return cfg.batch_size // cfg.num_minibatches


def _optimizer_steps(cfg) -> int:
    return cfg.steps * cfg.num_minibatches


def _grad_norm(cfg) -> float:
    return cfg.max_grad_norm if cfg.max_grad_norm is not None else 0.0


def _shared(trl_class: str, rung: str, loss: str) -> tuple[Mapping, ...]:
    return (
        Mapping(trl_class, "learning_rate", rung, "lr", None, "", value=same("lr")),
        Mapping(trl_class, "per_device_train_batch_size", rung, "batch_size", "update",
                "pairs per optimiser step: --batch-size ÷ --num-minibatches", value=_pairs_per_step),
        Mapping(trl_class, "max_steps", rung, "steps", None, "optimiser steps: --steps × --num-minibatches",
                value=_optimizer_steps),
        Mapping(trl_class, "max_grad_norm", rung, "max_grad_norm", "update", "0: no clipping", value=_grad_norm),
        Mapping(trl_class, "seed", rung, "seed", None, "", value=same("seed")),
        Mapping(trl_class, "logging_steps", rung, "eval_every", None, "TRL logs its own training statistics",
                value=same("eval_every")),
        Mapping(trl_class, "lr_scheduler_type", rung, None, None, "ladder's learning rate stays fixed",
                value=const("constant")),
        Mapping(trl_class, "warmup_steps", rung, None, None, "no warm-up in ladder", value=const(0)),
        Mapping(trl_class, "weight_decay", rung, None, None, "ladder's AdamW has none", value=const(0.0)),
        Mapping(trl_class, "max_length", rung, None, None, "ladder does not truncate", value=const(None)),
        Mapping(trl_class, "bf16", rung, None, loss, "float32, as ladder (TRL's default bf16 would run the "
                "reference under bfloat16 autocast on a CPU)", value=const(False)),
        Mapping(trl_class, "disable_dropout", rung, None, None, "as ladder", value=const(True)),
        Mapping(trl_class, "report_to", rung, None, None, "no tracker", value=const("none")),
    )


REWARD_ROWS = _shared("RewardConfig", "reward-model", "bradley_terry_loss") + (
    Mapping("RewardConfig", "model_init_kwargs", "reward-model", "dtype", None, "the dtype r_φ loads in",
            value=lambda cfg: {"dtype": cfg.dtype}),
)
PREFERENCE_ROWS = REWARD_ROWS + _shared("DPOConfig", "dpo", "dpo_loss") + (
    Mapping("DPOConfig", "beta", "dpo", "beta", "dpo_loss", "β of the implicit reward β·log π_θ/π_ref",
            value=same("beta")),
    Mapping("DPOConfig", "loss_type", "dpo", None, "dpo_loss", "core.DPO is the sigmoid loss",
            value=const(["sigmoid"])),
)
