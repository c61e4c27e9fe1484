"""The fifth policy, π_rollout, on the tiny task: what training on k-updates-old rollouts does to GRPO, and
what ``--sampler-correction`` gives back.

Every run is ``python -m ladder.run grpo --preset tiny --max-staleness K --sampler-correction C --seed S``
(the tiny tutor that forgets to carry; LoRA on a float32 model; 60 updates of 8 prompts × 8 completions;
one thread), its own process. With k > 0 the rollout of update u is drawn by the weights of update
max(0, u − k) (``ladder.rungs.grpo.staleness.LaggingRollout``); π_old is the trainer's forward at the
start of update u, so with one pass per batch the clipped ratio π_θ/π_old is 1 and the clip never acts:
the only thing that knows the batch is stale is the sampler weight w = π_old/π_rollout, which
``none`` ignores, ``token_truncate`` applies per token as min(w, C_max) and ``sequence_mask`` applies
per completion as the product of its tokens' w, dropping the completion outside [C_min, C_max]
(C_max = 3, no C_min: the rung's defaults).

Reported per run and as mean ± sample std over seeds: greedy held-out accuracy before, after, and its
lowest evaluation; the reward (mean of the last 10 updates, and its lowest update after the warm-up);
the k3 KL to π_ref (mean of the last 10 updates, and the run's largest); the sampler statistics averaged
over the run; the skipped optimiser steps; wall seconds. A run *collapses* when some evaluation of its
held-out accuracy falls more than ``COLLAPSE_DROP`` below its start.

    python benchmarks/staleness.py [--runs 0/none 8/token_truncate ...] [--seeds 0 1 2] [--jobs 2]
                                   [--out DIR] [--json FILE] [--reuse] [-- extra rung options]

stdout is markdown (the per-configuration table, then the per-run table); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sampler_quality import fmt  # mean ± sample std over the seeds, "–" for none (this folder's scripts)

HERE = Path(__file__).resolve().parent
DEFAULT_RUNS = ["0/none", "2/none", "2/token_truncate", "8/none", "8/token_truncate", "8/sequence_mask",
                "16/none", "16/token_truncate"]
WARMUP = 10          # the tiny preset's warmup_steps: the lowest reward is taken after them
COLLAPSE_DROP = 0.10  # collapse: an evaluation below accuracy_before − this
SAMPLER_KEYS = ["sampling/staleness", "sampler/logp_diff_mean", "sampler/is_ratio_min", "sampler/is_ratio_mean",
                "sampler/is_ratio_max", "sampler/corrected_frac"]


def train_command(run: str, seed: int, out: Path, extra: list[str]) -> list[str]:
    k, correction = run.split("/")
    return [sys.executable, "-m", "ladder.run", "grpo", "--preset", "tiny", "--max-staleness", k,
            "--sampler-correction", correction, "--seed", str(seed), "--threads", "1", "--print-samples", "0",
            *extra, "--out", str(out), "--no-progress", "--overwrite"]


def run_dir(args, run: str, seed: int) -> Path:
    return Path(args.out) / f"k{run.replace('/', '-')}-seed{seed}"


def run_one(run: str, seed: int, args) -> str | None:
    """Train (unless ``--reuse`` finds the run finished); return an error or None."""
    out = run_dir(args, run, seed)
    if args.reuse and (out / "summary.json").exists():
        return None
    t0 = time.perf_counter()
    log = out.with_suffix(".log")
    with log.open("w") as f:
        rc = subprocess.run(train_command(run, seed, out, args.extra), stdout=f, stderr=subprocess.STDOUT,
                            cwd=HERE.parent).returncode
    print(f"  k/correction {run} seed {seed}: {'ok' if rc == 0 else f'FAILED (rc {rc})'} in "
          f"{time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    return None if rc == 0 else f"rc {rc}: " + "".join(log.read_text().splitlines(keepends=True)[-15:])


def load_run(out: Path) -> dict:
    s = json.loads((out / "summary.json").read_text())
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    after_warmup = [r["reward"] for r in records if r["step"] > WARMUP]
    evals = [acc for _, acc in s["evals"]]

    def mean(key: str, rs: list[dict] = records) -> float | None:
        values = [r[key] for r in rs if key in r]
        return statistics.fmean(values) if values else None

    run = {"before": s["accuracy_before"], "after": s["accuracy_after"], "min_acc": min(evals), "evals": s["evals"],
           "reward10": mean("reward", records[-10:]), "min_reward": min(after_warmup),
           "kl_ref10": mean("kl_ref", records[-10:]), "max_kl_ref": max(r["kl_ref"] for r in records),
           "skipped": sum(r.get("skipped_steps", 0.0) for r in records), "updates": s["steps"], "wall": s["wall_s"]}
    run["collapsed"] = float(run["min_acc"] < run["before"] - COLLAPSE_DROP)
    run.update({key: mean(key) for key in SAMPLER_KEYS})
    return run


COLUMNS = [("acc before", "before", 3), ("acc after", "after", 3), ("lowest acc", "min_acc", 3),
           ("reward (last 10)", "reward10", 2), ("lowest reward", "min_reward", 2),
           ("kl_ref (last 10)", "kl_ref10", 3), ("max kl_ref", "max_kl_ref", 2),
           ("staleness", "sampling/staleness", 2), ("\\|Δlogp\\| mean", "sampler/logp_diff_mean", 4),
           ("w min", "sampler/is_ratio_min", 3), ("w mean", "sampler/is_ratio_mean", 3),
           ("w max", "sampler/is_ratio_max", 2), ("corrected", "sampler/corrected_frac", 4),
           ("skipped", "skipped", 0), ("wall s", "wall", 0)]


def label(run: str) -> str:
    k, correction = run.split("/")
    return f"k = {k}, {correction}"


def tables(runs: dict, names: list[str], seeds: list[int]) -> str:
    head = "| k, correction | collapsed | " + " | ".join(c[0] for c in COLUMNS) + " |\n|---|---:" \
           + "|---:" * len(COLUMNS) + "|\n"
    by_config = f"**Per configuration** (mean ± sample std over seeds {', '.join(map(str, seeds))}):\n\n" + head
    by_run = "**Per run:**\n\n" + head.replace("| k, correction |", "| k, correction, seed |", 1)
    for name in names:
        rows = [(seed, runs[name, seed]) for seed in seeds if (name, seed) in runs]
        if not rows:
            continue
        collapsed = f"{sum(int(r['collapsed']) for _, r in rows)}/{len(rows)}"
        by_config += f"| {label(name)} | {collapsed} | " \
            + " | ".join(fmt([r[k] for _, r in rows], d) for _, k, d in COLUMNS) + " |\n"
        for seed, r in rows:
            by_run += f"| {label(name)}, {seed} | {'yes' if r['collapsed'] else 'no'} | " \
                + " | ".join(fmt([r[k]], d) for _, k, d in COLUMNS) + " |\n"
    return by_config + "\n" + by_run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", nargs="+", default=DEFAULT_RUNS, help="K/CORRECTION pairs")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--jobs", type=int, default=2, help="runs in parallel")
    p.add_argument("--out", default="runs/staleness", help="one directory per run under this")
    p.add_argument("--json", default=None, help="write every run's numbers here")
    p.add_argument("--reuse", action="store_true", help="skip a run whose summary.json exists")
    p.add_argument("extra", nargs="*", help="after --: more rung options for every run (e.g. -- --lr 3e-3)")
    args = p.parse_args()
    import torch

    Path(args.out).mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/staleness.py " + " ".join(sys.argv[1:])
    rung = " ".join(["python -m ladder.run grpo --preset tiny --max-staleness K --sampler-correction C", *args.extra])
    header = (f"`{command}` — {time.strftime('%Y-%m-%d %H:%M')}\n\n"
              f"- machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs; python "
              f"{platform.python_version()}, torch {torch.__version__}\n"
              f"- `{rung}`, 1 thread per run, {args.jobs} run(s) at a time; "
              f"load average at the start {os.getloadavg()[0]:.2f}\n")
    jobs = [(name, s) for s in args.seeds for name in args.runs]
    print(f"{len(jobs)} runs, {args.jobs} at a time, under {args.out}", file=sys.stderr)
    with ThreadPoolExecutor(args.jobs) as pool:
        errors = dict(zip(jobs, pool.map(lambda job: run_one(*job, args), jobs)))
    runs = {job: load_run(run_dir(args, *job)) for job in jobs if (run_dir(args, *job) / "summary.json").exists()}
    if args.json:
        results = [{"k": int(n.split("/")[0]), "correction": n.split("/")[1], "seed": s, "extra": args.extra, **r}
                   for (n, s), r in runs.items()]
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    failed = "".join(f"\n- **{n} seed {s} failed**: ```{e.strip()[-600:]}```" for (n, s), e in errors.items() if e)
    print(header + f"- load average at the end {os.getloadavg()[0]:.2f}{failed}\n\n"
          + tables(runs, args.runs, args.seeds))


if __name__ == "__main__":
    main()
