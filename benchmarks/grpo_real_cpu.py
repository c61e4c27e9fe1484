"""GRPO + QLoRA at the real size of Qwen2.5-0.5B-Instruct, on the CPU: ladder's rung against TRL's GRPOTrainer.

No GPU is needed: the model has the architecture of Qwen2.5-0.5B-Instruct (hidden 896, 24 layers,
14 heads / 2 KV heads, the 151,936-token vocabulary, tied embeddings) with random weights, built
from its config and saved with a small BPE tokenizer, and both implementations load it through
``from_pretrained`` with the same 4-bit setup. Speed and memory depend on these shapes, not on the
values of the weights. The setup is that of ``grpo_gpu_memory.py`` (whose functions run both
sides here) at CPU scale: QLoRA (nf4, double quantisation, LoRA r = 16, α = 32 on every linear
layer, float32 compute), gradient checkpointing, AdamW at lr 1e-5, P = 1 GSM8K-style prompt of
about 100 tokens × G = 8 completions forced to exactly 128 new tokens, β = 0.04 (π_ref = the base
with the adapter disabled), loss "grpo", μ = 1, 2 torch threads.

ladder runs twice: with the rung's defaults, which on the CPU with ``--qlora`` fix glibc's mmap
threshold in-process (``--release-memory``: freed buffers leave RSS at once, the update is slower),
and as ``ladder-heap`` with ``--no-release-memory`` (glibc's dynamic threshold, as TRL runs), so that
the table shows what that setting trades (``--no-heap`` leaves that run out). The goals are read for
the defaults. ``--sampler-dtype bfloat16`` (or float16) adds a third ladder run, ``ladder-bf16``: the
defaults with the rung's ``--sampler-dtype``, sampling from the weights rounded to that dtype (the
4-bit base dequantized to it once per batch) while π_old, π_ref and the update stay in float32.

Each run is its own process, ladder, ladder-heap and TRL alternating ``--repeats`` times. Reported per
implementation (the best of its repeats): seconds per step (median of the timed steps: the first
``--warmup`` steps and the last one, which holds ladder's final evaluation, are left out),
completion tokens per second, the growth of peak RSS over the RSS after imports (loading the
model included), and the peak RSS of training alone above the RSS once the model is loaded.
ladder's step is broken down into sampling (generate + rewards), the π_ref forward and the
update (training forward + backward + optimiser step), from its ``time/…`` metrics; the sampling
phase's completion tokens per second are read for every run (TRL's: its ``_generate_single_turn``).

    python benchmarks/grpo_real_cpu.py [--steps 4] [--warmup 1] [--repeats 1] [--threads 2]

One step takes minutes on two cores; ``--size tiny --tokens 16`` checks the script in seconds.
Goals: ladder ≤ 0.7× TRL's seconds per step and ≤ 0.8× its peak RSS growth; ladder with a lower-precision
sampler ≤ 0.5× TRL's seconds per step at ≤ 0.8× its peak RSS growth.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import grpo_gpu_memory as gpu  # the model, prompts and both implementations' runs

SPEED_GOAL, MEMORY_GOAL, SAMPLER_SPEED_GOAL = 0.7, 0.8, 0.5
SHORT = {"bfloat16": "bf16", "float16": "fp16"}
PHASES = {"time/sampling_s": "sampling", "time/reference_s": "π_ref forward", "time/update_s": "update"}


def spawn(which: str, model_dir: str, dataset: str, args) -> dict:
    sampler = args.sampler_dtype if which.startswith("ladder-") and which != "ladder-heap" else "same"
    cmd = [sys.executable, gpu.__file__, "--child", "ladder" if sampler != "same" else which, model_dir,
           "--sizes", args.size, "--dataset", dataset, "--device", "cpu", "--steps", str(args.steps),
           "--tokens", str(args.tokens), "--prompts-per-step", str(args.prompts_per_step),
           "--threads", str(args.threads), "--sampler-dtype", sampler]
    env = dict(os.environ)
    if args.mmap_threshold is not None:  # glibc: fixed, so freed large buffers leave RSS at once
        env["MALLOC_MMAP_THRESHOLD_"] = str(args.mmap_threshold)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"grpo_real_cpu: {which} failed (exit {proc.returncode}):\n" +
                 "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:]))
    return json.loads(proc.stdout.strip().splitlines()[-1]) if which != "build" else {}


def timed(values: list, warmup: int) -> list:
    return values[warmup:len(values) - 1]  # the last step holds ladder's final evaluation: out for both


def summary(run: dict, warmup: int) -> dict:
    seconds = statistics.median(timed(run["per_step"], warmup))
    tokens = statistics.mean(timed(run["tokens"], warmup)) if len(run["tokens"]) == len(run["per_step"]) \
        else statistics.mean(run["tokens"])
    phases = {name: statistics.median(p[key] for p in timed(run["phases"], warmup))
              for key, name in PHASES.items()} if run.get("phases") else {}
    sampling = phases.get("sampling") or statistics.median(timed(run["sampling_s"], warmup))
    return {"s_per_step": seconds, "tokens_per_s": tokens / seconds, "growth_mb": run["peak_mb"] - run["start_mb"],
            "sampling_s": sampling, "sampling_tokens_per_s": tokens / sampling,
            "training_mb": run["training_peak_mb"] - run["loaded_mb"], "loaded_mb": run["loaded_mb"],
            "peak_mb": run["peak_mb"], "phases": phases, "steps": [round(s, 1) for s in run["per_step"]]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="0.5b", choices=("0.5b", "tiny"), help="architecture (tiny: a smoke test)")
    p.add_argument("--steps", type=int, default=4, help="GRPO steps per run")
    p.add_argument("--warmup", type=int, default=1, help="first steps left out of the timing")
    p.add_argument("--repeats", type=int, default=1, help="alternate the three runs this many times, keep the best")
    p.add_argument("--tokens", type=int, default=128, help="completion length, forced")
    p.add_argument("--prompts-per-step", type=int, default=1, help=f"P: prompts per step, G = {gpu.G} each")
    p.add_argument("--threads", type=int, default=2, help="torch threads in each run")
    p.add_argument("--sampler-dtype", default="same", choices=("same", *SHORT),
                   help="also run ladder with this --sampler-dtype (the row ladder-bf16 / ladder-fp16)")
    p.add_argument("--no-heap", action="store_true", help="leave out the ladder-heap run (--no-release-memory)")
    p.add_argument("--mmap-threshold", type=int, metavar="BYTES",
                   help="run all three with glibc's MALLOC_MMAP_THRESHOLD_ set to BYTES (default: glibc's dynamic one)")
    args = p.parse_args()
    if args.warmup < 1 or args.steps < args.warmup + 2:
        p.error("need --warmup >= 1 and --steps >= --warmup + 2 (the first and last steps hold evaluations)")
    import torch
    import transformers
    import trl

    from ladder.tasks import arithmetic

    names = ["ladder"] + ["ladder-heap"] * (not args.no_heap)
    names += [f"ladder-{SHORT[args.sampler_dtype]}"] * (args.sampler_dtype != "same")
    runs: dict[str, list[dict]] = {which: [] for which in names + ["trl"]}
    with tempfile.TemporaryDirectory() as work:
        dataset, model_dir = os.path.join(work, "problems.jsonl"), os.path.join(work, args.size)
        with open(dataset, "w") as f:
            for row in gpu.problems():
                f.write(json.dumps(row) + "\n")
        spawn("build", model_dir, dataset, args)
        for _ in range(args.repeats):
            for which in runs:
                runs[which].append(summary(spawn(which, model_dir, dataset, args), args.warmup))
    tokenizer = gpu.make_tokenizer()
    prompt_tokens = statistics.mean(len(tokenizer(arithmetic.chat_prompt(tokenizer, r["question"],
                                                                         arithmetic.SYSTEM_PROMPT)).input_ids)
                                    for r in gpu.problems())

    print(f"# GRPO + QLoRA on the CPU, ladder vs TRL {trl.__version__} -- {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"# {platform.platform()}, {os.cpu_count()} CPUs; python {platform.python_version()}, torch "
          f"{torch.__version__}, transformers {transformers.__version__}; load average {os.getloadavg()[0]:.2f}")
    print(f"# {gpu.NAMES[args.size]} ({gpu.parameter_count(args.size):,} parameters, random weights), nf4 + double "
          f"quant, LoRA r={gpu.LORA_R} alpha={gpu.LORA_ALPHA} all-linear, gradient checkpointing, AdamW, fp32 compute")
    env_threshold = 'dynamic (default)' if args.mmap_threshold is None else f'{args.mmap_threshold} bytes'
    print(f"# P={args.prompts_per_step} x G={gpu.G} completions x {args.tokens} tokens (forced), prompts "
          f"~{prompt_tokens:.0f} tokens, beta={gpu.BETA}, loss grpo, mu=1, {args.threads} threads; {args.steps} steps "
          f"({args.warmup} warm-up, last left out), {args.repeats} alternating repeat(s), best kept; glibc mmap "
          f"threshold in the environment {env_threshold}"
          + "; ladder-heap = ladder with --no-release-memory" * (not args.no_heap)
          + (f"; ladder-{SHORT[args.sampler_dtype]} = ladder with --sampler-dtype {args.sampler_dtype}"
             if args.sampler_dtype != "same" else ""))
    best = {}
    for which, results in runs.items():
        best[which] = min(results, key=lambda r: r["s_per_step"])
        for r in results:
            print(f"#   {which}: steps (s) {r['steps']}, median {r['s_per_step']:.1f} s")
    print(f"{'impl':<11} {'s/step':>8} {'tokens/s':>9} {'sampling s':>11} {'sampling tok/s':>15} "
          f"{'peak RSS growth':>16} {'training peak':>14} {'loaded':>8}")
    for which, r in best.items():
        print(f"{which:<11} {r['s_per_step']:>8.1f} {r['tokens_per_s']:>9.1f} {r['sampling_s']:>11.1f} "
              f"{r['sampling_tokens_per_s']:>15.1f} {r['growth_mb']:>13.0f} MB {r['training_mb']:>11.0f} MB "
              f"{r['loaded_mb']:>5.0f} MB")
    for which in names:
        phases = best[which]["phases"]
        if phases:
            rest = best[which]["s_per_step"] - sum(phases.values())
            print(f"{which}'s step: " + ", ".join(f"{name} {s:.1f} s" for name, s in phases.items())
                  + f", the rest (advantages, logging) {rest:.1f} s")
    for which in names:
        goal = SPEED_GOAL if which in ("ladder", "ladder-heap") else SAMPLER_SPEED_GOAL
        speed = best[which]["s_per_step"] / best["trl"]["s_per_step"]
        memory = best[which]["growth_mb"] / best["trl"]["growth_mb"]
        print(f"{which} / TRL: seconds per step {speed:.2f}x (goal <= {goal}x: "
              f"{'MET' if speed <= goal else 'NOT MET'}), peak RSS growth {memory:.2f}x (goal <= {MEMORY_GOAL}x: "
              f"{'MET' if memory <= MEMORY_GOAL else 'NOT MET'}), training peak "
              f"{best[which]['training_mb'] / best['trl']['training_mb']:.2f}x")


if __name__ == "__main__":
    main()
