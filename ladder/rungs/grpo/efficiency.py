"""What changes a grpo run's memory and time, never its numbers — one spec, its flags.

    GRPOEfficiency(gradient_checkpointing, sampler_loop, chunk_size, dequantize_once, release_memory, optim)
        the language-model rungs' ``lm_options.Efficiency``, and grpo's own: sampling from the 4-bit base dequantized
        once per batch, glibc's mmap threshold fixed, the optimiser (None and auto: decided once, by ``settle``)

``Config.efficiency`` holds it, built from ``--gradient-checkpointing``, ``--sampler-loop``, ``--chunk-size``,
``--dequantize-once``, ``--release-memory`` and ``--optim``, each listed where it always was.
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import Flag, OneOf
from ladder.rungs.lm_options import EFFICIENCY_PLACED, Efficiency, efficiency_params
from ladder.specs import FixedSpec, Param
from ladder.trl_rows import TRL, optim


@dataclass(frozen=True)
class GRPOEfficiency(Efficiency):
    dequantize_once: bool | None = None
    release_memory: bool | None = None
    optim: str = "auto"


PARAMS = (
    *efficiency_params(GRPOEfficiency),
    Param("dequantize_once", GRPOEfficiency, "dequantize_once", "sample with the 4-bit base dequantized once per "
          "batch, not once per token: the same samples, faster, the dequantized base held while sampling (default: "
          "on with --qlora on the CPU)", Flag(),
          trl=(TRL(None, note="ladder's 4-bit sampling on the CPU: speed only",
                   applies=lambda cfg: cfg.adapter.qlora),)),
    Param("release_memory", GRPOEfficiency, "release_memory", "glibc: a fixed mmap threshold, so freed buffers leave "
          "RSS at once: far less peak memory, a slower update (default: on with --qlora on the CPU)", Flag(),
          trl=(TRL(None, note="ladder's glibc mmap threshold: memory only (for TRL: MALLOC_MMAP_THRESHOLD_=131072 in "
                   "the environment)", applies=lambda cfg: cfg.adapter.qlora),)),
    Param("optim", GRPOEfficiency, "optim", "auto (8-bit paged AdamW on CUDA with --qlora, else AdamW), adamw, "
          "paged_adamw_8bit", OneOf(("auto", "adamw", "paged_adamw_8bit")), parser_checks=False,
          trl=(TRL("optim", note="auto: paged_adamw_8bit with --qlora on CUDA, else AdamW (weight decay 0 in both)",
                   value=optim),)),
)

PLACED = {**EFFICIENCY_PLACED, "dequantize_once": "steps", "release_memory": "steps", "optim": "steps"}
OPTION = FixedSpec("efficiency", GRPOEfficiency, PARAMS, placed=PLACED)
