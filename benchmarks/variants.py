"""GRPO's variants on one task: a league table of the ``--algo`` bundles on the tiny QLoRA preset.

Every method trains ``python -m ladder.run grpo --preset tiny --qlora`` (the tiny tutor that forgets
to carry; greedy held-out accuracy starts near the share of sums without a carry) with the same budget
of sampled completions (``--max-completions``, default 60 updates × 64 = 3840; ``--steps`` is set so
high that the budget is what stops each run — DAPO's dynamic sampling samples more per update, so it
makes fewer updates). Rows: each ``--algo`` (grpo, dr_grpo, dapo, gspo, cispo, rloo) with the flags its
paper sets, plus GRPO with π_ref refreshed (``--ref-sync-every 10 --ref-mixup 0.6``: six refreshes in
a 60-update run) and GRPO with the KL in the reward (``--kl-in reward``).

Each run is its own process (``--threads 1``). After it, a second process loads the saved adapter and
measures the drift from the starting model for every method alike, β = 0 ones included: the k3 estimate
of KL(π_θ‖π_0) per token (mean over each completion, then over completions) on 8 completions sampled at
temperature 1 from π_θ for each of the first 32 held-out problems (``drift.json``).

    python benchmarks/variants.py [--seeds 0 1 2] [--methods grpo rloo ...] [--jobs 2] [--reuse]
                                  [--write-results]

stdout is markdown (the per-method table, then the per-run table); progress goes to stderr;
``benchmarks/variants.png`` plots held-out accuracy against completions sampled.
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
METHODS = {name: (name, ["--algo", name]) for name in ("grpo", "dr_grpo", "dapo", "gspo", "cispo", "rloo")}
METHODS["grpo_ref_refresh"] = ("grpo + π_ref refresh",
                               ["--algo", "grpo", "--ref-sync-every", "10", "--ref-mixup", "0.6"])
METHODS["grpo_kl_reward"] = ("grpo, KL in reward", ["--algo", "grpo", "--kl-in", "reward"])
BEGIN, END = "<!-- variants.py:begin -->", "<!-- variants.py:end -->"
DRIFT_PROMPTS, DRIFT_SAMPLES = 32, 8


def train_command(method: str, seed: int, out: Path, args) -> list[str]:
    return [sys.executable, "-m", "ladder.run", "grpo", "--preset", "tiny", "--qlora", *METHODS[method][1],
            "--seed", str(seed), "--max-completions", str(args.max_completions), "--steps", str(args.max_completions),
            "--eval-every", str(args.eval_every), "--eval-size", str(args.eval_size), "--threads", "1",
            "--print-samples", "0", "--out", str(out), "--no-progress", "--overwrite"]


def run_one(method: str, seed: int, args) -> str | None:
    """Train (unless ``--reuse`` finds the run finished), then measure its drift; return an error or None."""
    out = Path(args.out) / f"{method}-seed{seed}"
    steps = []
    if not (args.reuse and (out / "summary.json").exists()):
        steps.append(("train", train_command(method, seed, out, args)))
    if not (args.reuse and (out / "drift.json").exists()) or steps:
        steps.append(("drift", [sys.executable, __file__, "--drift-child", str(out)]))
    for what, cmd in steps:
        t0 = time.perf_counter()
        log = Path(args.out) / f"{method}-seed{seed}.{what}.log"
        with log.open("w") as f:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=HERE.parent).returncode
        print(f"  {method} seed {seed}: {what} {'ok' if rc == 0 else f'FAILED (rc {rc})'} in "
              f"{time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
        if rc != 0:
            return f"{what} rc {rc}: " + "".join(log.read_text().splitlines(keepends=True)[-15:])
    return None


def drift_child(run_dir: str) -> None:
    """KL(π_θ‖π_0) per token of the run's final adapter, on completions sampled from π_θ."""
    import torch
    from peft import PeftModel

    from ladder.core.kl import kl_estimate
    from ladder.policies import quant
    from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
    from ladder.tasks import arithmetic, math_problems

    torch.set_num_threads(1)
    torch.manual_seed(12345)
    cfg = json.loads((Path(run_dir) / "config.json").read_text())
    path, device = math_problems.resolve_math_model(cfg["model"]), torch.device("cpu")
    tokenizer = quant.load_tokenizer(path)
    model = PeftModel.from_pretrained(quant.load_causal_lm(path, device, qlora=cfg["qlora"], new_adapter=False),
                                      str(Path(run_dir) / "adapter"))
    policy = CausalLMPolicy(model, temperature=cfg["temperature"])
    system = cfg["system_prompt"] or arithmetic.TINY_SYSTEM_PROMPT
    problems = arithmetic.train_eval_split(None, 200)[1][:DRIFT_PROMPTS]
    enc = tokenizer([arithmetic.chat_prompt(tokenizer, p["question"], system) for p in problems],
                    return_tensors="pt", padding=True)
    ids, mask = (x.repeat_interleave(DRIFT_SAMPLES, dim=0) for x in (enc.input_ids, enc.attention_mask))
    with torch.no_grad():
        completion, cmask = policy.generate(ids, mask, cfg["max_new_tokens"], tokenizer.pad_token_id,
                                            tokenizer.eos_token_id, do_sample=True)
        batch = lm_batch(ids, mask, completion, cmask, tokenizer.pad_token_id)
        logp, ref_logp = policy.evaluate(batch)[0].float(), policy.ref_logp(batch).float()
    m = batch.mask
    per_seq = lambda x: ((x * m).sum(1) / m.sum(1).clamp(min=1)).mean().item()  # noqa: E731
    result = {"kl_k3": per_seq(kl_estimate(logp, ref_logp, "k3")), "kl_k1": per_seq(kl_estimate(logp, ref_logp, "k1")),
              "completions": len(completion), "mean_length": m.sum(1).mean().item()}
    (Path(run_dir) / "drift.json").write_text(json.dumps(result, indent=2))


def load_run(out: Path) -> dict:
    s = json.loads((out / "summary.json").read_text())
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    drift = json.loads((out / "drift.json").read_text()) if (out / "drift.json").exists() else {}
    tail = records[-10:]
    mean = lambda key, rs=tail: statistics.fmean(r[key] for r in rs) if all(key in r for r in rs) else None  # noqa: E731
    curve = [(0, s["accuracy_before"])] + [(r["completions_total"], r["eval_accuracy"]) for r in records
                                           if "eval_accuracy" in r]
    return {"before": s["accuracy_before"], "after": s["accuracy_after"], "kl_ref": s["final_kl"],
            "kl_ref10": mean("kl_ref"), "drift": drift.get("kl_k3"), "overlong": mean("rewards/overlong/mean", records),
            "completions": s["completions"], "updates": s["steps"], "wall": s["wall_s"],
            "length": mean("completions/mean_length"), "truncated": mean("completions/clipped_ratio"),
            "clip": mean("clip_frac", records), "curve": curve}


def fmt(values: list, digits: int = 3) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    if len(set(values)) == 1:  # one run, or all seeds alike
        return f"{values[0]:.{digits}f}"
    return f"{statistics.fmean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


COLUMNS = [("acc before", "before", 3), ("acc after", "after", 3), ("final kl_ref", "kl_ref", 4),
           ("kl_ref (last 10)", "kl_ref10", 4), ("KL to π₀", "drift", 4), ("completions", "completions", 0),
           ("updates", "updates", 0), ("wall s", "wall", 0), ("len (last 10)", "length", 1),
           ("truncated", "truncated", 3),
           ("clip frac", "clip", 4), ("overlong reward", "overlong", 3)]


def tables(runs: dict, seeds: list[int]) -> str:
    head = "| method | " + " | ".join(c[0] for c in COLUMNS) + " |\n|---" + "|---:" * len(COLUMNS) + "|\n"
    by_method = f"**Per method** (mean ± sample std over seeds {', '.join(map(str, seeds))}):\n\n" + head
    by_run = "**Per run:**\n\n" + head.replace("| method |", "| method, seed |", 1)
    for method in METHODS:
        rows = [(seed, runs[method, seed]) for seed in seeds if (method, seed) in runs]
        if not rows:
            continue
        label = METHODS[method][0]
        by_method += f"| {label} | " + " | ".join(fmt([r[k] for _, r in rows], d) for _, k, d in COLUMNS) + " |\n"
        for seed, r in rows:
            by_run += f"| {label}, {seed} | " + " | ".join(fmt([r[k]], d) for _, k, d in COLUMNS) + " |\n"
    return by_method + "\n" + by_run


def figure(runs: dict, seeds: list[int], budget: int, path: Path) -> None:
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    grid = np.linspace(0, budget, 61)
    for i, method in enumerate(METHODS):
        curves = [runs[method, s]["curve"] for s in seeds if (method, s) in runs]
        if not curves:
            continue
        color = plt.cm.tab10(i)
        for c in curves:
            ax.plot(*zip(*c), color=color, alpha=0.25, lw=0.8)
        ys = np.mean([np.interp(grid, *map(np.array, zip(*c))) for c in curves], axis=0)
        ax.plot(grid, ys, color=color, lw=2, label=f"{METHODS[method][0]} ({len(curves)} seeds)")
    ax.set(xlabel="completions sampled", ylabel="greedy accuracy, held-out sums",
           title="GRPO variants, tiny preset + QLoRA: mean over seeds (thick), each seed (thin)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def write_results(text: str) -> None:
    path = HERE / "RESULTS.md"
    old = path.read_text()
    block = f"{BEGIN}\n{text.rstrip()}\n{END}"
    if BEGIN in old and END in old:
        new = old[:old.index(BEGIN)] + block + old[old.index(END) + len(END):]
    else:
        new = old.rstrip() + "\n\n## GRPO variants: a league table on the tiny preset\n\n" + block + "\n"
    path.write_text(new)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--max-completions", type=int, default=60 * 64, help="sampled completions per run")
    p.add_argument("--eval-every", type=int, default=10, help="greedy held-out evaluation every N updates")
    p.add_argument("--eval-size", type=int, default=200, help="held-out problems per evaluation")
    p.add_argument("--jobs", type=int, default=1, help="runs in parallel")
    p.add_argument("--out", default="runs/variants", help="one directory per run under this")
    p.add_argument("--reuse", action="store_true", help="skip a run whose summary.json exists")
    p.add_argument("--figure", default=str(HERE / "variants.png"))
    p.add_argument("--write-results", action="store_true", help="put the tables into benchmarks/RESULTS.md")
    p.add_argument("--drift-child", metavar="RUN_DIR", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.drift_child:
        drift_child(args.drift_child)
        return
    import bitsandbytes
    import peft
    import torch
    import transformers

    for m in [m for m in METHODS if m not in args.methods]:
        del METHODS[m]  # the tables and the figure keep the canonical order
    Path(args.out).mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/variants.py " + " ".join(sys.argv[1:])
    header = (f"`{command}` — {time.strftime('%Y-%m-%d %H:%M')}\n\n"
              f"- machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs; python "
              f"{platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
              f"peft {peft.__version__}, bitsandbytes {bitsandbytes.__version__}\n"
              f"- `python -m ladder.run grpo --preset tiny --qlora --algo …`, budget {args.max_completions} sampled "
              f"completions per run, greedy eval on {args.eval_size} held-out sums every {args.eval_every} updates, "
              f"1 thread per run, {args.jobs} run(s) at a time; load average at the start "
              f"{os.getloadavg()[0]:.2f}\n")
    jobs = [(m, s) for s in args.seeds for m in METHODS]
    print(f"{len(jobs)} runs, {args.jobs} at a time, under {args.out}", file=sys.stderr)
    with ThreadPoolExecutor(args.jobs) as pool:
        errors = dict(zip(jobs, pool.map(lambda job: run_one(*job, args), jobs)))
    runs = {job: load_run(Path(args.out) / f"{job[0]}-seed{job[1]}") for job in jobs
            if (Path(args.out) / f"{job[0]}-seed{job[1]}" / "summary.json").exists()}
    failed = "".join(f"\n- **{m} seed {s} failed**: ```{e.strip()[-600:]}```" for (m, s), e in errors.items() if e)
    text = (header + f"- load average at the end {os.getloadavg()[0]:.2f}{failed}\n\n"
            + tables(runs, args.seeds) + f"\n![accuracy vs completions]({Path(args.figure).name})\n")
    print(text)
    if runs:
        figure(runs, args.seeds, args.max_completions, Path(args.figure))
    if args.write_results:
        write_results(text)


if __name__ == "__main__":
    main()
