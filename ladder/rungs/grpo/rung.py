"""Rung 4: GRPO (DeepSeekMath) — no critic, group-relative advantages, rule rewards, KL in the loss.

Each update: P prompts × G sampled completions → rule rewards → Â_i = (r_i − mean_group)/std →
every token of completion i gets Â_i → ``Batch`` → ``ladder.core.update`` with the clipped
surrogate and β·KL(π_θ‖π_ref) in the loss. With ``--qlora`` the base is 4-bit and only LoRA
adapters train; π_ref is the base with the adapter disabled.

The KL term is by default β·(π_θ/π_old)·k3, the importance-corrected KL of DeepSeek-V3.2 and TRL 1.16's
default; DeepSeekMath's GRPO has plain β·k3 (``--kl-correction off``).

The same rung runs GRPO's design space (``ladder.rungs.grpo.options``): Dr. GRPO, DAPO, GSPO, CISPO,
RLOO, SAPO, LUSPO, VESPO and GDPO are flags, and ``--algo NAME`` sets the flags of each as its paper
does (the KL term excepted: ``--algo grpo`` keeps the corrected one); so are the top-entropy mask, the
(adaptive) entropy bonus and ``--max-staleness``'s lagging π_rollout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from ladder import core, rewards
from ladder.core.swappable import swappable
from ladder.plots import Panel
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, ReferenceWeights, lm_batch
from ladder.policies.low_precision import check_sampler_dtype
from ladder.rungs.grpo import advantages as advantage_settings
from ladder.rungs.grpo import entropy_control as entropy_settings
from ladder.rungs.grpo import options as grpo_options
from ladder.rungs.grpo import reference_refresh
from ladder.rungs.grpo.core_settings import records_sampler_logp, update_config
from ladder.rungs.grpo.loss_types import LOSS_TYPES
from ladder.rungs.grpo.options import (
    ALGOS,
    PRESETS,
    RESOLVED,
    Config,
    reward_weights,
)
from ladder.rungs.grpo.record import CutOffWatch, Laps, batch_statistics, completion_rows, step_record, summarize
from ladder.rungs.grpo.rollout import DYNAMIC_SAMPLING, Rollout, dynamic_sample, reward_column_weights, sample
from ladder.rungs.grpo.rules import validate
from ladder.rungs.grpo.sampler import settle_sampler
from ladder.rungs.grpo.setup import check_sampler, load_task, placement, save_trained
from ladder.rungs.grpo.staleness import LaggingRollout
from ladder.rungs.lm_options import gradient_checkpointing, uses_lora
from ladder.rungs.protocol import TRAINING_WRITES
from ladder.runtime import loop
from ladder.runtime.distributed import Processes, weights_digest
from ladder.runtime.loop import Recipe
from ladder.runtime.runlog import seed_everything
from ladder.runtime.session import RunSession
from ladder.tasks import math_eval, math_problems
from ladder.tasks.math_problems import ProblemStream

# The rung's options live in grpo_options; they are read from here too (grpo.Config, grpo.PRESETS, …).
__all__ = ["ALGOS", "LOSS_TYPES", "PRESETS", "RESOLVED", "WRITES", "Config", "validate", "export", "update_config",
           "reward_weights", "train", "grpo_step", "loss_normaliser", "build", "Step", "set_learning_rate",
           "learning_rate", "recipe", "task_step", "completion_rows", "batch_statistics", "CutOffWatch", "NAME",
           "Task", "math_task", "train_task", "ProblemStream"]
NAME = "grpo"
WRITES = TRAINING_WRITES
CURVES = [Panel("reward", "mean over the update's completions", {"reward": ""}),
          Panel("greedy accuracy (held-out)", "share correct", {"eval_accuracy": ""}),  # step 0: before training
          Panel("correctness reward", "mean over the update's completions", {"rewards/correctness/mean": ""}),
          Panel("KL(π_θ‖π_ref)", "nats per token", {"kl_ref": ""}),
          Panel("completion length", "tokens (mean)", {"completions/mean_length": ""}),
          Panel("groups with zero spread", "share of groups (no signal)", {"frac_reward_zero_std": ""})]


def sample_completions(step: Step, problems: list[dict]) -> Rollout:
    """G completions of each of ``problems`` (this process's share), scored: ``grpo_rollout.sample`` on the task's
    prompts (``step.prompt``)."""
    prompts = [step.prompt(step.tokenizer, problem, step.system_prompt) for problem in problems]
    return sample(step.policy, step.tokenizer, step.cfg, problems, prompts, step.reward_weights, step.reward_funcs,
                  step.procs.device, record_logp=step.records_sampler_logp)


def sample_groups(step: Step, sample_share: Callable[[Step, list[dict]], Rollout] = sample_completions
                  ) -> tuple[Rollout, int, int]:
    """This process's share of the next ``--prompts-per-step`` problems, G scored samples each
    (``sample_share``: completions here, trajectories in the agent rung); with ``--dynamic-sampling``, further
    rounds until enough groups have a reward spread. Returns (rollout, sampling rounds, samples drawn here)."""
    cfg, procs = step.cfg, step.procs
    rollout = sample_share(step, procs.shard(step.stream.draw(cfg.prompts_per_step)))
    if not cfg.dynamic_sampling:
        return rollout, 1, len(rollout)

    def sample_more(wanted: bool) -> Rollout | None:
        more = step.stream.draw(cfg.prompts_per_step)  # every process draws: the order stays the same everywhere
        return sample_share(step, procs.shard(more)) if wanted else None

    def all_done(mine: bool) -> bool:
        return bool(procs.gather(torch.tensor([float(mine)])).min().item())

    rounds = DYNAMIC_SAMPLING.resolve(cfg).max_rounds
    return dynamic_sample(rollout, sample_more, cfg.group_size, rounds, all_done,
                          step.tokenizer.pad_token_id)


def group_advantages(rewards: torch.Tensor, cfg: Config) -> torch.Tensor:
    """Â of every completion of the whole batch ``[P·G]`` (all processes), from whole groups."""
    if advantage_settings.estimator(cfg) == "rloo":
        return core.leave_one_out(rewards, cfg.group_size, advantage_settings.scale(cfg))
    return core.group_relative(rewards, cfg.group_size, advantage_settings.scale(cfg))


def batch_advantages(step: Step, rollout: Rollout, rewards: torch.Tensor) -> torch.Tensor:
    """Â ``[n]`` of this process's completions, from whole groups of the whole batch: ``step.advantages`` of the
    summed rewards r_i, or with --multi-objective-aggregation normalize_then_sum each reward function normalised
    within its group first (``core.decoupled_group_relative``; the overlong penalty one more function, weight
    --overlong-penalty: ``reward_column_weights``)."""
    cfg, procs = step.cfg, step.procs
    if cfg.multi_objective_aggregation == "normalize_then_sum":
        names = list(rollout.per_function)
        scores = torch.stack([rollout.per_function[name].float() for name in names], dim=1)    # [n, F]
        weights = reward_column_weights(names, step.reward_weights, cfg)
        whole = core.decoupled_group_relative(procs.gather(scores), weights, cfg.group_size)
    else:
        whole = step.advantages(procs.gather(rewards), cfg)
    return whole[procs.rank * len(rollout):][:len(rollout)]


def same_for_every_token(rollout: Rollout, advantages: torch.Tensor, cfg: Config) -> torch.Tensor:
    """GRPO's credit: every token of completion i gets its completion's Â_i → ``[n, 1]``, broadcast over T."""
    return advantages[:, None]


def summed_skipped_steps(passes: list[dict], steps_per_pass: int) -> float:
    """The optimiser steps the passes skipped (a non-finite gradient), summed: a Step's default count."""
    return float(sum(p["skipped_steps"] for p in passes))


@dataclass
class Step:
    """What one GRPO step works with; made by ``build``, by keyword. ``rollout`` and ``advantages`` are
    the step's algorithm: a new rung's rollout goes here, not into a copy of ``grpo_step``."""

    cfg: Config
    policy: CausalLMPolicy     # π_θ (π_old while sampling; π_ref with its adapter off or its own weights)
    trainer: object            # the policy, or its data-parallel wrapper (its backward averages gradients)
    tokenizer: object
    optimizer: torch.optim.Optimizer
    update_cfg: core.UpdateConfig
    stream: ProblemStream
    system_prompt: str
    reward_funcs: dict[str, Callable]
    reward_weights: dict[str, float]
    procs: Processes
    records_sampler_logp: bool = False  # sampling keeps π_sampler's own log-probs (core_settings)
    prompt: Callable[[object, dict, str], str] = math_problems.prompt  # (tokenizer, problem, system prompt) → text
    skipped_steps: Callable[[list[dict], int], float] = summed_skipped_steps
    rollout: Callable[[Step], tuple[Rollout, int, int]] = sample_groups          # (rollout, rounds, sampled here)
    advantages: Callable[[torch.Tensor, Config], torch.Tensor] = group_advantages  # rewards [P·G] → Â [P·G]
    credit: Callable[[Rollout, torch.Tensor, Config], torch.Tensor] = same_for_every_token  # Â [n] → tokens' [n, T]
    entropy_control: core.AdaptiveEntropyCoef | None = None  # --adaptive-entropy's c_H (None: c_H fixed)


def build(cfg: Config, *, policy: CausalLMPolicy, optimizer: torch.optim.Optimizer, tokenizer, stream,
          system_prompt: str, procs: Processes, trainer=None, update_cfg: core.UpdateConfig | None = None,
          reward_funcs: dict[str, Callable] | None = None, prompt: Callable = math_problems.prompt,
          skipped_steps: Callable = summed_skipped_steps,
          rollout: Callable = sample_groups, advantages: Callable = group_advantages,
          credit: Callable = same_for_every_token, entropy_control: core.AdaptiveEntropyCoef | None = None) -> Step:
    """The Step that ``train``, exercise 20's harness and the notebooks' labs run ``grpo_step`` on. What
    is left out is the rung's own: the trainer ``procs.wrap(policy)`` (the policy itself in one process),
    ``update_config(cfg)``, the ``--reward-funcs`` loaded and weighed by ``reward_weights(cfg)``, and
    ``entropy_settings.controller(cfg, procs)`` (``ladder.rungs.grpo.entropy_control``)."""
    cfg = settle_sampler(cfg, procs.device, policy.model.config)  # as train_task does (a lab's, a grader's cfg)
    return Step(cfg=cfg, policy=policy, trainer=procs.wrap(policy) if trainer is None else trainer,
                tokenizer=tokenizer, optimizer=optimizer,
                update_cfg=update_config(cfg) if update_cfg is None else update_cfg, stream=stream,
                system_prompt=system_prompt,
                reward_funcs=rewards.load_all(cfg.rewards.funcs) if reward_funcs is None else reward_funcs,
                reward_weights=reward_weights(cfg), procs=procs, records_sampler_logp=records_sampler_logp(cfg),
                prompt=prompt, skipped_steps=skipped_steps, rollout=rollout,
                advantages=advantages, credit=credit,
                entropy_control=entropy_settings.controller(cfg, procs) if entropy_control is None else entropy_control)


def learning_rate(cfg: Config, update: int) -> float:
    """The learning rate of update k = 0, 1, …, a linear warm-up over ``--warmup-steps`` updates:

        lr_k = lr · min(1, (k + 1) / warmup_steps)        (lr throughout when warmup_steps = 0)

    From the update's index alone: ``--resume`` needs no scheduler state."""
    return cfg.lr * min(1.0, (update + 1) / cfg.warmup_steps) if cfg.warmup_steps else cfg.lr


def set_learning_rate(optimizer: torch.optim.Optimizer, cfg: Config, update: int) -> None:
    """Set ``learning_rate(cfg, update)`` on every parameter group (what the loop does before update k)."""
    for group in optimizer.param_groups:
        group["lr"] = learning_rate(cfg, update)


def loss_normaliser(loss_type: str, rows: int, max_new_tokens: int, active_tokens: float) -> float | None:
    """The constant N that ``core.aggregate`` divides the summed loss by ("sum_over_constant") for this
    process's whole batch of ``rows`` completions; ``core.update`` gives each minibatch its share.

        dr_grpo               N = rows · L_max     "budget": the generation budget (Dr. GRPO), L_max =
                                                   --max-new-tokens
        dapo, cispo, vespo    N = active_tokens    "tokens": the real tokens of the whole batch, summed over the
                                                   P processes ÷ P (DAPO's token-level normaliser)
        grpo, bnpo, sapo,     None                 they average: no constant
        luspo
    (each loss type's constant is registered with it: ``loss_types.LossType.constant``)
    """
    constant = LOSS_TYPES[loss_type].constant
    if constant is None:
        return None
    if constant == "budget":
        return float(rows * max_new_tokens)
    return active_tokens


@swappable
def grpo_step(step: Step) -> tuple[dict, Rollout, torch.Tensor]:
    """One GRPO update: sample G completions per prompt (``step.rollout``) → rule rewards → group-relative
    advantages (``step.advantages``) → ``core.update``; the record is ``step_record``'s. Returns the
    record, this process's rollout and its advantages ``[B]`` (what ``completion_rows`` logs).

        r_i   = Σ_f w_f · f(completion_i)          (− β · Σ_t KL_t with --kl-in reward)
        Â_i   = (r_i − mean_group) / std_group     every token of completion i gets Â_i
    """
    cfg, procs, policy, laps = step.cfg, step.procs, step.policy, Laps()
    rollout, rounds, generated = step.rollout(step)                             # sample, scored: r_i
    laps.lap("sampling")
    inputs = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask,
                      step.tokenizer.pad_token_id, completion_attention_mask=rollout.attention_mask)
    ref_logp = policy.ref_logp(inputs) if cfg.kl.coef > 0 else None
    old_logp, rewards = None, rollout.rewards                                   # this process's [n], CPU
    beta_in_reward = cfg.kl.in_reward()                                         # --kl-in reward's β, else 0
    if beta_in_reward > 0:
        old_logp = policy.old_logp_and_values(inputs)[0].float()                # π_old, used by the update too
        rewards, _ = core.kl_in_reward(rewards, old_logp.cpu(), ref_logp.cpu(), rollout.mask.cpu(), beta_in_reward,
                                       cfg.kl.estimator)
    advantages = batch_advantages(step, rollout, rewards)
    loss_mask = rollout.mask * (~rollout.truncated).to(rollout.mask.device)[:, None] if cfg.mask_truncated \
        else rollout.mask
    token_advantages = step.credit(rollout, advantages, cfg).to(loss_mask.device)  # [n, T] or [n, 1]
    batch = replace(inputs, mask=loss_mask.float(), advantages=token_advantages * loss_mask,
                    old_logp=old_logp, ref_logp=ref_logp, sampling_logp=rollout.sampling_logp)
    # The loss's constant normaliser: the active tokens of the whole batch, shared out over the processes
    # (dapo, cispo), or this process's rows × --max-new-tokens (dr_grpo).
    active_tokens = procs.gather(torch.tensor([float(batch.num_tokens)])).sum().item() / procs.world
    num_tokens = loss_normaliser(cfg.loss_type, len(batch), cfg.max_new_tokens, active_tokens)
    laps.lap("reference")
    control = {} if step.entropy_control is None else {"entropy_control": step.entropy_control}
    passes = core.update(step.trainer, batch, step.optimizer, step.update_cfg, num_tokens=num_tokens, **control)
    laps.lap("update")
    return step_record(step, rollout, rewards, passes, rounds, generated, laps), rollout, advantages


def load_policy(cfg: Config, model_path: str, device: torch.device) -> tuple[CausalLMPolicy, torch.optim.Optimizer]:
    """π_θ (4-bit + LoRA, LoRA, or full), its π_ref, and the optimiser."""
    if grpo_options.release_memory(cfg, device.type):
        quant.release_freed_memory()  # before loading: see its docstring
    model = quant.load_causal_lm(model_path, device, qlora=cfg.qlora, lora=cfg.lora, lora_r=cfg.lora_r,
                                 lora_alpha=cfg.lora_alpha, gradient_checkpointing=gradient_checkpointing(cfg))
    ref_model = None
    if cfg.kl.coef > 0 and not uses_lora(cfg):
        ref_model = quant.load_causal_lm(model_path, device)  # full fine-tuning needs a frozen copy
    dequantize_once = grpo_options.dequantize_once(cfg, device.type)
    sampler = settle_sampler(cfg, device, model.config).sampler
    policy = CausalLMPolicy(model, temperature=cfg.temperature, chunk_size=cfg.chunk_size, ref_model=ref_model,
                            dequantize_once=dequantize_once, entropy_grad=cfg.entropy_coef > 0 or cfg.adaptive_entropy,
                            sampler_dtype=check_sampler_dtype(sampler.dtype, device),
                            sampler_loop=cfg.sampler_loop)
    if cfg.ref_sync_every:
        policy.make_reference_refreshable()  # a second, frozen adapter (LoRA) or the frozen copy (full)
    optim = grpo_options.optimizer_name(cfg, device.type)
    return policy, quant.make_optimizer(policy.parameters(), cfg.lr, optim, device)


def checkpoint_parts(step: Step, rollout: LaggingRollout | Callable) -> dict:
    """What a checkpoint holds: π_θ, the optimiser, the problems' order, and what the options add (π_ref's
    refreshed weights, the lagging π_rollout's snapshots, the adaptive c_H)."""
    cfg = step.cfg
    return {"policy": step.policy, "optimizer": step.optimizer, "problems": step.stream,
            **({"reference": ReferenceWeights(step.policy)} if cfg.ref_sync_every else {}),
            **({"rollout_lag": rollout} if cfg.max_staleness else {}),
            **({"entropy_coef": step.entropy_control} if step.entropy_control is not None else {})}


def held_out_accuracy(step: Step, held_out: list[dict]) -> float:
    """Greedy accuracy on the held-out problems, each process scoring its share."""
    procs, mine = step.procs, held_out[step.procs.rank::step.procs.world]
    result = math_eval.accuracy(step.policy, step.tokenizer, mine, step.system_prompt, step.cfg.max_new_tokens,
                              procs.device)
    correct = round(result["accuracy"] * len(mine))
    return procs.gather(torch.tensor([correct], dtype=torch.float64)).sum().item() / len(held_out)


def export(cfg: Config) -> dict | None:
    """``--export-trl FILE``: the run written as a TRL script (``ladder.trl.export``), nothing trained and no run
    directory; its summary. None without the flag: the run trains."""
    if cfg.export_trl is None:
        return None
    from ladder.trl import export as export_trl

    return export_trl.write(replace(cfg, sampler=grpo_options.sampler(cfg)), cfg.export_trl)


@dataclass
class Task:
    """What a GRPO run trains on, apart from the algorithm: the problems (with the fingerprint of their source, which
    ``--resume`` checks), the model and its tokenizer, how a batch is sampled and credited, how the held-out problems
    are scored, and the curves drawn. ``math_task`` is this rung's; the agent rung brings its own."""

    system_prompt: str
    problems: list[dict]
    held_out: list[dict]
    model_path: str
    tokenizer: object
    source: tuple[str | None, str | None]
    rollout: Callable[[Step], tuple[Rollout, int, int]] = sample_groups
    prompt: Callable[[object, dict, str], str] = math_problems.prompt  # a problem's prompt (the grpo rollout's)
    credit: Callable[[Rollout, torch.Tensor, Config], torch.Tensor] = same_for_every_token
    accuracy: Callable[[Step, list[dict]], float] = held_out_accuracy
    curves: list[Panel] = field(default_factory=lambda: list(CURVES))
    name: str | None = None  # what summary.json calls the task (None: --task)


def math_task(cfg: Config) -> Task:
    """The math problems of ``--task`` (``load_task``): one completion per prompt, greedy held-out accuracy."""
    system_prompt, problems, held_out, model_path, tokenizer = load_task(cfg)
    return Task(system_prompt, problems, held_out, model_path, tokenizer,
                source=(cfg.dataset, math_problems.fingerprint(cfg.task, cfg.dataset)))


def train(cfg: Config) -> dict:
    """Train with GRPO on math problems (``train_task`` with ``math_task``)."""
    validate(cfg)
    return train_task(cfg, NAME, math_task)


def train_task(cfg: Config, name: str, load: Callable[[Config], Task]) -> dict:
    """Train with GRPO on the task ``load(cfg)`` makes (``recipe``); write metrics.jsonl, completions.jsonl (every
    ``--print-samples`` updates), summary.json, curves.png and the adapter into ``cfg.out``.

    Under ``accelerate launch`` every process runs this function on its share of the prompts (see
    ``ladder.runtime.distributed``); only the main process writes.
    """
    device = placement(cfg)
    seed_everything(cfg.seed)
    task = load(cfg)  # checked to fit the model's context before any weight loads
    given, cfg = cfg, settle_sampler(cfg, device, quant.load_config(task.model_path))  # config.json records it
    check_sampler(cfg, device, given)
    reward_funcs = rewards.load_all(cfg.rewards.funcs)  # a user's module runs before the run directory exists
    procs = Processes(device)  # after the tiny model is built and cached (see ladder.runtime.distributed)
    # The output directory is claimed (finished run? --overwrite? another run in it?) before the model loads.
    summary = loop.train(cfg, name, lambda cfg, run: recipe(cfg, run, task, task_step(cfg, run, task, reward_funcs)),
                         total=cfg.steps, procs=procs)
    procs.close()
    return summary


def task_step(cfg: Config, run: RunSession, task: Task, reward_funcs: dict[str, Callable]) -> Step:
    """The Step of a run on ``task``: π_θ loaded (``load_policy``), each process's own sampling seed, the task's
    prompt, rollout (behind a lagging π_rollout with --max-staleness) and credit."""
    policy, optimizer = load_policy(cfg, task.model_path, run.procs.device)
    run.seed_each_process()  # the weights above are the same everywhere; the samples from here on are not
    rollout = LaggingRollout(task.rollout, policy, cfg.max_staleness) if cfg.max_staleness else task.rollout
    return build(cfg, policy=policy, optimizer=optimizer, tokenizer=task.tokenizer,
                 stream=ProblemStream(task.problems, cfg.seed, task.source), system_prompt=task.system_prompt,
                 procs=run.procs, reward_funcs=reward_funcs, prompt=task.prompt, skipped_steps=run.skipped_steps,
                 rollout=rollout, credit=task.credit)


def recipe(cfg: Config, run: RunSession, task: Task, step: Step) -> Recipe:
    """GRPO as the loop runs it: ``grpo_step`` each update on ``step`` (a run's: ``task_step``), the learning rate
    warmed up (``learning_rate``), the held-out accuracy before training and every ``--eval-every`` updates, π_ref
    refreshed every ``--ref-sync-every``, the completions logged every ``--print-samples``."""
    procs = run.procs
    policy, optimizer, rollout = step.policy, step.optimizer, step.rollout
    progress = {"tokens": 0, "completions": 0, "evals": [], "first_rewards": []}
    latest, cut_off = {}, CutOffWatch(cfg.max_new_tokens, lambda line: run.write(line, stderr=True))

    def update() -> dict:
        """``grpo_step``: sample → rewards → group-relative Â → ``core.update``; the run's counters."""
        record, latest["rollout"], latest["advantages"] = grpo_step(step)
        cut_off(record)
        progress["tokens"] += record["tokens"]
        progress["completions"] += record["sampling/completions"]
        if cfg.ref_sync_every and (run.step + 1) % cfg.ref_sync_every == 0:
            policy.refresh_reference(reference_refresh.mixup(cfg))  # every process alike: the weights are equal
        if len(progress["first_rewards"]) < 5:
            progress["first_rewards"].append(record["reward"])
        return record

    def evaluate() -> dict:
        progress["evals"].append((run.step + 1, task.accuracy(step, task.held_out)))
        return {"eval_accuracy": progress["evals"][-1][1]}

    def log_completions(record: dict) -> None:
        if cfg.print_samples and run.step % cfg.print_samples == 0:
            rows = completion_rows(latest["rollout"], latest["advantages"], procs, cfg.group_size)
            run.log_completions(rows)
            run.write(f"[{run.step}] {rows[0]['question']!r} → {rows[0]['completion']!r} → reward "
                      f"{rows[0]['reward']:.2f} (all {len(rows)}: {run.dir / 'completions.jsonl'})")

    def summary() -> dict:
        summary = {**summarize(cfg, run, progress, procs.gather_object(weights_digest(policy))),
                   "task": task.name or cfg.task}
        if procs.is_main:  # the trained adapter only (π_ref's adapter, if any, stays out)
            save_trained(policy.model, run.dir, lora=uses_lora(cfg))
        return summary

    return Recipe(
        parts=checkpoint_parts(step, rollout), progress=progress, update=update, summary=summary,
        finished=lambda updates: updates >= cfg.steps or bool(cfg.max_completions and
                                                              progress["completions"] >= cfg.max_completions),
        curves=lambda: [p.starting_at(eval_accuracy=progress["evals"][0][1]) for p in task.curves],
        evaluate=evaluate, eval_every=cfg.eval_every, optimizer=optimizer,
        learning_rate=lambda k: learning_rate(cfg, k),
        start=lambda: progress["evals"].append((0, task.accuracy(step, task.held_out))),
        record=lambda stats: {**stats, "tokens_total": progress["tokens"],
                              "completions_total": progress["completions"], "lr": optimizer.param_groups[0]["lr"]},
        postfix=lambda r: {"reward": f"{r['reward']:.2f}",
                           **({"acc": f"{progress['evals'][-1][1]:.2f}"} if progress["evals"] else {})},
        after_log=log_completions, checkpoint_last=False)
