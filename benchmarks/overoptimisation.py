"""Reward-model over-optimisation on the tiny preference task, and DPO on the same pairs: the true reward each method
reaches per unit of KL(π_θ‖π_ref), where the completions' length went, and what the doctor says of each run.

For each seed: a reward model r_φ (``reward-model --preset tiny``); PPO against it (``ppo-sentiment --preset tiny
--reward-model … --true-reward tiny-preferences``) at its preset (adaptive β, 100 updates, 16 new tokens) and at two
fixed β with a short, aggressive schedule (``--no-adaptive-kl --kl-coef β``, 60 updates, lr 2e-4, 32 new tokens:
notebook 9's runs); and DPO at each of its β (``dpo --preset tiny``). Every run logs the task's true reward r* beside
what it optimises, and the anatomy of its completions (words, the share that hedge with a "but", the share that repeat
a word). The figure plots r* against KL(π_θ‖π_ref) in nats per completion (PPO: kl_ref of each batch, 5-update means;
DPO: sample_kl at each evaluation); the JSON keeps every run's series, its peak/trough/end, and the doctor's findings.

    python benchmarks/overoptimisation.py [--seeds 0 1 2] [--variant native|avx2|no-simd] [--runs DIR] [--reuse]
        [--jobs 2] [--results FILE] [--figure FILE]

About 12 minutes per variant on 2 cores (two runs at a time). ``--variant avx2`` or ``no-simd`` runs everything under
a CPU kernel variant that rounds as other CPUs do (``gallery_margins.VARIANTS``). ``--reuse`` reads the runs already
finished in --runs instead of making them again (to read them with a changed doctor). The results of several variants
go to one JSON file (``--results``, each variant's runs replaced by its own), the figure of the native runs to
``--figure``.
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
AGGRESSIVE = ("--no-adaptive-kl", "--max-new-tokens", "32", "--steps", "60", "--lr", "2e-4")
PPO_RUNS = {"RM + PPO, β = 0.005": ("--kl-coef", "0.005", *AGGRESSIVE),
            "RM + PPO, β = 0.05": ("--kl-coef", "0.05", *AGGRESSIVE),
            "RM + PPO, adaptive β (preset)": ()}
DPO_BETAS = (0.03, 0.1, 0.3)
KEPT = ("step", "kl_ref", "sample_kl", "true_reward_mean", "score_mean", "response_length", "words_mean",
        "hedged_share", "padded_share", "kl_coef", "entropy", "explained_variance", "eval_accuracy", "loss",
        "rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen", "logps/rejected")


def ladder_run(rung: str, out: Path, reuse: bool, *flags: str) -> list[dict]:
    """``python -m ladder.run RUNG --preset tiny …`` in a process of its own; its metrics.jsonl records."""
    if not (reuse and (out / "summary.json").exists()):
        command = [sys.executable, "-m", "ladder.run", rung, "--preset", "tiny", "--out", str(out), "--overwrite",
                   "--no-progress", *flags]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def windows(values: list[float]) -> list[float]:
    return [statistics.fmean(values[i:i + SMOOTH]) for i in range(max(1, len(values) - SMOOTH + 1))]


def verdict(records: list[dict], kl_key: str) -> dict:
    """The true reward's peak, trough after it and end (5-record means) and the KL at each."""
    rows = [r for r in records if "true_reward_mean" in r]
    true, kl = windows([r["true_reward_mean"] for r in rows]), windows([r[kl_key] for r in rows])
    peak = max(range(len(true)), key=true.__getitem__)
    trough = min(range(peak, len(true)), key=true.__getitem__)
    return {"true_start": rows[0]["true_reward_mean"], "true_peak": true[peak], "kl_at_peak": kl[peak],
            "true_trough": true[trough], "kl_at_trough": kl[trough], "true_end": true[-1], "kl_end": kl[-1],
            "fall": true[peak] - true[-1]}


def series(records: list[dict]) -> dict[str, list]:
    """The kept metrics of each record, rounded (None where a record has no value)."""
    keys = [k for k in KEPT if any(k in r for r in records)]
    return {k: [round(r[k], 5) if k in r else None for r in records] for k in keys}


def findings(path: Path) -> list[str]:
    from ladder.doctor import diagnose, read_run

    return sorted(f.name for f in diagnose(read_run(path)))


def one_seed(seed: int, args, pool: ThreadPoolExecutor) -> list[dict]:
    base = Path(args.runs) / f"seed{seed}"
    rm = base / "rm"
    ladder_run("reward-model", rm, args.reuse, "--seed", str(seed))
    jobs = {}
    for method, extra in PPO_RUNS.items():
        flags = ("--seed", str(seed), "--reward-model", str(rm / "reward_model"), "--true-reward", "tiny-preferences",
                 "--print-samples", "0", "--num-eval-prompts", "0", *extra)
        out = base / ("ppo_" + (extra[1] if extra else "adaptive"))
        jobs[(method, out)] = pool.submit(ladder_run, "ppo-sentiment", out, args.reuse, *flags)
    for beta in DPO_BETAS:
        out = base / f"dpo_{beta}"
        flags = ("--seed", str(seed), "--beta", str(beta), "--steps", "120", "--eval-every", "10")
        jobs[(f"DPO, β = {beta:g}", out)] = pool.submit(ladder_run, "dpo", out, args.reuse, *flags)
    runs = []
    for (method, out), job in jobs.items():
        records = job.result()
        kl_key = "sample_kl" if method.startswith("DPO") else "kl_ref"
        before = json.loads((out / "summary.json").read_text()).get("eval_before", {})
        runs.append({"variant": args.variant, "seed": seed, "method": method, "kl_key": kl_key,
                     **verdict(records, kl_key), "before": before, "doctor": findings(out),
                     "series": series(records)})
        print(json.dumps({k: v for k, v in runs[-1].items() if k not in ("series", "before")}), flush=True)
    return runs


def figure(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    colours, first_seed = {}, runs[0]["seed"]
    for run in runs:
        colour = colours.setdefault(run["method"], f"C{len(colours)}")
        label = run["method"] if run["seed"] == first_seed else None
        rows = [i for i, t in enumerate(run["series"]["true_reward_mean"]) if t is not None]
        kl = [run["series"][run["kl_key"]][i] for i in rows]
        true = [run["series"]["true_reward_mean"][i] for i in rows]
        if run["kl_key"] == "kl_ref":
            kl, true = windows(kl), windows(true)
        ax.plot(kl, true, color=colour, alpha=0.8, label=label, marker="o" if run["kl_key"] == "sample_kl" else None,
                ms=3)
    ax.set_xlabel("KL(π_θ‖π_ref), nats per completion (summed over its tokens)")
    ax.set_ylabel("true reward r* (the task's, never seen in training)")
    ax.set_title("the tiny preference task: true reward against KL, one line per seed")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", default=None, help="where the runs go (default: a temporary directory)")
    parser.add_argument("--reuse", action="store_true", help="read the finished runs in --runs, make only the rest")
    parser.add_argument("--results", default="benchmarks/overoptimisation_results.json")
    parser.add_argument("--figure", default="benchmarks/overoptimisation.png")
    parser.add_argument("--variant", default="native", choices=("native", "avx2", "no-simd"))
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gallery_margins import VARIANTS

    os.environ.update(VARIANTS[args.variant])  # every run is a subprocess: it inherits the kernel variant
    args.runs = args.runs or tempfile.mkdtemp(prefix="ladder-overoptimisation-")
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = [run for seed in args.seeds for run in one_seed(seed, args, pool)]
    results = Path(args.results)
    kept = json.loads(results.read_text())["runs"] if results.exists() else []
    kept = [r for r in kept if r.get("variant", "native") != args.variant]
    Path(args.results).write_text(json.dumps({"runs": kept + runs}, ensure_ascii=False))
    if args.variant == "native":
        figure(runs, Path(args.figure))


if __name__ == "__main__":
    main()
