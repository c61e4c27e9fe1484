"""CartPole-v1 PPO, ladder vs Stable-Baselines3: wall-clock seconds and env steps to solve.

Both run in this one process on the same machine, one seed after the other, and both are judged by
the same test: ``ladder.rungs.gym_common.evaluate`` (20 greedy episodes, episode i seeded
``seed + 10_000 + i``) after the update that crosses each multiple of 5,000 env steps; a run is
solved when that mean return reaches 475, and training stops there. Wall-clock is
``time.perf_counter`` around the whole training call (env and model construction, training,
evaluations; for ladder also its run directory, metrics, checkpoints and plot).

    python benchmarks/cartpole_vs_sb3.py                 # seeds 0 1 2, SB3 at 1 and default threads
    python benchmarks/cartpole_vs_sb3.py --repeats 3 --no-default-threads   # the RESULTS.md main table
    python benchmarks/cartpole_vs_sb3.py --seeds 0 1 2 3 4
    python benchmarks/cartpole_vs_sb3.py --quick         # seed 0, SB3 at 1 thread only (~30 s)

Both get ``torch.set_num_threads(1)`` (ladder through ``Config.threads``). SB3 itself never sets a thread
count, so a column with SB3 at torch's default is added too; on a small busy machine that one can take
minutes per seed. Needs stable-baselines3 (``pip install -e .[bench]``). Results: benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import tempfile
import time

import gymnasium
import numpy as np
import stable_baselines3
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from ladder.rungs import gym_common
from ladder.rungs.cartpole import Config
from ladder.rungs.cartpole import train as ladder_train

ENV_ID = "CartPole-v1"
SOLVE_RETURN = 475.0
EVAL_EVERY = 5_000
EVAL_EPISODES = 20
EVAL_SEED_OFFSET = 10_000      # ladder's cartpole rung evaluates with seed + 10_000; SB3 gets the same
LADDER_MAX_STEPS = 100_000     # ladder's Config default total_steps (its lr anneals to 0 over it)
SB3_MAX_STEPS = 100_000        # the zoo's n_timesteps for CartPole-v1 (SB3's lin_ schedules anneal over it)
DEFAULT_THREADS = torch.get_num_threads()  # read before ladder's train() sets 1 for the process


def linear_schedule(initial_value: float):
    """rl-baselines3-zoo's ``lin_<value>``: value × progress_remaining (1 at the start, 0 at the end)."""
    return lambda progress_remaining: progress_remaining * initial_value


# Stable-Baselines3 PPO hyperparameters for CartPole-v1, as published by rl-baselines3-zoo:
# https://github.com/DLR-RM/rl-baselines3-zoo/blob/master/hyperparams/ppo.yml  ("# Tuned" CartPole-v1:
#   n_envs: 8, n_timesteps: 1e5, policy: 'MlpPolicy', n_steps: 32, batch_size: 256, gae_lambda: 0.8,
#   gamma: 0.98, n_epochs: 20, ent_coef: 0.0, learning_rate: lin_0.001, clip_range: lin_0.2).
# Everything else is SB3's PPO default (MlpPolicy: separate 64-64 tanh actor and critic, orthogonal init,
# vf_coef 0.5, max_grad_norm 0.5, advantage normalisation, Adam eps 1e-5).
SB3_N_ENVS = 8
SB3_HYPERPARAMS = dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
                       learning_rate=linear_schedule(1e-3), clip_range=linear_schedule(0.2))


class SolveCallback(BaseCallback):
    """Evaluate with ladder's ``gym_common.evaluate`` every 5,000 env steps; stop once solved.

    It evaluates at the start of a rollout, i.e. right after ``model.train()``, whenever the rollout
    just trained on crossed a multiple of ``EVAL_EVERY``: the same points (after the same number of
    updates) at which ladder's rung evaluates. Returning False from the next ``_on_step`` stops
    ``learn`` (after one more vector step of 8 transitions, not counted in the steps to solve).
    """

    def __init__(self, seed: int):
        super().__init__()
        self.eval_seed = seed + EVAL_SEED_OFFSET
        self.last_steps = 0
        self.evals: list[tuple[int, float]] = []
        self.solved = False

    def _act(self, obs: np.ndarray) -> np.ndarray:
        return self.model.predict(obs, deterministic=True)[0]

    def _evaluate(self) -> None:
        returns = gym_common.evaluate(self._act, ENV_ID, EVAL_EPISODES, seed=self.eval_seed)
        self.evals.append((self.num_timesteps, float(np.mean(returns))))
        self.solved = self.evals[-1][1] >= SOLVE_RETURN

    def _on_rollout_start(self) -> None:
        steps = self.num_timesteps
        if not self.solved and steps // EVAL_EVERY > self.last_steps // EVAL_EVERY:
            self._evaluate()
        self.last_steps = steps

    def _on_step(self) -> bool:
        return not self.solved

    def _on_training_end(self) -> None:
        # Like ladder, also evaluate after the last update if that was not an evaluation point.
        if not self.solved and (not self.evals or self.evals[-1][0] != self.num_timesteps):
            self._evaluate()


def run_ladder(seed: int, max_steps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Config(seed=seed, out=os.path.join(tmp, "run"), overwrite=True, progress=False,
                     total_steps=max_steps, eval_every=EVAL_EVERY, eval_episodes=EVAL_EPISODES,
                     solve_return=SOLVE_RETURN, threads=1)
        t0, c0 = time.perf_counter(), time.process_time()
        summary = ladder_train(cfg)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    steps = summary["solved_at_env_steps"] if summary["solved"] else summary["env_steps"]
    return {"solved": summary["solved"], "steps": steps, "wall_s": wall, "cpu_s": cpu, "evals": summary["evals"]}


def run_sb3(seed: int, max_steps: int, threads: int) -> dict:
    torch.set_num_threads(threads)
    t0, c0 = time.perf_counter(), time.process_time()
    env = make_vec_env(ENV_ID, n_envs=SB3_N_ENVS, seed=seed)
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **SB3_HYPERPARAMS)
    callback = SolveCallback(seed)
    model.learn(total_timesteps=max_steps, callback=callback)
    env.close()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    steps = callback.evals[-1][0] if callback.solved else model.num_timesteps
    return {"solved": callback.solved, "steps": steps, "wall_s": wall, "cpu_s": cpu, "evals": callback.evals}


def warm_up() -> None:
    """One tiny untimed run of each, so one-off lazy imports (e.g. matplotlib for ladder's plot,
    SB3's first network build) are not charged to the first timed seed."""
    with tempfile.TemporaryDirectory() as tmp:
        ladder_train(Config(seed=0, out=tmp, overwrite=True, progress=False, total_steps=512, eval_every=256))
    run_sb3(0, 512, threads=1)


def fmt_cell(r: dict) -> str:
    steps = f"{r['steps']:>7d}" if r["solved"] else f">{r['steps']:>6d}"
    return f"{r['wall_s']:7.2f} {steps}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--quick", action="store_true", help="seed 0 only, SB3 at 1 thread only (a smoke test)")
    p.add_argument("--repeats", type=int, default=1,
                   help="time each (implementation, seed) this many times, interleaved, and keep the fastest "
                        "(runs are deterministic per seed, so only the clock differs; guards against other load)")
    p.add_argument("--ladder-max-steps", type=int, default=LADDER_MAX_STEPS)
    p.add_argument("--sb3-max-steps", type=int, default=SB3_MAX_STEPS,
                   help="SB3 budget; note SB3's lin_ schedules anneal over it (the zoo uses 1e5)")
    p.add_argument("--no-default-threads", action="store_true",
                   help="skip the SB3 run at torch's default thread count")
    args = p.parse_args()
    seeds = [0] if args.quick else args.seeds

    impls = {"ladder (1 thread)": lambda s: run_ladder(s, args.ladder_max_steps),
             "SB3 (1 thread)": lambda s: run_sb3(s, args.sb3_max_steps, threads=1)}
    if not (args.quick or args.no_default_threads or DEFAULT_THREADS == 1):
        impls[f"SB3 ({DEFAULT_THREADS} threads)"] = \
            lambda s: run_sb3(s, args.sb3_max_steps, threads=DEFAULT_THREADS)

    print(f"# CartPole-v1 PPO, ladder vs Stable-Baselines3 -- {datetime.datetime.now():%Y-%m-%d %H:%M}")
    print(f"# {platform.platform()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"python {platform.python_version()}, torch {torch.__version__}, "
          f"stable-baselines3 {stable_baselines3.__version__}, gymnasium {gymnasium.__version__}")
    print(f"# solved: mean of {EVAL_EPISODES} greedy episodes (ladder gym_common.evaluate, seeds seed+"
          f"{EVAL_SEED_OFFSET}+i) >= {SOLVE_RETURN:g}, checked every {EVAL_EVERY} env steps; budgets: ladder "
          f"{args.ladder_max_steps}, SB3 {args.sb3_max_steps} env steps; torch default threads here: "
          f"{DEFAULT_THREADS} (SB3 at {DEFAULT_THREADS} threads = SB3 left at torch's default)")
    print(f"# one untimed warm-up run of each first; then seed by seed, {args.repeats} repeat(s) of each "
          f"implementation in column order, fastest kept; load average {os.getloadavg()[0]:.2f}")
    warm_up()

    results: dict[str, dict[int, dict]] = {name: {} for name in impls}
    for seed in seeds:
        for _ in range(args.repeats):
            for name, run in impls.items():
                r = run(seed)
                best = results[name].get(seed)
                if best is not None and (best["steps"], best["solved"]) != (r["steps"], r["solved"]):
                    print(f"#   WARNING: seed {seed} {name} not deterministic: {best['steps']} vs {r['steps']} steps")
                print(f"#   seed {seed} {name}: {'solved' if r['solved'] else 'UNSOLVED'} at {r['steps']} steps, "
                      f"{r['wall_s']:.2f} s wall, {r['cpu_s']:.2f} s CPU; evals "
                      f"{[(s, round(m, 1)) for s, m in r['evals']]}", flush=True)
                if best is None or r["wall_s"] < best["wall_s"]:
                    results[name][seed] = r
    print(f"# load average at the end {os.getloadavg()[0]:.2f}")

    width = 20
    rule = "-" * (9 + (width + 3) * len(impls))
    print()
    print("wall-clock seconds and env steps to solve (>N: unsolved after N steps)")
    print(f"{'seed':>7} | " + " | ".join(f"{name:^{width}}" for name in impls))
    print(f"{'':>7} | " + " | ".join(f"{'wall_s':>7} {'steps':>7}".ljust(width) for _ in impls))
    print(rule)
    for seed in seeds:
        print(f"{seed:>7} | " + " | ".join(fmt_cell(results[name][seed]).ljust(width) for name in impls))
    print(rule)
    medians = {}
    for name in impls:
        rs = list(results[name].values())
        medians[name] = (statistics.median(r["wall_s"] for r in rs), statistics.median(r["steps"] for r in rs))
    print(f"{'median':>7} | " + " | ".join(f"{w:7.2f} {s:>7.0f}".ljust(width) for w, s in medians.values()))
    cpu = {name: statistics.median(r["cpu_s"] for r in results[name].values()) for name in impls}
    print(f"{'med CPU':>7} | " + " | ".join(f"{c:7.2f}".ljust(width) for c in cpu.values()))
    rates = {name: sum(r["steps"] for r in results[name].values()) / sum(r["wall_s"] for r in results[name].values())
             for name in impls}
    print(f"{'steps/s':>7} | " + " | ".join(f"{v:7.0f}".ljust(width) for v in rates.values()))
    print()
    unsolved = {name: sum(not r["solved"] for r in results[name].values()) for name in impls}
    print("solved: " + ", ".join(f"{name} {len(seeds) - unsolved[name]}/{len(seeds)}" for name in impls)
          + "  (an unsolved run counts with its whole budget's time and steps: a lower bound)")
    ladder_name = next(iter(impls))
    for name in list(impls)[1:]:
        wall_ratio = medians[ladder_name][0] / medians[name][0]
        step_ratio = medians[ladder_name][1] / medians[name][1]
        speed_ratio = rates[ladder_name] / rates[name]
        print(f"ladder / {name}: median wall-clock {wall_ratio:.2f}x, median env steps {step_ratio:.2f}x, "
              f"throughput (steps/s) {speed_ratio:.2f}x")
    ratio = medians[ladder_name][0] / medians["SB3 (1 thread)"][0]
    print(f"goal ladder <= 0.5x SB3 (1 thread) median wall-clock: {'MET' if ratio <= 0.5 else 'NOT MET'} "
          f"({ratio:.2f}x)")


if __name__ == "__main__":
    main()
