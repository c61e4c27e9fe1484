"""How grpo samples its completions — one spec, its flags.

    GRPOGeneration(max_new_tokens, temperature, top_p, min_new_tokens)
        the language-model rungs' ``lm_options.Generation``, and grpo's own: at least ``min_new_tokens`` tokens (EOS
        suppressed until then; for benchmarks)

``Config.generation`` holds it, built from ``--max-new-tokens``, ``--temperature``, ``--top-p`` and
``--min-new-tokens`` (listed where it always was, before ``--eval-every``); the agent gives ``--max-new-tokens`` its
own default and words (a whole trajectory's budget).
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.domains import MAX_TOKENS, count
from ladder.rungs.lm_options import LENGTH_TRL, Generation, generation_params
from ladder.specs import FixedSpec, Param
from ladder.trl_rows import TRL

LENGTH_HELP = ("completion length limit (tokens); a completion cut off here has no final answer and scores 0 (512: "
               "TRL's max_completion_length; at 256 over half of Qwen2.5-0.5B-Instruct's GSM8K answers are cut off)")


@dataclass(frozen=True)
class GRPOGeneration(Generation):
    min_new_tokens: int = 0


MIN_NEW_TOKENS_TRL = (TRL("generation_kwargs", note="EOS suppressed until min_new_tokens",
                          value=lambda cfg: {"min_new_tokens": cfg.generation.min_new_tokens},
                          applies=lambda cfg: cfg.generation.min_new_tokens > 0),)


def option(max_new_tokens: int | None = None, length_help: str = LENGTH_HELP, length_trl: tuple = LENGTH_TRL
           ) -> FixedSpec:
    """``Config.generation``'s spec: grpo's, or a rung's own default, words and TRL names for --max-new-tokens (the
    agent's)."""
    params = (*generation_params(GRPOGeneration, max_new_tokens, length_help, length_trl),
              Param("min_new_tokens", GRPOGeneration, "min_new_tokens", "force at least this many tokens (EOS "
                    "suppressed until then; for benchmarks)", count(0, MAX_TOKENS), trl=MIN_NEW_TOKENS_TRL))
    return FixedSpec("generation", GRPOGeneration, params, placed={"min_new_tokens": "eval_every"})


OPTION = option()
