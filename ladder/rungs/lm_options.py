"""The options both language-model rungs share (``ppo-sentiment``, ``grpo``), declared once.

A rung's ``Config`` inherits them and re-declares a field only to give it its own default (the model), or its own
spec: a subclass with the rung's own fields (grpo's ``GRPOGeneration``, ``GRPOEfficiency``) or the same one with its
own defaults (``generation_params(max_new_tokens=16)``, ``efficiency_params(chunk_size=64)``).

Three typed specs (``ladder.specs``), each one field set by flags of its own: ``adapter`` (``Adapter``: --qlora,
--lora, --lora-r, --lora-alpha), ``efficiency`` (``Efficiency``: --gradient-checkpointing, --sampler-loop,
--chunk-size) and ``generation`` (``Generation``: --max-new-tokens, --temperature, --top-p).
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import MAX_LORA_ALPHA, MAX_STEPS, MAX_TOKENS, Flag, Number, OneOf, Text, count, int_range, interval
from ladder.options import RunOptions, option
from ladder.policies import SAMPLER_LOOPS
from ladder.specs import FixedSpec, Param
from ladder.trl_rows import GRPO_TRAINER, RLOO, SAME, TRL


@dataclass(frozen=True)
class Adapter:
    """The weights trained: LoRA adapters (``lora``) of rank ``r`` scaled by ``alpha`` / r, on a full-precision base
    or a 4-bit one (``qlora``, which implies them); π_ref = the base with the adapter disabled."""

    qlora: bool = False
    lora: bool = False
    r: int = 16
    alpha: int = 32

    def uses_lora(self) -> bool:
        """--qlora puts LoRA adapters on its 4-bit base, so it implies --lora."""
        return self.lora or self.qlora


ADAPTER = FixedSpec("adapter", Adapter, (
    Param("qlora", Adapter, "qlora", "4-bit nf4 base (double quantisation) + LoRA adapters + activation "
          "checkpointing (implies --lora); π_ref = the base with the adapter disabled", Flag(),
          trl=(TRL("quantization_config", note="BitsAndBytesConfig: 4-bit nf4, double quantisation, compute dtype "
                   "bf16 (CUDA) / float32 (CPU)", cls=GRPO_TRAINER),
               TRL("peft_config", note="LoRA on every linear layer", cls=GRPO_TRAINER))),
    Param("lora", Adapter, "lora", "LoRA adapters on a full-precision base; π_ref = the base with the adapter "
          "disabled (no copy)", Flag(),
          trl=(TRL("peft_config", note="LoraConfig(target_modules='all-linear', dropout 0)", cls=GRPO_TRAINER),)),
    Param("lora_r", Adapter, "r", "LoRA rank r, at most 4096 (a 7B model's width, where the adapter is no longer "
          "low-rank)", int_range(1, 4096), trl=(TRL("peft_config", note="LoraConfig.r", cls=GRPO_TRAINER),)),
    Param("lora_alpha", Adapter, "alpha", "LoRA α (the adapter's update is scaled by α / r; at most 65536, 16 × the "
          "largest --lora-r)", count(1, MAX_LORA_ALPHA),
          trl=(TRL("peft_config", note="LoraConfig.lora_alpha", cls=GRPO_TRAINER),)),
))


@dataclass(frozen=True)
class Efficiency:
    """What changes a run's memory and time, never its numbers: activation checkpointing (None: on with --qlora,
    ``gradient_checkpointing``), the sampling loop, the positions per chunk of the lm_head / log-softmax."""

    gradient_checkpointing: bool | None = None
    sampler_loop: str = "ladder"
    chunk_size: int = 16


def gradient_checkpointing(cfg) -> bool:
    """--gradient-checkpointing, or on with --qlora when it is not given."""
    given = cfg.efficiency.gradient_checkpointing
    return cfg.adapter.qlora if given is None else given


CHECKPOINTING_TRL = (TRL("gradient_checkpointing", note="default: on with --qlora (TRL's default: on)",
                         value=gradient_checkpointing),)
SAMPLER_LOOP_TRL = (TRL(None, note="TRL samples with transformers' generate (without vLLM); ladder's own decode loop "
                        "draws from the same distribution: speed only"),)
CHUNK_TRL = (TRL(None, note="ladder's chunked lm_head/log-softmax: memory only"),)


def efficiency_params(spec: type = Efficiency, chunk_size: int | None = None) -> tuple[Param, ...]:
    """The flags of ``Efficiency`` (or a rung's subclass ``spec``); ``chunk_size``: a rung's own default."""
    own = {} if chunk_size is None else {"own_default": chunk_size}
    return (
        Param("gradient_checkpointing", spec, "gradient_checkpointing", "recompute activations in backward "
              "(default: on with --qlora)", Flag(), trl=CHECKPOINTING_TRL),
        Param("sampler_loop", spec, "sampler_loop", "the sampling loop: ladder (its own KV-cached decode loop: the "
              "shared prompts encoded once, finished rows out of the batch, exactly the q_t it records) | generate "
              "(transformers' generate, as TRL samples without vLLM)", OneOf(SAMPLER_LOOPS), parser_checks=False,
              trl=SAMPLER_LOOP_TRL),
        Param("chunk_size", spec, "chunk_size", "positions per chunk of the lm_head / log-softmax (rows·chunk·vocab "
              "floats at once)", count(1, MAX_TOKENS), trl=CHUNK_TRL, **own),
    )


@dataclass(frozen=True)
class Generation:
    """How completions are sampled: at most ``max_new_tokens`` tokens, from softmax(logits/τ) cut to the nucleus
    ``top_p`` (1: off); π_old, π_θ and π_ref score the whole distribution at the same τ."""

    max_new_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0


LENGTH_HELP = "completion length limit (tokens)"
LENGTH_TRL = (TRL("max_completion_length", "aggregate", "completion length limit (and dr_grpo's constant L_max); 512 "
                  "by default in both", SAME),
              TRL("max_completion_length", cls=RLOO))
TEMPERATURE_TRL = (TRL("temperature", note="sampling τ; log-probs use the same τ in both", value=SAME),
                   TRL("temperature", cls=RLOO))
TOP_P_TRL = (TRL("top_p", note="nucleus sampling. ladder's π_sampler is the distribution drawn from, the cut "
                 "renormalised, so π_old/π_sampler is the kept mass; TRL's vLLM log-probs are the uncut ones "
                 "(trl#6789)", value=SAME),
             TRL("top_p", cls=RLOO))


def generation_params(spec: type = Generation, max_new_tokens: int | None = None, length_help: str = LENGTH_HELP,
                      length_trl: tuple = LENGTH_TRL) -> tuple[Param, ...]:
    """The flags of ``Generation`` (or a rung's subclass ``spec``); ``max_new_tokens``, ``length_help`` and
    ``length_trl``: a rung's own default, words and TRL names for it."""
    own = {} if max_new_tokens is None else {"own_default": max_new_tokens}
    return (
        Param("max_new_tokens", spec, "max_new_tokens", length_help, count(1, MAX_TOKENS), trl=length_trl, **own),
        Param("temperature", spec, "temperature", "sampling temperature τ, at least 0.01 (log-probs use the same τ "
              "and scale as logits/τ: below 0.01 a logit change of 0.9 overflows the float32 ratio π_θ/π_old; below "
              "~1e-36 logits/τ itself overflows float32 and bfloat16) and at most 100 (sampling is uniform long "
              "before)", Number(float, low=0.01, high=100.0, limit=True), trl=TEMPERATURE_TRL),
        Param("top_p", spec, "top_p", "nucleus sampling p (1: off): tokens are drawn from the smallest set of most "
              "likely tokens holding p of the mass, renormalised; π_old, π_θ and π_ref score the whole distribution "
              "(grpo: --sampler-correction weighs the difference)", interval(0, 1, open_low=True),
              trl=TOP_P_TRL),
    )


GENERATION = FixedSpec("generation", Generation, generation_params())

# --sampler-loop and --chunk-size are listed where they always were, after the sampling options
EFFICIENCY_PLACED = {"sampler_loop": "print_samples", "chunk_size": "print_samples"}
EFFICIENCY = FixedSpec("efficiency", Efficiency, efficiency_params(), placed=EFFICIENCY_PLACED)


@dataclass
class LMOptions(RunOptions):
    model: str = option("gpt2", "causal LM: hub id or local directory", Text())
    adapter: Adapter = option(Adapter(), "the LoRA adapter and the base it sits on; its flags are the spec's fields",
                              spec=ADAPTER)
    efficiency: Efficiency = option(Efficiency(), "what changes the run's memory and time, never its numbers; its "
                                                  "flags are the spec's fields", spec=EFFICIENCY)
    generation: Generation = option(Generation(), "how completions are sampled: their length limit, τ and "
                                                  "nucleus p; its flags are the spec's fields", spec=GENERATION)
    print_samples: int = option(10, "print sample prompt → completion → reward lines every N updates (0: never)",
                                count(0, MAX_STEPS), aliases=("--sample-every",))
    threads: int = option(0, "torch CPU threads (0: torch's default; at most 1024, more than a CPU has "
                                 "cores)", int_range(0, 1024),
                          trl=(TRL(None, note="the script calls torch.set_num_threads itself",
                                   applies=lambda cfg: cfg.threads > 0),))


# Options whose value is decided when the run starts, from other options: the rungs load their model with these,
# and --print-config prints them.
def uses_lora(cfg: LMOptions) -> bool:
    """--qlora puts LoRA adapters on its 4-bit base, so it implies --lora."""
    return cfg.adapter.uses_lora()



RESOLVED = {"lora": uses_lora, "gradient_checkpointing": gradient_checkpointing}  # a rung's RESOLVED (protocol)
