"""Where a GRPO run runs and what it loads around its training: this process's device and threads, the task's
problems and tokenizer (checked against the model's context before any weight loads), and the trained weights
written at the end. ``grpo.train_on`` and the recipe call these; they are read from ``grpo`` too
(``grpo.load_task``)."""

from __future__ import annotations

import sys

import torch

from ladder import hub
from ladder.policies import quant
from ladder.policies.low_precision import check_sampler_dtype, fast_on_this_cpu
from ladder.rungs.grpo import sampler as sampler_settings
from ladder.rungs.grpo.options import Config
from ladder.runtime.distributed import is_main_process, launched_processes, process_device
from ladder.runtime.runlog import UsageError
from ladder.tasks import math_eval, math_problems


def placement(cfg: Config) -> torch.device:
    """This process's device and thread count; what cannot run here is a one-line error."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = process_device(quant.check_device(cfg.device))
    if cfg.prompts_per_step % launched_processes():
        raise UsageError(f"--prompts-per-step {cfg.prompts_per_step} cannot be shared equally by "
                         f"{launched_processes()} processes; use a multiple of {launched_processes()}")
    if cfg.efficiency.optim == "paged_adamw_8bit" and device.type != "cuda":
        raise UsageError("--optim paged_adamw_8bit needs a CUDA GPU; use --optim adamw on the CPU")
    return device


def check_sampler(cfg: Config, device: torch.device, given: Config) -> None:
    """The settled sampler can run here (one line if not); the run's first lines say what ``auto`` chose, and
    when a dtype the CPU emulates is asked for."""
    dtype = check_sampler_dtype(cfg.sampler.dtype, device)
    if not is_main_process():
        return
    if given.sampler.dtype == "auto" and dtype is not None:
        correction, clip_max = cfg.sampler.correction, cfg.sampler.clip_max
        weighed = "uncorrected" if correction == "none" else f"--sampler-correction {correction}, C_max {clip_max}"
        least = f"{sampler_settings.BF16_FROM_PARAMETERS // 10**6}M"
        print(f"sampler: {cfg.sampler.dtype} weights, {weighed} (--sampler-dtype auto: {device.type} computes "
              f"{cfg.sampler.dtype} natively and the model has ≥ {least} weights); "
              f"--sampler-dtype same samples with the trainer's own", file=sys.stderr)
    if dtype is not None and device.type == "cpu" and not fast_on_this_cpu(dtype):
        print(f"note: this CPU has no {cfg.sampler.dtype} matrix instructions, so torch emulates them: sampling is "
              f"slower than in float32 (the mismatch it shows is the real one)", file=sys.stderr)


def load_task(cfg: Config) -> tuple[str, list[dict], list[dict], str, object]:
    """(system prompt, training problems, held-out problems, model path, tokenizer), checked to fit the
    model's context before any weight loads."""
    system_prompt = math_problems.system_prompt(cfg.problems.task, cfg.problems.system_prompt)
    problems, held_out = cfg.problems.split(cfg.prompts_per_step)
    model_path = hub.resolve(math_problems.resolve_math_model(cfg.model), "--model")
    tokenizer = quant.load_tokenizer(model_path)
    math_eval.check_context(tokenizer, quant.load_config(model_path), problems + held_out, system_prompt,
                            cfg.generation.max_new_tokens)
    return system_prompt, problems, held_out, model_path, tokenizer


def save_trained(model, out, lora: bool) -> None:
    """OUT/adapter (LoRA: the trained adapter, not π_ref's) or OUT/model (full fine-tuning)."""
    if lora:
        model.save_pretrained(out / "adapter", selected_adapters=[model.active_adapter])
    else:
        model.save_pretrained(out / "model")
