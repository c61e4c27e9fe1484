"""π_sampler: the weights grpo samples from and how the update corrects for them — one spec, its flags.

    Sampler(dtype, correction, clip_max, clip_min, off_policy_mask)
        dtype        sample from the weights rounded to it (``policies.low_precision``): auto | same | bfloat16 |
                     float16
        settled(bf16_native, parameters)   auto decided: bfloat16 where this device computes it natively and
                     the model has ≥ BF16_FROM_PARAMETERS weights (measured faster there, slower below), else
                     same; a correction left auto is TRL's default, sequence_mask, under a sampler of its own dtype
        options()    ``core.SamplerOptions``: w = π_old/π_sampler truncated or masked in [C_min, C_max], and the
                     off-policy mask δ (``core.off_policy``)
        records_logp(lag)   whether sampling keeps π_sampler's own log-probs: a sampler of its own dtype, a
                     correction asked for, or a lagging π_rollout (``lag`` = --max-staleness)
        unread(given)   the line refusing the bounds of w given to a run that computes no w

    settle(sampler, device, model_config, per_token)   auto decided for this device and model: what
                     ``ladder.rungs.grpo.settle`` calls, once per run, before config.json is written

``Config.sampler`` holds it, built from ``--sampler-dtype``, ``--sampler-correction``, ``--sampler-clip-max``,
``--sampler-clip-min`` and ``--off-policy-mask``. The lag itself (``--max-staleness``) is ``staleness``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch

from ladder import core
from ladder.core.off_policy import CORRECTIONS
from ladder.domains import MAX_SCALE, OneOf, non_negative, positive
from ladder.policies import quant
from ladder.policies.low_precision import bf16_native
from ladder.specs import FixedSpec, Param
from ladder.trl_rows import SAME, TRL

AUTO = "auto"
# The smallest model auto samples in bfloat16. At Qwen2.5-0.5B's size (494M) a bf16 sampler cut sampling to
# 0.38–0.45× TRL's, against 0.56–0.90× in float32 (benchmarks/RESULTS.md); ladder's tiny models (< 1M) stay on the
# trainer's weights, so that what the course's runs learn never depends on the processor.
BF16_FROM_PARAMETERS = 100_000_000


@dataclass(frozen=True)
class Sampler:
    dtype: str = AUTO
    correction: str = AUTO
    clip_max: float | None = 3.0        # C_max of w
    clip_min: float | None = None       # C_min of w
    off_policy_mask: float | None = None  # δ

    def settled(self, bf16_native: bool, parameters: int, per_token: bool = False) -> Sampler:
        """``auto`` decided: dtype bfloat16 where the device computes it natively and the model has at least
        ``BF16_FROM_PARAMETERS`` weights, else same; correction sequence_mask (TRL's default, C_max = clip_max)
        when the sampler has a dtype of its own — token_mask for a loss that takes per-token weights only
        (``per_token``: vespo) —, else none. What is not auto stays as given."""
        dtype = self.dtype
        if dtype == AUTO:
            dtype = "bfloat16" if bf16_native and parameters >= BF16_FROM_PARAMETERS else "same"
        correction = self.correction
        if correction == AUTO:
            correction = "none" if dtype == "same" else "token_mask" if per_token else "sequence_mask"
        return replace(self, dtype=dtype, correction=correction)

    def is_settled(self) -> bool:
        return AUTO not in (self.dtype, self.correction)

    def unless_settled(self) -> Sampler:
        """This sampler, or — auto not yet decided for a model (``ladder.rungs.grpo.settle``, which ``build`` and
        ``train_on`` run first) — the trainer's own weights: no device or model is known to decide otherwise."""
        return self if self.is_settled() else self.settled(bf16_native=False, parameters=0)

    def options(self) -> core.SamplerOptions:
        sampler = self.unless_settled()
        return core.SamplerOptions(sampler.correction, self.clip_min, self.clip_max, self.off_policy_mask)

    def records_logp(self, lag: int) -> bool:
        """With --sampler-dtype same and no lag, a correction weighs the sampling kernels' small mismatch."""
        sampler = self.unless_settled()
        return sampler.dtype != "same" or sampler.correction != "none" or lag > 0

    def conflict(self) -> str | None:
        if self.clip_min is not None and self.clip_max is not None and self.clip_min >= self.clip_max:
            return f"--sampler-clip-min {self.clip_min:g} must be below --sampler-clip-max {self.clip_max:g}"
        return None

    def unread(self, given: Sampler) -> str | None:
        """This settled sampler corrects nothing (correction none): the line refusing the bounds C_min, C_max of w
        that ``given`` (the sampler as asked for) sets, which the run would never read (None: none set)."""
        if self.correction != "none":
            return None
        default = {f.name: f.default for f in fields(Sampler)}
        flags = [f"--sampler-clip-{end}" for end in ("min", "max") if getattr(self, f"clip_{end}")
                 != default[f"clip_{end}"]]
        if not flags:
            return None
        if given.correction == "none":
            why = "--sampler-correction none"
        elif given.dtype == AUTO:
            why = ("--sampler-dtype auto settled on the trainer's own weights (same) for this model here, so "
                   "--sampler-correction auto is none")
        else:
            why = f"--sampler-dtype {self.dtype} with --sampler-correction auto is none"
        return (f"{' and '.join(flags)} {'bounds' if len(flags) == 1 else 'bound'} the weight w = π_old/π_sampler, "
                f"which this run never computes: {why}; give --sampler-correction (token_truncate, token_mask, "
                f"sequence_truncate, sequence_mask) to weigh it, or drop {' and '.join(flags)}")


def settle(sampler: Sampler, device: torch.device, model_config, per_token: bool = False) -> Sampler:
    """``sampler`` with --sampler-dtype and --sampler-correction ``auto`` decided for this device and this model
    (``Sampler.settled``: bfloat16 where it is native and the model large enough; ``per_token``: token_mask for a
    loss that folds per-token weights in); as given when neither is auto. ``ladder.rungs.grpo.settle`` calls it."""
    if sampler.is_settled():
        return sampler
    parameters = quant.parameter_count(model_config) if sampler.dtype == AUTO else 0
    return sampler.settled(bf16_native(device), parameters, per_token)


PARAMS = (
    Param("sampler_dtype", Sampler, "dtype", "sample from the weights rounded to this dtype, a cheaper sampler than "
          "the trainer (π_sampler ≠ π_old, as vLLM beside TRL): auto | same | bfloat16 | float16. auto: bfloat16 "
          "where this device computes it natively and the model has ≥ 100M weights (the run's first line says so), "
          "else same. The sampler's log-probs are recorded as it samples. On a CPU, bfloat16 is fast only with "
          "AVX512-BF16 or AMX and float16 only with AVX512-FP16 or AMX-FP16; elsewhere torch emulates them, slower "
          "than float32", OneOf((AUTO, "same", "bfloat16", "float16")),
          trl=(TRL("use_vllm", note="TRL samples with vLLM (its own engine and kernels); ladder with the trainer's "
                   "weights rounded to --sampler-dtype. Not set by the export: add use_vllm=True where vLLM runs",
                   applies=lambda cfg: cfg.sampler.dtype not in ("same", AUTO)),)),
    Param("sampler_correction", Sampler, "correction", "weigh the policy term by w = π_old/π_sampler "
          "(core.off_policy): auto | none | token_truncate | token_mask | sequence_truncate | sequence_mask (TRL's "
          "vllm_importance_sampling_mode). auto: sequence_mask (TRL's default; token_mask under --loss-type "
          "vespo) when --sampler-dtype is not same, else none (a stale rollout, --max-staleness, is corrected only "
          "when asked). π_sampler is the distribution the tokens were drawn from, --top-p's cut "
          "renormalised: under --top-p < 1 a token's w is the mass its step kept. With --sampler-dtype same, "
          "--top-p 1 and no --max-staleness it corrects the small mismatch of the cached sampling kernels, at the "
          "cost of a log-softmax over the vocabulary per sampled token", OneOf((AUTO, *CORRECTIONS)),
          trl=(TRL("vllm_importance_sampling_correction", "sampler_correction", "TRL's default is on (with use_vllm); "
                   "ladder's --sampler-correction none is off, auto on under a sampler of its own dtype",
                   lambda cfg: cfg.sampler.correction != "none"),
               TRL("vllm_importance_sampling_mode", "sampler_weights", "the same four modes (TRL's default "
                   "sequence_mask, which auto picks)", lambda cfg: trl_mode(cfg),
                   lambda cfg: cfg.sampler.correction != "none"))),
    Param("sampler_clip_max", Sampler, "clip_max", "C_max of w: truncated to it, or masked above it (TRL's "
          "vllm_importance_sampling_clip_max; from Python, None: no bound)", positive(MAX_SCALE),
          trl=(TRL("vllm_importance_sampling_clip_max", "sampler_weights", "C_max", SAME),)),
    Param("sampler_clip_min", Sampler, "clip_min", "C_min of w: truncated to it, or masked below it (None: no bound)",
          non_negative(MAX_SCALE), trl=(TRL("vllm_importance_sampling_clip_min", "sampler_weights", "C_min", SAME),)),
    Param("off_policy_mask", Sampler, "off_policy_mask", "δ: drop a completion with Â < 0 whose mean log π_sampler − "
          "log π_θ exceeds δ (DeepSeek-V3.2's off-policy sequence mask; TRL's off_policy_mask_threshold; None: off). "
          "Under --top-p < 1 the mean includes −log Z_t, Z_t the mass each step's cut kept", non_negative(MAX_SCALE),
          trl=(TRL("off_policy_mask_threshold", "off_policy_keep", "δ of DeepSeek-V3.2's off-policy sequence mask",
                   SAME),)),
)


OPTION = FixedSpec("sampler", Sampler, PARAMS)


def trl_mode(cfg) -> str:
    """TRL's vllm_importance_sampling_mode: ladder's --sampler-correction; auto (not decided where the model's
    config cannot be read) as TRL's default, which it decides for a sampler of its own dtype."""
    return "sequence_mask" if cfg.sampler.correction == AUTO else cfg.sampler.correction
