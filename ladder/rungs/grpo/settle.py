"""Every ``auto`` of a grpo (or agent) run, and every default that depends on another value, decided once.

    settle(cfg, model_config, device)   the frozen ``Settled``: the options with the sampler's auto decided for this
                                        device and model (what config.json records), ε_high, the KL correction,
                                        LoRA, activation checkpointing, --dequantize-once, --release-memory,
                                        --optim, the system prompt and the reward weights; a flag the settled run
                                        would not read refused in one line
    settle_known(cfg)                   ``settle`` where the model's config can be read without loading a weight
                                        (--print-config: the rung's ``RESOLVED``; --export-trl)

``train_on`` settles before config.json is written, ``build`` (a lab's or a grader's cfg) once more, which changes
nothing already settled; everything downstream reads the settled values. Each rule below decides one value, and
``settle`` is where they are all asked. What a rung's Config adds to a rule is a method of it:
``model_source()`` (--model as a path or hub id), ``chosen_system_prompt()``, ``sampler_before_settling()`` (the
agent's --train-env-tokens pins the sampler to the trainer's own weights).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from ladder import hub
from ladder.policies import quant
from ladder.rungs import lm_options
from ladder.rungs.grpo import sampler as sampler_settings
from ladder.rungs.grpo.sampler import Sampler
from ladder.runtime.errors import UsageError
from ladder.specs import options_dict

# What --print-config shows of a settled run (``Settled.shown``), in its order: the rung's ``RESOLVED``.
SHOWN = ("lora", "gradient_checkpointing", "dequantize_once", "release_memory", "optim", "clip_eps_high",
         "kl_correction", "sampler_dtype", "sampler_correction", "system_prompt", "reward_weights")


@dataclass(frozen=True)
class Settled:
    """A run's options with every auto and every default that depends on another value decided (``settle``)."""

    cfg: Any                       # the options, the sampler's auto decided: what config.json records
    eps_high: float                # ε_high: --clip-eps-high, or --clip-eps (symmetric, as TRL)
    kl_correction: bool            # the KL estimate weighted by π_θ/π_old (off only with --kl-correction off)
    lora: bool                     # LoRA adapters (--lora, or --qlora's)
    gradient_checkpointing: bool
    dequantize_once: bool
    release_memory: bool
    optim: str                     # adamw | paged_adamw_8bit
    system_prompt: str
    reward_weights: dict           # name → w_f of each reward function

    @property
    def sampler(self) -> Sampler:
        return self.cfg.sampler

    def shown(self) -> dict:
        """Option → its value in the run, as --print-config prints it (``SHOWN``). The KL correction is None with
        --kl-in reward: the loss has no KL term to weigh."""
        kl = None if self.cfg.kl.where == "reward" else "on" if self.kl_correction else "off"
        values = {"lora": self.lora, "gradient_checkpointing": self.gradient_checkpointing,
                  "dequantize_once": self.dequantize_once, "release_memory": self.release_memory, "optim": self.optim,
                  "clip_eps_high": self.eps_high, "kl_correction": kl, "sampler_dtype": self.sampler.dtype,
                  "sampler_correction": self.sampler.correction, "system_prompt": self.system_prompt,
                  "reward_weights": ",".join(f"{w:g}" for w in self.reward_weights.values())}
        return {option: values[option] for option in SHOWN}


# --- the rules, one value each ---------------------------------------------------------------------------------------

def eps_high(cfg) -> float:
    """ε_high: ``--clip-eps-high``, or ``--clip-eps`` when it is not given (symmetric clipping, as TRL). The rung
    passes it to ``core.UpdateConfig``; the core's own default is for its other callers."""
    ratio = cfg.ratio
    return ratio.clip_eps if ratio.clip_eps_high is None else ratio.clip_eps_high


def kl_correction(cfg) -> bool:
    """Whether the KL estimate is weighted by π_θ/π_old (DeepSeek-V3.2's correction, TRL 1.16's default): unless
    --kl-correction off. With --kl-in reward the loss has no KL term; the estimate the update logs stays weighted
    (and TRL's use_bias_correction_kl, which weighs the loss's term, is off)."""
    return cfg.kl.corrected() != "off"


def dequantize_once(cfg, device_type: str) -> bool:
    """--dequantize-once, or on for QLoRA on the CPU when it is not given."""
    given = cfg.efficiency.dequantize_once
    return cfg.adapter.qlora and device_type == "cpu" if given is None else given


def release_memory(cfg, device_type: str) -> bool:
    """--release-memory, or on for QLoRA on the CPU when it is not given."""
    given = cfg.efficiency.release_memory
    return cfg.adapter.qlora and device_type == "cpu" if given is None else given


def optimizer_name(cfg, device_type: str) -> str:
    """--optim; auto is paged 8-bit AdamW for QLoRA on a GPU, AdamW otherwise."""
    if cfg.efficiency.optim != "auto":
        return cfg.efficiency.optim
    return "paged_adamw_8bit" if cfg.adapter.qlora and device_type == "cuda" else "adamw"


def sampler(cfg, device: torch.device, model_config) -> Sampler:
    """--sampler-dtype and --sampler-correction with auto decided for this device and model (``sampler.settle``;
    None for ``model_config``: as given, nothing known to decide auto by); a loss that folds per-token weights into
    its own sequence weight (vespo's) gets token_mask. What the run would not read is refused in one line
    (``Sampler.unread``)."""
    given = cfg.sampler_before_settling()
    per_token = getattr(cfg.objective, "folds_sampler_weight", False)
    settled = given if model_config is None else sampler_settings.settle(given, device, model_config, per_token)
    unread = settled.unread(cfg.sampler) if settled.is_settled() else None
    if unread is not None:
        raise UsageError(unread)
    return settled


# --- all of them, once -----------------------------------------------------------------------------------------------

def settle(cfg, model_config, device: torch.device | None = None) -> Settled:
    """``cfg``'s every auto and dependent default decided, for ``device`` (default: --device) and the model of
    ``model_config`` (None where it cannot be read: the sampler's auto stays as given). A flag the settled run would
    not read is a ``UsageError``."""
    device = torch.device(cfg.device) if device is None else device
    settled_sampler = sampler(cfg, device, model_config)
    if settled_sampler != cfg.sampler:
        cfg = replace(cfg, sampler=settled_sampler)
    kind = device.type
    return Settled(cfg=cfg, eps_high=eps_high(cfg), kl_correction=kl_correction(cfg), lora=lm_options.uses_lora(cfg),
                   gradient_checkpointing=lm_options.gradient_checkpointing(cfg),
                   dequantize_once=dequantize_once(cfg, kind), release_memory=release_memory(cfg, kind),
                   optim=optimizer_name(cfg, kind), system_prompt=cfg.chosen_system_prompt(),
                   reward_weights=cfg.rewards.function_weights())


def settle_known(cfg) -> Settled:
    """``settle`` on --device and the config of --model, read without loading a weight; the sampler's auto left as
    given where that config cannot be read here (a hub id, offline) or the device is absent."""
    try:
        device = quant.check_device(cfg.device)
        model_config = quant.load_config(hub.resolve(cfg.model_source(), "--model"))
    except UsageError:
        return settle(cfg, None)
    return settle(cfg, model_config, device)


_LAST: list = []  # (cfg, its options, its Settled): --print-config asks once per option of RESOLVED


def resolved(cfg) -> dict:
    """``settle_known(cfg).shown()``: what --print-config prints of the settled run (the rung's ``RESOLVED``)."""
    options = options_dict(cfg)
    if not (_LAST and _LAST[0] is cfg and _LAST[1] == options):
        _LAST[:] = [cfg, options, settle_known(cfg).shown()]
    return _LAST[2]
