"""Reward-model over-optimisation on the tiny preference task, and DPO on the same pairs: the true reward each method
reaches per unit of KL(π_θ‖π_ref).

For each seed: a reward model r_φ (``reward-model --preset tiny``), PPO against it at each β (``ppo-sentiment
--preset tiny --reward-model … --true-reward tiny-preferences --no-adaptive-kl --kl-coef β``), and DPO at each of its
β (``dpo --preset tiny``). Every run logs the task's true reward r* beside what it optimises; the figure plots r*
against the KL to π_ref (PPO: kl_ref of each batch, smoothed; DPO: sample_kl at each evaluation), and the table gives,
per run, the true reward's peak (the best 5-update mean), its lowest after the peak (the trough), where it ended (the
last 5-update mean) and the fall from the peak to the end.

    python benchmarks/overoptimisation.py [--seeds 0 1 2] [--ppo-betas 0.005 0.05] [--dpo-betas 0.1]
        [--steps 60] [--lr 2e-4] [--runs DIR] [--jobs 2]

About 8 minutes on 2 cores (two runs at a time). ``--variant avx2`` or ``no-simd`` runs everything under a CPU kernel
variant that rounds as other CPUs do (``gallery_margins.VARIANTS``), to check that the fall is not one machine's.
The runs go to --runs (a temporary directory unless given); the
table and every run's series to benchmarks/overoptimisation_results.json, the figure to
benchmarks/overoptimisation.png (``--results``, ``--figure``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SMOOTH = 5  # updates per window of the peak and the end


def ladder_run(rung: str, out: Path, *flags: str) -> list[dict]:
    """``python -m ladder.run RUNG --preset tiny …`` in a process of its own; its metrics.jsonl records."""
    command = [sys.executable, "-m", "ladder.run", rung, "--preset", "tiny", "--out", str(out), "--overwrite",
               "--no-progress", *flags]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def windows(values: list[float]) -> list[float]:
    return [statistics.fmean(values[i:i + SMOOTH]) for i in range(max(1, len(values) - SMOOTH + 1))]


def verdict(records: list[dict], kl_key: str) -> dict:
    """The true reward's peak and end (5-record means) and the KL at each."""
    rows = [r for r in records if "true_reward_mean" in r]
    true, kl = [r["true_reward_mean"] for r in rows], [r[kl_key] for r in rows]
    smooth = windows(true)
    peak = max(range(len(smooth)), key=smooth.__getitem__)
    return {"true_peak": smooth[peak], "true_end": smooth[-1], "fall": smooth[peak] - smooth[-1],
            "true_trough": min(smooth[peak:]),
            "kl_at_peak": statistics.fmean(kl[peak:peak + SMOOTH]), "kl_end": statistics.fmean(kl[-SMOOTH:]),
            "proxy_end": statistics.fmean(r.get("score_mean", r.get("rewards/margins", 0.0)) for r in rows[-SMOOTH:])}


def one_seed(seed: int, args, pool: ThreadPoolExecutor) -> list[dict]:
    base = Path(args.runs) / f"seed{seed}"
    rm = base / "rm"
    ladder_run("reward-model", rm, "--seed", str(seed))
    jobs = {}
    for beta in args.ppo_betas:
        flags = ("--seed", str(seed), "--reward-model", str(rm / "reward_model"), "--true-reward", "tiny-preferences",
                 "--no-adaptive-kl", "--kl-coef", str(beta), "--max-new-tokens", "32", "--steps", str(args.steps),
                 "--lr", str(args.lr), "--print-samples", "0", "--num-eval-prompts", "0")
        jobs[("RM + PPO", beta)] = pool.submit(ladder_run, "ppo-sentiment", base / f"ppo_{beta}", *flags)
    for beta in args.dpo_betas:
        flags = ("--seed", str(seed), "--beta", str(beta), "--steps", str(args.dpo_steps), "--eval-every", "10")
        jobs[("DPO", beta)] = pool.submit(ladder_run, "dpo", base / f"dpo_{beta}", *flags)
    runs = []
    for (method, beta), job in jobs.items():
        records = job.result()
        kl_key = "kl_ref" if method == "RM + PPO" else "sample_kl"
        runs.append({"seed": seed, "method": method, "beta": beta, **verdict(records, kl_key),
                     "kl": [r[kl_key] for r in records if "true_reward_mean" in r],
                     "true": [r["true_reward_mean"] for r in records if "true_reward_mean" in r]})
        print(json.dumps({k: v for k, v in runs[-1].items() if k not in ("kl", "true")}), flush=True)
    return runs


def figure(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    colours = {}
    for run in runs:
        key = (run["method"], run["beta"])
        colour = colours.setdefault(key, f"C{len(colours)}")
        label = f"{run['method']}, β = {run['beta']:g}" if run["seed"] == runs[0]["seed"] else None
        kl, true = run["kl"], run["true"]
        if run["method"] == "RM + PPO":
            kl, true = windows(kl), windows(true)
        ax.plot(kl, true, color=colour, alpha=0.8, label=label, marker="o" if run["method"] == "DPO" else None, ms=3)
    ax.set_xlabel("KL(π_θ‖π_ref), nats summed over the completion")
    ax.set_ylabel("true reward r* (the task's, never seen in training)")
    ax.set_title("the tiny preference task: true reward against KL, one line per seed")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--ppo-betas", type=float, nargs="+", default=[0.005, 0.05])
    parser.add_argument("--dpo-betas", type=float, nargs="+", default=[0.1])
    parser.add_argument("--steps", type=int, default=60, help="PPO updates")
    parser.add_argument("--dpo-steps", type=int, default=120)
    parser.add_argument("--lr", type=float, default=2e-4, help="PPO's learning rate")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", default=None, help="where the runs go (default: a temporary directory)")
    parser.add_argument("--results", default="benchmarks/overoptimisation_results.json")
    parser.add_argument("--figure", default="benchmarks/overoptimisation.png")
    parser.add_argument("--variant", default="native", choices=("native", "avx2", "no-simd"))
    args = parser.parse_args()
    from gallery_margins import VARIANTS

    os.environ.update(VARIANTS[args.variant])  # every run is a subprocess: it inherits the kernel variant
    args.runs = args.runs or tempfile.mkdtemp(prefix="ladder-overoptimisation-")
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = [run for seed in args.seeds for run in one_seed(seed, args, pool)]
    Path(args.results).write_text(json.dumps({"args": vars(args), "runs": runs}, indent=1))
    figure(runs, Path(args.figure))


if __name__ == "__main__":
    main()
