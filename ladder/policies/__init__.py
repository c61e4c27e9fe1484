"""Policies implement the core's one requirement: ``evaluate(batch) -> (logp, entropy, values)``."""
