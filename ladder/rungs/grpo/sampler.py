"""π_sampler: the weights grpo samples from and how the update corrects for them — one spec, its flags.

    Sampler(dtype, correction, clip_max, clip_min, off_policy_mask)
        dtype        sample from the weights rounded to it (``policies.low_precision``): same | bfloat16 | float16
        options()    ``core.SamplerOptions``: w = π_old/π_sampler truncated or masked in [C_min, C_max], and the
                     off-policy mask δ (``core.off_policy``)
        records_logp(lag)   whether sampling keeps π_sampler's own log-probs: a sampler of its own dtype, a
                     correction asked for, or a lagging π_rollout (``lag`` = --max-staleness)

``Config.sampler`` holds it, built from ``--sampler-dtype``, ``--sampler-correction``, ``--sampler-clip-max``,
``--sampler-clip-min`` and ``--off-policy-mask``. The lag itself (``--max-staleness``) is ``staleness``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder import core
from ladder.cli import OneOf, non_negative, positive
from ladder.core.off_policy import CORRECTIONS
from ladder.specs import FixedSpec, Param
from ladder.trl.row import Mapping, same


@dataclass(frozen=True)
class Sampler:
    dtype: str = "same"
    correction: str = "none"
    clip_max: float | None = 3.0        # C_max of w
    clip_min: float | None = None       # C_min of w
    off_policy_mask: float | None = None  # δ

    def options(self) -> core.SamplerOptions:
        return core.SamplerOptions(self.correction, self.clip_min, self.clip_max, self.off_policy_mask)

    def records_logp(self, lag: int) -> bool:
        """With --sampler-dtype same and no lag, a correction weighs the sampling kernels' small mismatch."""
        return self.dtype != "same" or self.correction != "none" or lag > 0

    def conflict(self) -> str | None:
        if self.clip_min is not None and self.clip_max is not None and self.clip_min >= self.clip_max:
            return f"--sampler-clip-min {self.clip_min:g} must be below --sampler-clip-max {self.clip_max:g}"
        return None


PARAMS = (
    Param("sampler_dtype", Sampler, "dtype", "sample from the weights rounded to this dtype, a cheaper sampler than "
          "the trainer (π_sampler ≠ π_old, as vLLM beside TRL): same | bfloat16 | float16. The sampler's log-probs are "
          "recorded as it samples. On a CPU, bfloat16 is fast only with AVX512-BF16 or AMX and float16 only with "
          "AVX512-FP16 or AMX-FP16; elsewhere torch emulates them, slower than float32",
          OneOf(("same", "bfloat16", "float16"))),
    Param("sampler_correction", Sampler, "correction", "weigh the policy term by w = π_old/π_sampler "
          "(core.off_policy): none | token_truncate | token_mask | sequence_truncate | sequence_mask (TRL's "
          "vllm_importance_sampling_mode). π_sampler is the distribution the tokens were drawn from, --top-p's cut "
          "renormalised: under --top-p < 1 a token's w is the mass its step kept. With --sampler-dtype same, "
          "--top-p 1 and no --max-staleness it corrects the small mismatch of the cached sampling kernels, at the "
          "cost of a log-softmax over the vocabulary per sampled token", OneOf(CORRECTIONS)),
    Param("sampler_clip_max", Sampler, "clip_max", "C_max of w: truncated to it, or masked above it (TRL's "
          "vllm_importance_sampling_clip_max; from Python, None: no bound)", positive()),
    Param("sampler_clip_min", Sampler, "clip_min", "C_min of w: truncated to it, or masked below it (None: no bound)",
          non_negative()),
    Param("off_policy_mask", Sampler, "off_policy_mask", "δ: drop a completion with Â < 0 whose mean log π_sampler − "
          "log π_θ exceeds δ (DeepSeek-V3.2's off-policy sequence mask; TRL's off_policy_mask_threshold; None: off). "
          "Under --top-p < 1 the mean includes −log Z_t, Z_t the mass each step's cut kept", non_negative()),
)


OPTION = FixedSpec("sampler", Sampler, PARAMS)

G = "GRPOConfig"
# The flags' rows of ladder.trl.map (GRPOConfig's vllm_importance_sampling_*: TRL's sampler is vLLM, ladder's the
# weights rounded), in the order the map places them.
TRL_ROWS = (
    Mapping(G, "use_vllm", "grpo", "sampler_dtype", None, "TRL samples with vLLM (its own engine and kernels); "
            "ladder with the trainer's weights rounded to --sampler-dtype. Not set by the export: add use_vllm=True "
            "where vLLM runs", applies=lambda cfg: cfg.sampler.dtype != "same"),
    Mapping(G, "vllm_importance_sampling_correction", "grpo", "sampler_correction", "sampler_correction",
            "TRL's default is on (with use_vllm); ladder's --sampler-correction none is off",
            lambda cfg: cfg.sampler.correction != "none"),
    Mapping(G, "vllm_importance_sampling_mode", "grpo", "sampler_correction", "sampler_weights",
            "the same four modes (TRL's default sequence_mask)", same("sampler_correction"),
            lambda cfg: cfg.sampler.correction != "none"),
    Mapping(G, "vllm_importance_sampling_clip_max", "grpo", "sampler_clip_max", "sampler_weights", "C_max",
            same("sampler_clip_max")),
    Mapping(G, "vllm_importance_sampling_clip_min", "grpo", "sampler_clip_min", "sampler_weights", "C_min",
            same("sampler_clip_min")),
    Mapping(G, "off_policy_mask_threshold", "grpo", "off_policy_mask", "off_policy_keep",
            "δ of DeepSeek-V3.2's off-policy sequence mask", same("off_policy_mask")),
)
