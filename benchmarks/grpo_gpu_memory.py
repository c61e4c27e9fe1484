"""GRPO with QLoRA on a GPU: peak GPU memory and throughput of ladder's rung, and of TRL's GRPOTrainer.

The models have the architectures of Qwen2.5-0.5B-Instruct and Qwen2.5-1.5B-Instruct (hidden
sizes, layers, heads, grouped-query attention, the 151,936-token vocabulary, tied embeddings),
built from their configs with random weights in bfloat16 and saved to a temporary directory with
a small BPE tokenizer, so nothing is downloaded and both implementations load them through
``from_pretrained``. Speed and memory depend on the shapes, not on the values of the weights.

Setup, the same for both: QLoRA (nf4 base with double quantisation, bf16 compute, LoRA r = 16,
α = 32 on every linear layer), gradient checkpointing, paged 8-bit AdamW, lr 1e-5; GSM8K-style
word problems with the task's system prompt and chat template; P = 2 prompts × G = 8 completions
per step, each forced to exactly 512 new tokens (EOS suppressed until then, so 8,192 completion
tokens per step); sampling at temperature 1 with no top-k / top-p; β = 0.04 (π_ref = the base with
the adapter disabled), loss type "grpo", μ = 1.

ladder runs the real rung (``ladder.rungs.grpo.train`` with ``qlora=True``); TRL runs
``GRPOTrainer`` given the same 4-bit model and ``peft_config``. Each implementation and model
size runs in its own subprocess. Reported per run:

- peak GPU memory: ``torch.cuda.max_memory_allocated()`` over the whole process (model weights,
  KV cache, activations, logits, adapters, gradients and optimiser state, all included); also
  the memory held right after the model is loaded, and the allocator's peak reserved memory.
  (Paged optimiser state lives in CUDA managed memory, outside torch's allocator; for LoRA
  adapters it is a few tens of MB.)
- tokens/s: completion tokens generated per step divided by the median seconds per step, where a
  step is everything from sampling to the optimiser step. The first ``--warmup`` steps and the
  last step (the rung runs its final held-out evaluation inside it) are left out of the timing.

Goals: the 1.5B model under 5 GB peak with ladder; ladder's tokens/s at least 1.5× TRL's.

    python benchmarks/grpo_gpu_memory.py [--sizes 0.5b 1.5b] [--steps 8] [--warmup 2] [--no-trl]
    python benchmarks/grpo_gpu_memory.py --show-configs          # parameter counts, no GPU needed
    python benchmarks/grpo_gpu_memory.py --sizes tiny --device cpu --tokens 16 --steps 3 --warmup 1  # smoke test

``--sizes tiny`` is a very small Qwen2 (vocabulary = the tokenizer's) to check the script itself;
on the CPU both sides use plain AdamW (paged 8-bit AdamW needs CUDA) and float32 compute, and the
memory columns are process RSS instead of GPU memory.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from gsm8k_like import problems
from memory import mark_loaded, memory_now_mb, memory_peak_mb, time_calls, training_peak_mb

G, PROMPTS_PER_STEP, LENGTH, BETA, LR, LORA_R, LORA_ALPHA = 8, 2, 512, 0.04, 1e-5, 16, 32
PEAK_GOAL_GB, SPEED_GOAL = 5.0, 1.5

# Published architecture values of the Qwen2.5 instruct models (config.json on the hub).
QWEN25 = dict(vocab_size=151936, max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6,
              tie_word_embeddings=True, hidden_act="silu", use_sliding_window=False, attention_dropout=0.0,
              initializer_range=0.02)
ARCHS = {
    "0.5b": dict(QWEN25, hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, max_window_layers=24),
    "1.5b": dict(QWEN25, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, max_window_layers=21),
    "tiny": dict(QWEN25, vocab_size=None, hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_window_layers=2, max_position_embeddings=2048),
}
NAMES = {"0.5b": "Qwen2.5-0.5B", "1.5b": "Qwen2.5-1.5B", "tiny": "tiny Qwen2 (smoke test)"}

def make_tokenizer():
    """A byte-level BPE tokenizer trained on the prompts (about one token per word, digits split as
    Qwen2.5 splits them), with Qwen's chat markers; its ids are all far below 151,936."""
    from ladder.tasks import arithmetic

    corpus = [f"<|im_start|>system\n{arithmetic.SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n{p['question']}"
              f"<|im_end|>\n<|im_start|>assistant\n" for p in problems()]
    return arithmetic.chat_tokenizer(corpus, vocab_size=4096)


def qwen2_config(size: str, tokenizer=None):
    from transformers import Qwen2Config

    arch = dict(ARCHS[size])
    if arch["vocab_size"] is None:
        arch["vocab_size"] = len(tokenizer)
    ids = {}
    if tokenizer is not None:
        ids = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                   pad_token_id=tokenizer.pad_token_id)
    return Qwen2Config(**arch, **ids)


def parameter_count(size: str) -> int:
    """Parameters of the architecture (built on the meta device: no memory, no time)."""
    import torch
    from transformers import Qwen2ForCausalLM

    config = qwen2_config(size, tokenizer=None if size != "tiny" else make_tokenizer())
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config)
    return sum(p.numel() for p in model.parameters())  # tied embeddings counted once


def build_model(size: str, path: str, device: str) -> None:
    """Random bf16 weights with the architecture of ``size``, saved with the tokenizer."""
    import torch
    from transformers import Qwen2ForCausalLM

    from ladder.tasks import tiny_lm

    tokenizer = make_tokenizer()
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM._from_config(qwen2_config(size, tokenizer), dtype=torch.bfloat16)
    tiny_lm.save(model, tokenizer, path)


# --- the two implementations, each in its own process -----------------------------------------

def run_ladder(model_dir: str, dataset: str, args, release_memory: bool | None = None) -> dict:
    from ladder.policies import quant
    from ladder.rungs import grpo
    from ladder.tasks import arithmetic

    loaded: list[float] = []
    load = quant.load_causal_lm

    def load_and_measure(*a, **kw):
        model = load(*a, **kw)
        loaded.append(mark_loaded(args.device))
        return model

    quant.load_causal_lm = load_and_measure  # the rung calls quant.load_causal_lm: measure right after it
    with tempfile.TemporaryDirectory() as out:
        cfg = grpo.Config(model=model_dir, dataset=dataset, task="gsm8k", system_prompt=arithmetic.SYSTEM_PROMPT,
                          qlora=True, lora_r=LORA_R, lora_alpha=LORA_ALPHA, steps=args.steps,
                          prompts_per_step=args.prompts_per_step, group_size=G, lr=LR, kl_coef=BETA, loss_type="grpo",
                          max_new_tokens=args.tokens, min_new_tokens=args.tokens, temperature=1.0, eval_every=0,
                          eval_size=1, out=os.path.join(out, "run"), progress=False, print_samples=0,
                          checkpoint_every=10**9, device=args.device, threads=args.threads,
                          release_memory=release_memory, sampler_dtype=args.sampler_dtype)
        grpo.train(cfg)
        with open(os.path.join(out, "run", "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f]
    walls = [r["wall_s"] for r in records]
    # step 1 also holds the initial evaluation, the last step the final one (both left out of the timing)
    per_step = [walls[0]] + [b - a for a, b in zip(walls, walls[1:])]
    return {"per_step": per_step, "tokens": [r["tokens"] for r in records],
            "mean_length": [r["completions/mean_length"] for r in records], "loaded_mb": loaded[0],
            "phases": [{k: v for k, v in r.items() if k.startswith("time/")} for r in records]}


def run_trl(model_dir: str, dataset: str, args) -> dict:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from ladder.tasks import arithmetic

    cuda = args.device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    with open(dataset) as f:
        rows = [json.loads(line) for line in f]
    rows = [{"prompt": arithmetic.chat_prompt(tokenizer, r["question"], arithmetic.SYSTEM_PROMPT),
             "answer": arithmetic.gold_answer(r["answer"])} for r in rows]

    def correctness(completions, answer, **_):
        return arithmetic.correctness_reward(completions, answer)

    def fmt(completions, answer, **_):
        return arithmetic.format_reward(completions, answer)

    times: list[float] = []
    lengths: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args_, state, control, **kw):
            if cuda:
                torch.cuda.synchronize()
            self.t = time.perf_counter()

        def on_step_end(self, args_, state, control, **kw):
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - self.t)

        def on_log(self, args_, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                lengths.append(logs["completions/mean_length"])

    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                             bnb_4bit_compute_dtype=dtype)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, quantization_config=bnb,
                                                 device_map={"": torch.device(args.device).index or 0} if cuda
                                                 else {"": "cpu"})
    if not cuda:  # as the rung does: bitsandbytes' CPU inference repacking breaks a later forward with gradients
        for module in model.modules():
            if hasattr(module, "support_avx512bf16_for_cpu"):
                module.support_avx512bf16_for_cpu = False
    completions = args.prompts_per_step * G
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out, per_device_train_batch_size=completions, num_generations=G,
            max_completion_length=args.tokens, generation_kwargs={"min_new_tokens": args.tokens}, beta=BETA,
            loss_type="grpo", learning_rate=LR, max_steps=args.steps, num_iterations=1, temperature=1.0,
            top_p=1.0, top_k=0, use_cpu=not cuda, bf16=cuda, gradient_checkpointing=True,
            optim="paged_adamw_8bit" if cuda else "adamw_torch", logging_steps=1, save_strategy="no",
            report_to="none", disable_dropout=True, seed=0, dataloader_num_workers=0)
        peft_config = LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, lora_dropout=0.0, target_modules="all-linear",
                                 task_type="CAUSAL_LM", bias="none")
        trainer = GRPOTrainer(model=model, reward_funcs=[correctness, fmt], args=config,
                              train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                              peft_config=peft_config, callbacks=[Clock()])
        loaded = mark_loaded(args.device)
        sampling = time_calls(trainer, "_generate_single_turn", cuda)  # TRL's sampling phase: its generate call
        trainer.train()
    # with μ = 1 one step = one generation + one optimiser step; every completion is forced to full length
    return {"per_step": times, "tokens": [round(m * completions) for m in lengths] or [completions * args.tokens]
            * len(times), "mean_length": lengths, "loaded_mb": loaded, "sampling_s": sampling}


def child(which: str, model_dir: str, args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # Both implementations' libraries are imported before the baseline, in every child alike.
    import ladder.rungs.grpo  # noqa: F401
    if importlib.util.find_spec("trl") is not None:
        import datasets  # noqa: F401
        import trl  # noqa: F401
    start_mb = memory_now_mb(args.device)
    if which == "build":
        build_model(args.sizes[0], model_dir, args.device)
        return
    if which == "trl":
        result = run_trl(model_dir, args.dataset, args)
    else:  # "ladder", or "ladder-heap": the rung with --no-release-memory (glibc's dynamic mmap threshold)
        result = run_ladder(model_dir, args.dataset, args, release_memory=False if which == "ladder-heap" else None)
    result["peak_mb"], result["reserved_mb"] = memory_peak_mb(args.device)
    result["start_mb"] = start_mb
    if not args.device.startswith("cuda"):
        result["training_peak_mb"] = training_peak_mb()
    print(json.dumps(result))


# --- the driver --------------------------------------------------------------------------------

def spawn(which: str, size: str, model_dir: str, dataset: str, args) -> dict | None:
    cmd = [sys.executable, __file__, "--child", which, model_dir, "--sizes", size, "--dataset", dataset,
           "--device", args.device, "--steps", str(args.steps), "--tokens", str(args.tokens),
           "--prompts-per-step", str(args.prompts_per_step), "--threads", str(args.threads),
           "--sampler-dtype", args.sampler_dtype]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        print(f"# {which} {size}: failed (exit {proc.returncode})\n{tail}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1]) if which != "build" else {}


def summarise(r: dict, warmup: int) -> dict:
    steps = len(r["per_step"])
    timed = slice(warmup, steps - 1)  # the rung evaluates inside its last step; leave it out for both
    seconds = statistics.median(r["per_step"][timed])
    tokens = statistics.mean(r["tokens"][timed]) if len(r["tokens"]) == steps else statistics.mean(r["tokens"])
    return {"s_per_step": seconds, "tokens_per_step": tokens, "tokens_per_s": tokens / seconds,
            "timed_steps": len(r["per_step"][timed]), "peak_gb": r["peak_mb"] / 1024,
            "reserved_gb": r["reserved_mb"] / 1024, "loaded_gb": r["loaded_mb"] / 1024,
            "mean_length": statistics.mean(r["mean_length"]) if r["mean_length"] else float("nan")}


def show_configs() -> None:
    for size in ("0.5b", "1.5b"):
        a = ARCHS[size]
        print(f"{NAMES[size]}: {parameter_count(size):,} parameters (hidden {a['hidden_size']}, intermediate "
              f"{a['intermediate_size']}, {a['num_hidden_layers']} layers, {a['num_attention_heads']} heads / "
              f"{a['num_key_value_heads']} KV heads, vocabulary {a['vocab_size']:,}, tied embeddings)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="+", default=["0.5b", "1.5b"], choices=tuple(ARCHS), help="architectures")
    p.add_argument("--steps", type=int, default=8, help="GRPO steps per implementation and size")
    p.add_argument("--warmup", type=int, default=2, help="first steps left out of the timing (at least 1)")
    p.add_argument("--prompts-per-step", type=int, default=PROMPTS_PER_STEP,
                   help=f"P: prompts per step, each with G = {G} completions")
    p.add_argument("--tokens", type=int, default=LENGTH, help="completion length, forced (lower only to smoke-test)")
    p.add_argument("--device", default="cuda", help="torch device (cpu only for a smoke test with --sizes tiny)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads in each run")
    p.add_argument("--sampler-dtype", default="same", choices=("same", "bfloat16", "float16"),
                   help="ladder's --sampler-dtype: sample from the weights rounded to this dtype")
    p.add_argument("--no-trl", action="store_true", help="measure ladder only")
    p.add_argument("--show-configs", action="store_true", help="print the architectures' parameter counts and exit")
    p.add_argument("--dataset", help=argparse.SUPPRESS)
    p.add_argument("--child", nargs=2, metavar=("WHICH", "MODEL_DIR"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args)
        return
    if args.show_configs:
        show_configs()
        return
    if args.warmup < 1 or args.steps < args.warmup + 2:
        p.error("need --warmup >= 1 and --steps >= --warmup + 2 (the first and last steps hold evaluations)")
    import torch
    import transformers

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("grpo_gpu_memory: this benchmark needs a CUDA GPU (none is available here); "
              "for a CPU smoke test: --sizes tiny --device cpu --tokens 16 --steps 3 --warmup 1")
        sys.exit(2)
    with_trl = not args.no_trl and importlib.util.find_spec("trl") is not None
    impls = ["ladder", "trl"] if with_trl else ["ladder"]

    results: dict[str, dict[str, dict | None]] = {}
    with tempfile.TemporaryDirectory() as work:
        dataset = os.path.join(work, "problems.jsonl")
        with open(dataset, "w") as f:
            for row in problems():
                f.write(json.dumps(row) + "\n")
        for size in args.sizes:
            model_dir = os.path.join(work, size)
            if spawn("build", size, model_dir, dataset, args) is None:
                continue
            results[size] = {which: spawn(which, size, model_dir, dataset, args) for which in impls}
            shutil.rmtree(model_dir, ignore_errors=True)
        from ladder.tasks import arithmetic

        tokenizer = make_tokenizer()
        prompt_tokens = statistics.mean(
            len(tokenizer(arithmetic.chat_prompt(tokenizer, r["question"], arithmetic.SYSTEM_PROMPT)).input_ids)
            for r in problems())

    cuda = args.device.startswith("cuda")
    device = torch.cuda.get_device_name(torch.device(args.device)) if cuda else "CPU"
    trl_version = f", trl {importlib.import_module('trl').__version__}" if with_trl else ""
    completions = args.prompts_per_step * G
    print(f"# GRPO + QLoRA, ladder{' vs TRL' if with_trl else ''} on {device} -- {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"# torch {torch.__version__}, transformers {transformers.__version__}{trl_version}; nf4 + double quant, "
          f"LoRA r={LORA_R} alpha={LORA_ALPHA} all-linear, gradient checkpointing, "
          f"{'paged 8-bit AdamW, bf16' if cuda else 'AdamW, fp32 (CPU)'}; ladder's sampler dtype {args.sampler_dtype}")
    print(f"# P={args.prompts_per_step} prompts x G={G} = {completions} completions x {args.tokens} tokens (forced) "
          f"per step, prompts ~{prompt_tokens:.0f} tokens, beta={BETA}, loss grpo, {args.steps} steps "
          f"({args.warmup} warm-up, last left out), {args.threads} CPU thread(s)")
    memory = "GPU memory: torch peak allocated over the whole run" if cuda else "memory: process RSS (CPU run)"
    print(f"# {memory}; 'loaded' = held after the model is loaded")
    print(f"{'model':<24} {'impl':<7} {'params':>14} {'s/step':>8} {'tokens/s':>9} {'length':>7} "
          f"{'peak GB':>8} {'reserved':>9} {'loaded':>7}")
    rows: dict[str, dict[str, dict]] = {}
    for size, by_impl in results.items():
        params = parameter_count(size)
        for which, r in by_impl.items():
            if r is None:
                print(f"{NAMES[size]:<24} {which:<7} {params:>14,} {'failed (see above)':>30}")
                continue
            s = rows.setdefault(size, {})[which] = summarise(r, args.warmup)
            print(f"{NAMES[size]:<24} {which:<7} {params:>14,} {s['s_per_step']:>8.2f} {s['tokens_per_s']:>9.1f} "
                  f"{s['mean_length']:>7.1f} {s['peak_gb']:>8.2f} {s['reserved_gb']:>9.2f} {s['loaded_gb']:>7.2f}")
    for size, s in rows.items():
        line = f"{NAMES[size]}:"
        if "ladder" in s and size == "1.5b" and cuda:
            peak = s["ladder"]["peak_gb"]
            met = "MET" if peak < PEAK_GOAL_GB else "NOT MET"
            line += f" ladder peak {peak:.2f} GB (goal < {PEAK_GOAL_GB:g} GB: {met});"
        if "ladder" in s and "trl" in s:
            speed = s["ladder"]["tokens_per_s"] / s["trl"]["tokens_per_s"]
            memory_ratio = s["ladder"]["peak_gb"] / s["trl"]["peak_gb"]
            line += (f" tokens/s ladder / TRL {speed:.2f}x (goal >= {SPEED_GOAL:g}x: "
                     f"{'MET' if speed >= SPEED_GOAL else 'NOT MET'}); peak memory ladder / TRL {memory_ratio:.2f}x")
        if line.endswith(";") or line.endswith("x"):
            print(line.rstrip(";"))


if __name__ == "__main__":
    main()
