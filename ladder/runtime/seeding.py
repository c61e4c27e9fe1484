"""Every random generator a run draws from, seeded together, saved and restored together (a checkpoint keeps
them, so that ``--resume`` continues the run exactly)."""

from __future__ import annotations

import random

import numpy as np
import torch


def rng_state() -> dict:
    """Every random generator a run draws from: torch's (CPU, and every CUDA device's once CUDA is in
    use), NumPy's and Python's."""
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
