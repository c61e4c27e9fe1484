"""Rung 4: GRPO (DeepSeekMath) — no critic, group-relative advantages, rule rewards, KL in the loss.

Each update: P prompts × G sampled completions → rule rewards → Â_i = (r_i − mean_group)/std →
every token of completion i gets Â_i → ``Batch`` → ``ladder.core.update`` with the clipped
surrogate and β·KL(π_θ‖π_ref) (k3, importance-corrected) in the loss. With ``--qlora`` the base is
4-bit and only LoRA adapters train; π_ref is the base with the adapter disabled.

The same rung runs GRPO's design space (``ladder.rungs.grpo_options``): Dr. GRPO, DAPO, GSPO,
CISPO and RLOO are flags, and ``--algo NAME`` sets the flags of each as its paper does.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import asdict

import numpy as np
import torch
from tqdm.auto import tqdm

from ladder import core, hub, rewards
from ladder.cli import show_progress
from ladder.distributed import Processes, launched_processes, process_device, weights_digest
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
from ladder.rungs import grpo_options, lm_eval
from ladder.rungs.grpo_options import ALGOS, LOSS_TYPES, PRESETS, Config, reward_weights, update_config, validate
from ladder.rungs.grpo_rollout import Rollout, dynamic_sample, sample
from ladder.runlog import NonFiniteGuard, RunLog, UsageError, rng_state, seed_everything, set_rng_state
from ladder.tasks import arithmetic

# The rung's options live in grpo_options; they are read from here too (grpo.Config, grpo.PRESETS, …).
__all__ = ["ALGOS", "LOSS_TYPES", "PRESETS", "Config", "validate", "update_config", "reward_weights", "train",
           "grpo_step", "NAME"]
NAME = "grpo"
CURVES = {"reward": "reward (mean)", "eval_accuracy": "greedy accuracy (held-out)",
          "rewards/correctness/mean": "correctness reward", "kl_ref": "KL(π_θ‖π_ref)",
          "completions/mean_length": "completion length", "frac_reward_zero_std": "groups with zero spread"}


def reward_functions(cfg: Config) -> dict[str, Callable]:
    """Name → function for ``--reward-funcs`` (a user's file is imported here)."""
    return rewards.load_all(cfg.reward_funcs)


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


def train(cfg: Config) -> dict:
    """Train with GRPO; write metrics.jsonl, summary.json, curves.png and the adapter into ``cfg.out``.

    Under ``accelerate launch`` every process runs this function on its share of the prompts (see
    ``ladder.distributed``); only the main process writes.
    """
    validate(cfg)
    if cfg.export_trl:  # write the TRL script for this run and stop: no model loaded, no run directory
        from ladder import export_trl

        return export_trl.write(cfg, cfg.export_trl)
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
    release_memory = cfg.qlora and device.type == "cpu" if cfg.release_memory is None else cfg.release_memory
    if release_memory:
        quant.release_freed_memory()  # before loading: see its docstring
    model = quant.load_causal_lm(model_path, device, qlora=cfg.qlora, lora=cfg.lora, lora_r=cfg.lora_r,
                                 lora_alpha=cfg.lora_alpha, gradient_checkpointing=grad_ckpt)
    ref_model = None
    if cfg.kl_coef > 0 and not (cfg.qlora or cfg.lora):
        ref_model = quant.load_causal_lm(model_path, device)  # full fine-tuning needs a frozen copy
    dequantize_once = cfg.qlora and device.type == "cpu" if cfg.dequantize_once is None else cfg.dequantize_once
    policy = CausalLMPolicy(model, temperature=cfg.temperature, chunk_size=cfg.chunk_size, ref_model=ref_model,
                            dequantize_once=dequantize_once)
    if cfg.ref_sync_every:
        policy.make_reference_refreshable()  # a second, frozen adapter (LoRA) or the frozen copy (full)
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
    step, tokens, completions, wall_before, evals = 0, 0, 0, 0.0, []
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
        completions = state.get("completions", 0)  # checkpoints from before the budget had no count
        if "reference" in state:
            policy.load_reference_state(state["reference"])
    t0 = time.perf_counter() - wall_before
    if not evals:
        evals.append((0, evaluate()))
    first_rewards = state["first_rewards"] if state else []
    bar = tqdm(total=cfg.steps, initial=step, unit="update", desc=NAME,
               disable=not show_progress(cfg.progress and procs.is_main))

    def draw(n: int) -> list[dict]:
        """The next ``n`` problems of the shuffled order (the same in every process)."""
        nonlocal order
        picked = []
        for _ in range(n):
            if not order:
                order = list(range(len(problems)))
                order_rng.shuffle(order)
            picked.append(problems[order.pop()])
        return picked

    done = False
    while not done:
        for group in optimizer.param_groups:  # from the step count alone, so --resume needs no scheduler state
            group["lr"] = cfg.lr * min(1.0, (step + 1) / cfg.warmup_steps) if cfg.warmup_steps else cfg.lr
        record, batch_texts = grpo_step(trainer, tokenizer, optimizer, update_cfg, cfg, draw(cfg.prompts_per_step),
                                        system_prompt, weights, device, functions, guard, procs, draw)
        step += 1
        tokens += record["tokens"]
        completions += record["sampling/completions"]
        if cfg.ref_sync_every and step % cfg.ref_sync_every == 0:
            policy.refresh_reference(cfg.ref_mixup)  # every process alike: the weights are equal everywhere
        record.update(step=step, tokens_total=tokens, completions_total=completions,
                      lr=optimizer.param_groups[0]["lr"])
        if len(first_rewards) < 5:
            first_rewards.append(record["reward"])
        done = step >= cfg.steps or bool(cfg.max_completions and completions >= cfg.max_completions)
        if (cfg.eval_every and step % cfg.eval_every == 0) or done:
            record["eval_accuracy"] = evaluate()
            evals.append((step, record["eval_accuracy"]))
        record["wall_s"] = time.perf_counter() - t0
        log.log(record)
        bar.update(1)
        bar.set_postfix(reward=f"{record['reward']:.2f}", acc=f"{evals[-1][1]:.2f}")
        if cfg.print_samples and step % cfg.print_samples == 0 and procs.is_main:
            q, c, r = batch_texts
            tqdm.write(f"[{step}] {q!r} → {c!r} → reward {r:.2f}")
        if step % cfg.checkpoint_every == 0 and not done:
            rng = procs.gather_object(rng_state())  # every process's generator, for an exact resume
            trainable = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
            reference = {"reference": policy.reference_state()} if cfg.ref_sync_every else {}
            log.save_checkpoint({"trainable": trainable, "optimizer": optimizer.state_dict(), "rng": rng,
                                 "processes": procs.world, "order_rng": order_rng.getstate(), "order": order,
                                 "step": step, "tokens": tokens, "completions": completions,
                                 "wall_s": time.perf_counter() - t0, "evals": evals, "first_rewards": first_rewards,
                                 **reference})
    bar.close()

    digests = procs.gather_object(weights_digest(policy))
    if procs.is_main:
        if cfg.qlora or cfg.lora:  # the trained adapter only (π_ref's adapter, if any, stays out)
            model.save_pretrained(log.dir / "adapter", selected_adapters=[model.active_adapter])
        else:
            model.save_pretrained(log.dir / "model")
    records = log.records()
    summary = {"rung": NAME, "model": cfg.model, "task": cfg.task, "steps": step, "tokens": tokens,
               "completions": completions,
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
              procs: Processes | None = None, draw: Callable[[int], list[dict]] | None = None) -> tuple[dict, tuple]:
    """Sample G completions per prompt, score them, and run one ``core.update``.

    With several processes each one takes its share of ``problems``; rewards are gathered so that
    the advantages and the statistics cover the whole batch. ``draw(n)`` gives further problems
    (dynamic sampling).
    """
    procs = procs or Processes(torch.device(device))
    G, pad = cfg.group_size, tokenizer.pad_token_id
    started = time.perf_counter()

    def sample_share(problems: list[dict]) -> Rollout:
        return sample(policy, tokenizer, cfg, procs.shard(problems), system_prompt, weights, functions, device)

    rollout = sample_share(problems)
    rounds, generated = 1, len(rollout)
    if cfg.dynamic_sampling:
        if draw is None:
            raise ValueError("dynamic sampling needs draw(n), the source of further problems")

        def sample_more(wanted: bool) -> Rollout | None:
            more = draw(cfg.prompts_per_step)  # every process draws, so the order stays the same everywhere
            return sample_share(more) if wanted else None

        def all_done(mine: bool) -> bool:
            return bool(procs.gather(torch.tensor([float(mine)])).min().item())

        rollout, rounds, generated = dynamic_sample(rollout, sample_more, G, cfg.max_sampling_rounds, all_done, pad)
    sampled = time.perf_counter()
    record = _advantages_and_update(policy, optimizer, update_cfg, cfg, rollout, procs, pad, guard)
    record["time/sampling_s"] = sampled - started
    record["sampling/rounds"] = rounds
    record["sampling/completions"] = int(procs.gather(torch.tensor([float(generated)])).sum().item())
    return record, (rollout.questions[0], rollout.texts[0], rollout.rewards[0].item())


def _advantages_and_update(policy, optimizer, update_cfg: core.UpdateConfig, cfg: Config, rollout: Rollout,
                           procs: Processes, pad: int, guard: NonFiniteGuard | None) -> dict:
    """Rewards (− β·KL with ``--kl-in reward``) → advantages over whole groups → ``core.update``."""
    G, device, mask = cfg.group_size, rollout.completion.device, rollout.mask
    batch = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, mask, pad)
    started = time.perf_counter()
    if cfg.kl_coef > 0:
        batch.ref_logp = policy.ref_logp(batch)
    reference_done = time.perf_counter()
    all_rewards = procs.gather(rollout.rewards)                                 # [P·G], all processes
    mine = slice(procs.rank * len(rollout), (procs.rank + 1) * len(rollout))
    shaped = all_rewards
    if cfg.kl_in == "reward" and cfg.kl_coef > 0:
        batch.old_logp = policy.old_logp_and_values(batch)[0].float()        # π_old, used by the update too
        my_shaped, _ = core.kl_in_reward(rollout.rewards.to(device), batch.old_logp, batch.ref_logp, mask,
                                         cfg.kl_coef, cfg.kl_estimator)
        shaped = procs.gather(my_shaped.cpu())
    if cfg.advantage == "rloo":
        advantages = core.leave_one_out(shaped, G, cfg.scale_rewards)[mine]
    else:
        advantages = core.group_relative(shaped, G, cfg.scale_rewards)[mine]  # Â from whole groups
    loss_mask = mask * (~rollout.truncated).to(device)[:, None] if cfg.mask_truncated else mask
    batch.mask = loss_mask.float()
    batch.advantages = advantages.to(device)[:, None] * loss_mask
    # The loss's constant normaliser: the active tokens of the whole batch, shared out over the processes
    # (dapo, cispo), or this process's rows × --max-new-tokens (dr_grpo).
    active_tokens = procs.gather(torch.tensor([float(batch.num_tokens)])).sum().item() / procs.world
    num_tokens = grpo_options.loss_normaliser(cfg.loss_type, len(batch), cfg.max_new_tokens, active_tokens)
    update_started = time.perf_counter()
    passes = core.update(policy, batch, optimizer, update_cfg, num_tokens=num_tokens)
    timings = {"time/reference_s": reference_done - started, "time/update_s": time.perf_counter() - update_started}

    lengths = procs.gather(mask.sum(1).cpu())
    truncated = procs.gather(rollout.truncated.float().cpu())
    grouped = all_rewards.view(-1, G)
    record = {"reward": all_rewards.mean().item(), "reward_std": all_rewards.std().item(),
              "frac_reward_zero_std": (grouped.std(1) == 0).float().mean().item(),
              "completions/mean_length": lengths.float().mean().item(),
              "completions/min_length": lengths.min().item(), "completions/max_length": lengths.max().item(),
              "completions/clipped_ratio": truncated.mean().item(), "tokens": int(lengths.sum().item()),
              "num_passes": len(passes), **timings}
    if shaped is not all_rewards:
        record["reward_shaped"] = shaped.mean().item()
    for name, r in rollout.per_function.items():
        r = procs.gather(r)
        record[f"rewards/{name}/mean"] = r.mean().item()
        record[f"rewards/{name}/std"] = r.std().item()
    record.update(procs.mean(passes[-1]))
    skipped = procs.mean({"skipped_steps": sum(p["skipped_steps"] for p in passes)})["skipped_steps"]
    record["skipped_steps"] = guard([{"skipped_steps": skipped}], update_cfg.num_minibatches * len(passes)) \
        if guard is not None else skipped
    return record
