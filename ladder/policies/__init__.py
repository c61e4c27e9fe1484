"""Policies implement the core's one requirement: ``evaluate(batch) -> (logp, entropy, values)``."""

SAMPLER_LOOPS = ("ladder", "generate")  # a language model's sampling loop: policies.decode, or transformers' generate
