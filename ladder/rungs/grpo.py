"""Rung 4: GRPO (DeepSeekMath) — no critic, group-relative advantages, rule rewards, KL in the loss.

Each update: P prompts × G sampled completions → rule rewards → Â_i = (r_i − mean_group)/std →
every token of completion i gets Â_i → ``Batch`` → ``ladder.core.update`` with the clipped
surrogate and β·KL(π_θ‖π_ref) (k3, importance-corrected) in the loss. With ``--qlora`` the base is
4-bit and only LoRA adapters train; π_ref is the base with the adapter disabled.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from ladder import core, hub, rewards
from ladder.cli import RunOptions, option, show_progress
from ladder.distributed import Processes, launched_processes, process_device, weights_digest
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
from ladder.rewards import score
from ladder.rungs import lm_eval
from ladder.runlog import NonFiniteGuard, RunLog, UsageError, rng_state, seed_everything, set_rng_state
from ladder.tasks import arithmetic

NAME = "grpo"
LOSS_TYPES = {"grpo": "seq_mean_token_mean", "bnpo": "token_mean", "dr_grpo": "dr_grpo", "dapo": "dapo"}
CURVES = {"reward": "reward (mean)", "eval_accuracy": "greedy accuracy (held-out)",
          "rewards/correctness/mean": "correctness reward", "kl_ref": "KL(π_θ‖π_ref)",
          "completions/mean_length": "completion length", "frac_reward_zero_std": "groups with zero spread"}


@dataclass
class Config(RunOptions):
    model: str = option("Qwen/Qwen2.5-0.5B-Instruct", "causal LM: hub id or local directory")
    task: str = option("gsm8k", "gsm8k (GSM8K word problems) or arithmetic (synthetic, offline)",
                       choices=("gsm8k", "arithmetic"))
    dataset: str = option("openai/gsm8k", "GSM8K hub id or a local .json/.jsonl with question/answer")
    system_prompt: str | None = option(None, "system prompt (default: the task's)")
    qlora: bool = option(False, "4-bit nf4 base (double quantisation) + LoRA adapters + checkpointing")
    lora: bool = option(False, "LoRA adapters on a full-precision base")
    lora_r: int = option(16, "LoRA rank")
    lora_alpha: int = option(32, "LoRA alpha")
    gradient_checkpointing: bool | None = option(None, "recompute activations in backward (default: on with --qlora)")
    optim: str = option("auto", "auto (8-bit paged AdamW on CUDA with --qlora, else AdamW), adamw, paged_adamw_8bit")
    steps: int = option(200, "updates (each: P prompts × G completions)")
    prompts_per_step: int = option(4, "P: prompts per update")
    group_size: int = option(8, "G: completions sampled per prompt (at least 2)")
    mu: int = option(1, "μ: optimisation passes over each batch")
    num_minibatches: int = option(1, "shuffled minibatches per pass (each one optimiser step)")
    lr: float = option(1e-5, "learning rate")
    warmup_steps: int = option(0, "linear learning-rate warmup over the first N updates (0: none)")
    max_grad_norm: float = option(1.0, "gradient-norm clip")
    clip_eps_low: float = option(0.2, "ε_low (ratio clipped below at 1 − ε_low)")
    clip_eps_high: float = option(0.2, "ε_high (ratio clipped above at 1 + ε_high; 0.28 is DAPO's clip-higher)")
    kl_coef: float = option(0.04, "β of KL(π_θ‖π_ref) in the loss (0: no reference computed at all)")
    kl_correction: str = option("on", "importance-weight the KL term by π_θ/π_old (off: the biased form)",
                                choices=("on", "off"))
    loss_type: str = option("grpo", "loss aggregation: grpo | bnpo | dr_grpo | dapo", choices=tuple(LOSS_TYPES))
    scale_rewards: str = option("group", "advantage scale: group std | batch std | none",
                                choices=("group", "batch", "none"))
    reward_funcs: str = option("correctness,format", "reward functions, comma-separated: built-in names "
                               "(correctness, format) or FILE.py:FUNCTION or MODULE:FUNCTION, each called as "
                               "fn(completions, answers) -> list of floats")
    reward_weights: str | None = option(None, "one weight per reward function, comma-separated (default: all 1)")
    max_new_tokens: int = option(256, "completion length limit")
    min_new_tokens: int = option(0, "force at least this many tokens (EOS suppressed until then; for benchmarks)")
    temperature: float = option(1.0, "sampling temperature (log-probs use the same)")
    top_p: float = option(1.0, "nucleus sampling p")
    chunk_size: int = option(16, "positions per chunk of the lm_head / log-softmax (rows·chunk·vocab floats at once)")
    eval_every: int = option(25, "greedy held-out accuracy every N updates (0: only before and after)")
    eval_size: int = option(200, "held-out problems in the evaluation")
    train_size: int = option(0, "limit the training problems (0: all)")
    print_samples: int = option(25, "print a sample prompt → completion → reward every N updates (0: never)")
    threads: int = option(0, "torch CPU threads (0: torch's default)")


# The tiny preset's model imitates a tutor who forgets to carry (see arithmetic.build_tiny_math_model):
# greedy accuracy starts near the share of sums without a carry and GRPO lifts it by teaching the carry.
PRESETS = {
    "tiny": dict(model="@tiny-math", task="arithmetic", lora=True, lora_r=16, lora_alpha=32, steps=60,
                 prompts_per_step=8, group_size=8, lr=1e-3, warmup_steps=10, temperature=1.0, max_new_tokens=28,
                 kl_coef=0.04, eval_every=10, eval_size=200, print_samples=10, threads=1),
}


def validate(cfg: Config) -> None:
    if cfg.group_size < 2:
        raise UsageError(f"--group-size must be at least 2 (advantages compare completions of a prompt), "
                         f"got {cfg.group_size}")
    if cfg.mu < 1:
        raise UsageError(f"--mu must be at least 1, got {cfg.mu}")
    for name in ("clip_eps_low", "clip_eps_high"):
        value = getattr(cfg, name)
        if not 0.0 < value < 1.0:
            raise UsageError(f"--{name.replace('_', '-')} must be in (0, 1), got {value}")
    if cfg.lr <= 0:
        raise UsageError(f"--lr must be positive, got {cfg.lr}")
    if cfg.warmup_steps < 0:
        raise UsageError(f"--warmup-steps must be ≥ 0, got {cfg.warmup_steps}")
    if cfg.kl_coef < 0:
        raise UsageError(f"--kl-coef must be ≥ 0, got {cfg.kl_coef}")
    if cfg.steps < 1 or cfg.prompts_per_step < 1 or cfg.max_new_tokens < 1:
        raise UsageError("--steps, --prompts-per-step and --max-new-tokens must be positive")
    if (cfg.prompts_per_step * cfg.group_size) % cfg.num_minibatches or cfg.num_minibatches < 1:
        raise UsageError(f"{cfg.prompts_per_step} prompts × {cfg.group_size} completions cannot be split into "
                         f"{cfg.num_minibatches} equal minibatches")
    if cfg.temperature <= 0:
        raise UsageError(f"--temperature must be positive, got {cfg.temperature}")
    reward_weights(cfg)


def reward_functions(cfg: Config) -> dict[str, Callable]:
    """Name → function for ``--reward-funcs`` (a user's file is imported here)."""
    return rewards.load_all(cfg.reward_funcs)


def reward_weights(cfg: Config) -> dict[str, float]:
    """Name → weight w_f of each reward function (``--reward-weights``)."""
    return rewards.weights(cfg.reward_funcs, cfg.reward_weights)


def load_problems(cfg: Config) -> tuple[list[dict], list[dict]]:
    """(training problems, fixed held-out evaluation problems)."""
    if cfg.task == "arithmetic":
        return arithmetic.train_eval_split(None, cfg.eval_size)
    train = arithmetic.load_gsm8k(cfg.dataset, "train")
    try:
        held_out = arithmetic.load_gsm8k(cfg.dataset, "test", limit=cfg.eval_size)
    except UsageError:
        held_out = None
    if held_out is None or held_out == train[:len(held_out)]:  # a local file has one split: hold out its tail
        if len(train) < 2:
            raise UsageError(f"--dataset {cfg.dataset}: need at least 2 rows to hold some out for evaluation")
        cut = max(1, min(cfg.eval_size, len(train) // 5))
        train, held_out = train[:-cut], train[-cut:]
    return train, held_out


def resolve_model(model: str) -> str:
    return str(arithmetic.tiny_math_model()) if model == "@tiny-math" else model


def update_config(cfg: Config) -> core.UpdateConfig:
    """GRPO's ``core.update``: the clipped surrogate (ε_low, ε_high) + β·k3 KL to π_ref in the loss."""
    return core.UpdateConfig(
        mu=cfg.mu, num_minibatches=cfg.num_minibatches, objective="clipped", clip_eps_low=cfg.clip_eps_low,
        clip_eps_high=cfg.clip_eps_high, aggregation=LOSS_TYPES[cfg.loss_type], kl_coef=cfg.kl_coef,
        kl_estimator="k3", kl_correction=cfg.kl_correction == "on", max_grad_norm=cfg.max_grad_norm)


def train(cfg: Config) -> dict:
    """Train with GRPO; write metrics.jsonl, summary.json, curves.png and the adapter into ``cfg.out``.

    Under ``accelerate launch`` every process runs this function on its share of the prompts (see
    ``ladder.distributed``); only the main process writes.
    """
    validate(cfg)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = process_device(quant.check_device(cfg.device))
    if cfg.prompts_per_step % launched_processes():
        raise UsageError(f"--prompts-per-step {cfg.prompts_per_step} cannot be shared equally by "
                         f"{launched_processes()} processes; use a multiple of {launched_processes()}")
    optim = cfg.optim if cfg.optim != "auto" else ("paged_adamw_8bit" if cfg.qlora and device.type == "cuda"
                                                   else "adamw")
    if optim == "paged_adamw_8bit" and device.type != "cuda":
        raise UsageError("--optim paged_adamw_8bit needs a CUDA GPU; use --optim adamw on the CPU")
    seed_everything(cfg.seed)
    functions, weights = reward_functions(cfg), reward_weights(cfg)
    system_prompt = cfg.system_prompt or (arithmetic.TINY_SYSTEM_PROMPT if cfg.task == "arithmetic"
                                          else arithmetic.SYSTEM_PROMPT)
    problems, held_out = load_problems(cfg)
    if cfg.train_size:
        problems = problems[:cfg.train_size]
    model_path = hub.resolve(resolve_model(cfg.model), "--model")
    tokenizer = quant.load_tokenizer(model_path)
    lm_eval.check_context(tokenizer, quant.load_config(model_path), problems + held_out, system_prompt,
                          cfg.max_new_tokens)
    procs = Processes(device)  # after the tiny model is built and cached (see ladder.distributed)
    # The output directory is checked (finished run? --overwrite?) before the model takes time to load.
    log = RunLog(cfg.out, NAME, {"rung": NAME, **asdict(cfg), "processes": procs.world},
                 resume=cfg.resume is not None, overwrite=cfg.overwrite, tensorboard=cfg.tensorboard,
                 writes=procs.is_main)
    grad_ckpt = cfg.qlora if cfg.gradient_checkpointing is None else cfg.gradient_checkpointing
    model = quant.load_causal_lm(model_path, device, qlora=cfg.qlora, lora=cfg.lora, lora_r=cfg.lora_r,
                                 lora_alpha=cfg.lora_alpha, gradient_checkpointing=grad_ckpt)
    ref_model = None
    if cfg.kl_coef > 0 and not (cfg.qlora or cfg.lora):
        ref_model = quant.load_causal_lm(model_path, device)  # full fine-tuning needs a frozen copy
    policy = CausalLMPolicy(model, temperature=cfg.temperature, chunk_size=cfg.chunk_size, ref_model=ref_model)
    optimizer = quant.make_optimizer(policy.parameters(), cfg.lr, optim, device)
    guard = NonFiniteGuard(cfg.max_nonfinite_updates, log.dir, warn=tqdm.write)
    update_cfg = update_config(cfg)
    my_held_out = held_out[procs.rank::procs.world]

    def evaluate() -> float:
        """Greedy accuracy on the held-out problems, each process scoring its share."""
        correct = round(lm_eval.accuracy(policy, tokenizer, my_held_out, system_prompt, cfg.max_new_tokens,
                                         device)["accuracy"] * len(my_held_out))
        return procs.gather(torch.tensor([correct], dtype=torch.float64)).sum().item() / len(held_out)

    order_rng = random.Random(cfg.seed)  # the same prompt order in every process; each takes its share
    order: list[int] = []
    step, tokens, wall_before, evals = 0, 0, 0.0, []
    if procs.world > 1:
        torch.manual_seed(cfg.seed + 1 + procs.rank)  # same initial weights (above), different samples
    trainer = procs.wrap(policy)
    state = log.load_checkpoint() if cfg.resume else None
    if state is not None:
        if state.get("processes", 1) != procs.world:
            raise UsageError(f"--resume {cfg.out}: the run was saved by {state.get('processes', 1)} process(es), "
                             f"this is {procs.world}; resume it with the same number")
        policy.load_state_dict(state["trainable"], strict=False)
        optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"][procs.rank])
        order_rng.setstate(state["order_rng"])
        order, step, tokens, wall_before, evals = (state["order"], state["step"], state["tokens"], state["wall_s"],
                                                   state["evals"])
    t0 = time.perf_counter() - wall_before
    if not evals:
        evals.append((0, evaluate()))
    first_rewards = state["first_rewards"] if state else []
    bar = tqdm(total=cfg.steps, initial=step, unit="update", desc=NAME,
               disable=not show_progress(cfg.progress and procs.is_main))
    while step < cfg.steps:
        picked = []
        for _ in range(cfg.prompts_per_step):
            if not order:
                order = list(range(len(problems)))
                order_rng.shuffle(order)
            picked.append(problems[order.pop()])
        for group in optimizer.param_groups:  # from the step count alone, so --resume needs no scheduler state
            group["lr"] = cfg.lr * min(1.0, (step + 1) / cfg.warmup_steps) if cfg.warmup_steps else cfg.lr
        record, batch_texts = grpo_step(trainer, tokenizer, optimizer, update_cfg, cfg, picked, system_prompt,
                                        weights, device, functions, guard, procs)
        step += 1
        tokens += record["tokens"]
        record.update(step=step, tokens_total=tokens, lr=optimizer.param_groups[0]["lr"])
        if len(first_rewards) < 5:
            first_rewards.append(record["reward"])
        if (cfg.eval_every and step % cfg.eval_every == 0) or step == cfg.steps:
            record["eval_accuracy"] = evaluate()
            evals.append((step, record["eval_accuracy"]))
        record["wall_s"] = time.perf_counter() - t0
        log.log(record)
        bar.update(1)
        bar.set_postfix(reward=f"{record['reward']:.2f}", acc=f"{evals[-1][1]:.2f}")
        if cfg.print_samples and step % cfg.print_samples == 0 and procs.is_main:
            q, c, r = batch_texts
            tqdm.write(f"[{step}] {q!r} → {c!r} → reward {r:.2f}")
        if step % cfg.checkpoint_every == 0 and step < cfg.steps:
            rng = procs.gather_object(rng_state())  # every process's generator, for an exact resume
            trainable = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
            log.save_checkpoint({"trainable": trainable, "optimizer": optimizer.state_dict(), "rng": rng,
                                 "processes": procs.world, "order_rng": order_rng.getstate(), "order": order,
                                 "step": step, "tokens": tokens, "wall_s": time.perf_counter() - t0,
                                 "evals": evals, "first_rewards": first_rewards})
    bar.close()

    digests = procs.gather_object(weights_digest(policy))
    if procs.is_main:
        model.save_pretrained(log.dir / ("adapter" if (cfg.qlora or cfg.lora) else "model"))
    records = log.records()
    summary = {"rung": NAME, "model": cfg.model, "task": cfg.task, "steps": step, "tokens": tokens,
               "accuracy_before": evals[0][1], "accuracy_after": evals[-1][1],
               "accuracy_gain": evals[-1][1] - evals[0][1], "evals": evals,
               "reward_first5": float(np.mean(first_rewards)) if first_rewards else None,
               "reward_last5": float(np.mean([r["reward"] for r in records[-5:]])) if records else None,
               "final_kl": records[-1].get("kl_ref") if records else None,
               "wall_s": time.perf_counter() - t0, "seed": cfg.seed,
               "processes": procs.world, "weights_digest_per_process": digests}
    log.finish(summary, CURVES, x="step")
    procs.barrier()
    return summary


def grpo_step(policy: CausalLMPolicy, tokenizer, optimizer, update_cfg: core.UpdateConfig, cfg: Config,
              problems: list[dict], system_prompt: str, weights: dict, device,
              functions: dict[str, Callable] | None = None, guard: NonFiniteGuard | None = None,
              procs: Processes | None = None) -> tuple[dict, tuple]:
    """Sample G completions per prompt, score them, and run one ``core.update``.

    With several processes each one takes its share of ``problems``; rewards are gathered so that
    the advantages and the statistics cover the whole batch.
    """
    procs = procs or Processes(torch.device(device))
    G = cfg.group_size
    problems = procs.shard(problems)
    prompts = [arithmetic.chat_prompt(tokenizer, p["question"], system_prompt) for p in problems]
    enc = tokenizer(prompts, return_tensors="pt", padding=True).to(device)
    prompt_ids = enc.input_ids.repeat_interleave(G, dim=0)
    prompt_mask = enc.attention_mask.repeat_interleave(G, dim=0)
    completion, mask = policy.generate(prompt_ids, prompt_mask, cfg.max_new_tokens, tokenizer.pad_token_id,
                                       tokenizer.eos_token_id, do_sample=True, top_p=cfg.top_p,
                                       min_new_tokens=cfg.min_new_tokens)
    texts = tokenizer.batch_decode(torch.where(mask.bool(), completion, tokenizer.pad_token_id),
                                   skip_special_tokens=True)
    answers = [p["answer"] for p in problems for _ in range(G)]
    my_rewards, my_per_function = score(texts, answers, weights, functions)
    all_rewards = procs.gather(my_rewards)                                 # [P·G], all processes
    mine = slice(procs.rank * len(my_rewards), (procs.rank + 1) * len(my_rewards))

    advantages = core.group_relative(all_rewards, G, cfg.scale_rewards)[mine]  # Â from whole groups
    batch = lm_batch(prompt_ids, prompt_mask, completion, mask.to(device), tokenizer.pad_token_id,
                     advantages=advantages.to(device)[:, None] * mask.to(device), rewards=None)
    if cfg.kl_coef > 0:
        batch.ref_logp = policy.ref_logp(batch)
    passes = core.update(policy, batch, optimizer, update_cfg)

    lengths = procs.gather(mask.sum(1).cpu())
    ended = procs.gather((completion == tokenizer.eos_token_id).any(1).float().cpu()).bool()
    grouped = all_rewards.view(-1, G)
    record = {"reward": all_rewards.mean().item(), "reward_std": all_rewards.std().item(),
              "frac_reward_zero_std": (grouped.std(1) == 0).float().mean().item(),
              "completions/mean_length": lengths.float().mean().item(),
              "completions/min_length": lengths.min().item(), "completions/max_length": lengths.max().item(),
              "completions/clipped_ratio": (~ended).float().mean().item(), "tokens": int(lengths.sum().item()),
              "num_passes": len(passes)}
    for name, r in my_per_function.items():
        r = procs.gather(r)
        record[f"rewards/{name}/mean"] = r.mean().item()
        record[f"rewards/{name}/std"] = r.std().item()
    last = procs.mean(passes[-1])
    record.update(last)
    skipped = procs.mean({"skipped_steps": sum(p["skipped_steps"] for p in passes)})["skipped_steps"]
    record["skipped_steps"] = guard([{"skipped_steps": skipped}], update_cfg.num_minibatches * len(passes)) \
        if guard is not None else skipped
    return record, (problems[0]["question"], texts[0], my_rewards[0].item())
