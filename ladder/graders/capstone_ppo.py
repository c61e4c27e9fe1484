"""Capstone I's grader: properties of a learner's PPO (exercises/capstone1_ppo_cartpole.py) that a wrong loop
breaks, judged by behaviour and within tolerances, with ``ladder.core`` as the oracle where there is one.

    grade(module, name) -> (status, message)     status "passed", "failed" or NOT_IMPLEMENTED

Each property returns None or one line (two at most) saying which property broke, on which input, what was
expected and what came back. All are fast but ``solves_cartpole``, which trains; when it fails, it names the fast
properties that fail. Here: the properties of the parts; in ``capstone_ppo_clauses`` the small clauses
(gae leaves its inputs, update's generator and stats); in ``capstone_ppo_wiring`` how ``train`` joins the parts,
seen by spies (``capstone_ppo_trace``) in short runs. Each runs under ``limit_s()``
(``solves_cartpole``: ``limit_s(training=True)``); one still running then, or one whose code calls ``sys.exit``,
fails in one line naming the learner's function and line.
"""

from __future__ import annotations

import copy
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import gymnasium as gym
import torch

from ladder.runtime.limits import TimedOut, time_limit

from . import ORIGINALS, Stopped, exercise_imports, exit_call, limit_s, load
from .capstone_ppo_cases import GRAD_RTOL, RTOL, UPDATE, close, gae_cases, minibatch, run_update, seeded_agent
from .capstone_ppo_clauses import check_gae_inputs, check_update_generator, check_update_stats
from .capstone_ppo_harness import (
    Heuristic,
    clipped,
    core_config,
    core_loss_and_grads,
    greedy_returns,
    relative_difference,
    replay,
    rows_of,
    total_norm,
    vector_env,
)
from .capstone_ppo_variants import gae_variant, loss_variant
from .capstone_ppo_wiring import (
    check_advantages_wiring,
    check_env_steps,
    check_reproducible,
    check_rollout_chain,
)
from .cases import fmt

WIRING_PROPERTIES = {"rollout_chain": check_rollout_chain, "advantages_wiring": check_advantages_wiring,
                     "env_steps": check_env_steps, "reproducible": check_reproducible}

SHEET = "capstone1_ppo_cartpole.py"
NOT_IMPLEMENTED = "not implemented yet"
VERDICT_S = 60.0   # solves_cartpole's failure grades the fast properties again, for this long at most
SOLVE = dict(total_steps=60_000, seed=0, episodes=20, eval_seed=20_000, threshold=475.0)
BUFFER_KEYS = ("obs", "actions", "logp", "values", "rewards", "terminated", "truncated", "final_values")


def check_agent(m: ModuleType) -> str | None:
    agent = seeded_agent(m)
    obs = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
    action, logp, entropy, value = agent.get_action_and_value(obs)
    got = {"action": action, "logp": logp, "entropy": entropy, "value": value, "get_value": agent.get_value(obs)}
    wrong = {k: tuple(v.shape) for k, v in got.items() if tuple(v.shape) != (5,)}
    if wrong:
        return f"agent: on obs [5, 4], every output must be [5]; got shapes {wrong}"
    if action.dtype != torch.long or not ((action == 0) | (action == 1)).all():
        return f"agent: the sampled actions must be int64 in {{0, 1}}; got {action.dtype} {fmt(action)}"
    logits = agent.actor(obs)
    if tuple(logits.shape) != (5, 2):
        return f"agent: actor(obs [5, 4]) must give logits [5, 2]; got {tuple(logits.shape)}"
    each = [agent.get_action_and_value(obs, torch.full((5,), a))[1] for a in (0, 1)]
    expected = torch.log_softmax(logits, -1)
    if not close(torch.stack(each, -1), expected):
        return f"agent: log π(a|s) for a given a must be log_softmax(actor(s))[a]: expected {fmt(expected)}, " \
               f"got {fmt(torch.stack(each, -1))}"
    checks = {"the sampled action's log-prob": (logp, expected.gather(1, action[:, None]).squeeze(1)),
              "the entropy −Σ π log π": (entropy, -(expected.exp() * expected).sum(-1)),
              "get_action_and_value's value (= get_value's)": (value, got["get_value"])}
    for what, (g, e) in checks.items():
        if not close(g, e):
            return f"agent: {what} on obs {fmt(obs[0])}…: expected {fmt(e)}, got {fmt(g)}"
    if not (logp.requires_grad and value.requires_grad):
        return "agent: get_action_and_value's logp and value must carry gradients (no torch.no_grad inside it)"
    many = obs[:1].expand(4000, 4)
    share, p = agent.get_action_and_value(many)[0].float().mean().item(), expected[0, 1].exp().item()
    if abs(share - p) > 4 * (p * (1 - p) / 4000) ** 0.5 + 1e-3:
        return (f"agent: actions must be sampled from π (not argmax): π(1|s) = {p:.3f}, "
                f"share of 1s in 4000 draws {share:.3f}")
    return None


def check_make_envs(m: ModuleType) -> str | None:
    envs = m.make_envs(3)
    mode = envs.metadata.get("autoreset_mode")
    got = (type(envs).__name__, envs.num_envs, envs.single_observation_space.shape, mode)
    if got != ("SyncVectorEnv", 3, (4,), gym.vector.AutoresetMode.SAME_STEP):
        return f"make_envs: make_envs(3) must be a SyncVectorEnv of 3 CartPoles with SAME_STEP autoreset; got {got}"
    return None


def _rollout(m: ModuleType, N: int = 4, T: int = 40, limit: int = 12, seed: int = 3):
    """The learner's rollout, by a fixed controller, on envs with a time limit of ``limit`` steps."""
    torch.manual_seed(seed)
    agent = Heuristic()
    envs = vector_env(N, limit)
    obs, _ = envs.reset(seed=seed)
    buffer, next_obs = m.collect_rollout(agent, envs, obs, T)
    where = (f"collect_rollout(a fixed controller, N = {N} CartPoles with a {limit}-step time limit reset with "
             f"seed {seed}, T = {T})")
    return agent, buffer, next_obs, where


def check_rollout(m: ModuleType) -> str | None:
    agent, buffer, next_obs, where = _rollout(m)
    missing = [k for k in (*BUFFER_KEYS, "last_values") if k not in buffer]
    if missing:
        return f"rollout: {where}: the buffer lacks {missing}"
    shapes = {k: tuple(buffer[k].shape) for k in buffer}
    want = {**{k: (4, 40) for k in BUFFER_KEYS}, "obs": (4, 40, 4), "last_values": (4,)}
    if any(shapes.get(k) != v for k, v in want.items()):
        return f"rollout: {where}: expected shapes {want}, got {shapes}"
    if any(torch.is_tensor(v) and v.requires_grad for v in buffer.values()):
        return f"rollout: {where}: the buffer must hold no graph (collect under torch.no_grad)"
    truth = replay(agent, buffer["actions"].long(), 4, 3, 12)
    for key in ("obs", "rewards", "terminated", "truncated"):
        bad = (~torch.isclose(buffer[key].float(), truth[key], atol=1e-6)).reshape(4, 40, -1).any(-1).nonzero()
        if len(bad):
            n, t = bad[0].tolist()
            return (f"rollout alignment: {where}: {key}[{n}, {t}] must be what env {n} gave "
                    f"{'before' if key == 'obs' else 'for'} action {t}: expected {fmt(truth[key][n, t])}, "
                    f"got {fmt(buffer[key][n, t])}")
    _, logp, _, values = agent.get_action_and_value(truth["obs"].flatten(0, 1), buffer["actions"].long().flatten())
    for key, e in (("logp", logp.view(4, 40)), ("values", values.view(4, 40))):
        if not close(buffer[key], e):
            n, t = (~torch.isclose(buffer[key], e, atol=RTOL)).nonzero()[0].tolist()
            return (f"rollout: {where}: {key}[{n}, {t}] must be the agent's at obs[{n}, {t}] (the obs the action "
                    f"was taken from): expected {e[n, t]:.5f}, got {float(buffer[key][n, t]):.5f}")
    if not (close(next_obs, truth["next_obs"]) and close(buffer["last_values"], agent.get_value(truth["next_obs"]))):
        return f"rollout: {where}: the obs returned and last_values must be the obs after step T − 1 and V of it"
    return None


def check_truncation_bootstrap(m: ModuleType) -> str | None:
    agent, buffer, _, where = _rollout(m, limit=6)   # no CartPole episode falls within 6 steps: all are cut
    truth = replay(agent, buffer["actions"].long(), 4, 3, 6)
    truncated = truth["truncated"].bool()
    got = buffer["final_values"].float()
    if not close(got[truncated], truth["final_values"][truncated]):
        n, t = (truncated & ~torch.isclose(got, truth["final_values"], atol=RTOL)).nonzero()[0].tolist()
        returned = agent.get_value(torch.cat([truth["obs"][:, 1:], truth["next_obs"][:, None]], dim=1)).detach()
        why = ("\n  that is V of the obs step() returned — the new episode's first; read info['final_obs']"
               if close(got[truncated], returned[truncated]) else "")
        return (f"truncation bootstrap: {where}: final_values[{n}, {t}] (env {n} hit its time limit at step {t}) "
                f"must be V(info['final_obs'][{n}]) = {truth['final_values'][n, t]:.5f}, got {float(got[n, t]):.5f}"
                f"{why}")
    return None


def check_gae(m: ModuleType) -> str | None:
    for i, (what, c) in enumerate(gae_cases()):
        bootstrap = c["truncated"] * (1 - c["terminated"]) * c["final_values"]   # V(final obs) where truncated only
        dones = ((c["terminated"] + c["truncated"]) > 0).float()
        expected = ORIGINALS["gae"](c["rewards"] + c["gamma"] * bootstrap, c["values"], dones, c["gamma"], c["lam"],
                            c["last_values"])
        got = m.gae(**{k: v.clone() if torch.is_tensor(v) else v for k, v in c.items()})
        for name, g, e in zip(("advantages", "returns"), got, expected):
            if not close(g, e):
                if variant := gae_variant(m):
                    return (f"gae: case {i + 1}: {what}: expected {name} {fmt(e)}, got {fmt(g)}\n"
                            f"  that is GAE where {variant}")
                inputs = ", ".join(f"{k} {fmt(c[k])}" for k in ("rewards", "values", "final_values", "last_values"))
                return (f"gae: case {i + 1}: {what}, γ = {c['gamma']}, λ = {c['lam']} (final_values hold noise where "
                        f"not truncated), {inputs}:\n  expected {name} {fmt(e)}, got {fmt(g)}")
    return None


def check_loss(m: ModuleType) -> str | None:
    for i, (eps, c_v, c_h) in enumerate([(0.2, 0.5, 0.0), (0.1, 1.0, 0.01), (0.3, 0.25, 0.1)]):
        agent = seeded_agent(m, i)
        mb = minibatch(agent, 16, i)
        expected, expected_grads = core_loss_and_grads(agent, mb, core_config(eps, c_v, c_h))
        loss, _ = m.ppo_loss(agent, {k: v.clone() for k, v in mb.items()}, eps, c_v, c_h)
        loss.backward()
        grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in agent.parameters()]
        where = f"loss: ppo_loss on a minibatch of 16 (π_old ≠ π_θ), ε = {eps}, c_v = {c_v}, c_H = {c_h}"
        if not close(loss, expected):
            variant = loss_variant(agent, mb, eps, c_v, c_h, loss.item())
            why = f"\n  that is the loss with {variant}" if variant else ""
            return f"{where}: expected core.compute_loss's {expected:.6f}, got {loss.item():.6f}{why}"
        if (d := relative_difference(grads, expected_grads)) > GRAD_RTOL:
            return f"{where}: the loss {loss.item():.6f} is right but its gradient differs from the core's by {d:.2e}"
    return None


def check_optimiser_steps(m: ModuleType) -> str | None:
    _, _, steps, where, _ = run_update(m, 1e3)
    expected = UPDATE["num_epochs"] * UPDATE["num_minibatches"]
    return None if len(steps) == expected else f"optimiser steps: {where}: expected μ·M = {expected}, got {len(steps)}"


def check_minibatches(m: ModuleType) -> str | None:
    _, batch, steps, where, _ = run_update(m, 1e3)
    M, n = UPDATE["num_minibatches"], len(batch["actions"])
    rows = [None if s["minibatch"] is None else rows_of(s["minibatch"], batch["obs"]) for s in steps]
    if len(steps) != UPDATE["num_epochs"] * M or None in rows:
        return f"minibatches: {where}: each of the μ·M steps must follow a loss on n/M = {n // M} rows of the batch"
    for e in range(UPDATE["num_epochs"]):
        epoch = rows[e * M:(e + 1) * M]
        if sorted(r for mb in epoch for r in mb) != list(range(n)) or {len(mb) for mb in epoch} != {n // M}:
            return (f"minibatches: {where}: epoch {e + 1}'s {M} minibatches must split the {n} rows, each row once; "
                    f"got rows {epoch}")
    orders = [sum(rows[e * M:(e + 1) * M], []) for e in range(UPDATE["num_epochs"])]
    if orders[0] == list(range(n)) or all(o == orders[0] for o in orders):
        return f"minibatches: {where}: the rows must be shuffled anew each epoch; got the orders {orders}"
    return None


def _core_step_grads(steps, start, batch, max_grad_norm) -> Callable[[int, str], list[torch.Tensor]]:
    """core_grad(k, old): the core's gradient at step k's weights, on step k's minibatch, clipped to max_grad_norm;
    π_old the rollout's log-probs (old = "rollout") or π_θ's at that step ("current")."""
    cfg = core_config(UPDATE["clip_eps"], UPDATE["value_coef"], UPDATE["entropy_coef"])

    def core_grad(k: int, old: str) -> list[torch.Tensor]:
        agent = copy.deepcopy(start)
        with torch.no_grad():
            for p, w in zip(agent.parameters(), steps[k]["weights"]):
                p.copy_(w)
        mb = {key: v[rows_of(steps[k]["minibatch"], batch["obs"])] for key, v in batch.items()}
        old_logp = None if old == "rollout" else agent.get_action_and_value(mb["obs"], mb["actions"])[1].detach()
        return clipped(core_loss_and_grads(agent, mb, cfg, old_logp)[1], max_grad_norm)
    return core_grad


def _piled_up(got: list[torch.Tensor], expected: list[list[torch.Tensor]]) -> bool:
    """Whether ``got`` is the sum of the last step's core gradient and those of some steps just before it."""
    for first in range(len(expected) - 1):
        total = [sum(grads) for grads in zip(*expected[first:])]
        if relative_difference(got, total) <= GRAD_RTOL:
            return True
    return False


def _loss_fails(m: ModuleType) -> bool:
    try:
        return check_loss(m) is not None
    except Exception:   # noqa: BLE001 - the learner's ppo_loss raised: the loss property fails
        return True


def _not_the_cores(m: ModuleType, got: list[torch.Tensor], expected: list[list[torch.Tensor]],
                   if_recomputed: list[torch.Tensor]) -> str:
    """Why a step's gradient is not the core's (``expected``: the core's of this step and every one before):
    π_old recomputed, gradients piled up, the loss wrong, a norm of its own, or something else."""
    if relative_difference(got, if_recomputed) <= GRAD_RTOL:
        return ("π_old re-recorded from π_θ after the first optimiser step (the ratio is 1 again): use the "
                "rollout's log-probs")
    if _piled_up(got, expected):
        return ("the gradient handed over is the sum of this and earlier minibatches' gradients: "
                "optimizer.zero_grad() before each backward")
    got_norm, expected_norm = total_norm(got), total_norm(expected[-1])
    direction = relative_difference([g / got_norm for g in got], [e / expected_norm for e in expected[-1]])
    if direction > GRAD_RTOL:
        return ("the gradient handed to the optimiser is not the core's: fix the loss first (the loss property "
                "fails)" if _loss_fails(m) else "the gradient handed to the optimiser is not the core's (the loss? "
                "the order of zero_grad, backward, clip and step?)")
    if got_norm < expected_norm:
        return (f"the core's gradient clipped to norm {got_norm:.4g}, though max_grad_norm = 1000 clips nothing here: "
                f"a clip norm that ignores max_grad_norm (hard-coded?)")
    return f"the core's direction, {got_norm / expected_norm:.4g} × its norm (a loss scaled by a constant?)"


def check_pi_old(m: ModuleType) -> str | None:
    start, batch, steps, where, _ = run_update(m, 1e3)
    if check_minibatches(m) or check_optimiser_steps(m):
        return f"π_old: {where}: needs the optimiser steps and minibatches right first"
    core_grad, expected = _core_step_grads(steps, start, batch, 1e3), []
    for k, step in enumerate(steps):
        expected.append(core_grad(k, "rollout"))
        if (d := relative_difference(step["grads"], expected[-1])) > GRAD_RTOL:
            e, j = divmod(k, UPDATE["num_minibatches"])
            why = _not_the_cores(m, step["grads"], expected, core_grad(k, "current"))
            return (f"π_old: {where}: step {k + 1} (epoch {e + 1}, minibatch {j + 1}): {why}; ‖g − g_core‖/‖g_core‖ "
                    f"= {d:.2e}, the core's loss with π_old = the rollout's log-probs, on that minibatch")
    return None


def check_grad_clip(m: ModuleType) -> str | None:
    _, _, steps, where, _ = run_update(m, 0.01)
    for k, step in enumerate(steps):
        norm = total_norm(step["grads"])
        if norm > 0.01 * (1 + 1e-3):
            return f"grad clip: {where}: step {k + 1} was handed a gradient of norm {norm:.4g}, expected ≤ 0.01"
    return None


def check_evaluate(m: ModuleType) -> str | None:
    torch.manual_seed(0)
    agent = Heuristic()
    expected, got = greedy_returns(agent, 6, 40), m.evaluate(agent, episodes=6, seed=40)
    if not close(torch.as_tensor(list(got), dtype=torch.float32), torch.tensor(expected)):
        return (f"evaluate: evaluate(a fixed controller, episodes=6, seed=40): greedy episodes (argmax of actor's "
                f"logits), episode i seeded 40 + i; expected returns {expected}, got {list(got)}")
    return None


def check_solves_cartpole(m: ModuleType) -> str | None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(SOLVE["seed"])
        agent, history = m.train(total_steps=SOLVE["total_steps"], seed=SOLVE["seed"])
    finally:
        torch.set_num_threads(threads)
    where = f"train(total_steps={SOLVE['total_steps']}, seed={SOLVE['seed']})"
    used = history[-1]["env_steps"] if history else 0
    if used > SOLVE["total_steps"]:
        return f"solves CartPole: {where} took {used} env steps, over its budget"
    returns = greedy_returns(agent, SOLVE["episodes"], SOLVE["eval_seed"])
    mean = sum(returns) / len(returns)
    if mean < SOLVE["threshold"]:
        return (f"solves CartPole: {where}, then {SOLVE['episodes']} greedy episodes (seeds {SOLVE['eval_seed']}…): "
                f"expected a mean return ≥ {SOLVE['threshold']:g}, got {mean:.1f} after {used} env steps\n"
                f"  {_verdict(m)}")
    return None


def _verdict(m: ModuleType) -> str:
    """Which of the fast properties fail now, each under its own limit, all within VERDICT_S: where to look first."""
    start, failing, unchecked = time.monotonic(), [], []
    fast = [name for name in PROPERTIES if name != "solves_cartpole"]
    for name in fast:
        if time.monotonic() - start > VERDICT_S:
            unchecked.append(name)
        elif grade(m, name)[0] != "passed":
            failing.append(name)
    left = f" ({', '.join(unchecked)} not checked: over {VERDICT_S:g} s)" if unchecked else ""
    if failing:
        return f"the fast properties that fail, to fix first: {', '.join(failing)}{left}"
    if unchecked:
        return f"the fast properties checked pass{left}"
    return (f"the fast properties (all {len(fast)}) pass: look at the learning itself "
            f"(the hyperparameters: the contract suggests some that solve it)")


PROPERTIES: dict[str, Callable[[ModuleType], str | None]] = {
    "agent": check_agent, "make_envs": check_make_envs, "rollout": check_rollout,
    "truncation_bootstrap": check_truncation_bootstrap, "gae": check_gae, "gae_inputs": check_gae_inputs,
    "loss": check_loss, "optimiser_steps": check_optimiser_steps, "minibatches": check_minibatches,
    "update_generator": check_update_generator, "pi_old": check_pi_old, "grad_clip": check_grad_clip,
    "update_stats": check_update_stats, "evaluate": check_evaluate, **WIRING_PROPERTIES,
    "solves_cartpole": check_solves_cartpole,
}


LABELS = {"agent": "agent", "make_envs": "make_envs", "rollout": "rollout",
          "truncation_bootstrap": "truncation bootstrap", "gae": "gae", "gae_inputs": "gae inputs", "loss": "loss",
          "optimiser_steps": "optimiser steps", "minibatches": "minibatches", "update_generator": "update generator",
          "pi_old": "π_old", "grad_clip": "grad clip", "update_stats": "update stats", "evaluate": "evaluate",
          "rollout_chain": "rollout chain", "advantages_wiring": "advantages wiring", "env_steps": "env steps",
          "reproducible": "reproducible", "solves_cartpole": "solves CartPole"}


def _in_sheet(e: BaseException, module: ModuleType) -> tuple[str, int] | None:
    """The innermost frame of the learner's file that the exception passed through: (function, line)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == module.__file__]
    return (frames[-1].name, frames[-1].lineno) if frames else None


def _at(where: tuple[str, int] | None) -> str:
    return f" in {where[0]}, line {where[1]} of {SHEET}" if where else ""


def grade(module: ModuleType, name: str) -> tuple[str, str]:
    """One property of a loaded capstone: ("passed", ""), ("failed", message) or (NOT_IMPLEMENTED, message).
    It runs under ``limit_s()``; past it, or on a ``sys.exit``, it fails naming the learner's function."""
    seconds = limit_s(training=name == "solves_cartpole")
    try:
        with time_limit(seconds, LABELS[name]):
            message = PROPERTIES[name](module)
    except TimedOut as e:
        if e.what != LABELS[name]:   # an outer limit's: not this property's to report
            raise
        where = _in_sheet(e, module)
        return "failed", (f"{LABELS[name]}: {where[0]} did not return within {seconds:g} s (line {where[1]} of "
                          f"{SHEET})" if where else f"{LABELS[name]}: did not finish within {seconds:g} s")
    except SystemExit as e:
        return "failed", f"{LABELS[name]}: called {exit_call(e)}{_at(_in_sheet(e, module))}"
    except NotImplementedError as e:
        where = _in_sheet(e, module)
        return NOT_IMPLEMENTED, NOT_IMPLEMENTED + (f" ({where[0]})" if where else "")
    except Exception as e:   # noqa: BLE001 - the learner's code raised: say where, in one line
        text = str(e).splitlines()[0] if str(e) else ""
        return "failed", f"{LABELS[name]}: raised {type(e).__name__}{_at(_in_sheet(e, module))}: {text}"
    return ("passed", "") if message is None else ("failed", message)


def grade_file(directory: str | Path, name: str) -> tuple[str, str]:
    """Grade ``name`` on the sheet in ``directory`` (a missing or stub file: not implemented yet)."""
    path = Path(directory) / SHEET
    if not path.is_file():
        return NOT_IMPLEMENTED, f"{NOT_IMPLEMENTED} ({path} not found)"
    try:
        module = load(path)
    except NotImplementedError:
        return NOT_IMPLEMENTED, f"{NOT_IMPLEMENTED} (the module's top level)"
    except Stopped as e:     # it called sys.exit, or hung, at import
        return "failed", str(e)
    except Exception as e:   # noqa: BLE001
        return "failed", f"{SHEET} does not import: {type(e).__name__}: {e}"
    with exercise_imports(path.parent):   # an earlier exercise imported inside a function is found at call time
        return grade(module, name)
