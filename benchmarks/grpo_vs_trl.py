"""GRPO on the CPU: ladder's rung against TRL's ``GRPOTrainer`` on the same tiny model.

Both train the same randomly initialised Qwen2-architecture model (built from a config and saved
to a temporary directory, so both load it through ``from_pretrained``) on the same prompts with
the same rule rewards: G = 8 completions per prompt, 16 completions per step, exactly 32 new
tokens each (EOS suppressed until then), β = 0.04 (so both compute π_ref), loss type "grpo",
μ = 1, full fine-tuning, sampling at temperature 1, one torch thread. ``--sampler-dtype bfloat16``
(or float16) adds a ladder run, ``ladder-bf16``: the rung's ``--sampler-dtype``, sampling from
the weights rounded to that dtype while π_old, π_ref and the update stay in float32. ``--with-generate``
adds ``ladder-generate``: the rung with ``--sampler-loop generate`` (transformers' ``generate``, TRL's loop)
in place of ladder's own decode loop.

Each run is its own subprocess; the script prints seconds per step (median over the timed steps,
after warm-up steps; ladder's last step is left out because it includes the final greedy
evaluation) and the peak resident memory growth of training (peak RSS minus the RSS after
imports), the sampling phase's completion tokens per second (ladder's ``time/sampling_s``, TRL's
``_generate_single_turn``), and the ratios ladder / TRL. ``--repeats N`` alternates the runs N times
and keeps each one's fastest median, so a machine shared with other jobs slows all alike.

    python benchmarks/grpo_vs_trl.py [--steps 10] [--warmup 2] [--repeats 3] [--sampler-dtype bfloat16]
                                     [--with-generate]
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

from memory import memory_now_mb, peak_rss_mb, time_calls

G, COMPLETIONS_PER_STEP, LENGTH, BETA, LR = 8, 16, 32, 0.04, 1e-5
SPEED_GOAL, MEMORY_GOAL = 0.5, 0.5  # ladder / TRL: seconds per step, peak RSS growth
SHORT = {"bfloat16": "bf16", "float16": "fp16"}


def build_model(path: str) -> None:
    import torch

    from ladder.tasks import arithmetic, tiny_lm

    train, _ = arithmetic.train_eval_split(200, 10)
    corpus = [p["question"] + "\n" + p["solution"] for p in train]
    tokenizer = arithmetic.chat_tokenizer(corpus, vocab_size=400)
    torch.manual_seed(0)
    model = tiny_lm.build_model("qwen2", tokenizer, hidden=256, layers=4, heads=4, max_positions=512)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


def problems():
    from ladder.tasks import arithmetic

    train, _ = arithmetic.train_eval_split(64, 10)
    return train


def run_ladder(model_dir: str, steps: int, sampler_dtype: str = "same", sampler_loop: str = "ladder") -> dict:
    from ladder.rungs import grpo

    with tempfile.TemporaryDirectory() as out:
        dataset = os.path.join(out, "rows.jsonl")
        with open(dataset, "w") as f:
            for p in problems():
                f.write(json.dumps({"question": p["question"], "answer": "#### " + p["answer"]}) + "\n")
        cfg = grpo.Config(model=model_dir, dataset=dataset, task="gsm8k", system_prompt="Solve it.",
                          steps=steps, prompts_per_step=COMPLETIONS_PER_STEP // G, group_size=G, lr=LR,
                          kl_coef=BETA, loss_type="grpo", max_new_tokens=LENGTH, min_new_tokens=LENGTH,
                          eval_every=0, eval_size=1, out=os.path.join(out, "run"), progress=False,
                          print_samples=0, checkpoint_every=10**9, sampler_dtype=sampler_dtype,
                          sampler_loop=sampler_loop)
        grpo.train(cfg)
        records = [json.loads(line) for line in open(os.path.join(out, "run", "metrics.jsonl"))]
    walls = [r["wall_s"] for r in records]
    # the first step is the timer's start, the last one also runs the final evaluation
    return {"per_step": [b - a for a, b in zip(walls, walls[1:-1])],
            "sampling_s": [r["time/sampling_s"] for r in records[1:-1]]}


def run_trl(model_dir: str, steps: int) -> dict:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from ladder.tasks import arithmetic

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    rows = [{"prompt": arithmetic.chat_prompt(tokenizer, p["question"], "Solve it."), "answer": p["answer"]}
            for p in problems()]

    def correctness(completions, answer, **_):
        return arithmetic.correctness_reward(completions, answer)

    def fmt(completions, answer, **_):
        return arithmetic.format_reward(completions, answer)

    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t)

    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out, per_device_train_batch_size=COMPLETIONS_PER_STEP, num_generations=G,
            max_completion_length=LENGTH, generation_kwargs={"min_new_tokens": LENGTH}, beta=BETA,
            loss_type="grpo", learning_rate=LR, max_steps=steps, num_iterations=1, temperature=1.0,
            use_cpu=True, bf16=False, gradient_checkpointing=False, logging_steps=10**9, save_strategy="no",
            report_to="none", disable_dropout=True, seed=0, dataloader_num_workers=0)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        trainer = GRPOTrainer(model=model, reward_funcs=[correctness, fmt], args=config,
                              train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                              callbacks=[Clock()])
        sampling = time_calls(trainer, "_generate_single_turn", cuda=False)
        trainer.train()
    # with μ = 1 one step = one generation + one optimiser step
    return {"per_step": times, "sampling_s": sampling}


def child(which: str, model_dir: str, steps: int, sampler_dtype: str) -> None:
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    base = memory_now_mb()
    if which == "trl":
        result = run_trl(model_dir, steps)
    else:
        loop = "generate" if which == "ladder-generate" else "ladder"
        result = run_ladder(model_dir, steps, sampler_dtype, loop)
    print(json.dumps({**result, "peak_growth_mb": peak_rss_mb() - base, "peak_rss_mb": peak_rss_mb()}))


def run_names(sampler_dtype: str, with_generate: bool = False) -> list[str]:
    """The ladder runs compared with TRL: ``ladder``, ``ladder-generate`` (``--sampler-loop generate``) with
    ``with_generate``, and ``ladder-bf16`` / ``ladder-fp16`` with a sampler dtype."""
    names = ["ladder"] + (["ladder-generate"] if with_generate else [])
    return names if sampler_dtype == "same" else names + [f"ladder-{SHORT[sampler_dtype]}"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=10, help="GRPO steps per implementation")
    p.add_argument("--warmup", type=int, default=2, help="first steps left out of the timing")
    p.add_argument("--repeats", type=int, default=1, help="alternate ladder and TRL this many times, keep the best")
    p.add_argument("--sampler-dtype", default="same", choices=("same", *SHORT),
                   help="also run ladder with this --sampler-dtype (the row ladder-bf16 / ladder-fp16)")
    p.add_argument("--with-generate", action="store_true",
                   help="also run ladder with --sampler-loop generate (the row ladder-generate)")
    p.add_argument("--child", nargs=2, metavar=("WHICH", "MODEL_DIR"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.steps, args.sampler_dtype)
        return
    import torch
    import transformers
    import trl

    with tempfile.TemporaryDirectory() as model_dir:
        build_model(model_dir)
        names = run_names(args.sampler_dtype, args.with_generate)
        results: dict[str, list[dict]] = {which: [] for which in names + ["trl"]}
        for _ in range(args.repeats):
            for which in results:
                sampler = args.sampler_dtype if which.startswith(("ladder-bf", "ladder-fp")) else "same"
                out = subprocess.run([sys.executable, __file__, "--steps", str(args.steps), "--sampler-dtype", sampler,
                                      "--child", which, model_dir], capture_output=True, text=True, check=True)
                results[which].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"# GRPO on CPU, ladder vs TRL {trl.__version__} -- {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"# {platform.platform()}, {os.cpu_count()} CPUs; python {platform.python_version()}")
    print(f"# torch {torch.__version__}, transformers {transformers.__version__}; tiny Qwen2 (hidden 256, 4 layers), "
          f"G={G}, {COMPLETIONS_PER_STEP} completions x {LENGTH} tokens per step, beta={BETA}, loss grpo, "
          f"1 thread, {args.steps} steps ({args.warmup} warm-up), {args.repeats} alternating repeat(s); "
          f"load average {os.getloadavg()[0]:.2f}")
    rows = {}
    tokens = COMPLETIONS_PER_STEP * LENGTH
    for which, runs in results.items():
        medians = [statistics.median(r["per_step"][args.warmup:]) for r in runs]
        best = runs[medians.index(min(medians))]
        sampling = statistics.median(best["sampling_s"][args.warmup:])
        rows[which] = (min(medians), best["peak_growth_mb"])
        print(f"{which:>11}: {rows[which][0]:.3f} s/step (best of the medians "
              f"{', '.join(f'{m:.3f}' for m in medians)}), sampling {sampling:.3f} s = "
              f"{tokens / sampling:.0f} tokens/s, peak RSS growth {best['peak_growth_mb']:.0f} MB "
              f"(peak RSS {best['peak_rss_mb']:.0f} MB)")
    for which in names:
        speed = rows[which][0] / rows["trl"][0]
        memory = rows[which][1] / rows["trl"][1]
        print(f"{which} / TRL: seconds per step {speed:.2f}x (goal <= {SPEED_GOAL}x: "
              f"{'MET' if speed <= SPEED_GOAL else 'NOT MET'}), peak memory {memory:.2f}x (goal <= {MEMORY_GOAL}x: "
              f"{'MET' if memory <= MEMORY_GOAL else 'NOT MET'})")


if __name__ == "__main__":
    main()
