"""The inputs Capstone I's grader feeds a learner's functions, and its tolerances: shared by its properties.

    close(got, expected)    equal shapes and values within RTOL
    seeded_agent(m, seed)   the learner's Agent(), built after torch.manual_seed(seed)
    gae_cases()             GAE inputs with every kind of ending (final_values hold noise where not truncated)
    minibatch(agent, b, s)  a minibatch of b rows whose π_old differs from the agent's π_θ
    run_update(m, ...)      the learner's update on a batch of 32, through the Recorder and CountingAdam
"""

from __future__ import annotations

import copy
import random
from types import ModuleType

import numpy as np
import torch

from .capstone_ppo_harness import CountingAdam, Recorder
from .cases import fmt

RTOL = 1e-5        # values: the loss, GAE, log-probs
GRAD_RTOL = 1e-4   # ‖g − g_core‖ / ‖g_core‖ over all parameters
UPDATE = dict(num_epochs=3, num_minibatches=4, clip_eps=0.2, value_coef=0.5, entropy_coef=0.01)


def close(got, expected, rtol: float = RTOL) -> bool:
    got, expected = torch.as_tensor(got, dtype=torch.float32), torch.as_tensor(expected, dtype=torch.float32)
    return got.shape == expected.shape and torch.allclose(got, expected, rtol=rtol, atol=rtol)


def seeded_agent(m: ModuleType, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return m.Agent()


def seed_global_rngs(seed: int) -> None:
    """torch's, numpy's and Python's global RNGs, all from ``seed``: what a run must not depend on."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def gae_cases() -> list[tuple[str, dict]]:
    g = torch.Generator().manual_seed(30)
    cases = []
    for k, (N, T) in enumerate([(1, 3), (1, 3), (1, 3), (2, 4), (1, 1), (3, 8), (4, 5), (2, 9), (1, 6)]):
        ends = torch.rand(N, T, generator=g)
        terminated, truncated = (ends < 0.2).float(), ((ends > 0.75) | (ends < 0.05)).float()
        if k < 3:   # one env, one kind of ending at t = 1 (k = 0: none)
            terminated, truncated = torch.zeros(1, 3), torch.zeros(1, 3)
            (terminated if k == 1 else truncated)[0, 1] = float(k > 0)
        cases.append((f"N = {N}, T = {T}, terminated {fmt(terminated)}, truncated {fmt(truncated)}", dict(
            rewards=torch.rand(N, T, generator=g), values=torch.randn(N, T, generator=g), terminated=terminated,
            truncated=truncated, final_values=torch.randn(N, T, generator=g), last_values=torch.randn(N, generator=g),
            gamma=[0.9, 0.99, 0.5][k % 3], lam=[0.95, 0.8, 1.0][k % 3])))
    return cases


def minibatch(agent, b: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(b, 4, generator=g)
    with torch.no_grad():
        actions, logp, _, values = agent.get_action_and_value(obs)
    return {"obs": obs, "actions": actions, "logp": logp + 0.3 * torch.randn(b, generator=g),
            "values": values + 0.1 * torch.randn(b, generator=g), "advantages": torch.randn(b, generator=g),
            "returns": torch.randn(b, generator=g)}


def run_update(m: ModuleType, max_grad_norm: float, n: int = 32, generator_seed: int = 1,
               global_seed: int | None = None):
    """The learner's ``update`` on a batch whose π_old is the agent's own (as after a rollout), through the
    Recorder and CountingAdam; ``global_seed``: the global RNGs seeded with it just before the call.
    Returns the agent before, the batch, the optimiser's steps, where (for messages) and what update returned."""
    agent = seeded_agent(m)
    batch = minibatch(agent, n, 7)
    with torch.no_grad():
        batch["logp"] = agent.get_action_and_value(batch["obs"], batch["actions"])[1]
    start = copy.deepcopy(agent)
    recorder = Recorder(agent)
    optimizer = CountingAdam(agent.parameters(), recorder, lr=3e-3, eps=1e-5)
    if global_seed is not None:
        seed_global_rngs(global_seed)
    stats = m.update(recorder, optimizer, {k: v.clone() for k, v in batch.items()}, max_grad_norm=max_grad_norm,
                     **UPDATE, generator=torch.Generator().manual_seed(generator_seed))
    where = (f"update(μ = {UPDATE['num_epochs']}, M = {UPDATE['num_minibatches']}, a batch of {n}, "
             f"max_grad_norm = {max_grad_norm})")
    return start, batch, optimizer.steps, where, stats
