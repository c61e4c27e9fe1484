"""ladder: policy-gradient RL from CartPole to LLMs, on one shared core."""

__version__ = "0.1.0"
