"""Notebook 2's vector envs: a short real run of N CartPoles under each of gymnasium's autoreset modes, and the
bootstrap targets V(s_{t+1}) read from it.

Three CartPoles with a time limit of ``TIME_LIMIT`` steps, each driven by a fixed rule of its observation
(env 0 always pushes right, env 1 balances, env 2 always pushes left), so that within ``STEPS`` steps episodes
end both ways: terminated (the pole fell) and truncated (the time limit). ``record(mode)`` steps them in a
``SyncVectorEnv`` and keeps what ``step()`` returned; ``autoreset_view`` (in ``vector_envs_view``) draws it.

    SAME_STEP   an env that ends at step t returns its NEW episode's first observation at once; the finished
                episode's last one is in info["final_obs"][i], set where info["_final_obs"][i] is True.
    NEXT_STEP   (gymnasium's default) step t returns the finished episode's last observation; the next step()
                resets that env: it ignores the action, returns the new first observation with reward 0 and
                both flags False, and is no transition of any episode.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

TIME_LIMIT = 10          # steps before an episode is truncated (CartPole-v1's own is 500)
STEPS = 20               # vector steps recorded
SEED = 60                # reset seed: with it, one step holds a termination, a truncation and a running env
RULES = ("push right", "balance", "push left")
POLE_LIMIT = 12 * 2 * np.pi / 360   # |φ| (the pole angle) beyond which CartPole terminates (12°, ≈ 0.2095 rad)
MODES = {"SAME_STEP": gym.vector.AutoresetMode.SAME_STEP, "NEXT_STEP": gym.vector.AutoresetMode.NEXT_STEP}


def make_envs(mode: str, time_limit: int = TIME_LIMIT) -> gym.vector.SyncVectorEnv:
    """``len(RULES)`` CartPole-v1 copies stepped together, with autoreset ``mode`` ("SAME_STEP" or "NEXT_STEP")."""
    return gym.make_vec("CartPole-v1", num_envs=len(RULES), vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": MODES[mode]}, max_episode_steps=time_limit)


def rule_actions(obs: np.ndarray) -> np.ndarray:
    """One action per env from its observation [x, ẋ, φ, φ̇] (φ the pole angle): right (1), the balancing rule
    1 if φ + φ̇/2 > 0 else 0, left (0)."""
    balance = int(obs[1, 2] + 0.5 * obs[1, 3] > 0)
    return np.array([1, balance, 0])


def record(mode: str, steps: int = STEPS, seed: int = SEED) -> dict[str, np.ndarray]:
    """Step the envs ``steps`` times; every array is ``[steps, N, …]``.

    ``obs_in[t]`` is the observation the actions of step t were chosen from, ``obs[t]`` what step t returned,
    ``final_obs[t]`` info["final_obs"] where info["_final_obs"] is set (``has_final``) and NaN elsewhere.
    """
    envs = make_envs(mode)
    obs, _ = envs.reset(seed=seed)
    out: dict[str, list] = {k: [] for k in ("obs_in", "actions", "obs", "rewards", "terminated", "truncated",
                                             "final_obs", "has_final")}
    for _ in range(steps):
        actions = rule_actions(obs)
        out["obs_in"].append(obs)
        obs, rewards, terminated, truncated, info = envs.step(actions)
        has_final = info.get("_final_obs", np.zeros(len(RULES), dtype=bool))
        final_obs = np.full_like(obs, np.nan)
        for i in np.flatnonzero(has_final):
            final_obs[i] = info["final_obs"][i]
        returned = {"actions": actions, "obs": obs, "rewards": rewards, "terminated": terminated,
                    "truncated": truncated, "final_obs": final_obs, "has_final": has_final}
        for key, value in returned.items():
            out[key].append(value)
    envs.close()
    return {k: np.asarray(v) for k, v in out.items()}


def reset_step_obs(action: int) -> np.ndarray:
    """Under NEXT_STEP: what env 0 (pushing right) returns on the step after its first episode ended, when that
    step is passed ``action``; whatever the action, it is the new episode's first observation."""
    envs = make_envs("NEXT_STEP")
    envs.reset(seed=SEED)
    ended = False
    while not ended:
        _, _, terminated, truncated, _ = envs.step(np.array([1, 1, 1]))
        ended = bool(terminated[0] or truncated[0])
    obs, *_ = envs.step(np.array([action, 1, 1]))
    envs.close()
    return obs[0]


def real_transitions(rec: dict[str, np.ndarray], mode: str) -> np.ndarray:
    """[steps, N] bool: whether step t of env i is a transition (s_t, a_t, r_t, s_{t+1}) of an episode.
    Under NEXT_STEP the step after an env ended only resets it; under SAME_STEP every step is real."""
    real = np.ones_like(rec["terminated"])
    if mode == "NEXT_STEP":
        ended = rec["terminated"] | rec["truncated"]
        real[1:] = ~ended[:-1]
    return real


def next_states(rec: dict[str, np.ndarray], mode: str) -> np.ndarray:
    """[steps, N, 4]: s_{t+1} of each transition, the observation its episode reached. SAME_STEP: info's
    final_obs where the episode ended, the returned obs elsewhere; NEXT_STEP: the returned obs."""
    if mode == "NEXT_STEP":
        return rec["obs"]
    return np.where(rec["has_final"][..., None], rec["final_obs"], rec["obs"])


def critic(obs: np.ndarray) -> np.ndarray:
    """A stand-in critic V(s) = 10 · (1 − |φ| / 0.2095), φ the pole angle: 10 with the pole upright, 0 at the
    angle where CartPole terminates. It stands for any V; ``bootstrap_values`` does not depend on its form."""
    return 10.0 * (1.0 - np.abs(obs[..., 2]) / POLE_LIMIT)


def bootstrap_values(obs: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, final_obs: np.ndarray,
                     value=critic) -> np.ndarray:
    """V(s_{t+1}) for one SAME_STEP step of N envs, as the TD target r_t + γ·V(s_{t+1}) needs it:

        0                 where terminated (the episode is over: no future),
        V(final_obs)      where truncated only (the time limit cut a state that has a future),
        V(obs)            otherwise (the returned obs is the episode's next state).

    ``obs`` where an env ended is the NEW episode's first state, never s_{t+1}.
    """
    v_next = value(obs)
    cut = truncated & ~terminated
    v_next = np.where(cut, value(np.nan_to_num(final_obs)), v_next)
    return np.where(terminated, 0.0, v_next)


def mixed_step(rec: dict[str, np.ndarray]) -> int | None:
    """The first step at which one env terminated, one was truncated and one ran on (None if there is none)."""
    terminated, truncated = rec["terminated"], rec["truncated"]
    running = ~(terminated | truncated)
    kinds = (terminated & ~truncated).any(1) & (truncated & ~terminated).any(1) & running.any(1)
    found = np.flatnonzero(kinds)
    return int(found[0]) if len(found) else None
