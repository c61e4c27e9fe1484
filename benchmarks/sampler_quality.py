"""A sampler that is not π_old, on the tiny task: what sampling from bf16-rounded weights does to GRPO's result.

Every configuration trains ``python -m ladder.run grpo --preset tiny`` (the tiny tutor that forgets to carry;
LoRA on a float32 model, one thread) with the same budget of sampled completions: ``--steps`` updates of
the preset's 8 prompts × 8 completions (``--max-completions`` is set to the same number, so no run samples
more). The default, 30 updates (1920 completions), is half the preset's 60, so that the 12 runs of the
default take about half an hour on two shared cores; on this task greedy accuracy is near its plateau
after 10 updates (see ``variants.py``). Rows:

- ``fp32``: ``--sampler-dtype same``: today's rung, π_sampler = π_old up to the cached decode's rounding;
- ``bf16``: ``--sampler-dtype bfloat16 --sampler-correction none``: sampled from the weights (base and
  adapter) rounded to bf16, trained as if π_old had sampled;
- ``bf16_token_truncate``: the same sampler, each token's policy term weighed by min(π_old/π_sampler, C_max);
- ``bf16_sequence_mask``: the same sampler, a completion whose product of weights leaves [C_min, C_max]
  dropped from the policy term (C_max = 3, C_min none: the rung's defaults);
- ``fp32_token_truncate`` (not run unless named): the fp32 sampler with its log-probs recorded, which shows
  the mismatch of the cached float32 decode itself.

Reported per run and as mean ± sample std over seeds: greedy held-out accuracy before and after training
(summary.json ``accuracy_before`` / ``accuracy_after``, ``--eval-size`` problems), the KL to the starting
model (``final_kl``: the k3 term of the last update's batch, and ``kl_ref`` averaged over the last 10
updates, less noisy), and the mismatch, each ``sampler/*`` metric averaged over the run's updates:
mean and max |log π_old − log π_sampler| per token, the spread of the sequence log-weight, the weights'
min / mean / max and the share the correction truncated or masked. Each run is its own process.

    python benchmarks/sampler_quality.py [--seeds 0 1 2] [--steps 30] [--configs fp32 bf16 ...] [--jobs 2]
                                         [--reuse]

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

HERE = Path(__file__).resolve().parent
BF16 = ["--sampler-dtype", "bfloat16"]
CONFIGS = {
    "fp32": ("fp32 sampler", ["--sampler-dtype", "same"]),
    "bf16": ("bf16 sampler, no correction", [*BF16, "--sampler-correction", "none"]),
    "bf16_token_truncate": ("bf16 + token_truncate", [*BF16, "--sampler-correction", "token_truncate"]),
    "bf16_sequence_mask": ("bf16 + sequence_mask", [*BF16, "--sampler-correction", "sequence_mask"]),
    "fp32_token_truncate": ("fp32 + token_truncate", ["--sampler-dtype", "same", "--sampler-correction",
                                                      "token_truncate"]),
}
DEFAULT = ["fp32", "bf16", "bf16_token_truncate", "bf16_sequence_mask"]
COMPLETIONS_PER_UPDATE = 8 * 8  # the tiny preset's prompts_per_step × group_size
SAMPLER_KEYS = ["sampler/logp_diff_mean", "sampler/logp_diff_max", "sampler/seq_log_ratio_std",
                "sampler/is_ratio_min", "sampler/is_ratio_mean", "sampler/is_ratio_max", "sampler/corrected_frac",
                "off_policy/masked_frac"]


def train_command(config: str, seed: int, out: Path, args) -> list[str]:
    budget = args.steps * COMPLETIONS_PER_UPDATE
    return [sys.executable, "-m", "ladder.run", "grpo", "--preset", "tiny", *CONFIGS[config][1], "--seed", str(seed),
            "--steps", str(args.steps), "--max-completions", str(budget), "--eval-every", str(args.eval_every),
            "--eval-size", str(args.eval_size), "--threads", "1", "--print-samples", "0", "--out", str(out),
            "--no-progress", "--overwrite"]


def run_one(config: str, seed: int, args) -> str | None:
    """Train (unless ``--reuse`` finds the run finished); return an error or None."""
    out = Path(args.out) / f"{config}-seed{seed}"
    if args.reuse and (out / "summary.json").exists():
        return None
    t0 = time.perf_counter()
    log = Path(args.out) / f"{config}-seed{seed}.log"
    with log.open("w") as f:
        rc = subprocess.run(train_command(config, seed, out, args), stdout=f, stderr=subprocess.STDOUT,
                            cwd=HERE.parent).returncode
    print(f"  {config} seed {seed}: {'ok' if rc == 0 else f'FAILED (rc {rc})'} in {time.perf_counter() - t0:.0f} s; "
          f"load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    return None if rc == 0 else f"rc {rc}: " + "".join(log.read_text().splitlines(keepends=True)[-15:])


def load_run(out: Path) -> dict:
    s = json.loads((out / "summary.json").read_text())
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]

    def mean(key: str, rs: list[dict] = records) -> float | None:
        values = [r[key] for r in rs if key in r]
        return statistics.fmean(values) if values else None

    run = {"before": s["accuracy_before"], "after": s["accuracy_after"], "kl_ref": s["final_kl"],
           "kl_ref10": mean("kl_ref", records[-10:]), "completions": s["completions"], "updates": s["steps"],
           "wall": s["wall_s"], "sampling_s": mean("time/sampling_s"), "reward": mean("reward", records[-10:])}
    run.update({key: mean(key) for key in SAMPLER_KEYS})
    return run


def fmt(values: list, digits: int = 3) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    if len(set(values)) == 1:  # one run, or all seeds alike
        return f"{values[0]:.{digits}f}"
    return f"{statistics.fmean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


COLUMNS = [("acc before", "before", 3), ("acc after", "after", 3), ("final kl_ref", "kl_ref", 4),
           ("kl_ref (last 10)", "kl_ref10", 4), ("reward (last 10)", "reward", 2),
           ("\\|Δlogp\\| mean", "sampler/logp_diff_mean", 5), ("\\|Δlogp\\| max", "sampler/logp_diff_max", 3),
           ("seq log-w std", "sampler/seq_log_ratio_std", 4), ("w min", "sampler/is_ratio_min", 3),
           ("w mean", "sampler/is_ratio_mean", 4), ("w max", "sampler/is_ratio_max", 3),
           ("corrected", "sampler/corrected_frac", 4), ("off-policy masked", "off_policy/masked_frac", 4),
           ("updates", "updates", 0), ("sampling s / update", "sampling_s", 2), ("wall s", "wall", 0)]


def tables(runs: dict, configs: list[str], seeds: list[int]) -> str:
    columns = [c for c in COLUMNS if any(r.get(c[1]) is not None for r in runs.values())]
    head = "| sampler | " + " | ".join(c[0] for c in columns) + " |\n|---" + "|---:" * len(columns) + "|\n"
    by_config = f"**Per configuration** (mean ± sample std over seeds {', '.join(map(str, seeds))}):\n\n" + head
    by_run = "**Per run:**\n\n" + head.replace("| sampler |", "| sampler, seed |", 1)
    for config in configs:
        rows = [(seed, runs[config, seed]) for seed in seeds if (config, seed) in runs]
        if not rows:
            continue
        label = CONFIGS[config][0]
        by_config += f"| {label} | " + " | ".join(fmt([r[k] for _, r in rows], d) for _, k, d in columns) + " |\n"
        for seed, r in rows:
            by_run += f"| {label}, {seed} | " + " | ".join(fmt([r[k]], d) for _, k, d in columns) + " |\n"
    return by_config + "\n" + by_run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", nargs="+", default=DEFAULT, choices=list(CONFIGS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=30,
                   help=f"updates per run ({COMPLETIONS_PER_UPDATE} completions each; the preset makes 60)")
    p.add_argument("--eval-every", type=int, default=10, help="greedy held-out evaluation every N updates")
    p.add_argument("--eval-size", type=int, default=200, help="held-out problems per evaluation")
    p.add_argument("--jobs", type=int, default=2, help="runs in parallel")
    p.add_argument("--out", default="runs/sampler_quality", help="one directory per run under this")
    p.add_argument("--reuse", action="store_true", help="skip a run whose summary.json exists")
    args = p.parse_args()
    import peft
    import torch
    import transformers

    from ladder.policies.low_precision import fast_on_this_cpu

    Path(args.out).mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/sampler_quality.py " + " ".join(sys.argv[1:])
    header = (f"`{command}` — {time.strftime('%Y-%m-%d %H:%M')}\n\n"
              f"- machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs; python "
              f"{platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
              f"peft {peft.__version__}; bf16 matrix instructions: {fast_on_this_cpu(torch.bfloat16)}\n"
              f"- `python -m ladder.run grpo --preset tiny --sampler-dtype … --sampler-correction …`, "
              f"{args.steps} updates × {COMPLETIONS_PER_UPDATE} = {args.steps * COMPLETIONS_PER_UPDATE} sampled "
              f"completions per run, greedy eval on {args.eval_size} held-out sums every {args.eval_every} updates, "
              f"1 thread per run, {args.jobs} run(s) at a time; load average at the start {os.getloadavg()[0]:.2f}\n")
    jobs = [(c, s) for s in args.seeds for c in args.configs]
    print(f"{len(jobs)} runs, {args.jobs} at a time, under {args.out}", file=sys.stderr)
    with ThreadPoolExecutor(args.jobs) as pool:
        errors = dict(zip(jobs, pool.map(lambda job: run_one(*job, args), jobs)))
    runs = {job: load_run(Path(args.out) / f"{job[0]}-seed{job[1]}") for job in jobs
            if (Path(args.out) / f"{job[0]}-seed{job[1]}" / "summary.json").exists()}
    failed = "".join(f"\n- **{c} seed {s} failed**: ```{e.strip()[-600:]}```" for (c, s), e in errors.items() if e)
    print(header + f"- load average at the end {os.getloadavg()[0]:.2f}{failed}\n\n"
          + tables(runs, args.configs, args.seeds))


if __name__ == "__main__":
    main()
