"""Capstone I's wiring properties: how a learner's ``train`` joins its parts, seen by spies in a short run.

    rollout_chain       each rollout starts from the obs the last one ended on; the first from reset(seed=seed)
    advantages_wiring   update gets gae's advantages and returns for the same (env, step), matched by obs
    env_steps           history's env_steps are the steps taken (N·T a rollout), within the budget, one rollout short
                        of it at most
    reproducible        one seed, one result: two runs give the same weights whatever the global RNGs held

CartPole is easy enough that a trainer wired wrong may learn anyway; these say which joint is wrong, in seconds.
"""

from __future__ import annotations

from types import ModuleType

import torch

from .capstone_ppo_cases import RTOL, close, seed_global_rngs
from .capstone_ppo_harness import relative_difference, vector_env
from .capstone_ppo_trace import Trace, kept_global_rngs, traced_train
from .cases import fmt

WIRING = dict(total_steps=1_500, seed=1)
WHERE = f"train(total_steps={WIRING['total_steps']}, seed={WIRING['seed']})"
TOO_FEW = (f"the wiring checks need 2 or more: with your defaults, one rollout (N·T) of at most "
           f"{WIRING['total_steps'] // 2} env steps")


def _no_calls(label: str, trace: Trace, names: tuple[str, ...]) -> str | None:
    """One line if ``train`` made no call of one of ``names`` through the module."""
    missing = [name for name in names if not trace.calls(name)]
    if missing:
        return (f"{label}: {WHERE} made no call of {', '.join(missing)} through the module: train must call "
                f"collect_rollout, gae and update by their module-level names")
    return None


def check_rollout_chain(m: ModuleType) -> str | None:
    trace = traced_train(m, **WIRING)
    rollouts = trace.calls("collect_rollout")
    if len(rollouts) < 2:
        return f"rollout chain: {WHERE} made {len(rollouts)} call(s) of collect_rollout; {TOO_FEW}"
    envs = vector_env(len(rollouts[0].obs))
    reset = torch.as_tensor(envs.reset(seed=WIRING["seed"])[0], dtype=torch.float32)
    envs.close()
    if not close(rollouts[0].obs, reset):
        return (f"rollout chain: {WHERE}: the first rollout must start from envs.reset(seed={WIRING['seed']})'s obs: "
                f"expected env 0's {fmt(reset[0])}, got {fmt(rollouts[0].obs[0])}")
    for k in range(1, len(rollouts)):
        if not close(rollouts[k].obs, rollouts[k - 1].next_obs):
            again = _why_reset_obs(rollouts[k]) if close(rollouts[k].obs, reset) else ""
            return (f"rollout chain: {WHERE}: rollout {k + 1} must start from the next_obs rollout {k} returned, "
                    f"env 0's {fmt(rollouts[k - 1].next_obs[0])}; got {fmt(rollouts[k].obs[0])}{again}")
    return None


def _why_reset_obs(rollout) -> str:
    """A rollout that starts from reset(seed=seed)'s obs: the envs reset again (their first step then goes as a
    fresh reset's would), or that obs passed again while the envs ran on (a stale obs)."""
    obs, actions = rollout.buffer["obs"], rollout.buffer["actions"]
    if obs.shape[1] < 2:
        return " (reset(seed)'s obs)"
    envs = vector_env(len(obs))
    envs.reset(seed=WIRING["seed"])
    stepped = torch.as_tensor(envs.step(actions[:, 0].long().numpy())[0], dtype=torch.float32)
    envs.close()
    if close(obs[:, 1], stepped):
        return " (a fresh envs.reset(seed)'s obs, and the envs stepped on from it: reset before each rollout: " \
               "continue from next_obs)"
    return " (rollout 1's first obs again, while the envs ran on: a stale obs)"


def _same(x: torch.Tensor, y: torch.Tensor, match: torch.Tensor) -> torch.Tensor:
    """[n]: row i of x equals y at one of the rollout's places whose obs is row i's (match [n, N·T])."""
    return (match & torch.isclose(x[:, None], y[None, :], rtol=RTOL, atol=RTOL)).any(1)


def _whitened(x: torch.Tensor) -> torch.Tensor:
    return (x - x.mean()) / (x.std() + 1e-8)


def _advantages_wrong(k: int, batch: dict, rollout, gae_out) -> str | None:
    """Why update k's batch does not hold gae's advantages and returns for its rows (None: it does)."""
    obs = rollout.buffer["obs"]   # [N, T, 4]
    batch_obs = batch["obs"].reshape(-1, obs.shape[-1])
    match = (batch_obs[:, None, :] - obs.reshape(1, -1, obs.shape[-1])).abs().amax(-1) <= 1e-6   # [n, N·T]
    if not match.any(1).all():
        i = int((~match.any(1)).nonzero()[0])
        return f"update {k}'s batch row {i} has obs {fmt(batch_obs[i])}, which is not in the rollout before it"
    place = match.float().argmax(1)   # the (env, step) of each row, flat: n·T + t
    T = obs.shape[1]
    advantages, returns = (x.reshape(-1) for x in gae_out)
    got = {key: batch[key].reshape(-1) for key in ("advantages", "returns")}
    affine = close(_whitened(got["advantages"]), _whitened(advantages[place]), rtol=1e-4)   # whitened per batch
    if not (_same(got["advantages"], advantages, match).all() or affine):
        if _same(got["advantages"], returns, match).all():
            return f"update {k} got gae's returns R_t = Â_t + V(s_t) as its advantages, not Â_t"
        i = int((~_same(got["advantages"], advantages, match)).nonzero()[0])
        n, t = divmod(int(place[i]), T)
        return (f"update {k}'s batch row {i} (env {n}, step {t}, by its obs) has advantage "
                f"{float(got['advantages'][i]):.5f}; gae gave Â = {float(advantages[place[i]]):.5f} there")
    if not _same(got["returns"], returns, match).all():
        i = int((~_same(got["returns"], returns, match)).nonzero()[0])
        n, t = divmod(int(place[i]), T)
        return (f"update {k}'s batch row {i} (env {n}, step {t}, by its obs) has return "
                f"{float(got['returns'][i]):.5f}; gae gave R = {float(returns[place[i]]):.5f} there")
    return None


def check_advantages_wiring(m: ModuleType) -> str | None:
    trace = traced_train(m, **WIRING)
    if message := _no_calls("advantages wiring", trace, ("collect_rollout", "gae", "update")):
        return message
    for k, (rollout, gae_out, batch, _) in enumerate(trace.updates(), start=1):
        if rollout is None or gae_out is None:
            return f"advantages wiring: {WHERE}: update {k} came before any rollout and gae"
        if tuple(gae_out[0].shape) != tuple(rollout.buffer["rewards"].shape):
            return (f"advantages wiring: {WHERE}: gae's advantages before update {k} are {tuple(gae_out[0].shape)}, "
                    f"the rollout's rewards {tuple(rollout.buffer['rewards'].shape)}")
        if why := _advantages_wrong(k, batch, rollout, gae_out):
            return f"advantages wiring: {WHERE}: {why}"
    return None


def check_env_steps(m: ModuleType) -> str | None:
    trace = traced_train(m, **WIRING)
    if message := _no_calls("env steps", trace, ("collect_rollout", "update")):
        return message
    rollouts, budget = trace.calls("collect_rollout"), WIRING["total_steps"]
    taken, per = sum(r.env_steps for r in rollouts), rollouts[-1].env_steps
    did = f"{WHERE} took {taken} env steps ({len(rollouts)} rollouts of N·T = {per})"
    if taken > budget:
        return f"env steps: {did}, over its budget: round the number of rollouts down, {budget} // {per}"
    if budget - taken >= per:
        return f"env steps: {did}: another rollout fits in the budget, total_steps // (N·T) = {budget // per} in all"
    so_far = [env_steps for *_, env_steps in trace.updates()]
    got = [record.get("env_steps") if isinstance(record, dict) else None for record in trace.history]
    if got == so_far:
        return None
    N = len(rollouts[-1].obs)
    per_env = [g * N for g in got if g is not None] == so_far
    hint = f" (counted per env: one step of the N = {N} envs is {N} env steps)" if per_env else ""
    return (f"env steps: {WHERE}: history's env_steps (one record per update) must be the env steps taken by then, "
            f"{so_far}; got {got}{hint}")


def check_reproducible(m: ModuleType) -> str | None:
    runs = []
    with kept_global_rngs():
        for global_seed in (101, 202):
            seed_global_rngs(global_seed)
            runs.append(traced_train(m, **WIRING))
    weights = [[p.detach() for p in run.agent.parameters()] for run in runs]
    if (d := relative_difference(weights[0], weights[1])) <= RTOL:
        return None
    done = f"{WHERE} twice, the global RNGs (torch, numpy, random) seeded differently before each"
    firsts = [run.calls("collect_rollout")[:1] for run in runs]
    if not all(firsts):
        why = "(train made no call of collect_rollout through the module)"
    elif relative_difference(firsts[0][0].weights, firsts[1][0].weights) > RTOL:
        why = "the agent's first weights differ: torch.manual_seed(seed) before Agent()"
    elif not close(firsts[0][0].obs, firsts[1][0].obs):
        why = "the envs' first obs differ: envs.reset(seed=seed)"
    else:
        why = "the runs start alike and part later: an RNG that train does not seed (numpy's? the shuffle's?)"
    return f"reproducible: {done}: the weights differ by {d:.2e} (relative); {why}"
