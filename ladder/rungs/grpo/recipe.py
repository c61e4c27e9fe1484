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
from dataclasses import dataclass, field

import torch

from ladder import hub, rewards
from ladder.plots import Panel
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, ReferenceWeights
from ladder.policies.low_precision import check_sampler_dtype
from ladder.rungs.grpo.options import Config
from ladder.rungs.grpo.record import CutOffWatch, completion_rows, summarize
from ladder.rungs.grpo.rollout import Rollout
from ladder.rungs.grpo.rules import validate
from ladder.rungs.grpo.settle import settle
from ladder.rungs.grpo.setup import check_sampler, load_task, placement, save_trained
from ladder.rungs.grpo.staleness import LaggingRollout
from ladder.rungs.grpo.step import Step, grpo_step, make_step, same_for_every_token, sample_groups
from ladder.rungs.lm_options import uses_lora
from ladder.rungs.protocol import Rung
from ladder.runtime import loop
from ladder.runtime.distributed import Processes, weights_digest
from ladder.runtime.loop import Recipe
from ladder.runtime.runlog import seed_everything
from ladder.runtime.session import RunSession
from ladder.tasks import math_eval, math_problems
from ladder.tasks.math_problems import ProblemStream
from ladder.trl_rows import GRPO, GRPO_TRAINER, RLOO, TRL, const

NAME = "grpo"
RUNG = Rung(name=NAME, position=4,
            summary="GRPO on math problems (group-relative advantages, rule rewards; --qlora)",
            export="ladder.trl.export:write_grpo",
            exercises=("ex05_clipped_surrogate", "ex08_kl_corrected", "ex10_group_relative", "ex11_aggregate",
                       "ex12_sequence_ratio", "ex13_leave_one_out", "ex14_kl_in_reward", "ex15_soft_update",
                       "ex16_token_logp", "ex17_compute_loss", "ex18_update", "ex20_grpo_step",
                       "ex21_sampler_weights", "ex24_soft_gate", "ex25_decoupled_advantages"),
            vitals=("reward", "reward_functions", "accuracy", "kl_ref", "entropy", "clip", "ratio", "length",
                    "cut_off", "zero_spread", "grad_norm", "tool_calls", "sampler_cut", "sampler_gap"),
            trl_classes=(GRPO, GRPO_TRAINER, "GRPOTrainer.train", RLOO, "trl.rewards"),
            trl=(TRL("gradient_accumulation_steps", "update", "1: ladder takes one optimiser step per minibatch and "
                     "accumulates nothing", const(1)),
                 TRL("disable_dropout", note="ladder always turns dropout off in the policy", value=const(True)),
                 TRL("logging_steps", note="ladder logs every update", value=const(1)),
                 TRL("reward_clip_range", note="ladder does not clip rewards", cls=RLOO)))
CURVES = [Panel("reward", "mean over the update's completions", {"reward": ""}),
          Panel("greedy accuracy (held-out)", "share correct", {"eval_accuracy": ""}),  # step 0: before training
          Panel("correctness reward", "mean over the update's completions", {"rewards/correctness/mean": ""}),
          Panel("KL(π_θ‖π_ref)", "nats per token", {"kl_ref": ""}),
          Panel("completion length", "tokens (mean)", {"completions/mean_length": ""}),
          Panel("groups with zero spread", "share of groups (no signal)", {"frac_reward_zero_std": ""})]


def load_policy(cfg: Config, model_path: str, device: torch.device) -> tuple[CausalLMPolicy, torch.optim.Optimizer]:
    """π_θ (4-bit + LoRA, LoRA, or full), its π_ref, and the optimiser, as the settled options say (``settle``: what
    loading needs is decided without the model's config; the sampler, with the loaded model's)."""
    loading = settle(cfg, None, device)
    if loading.release_memory:
        quant.release_freed_memory()  # before loading: see its docstring
    adapter = cfg.adapter
    model = quant.load_causal_lm(model_path, device, qlora=adapter.qlora, lora=adapter.lora, lora_r=adapter.r,
                                 lora_alpha=adapter.alpha, gradient_checkpointing=loading.gradient_checkpointing)
    ref_model = None
    if cfg.kl.coef > 0 and not loading.lora:
        ref_model = quant.load_causal_lm(model_path, device)  # full fine-tuning needs a frozen copy
    settled = settle(cfg, model.config, device)
    entropy_grad = cfg.entropy.coef > 0 or cfg.entropy_control is not None
    policy = CausalLMPolicy(model, temperature=cfg.generation.temperature, chunk_size=cfg.efficiency.chunk_size,
                            ref_model=ref_model,
                            dequantize_once=settled.dequantize_once, entropy_grad=entropy_grad,
                            sampler_dtype=check_sampler_dtype(settled.sampler.dtype, device),
                            sampler_loop=cfg.efficiency.sampler_loop)
    if cfg.reference_refresh is not None:
        policy.make_reference_refreshable()  # a second, frozen adapter (LoRA) or the frozen copy (full)
    return policy, quant.make_optimizer(policy.parameters(), cfg.optimisation.lr, settled.optim, device)


def held_out_accuracy(step: Step, held_out: list[dict]) -> float:
    """Greedy accuracy on the held-out problems, each process scoring its share."""
    procs, mine = step.procs, held_out[step.procs.rank::step.procs.world]
    result = math_eval.accuracy(step.policy, step.tokenizer, mine, step.system_prompt,
                                step.cfg.generation.max_new_tokens, procs.device)
    correct = round(result["accuracy"] * len(mine))
    return procs.gather(torch.tensor([correct], dtype=torch.float64)).sum().item() / len(held_out)


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
                source=(cfg.problems.dataset, math_problems.fingerprint(cfg.problems.task, cfg.problems.dataset)))


def train(cfg: Config) -> dict:
    """Train with GRPO on math problems (``build``)."""
    validate(cfg)
    return train_on(cfg, NAME, build, load_task_model=lambda cfg: math_problems.resolve_math_model(cfg.model))


def build(cfg: Config, run: RunSession) -> GRPO:
    """GRPO on the math problems of ``--task`` (``math_task``), as the loop runs it."""
    return task_recipe(cfg, run, math_task(cfg))


def train_on(cfg: Config, name: str, build: Callable[[Config, RunSession], Recipe],
             load_task_model: Callable[[Config], str]) -> dict:
    """Train the GRPO recipe ``build`` makes; write metrics.jsonl, completions.jsonl (every ``--print-samples``
    updates), summary.json, curves.png and the adapter into ``cfg.out``. Before the run directory is claimed: this
    process's device, and the sampler's ``auto`` settled from the model's config (``load_task_model(cfg)``: the
    model's path), so config.json records it.

    Under ``accelerate launch`` every process runs this function on its share of the prompts (see
    ``ladder.runtime.distributed``); only the main process writes.
    """
    device = placement(cfg)
    seed_everything(cfg.seed)
    model_path = hub.resolve(load_task_model(cfg), "--model")
    given, cfg = cfg, settle(cfg, quant.load_config(model_path), device).cfg  # config.json records it
    check_sampler(cfg, device, given)
    procs = Processes(device)  # after the tiny model is built and cached (see ladder.runtime.distributed)
    summary = loop.train(cfg, name, build, procs=procs)
    procs.close()
    return summary


def task_recipe(cfg: Config, run: RunSession, task: Task, recipe: type[GRPO] | None = None) -> GRPO:
    """The GRPO recipe of a run on ``task``: the ``--reward-funcs`` loaded, π_θ loaded (``load_policy``), each
    process's own sampling seed, the task's prompt, rollout (behind a lagging π_rollout with --max-staleness) and
    credit; ``recipe``: a rung's subclass of ``GRPO`` (the distill rung's), else ``GRPO``."""
    reward_funcs = rewards.load_all(cfg.rewards.funcs)
    policy, optimizer = load_policy(cfg, task.model_path, run.procs.device)
    run.seed_each_process()  # the weights above are the same everywhere; the samples from here on are not
    rollout = LaggingRollout(task.rollout, policy, cfg.max_staleness) if cfg.max_staleness else task.rollout
    step = make_step(cfg, policy=policy, optimizer=optimizer, tokenizer=task.tokenizer,
                     stream=ProblemStream(task.problems, cfg.seed, task.source), system_prompt=task.system_prompt,
                     procs=run.procs, reward_funcs=reward_funcs, prompt=task.prompt, rollout=rollout,
                     credit=task.credit)
    return (recipe or GRPO)(cfg, run, task, step)


class GRPO(Recipe):
    """GRPO as the loop runs it: ``grpo_step`` each update on ``step``, the learning rate warmed up over
    ``--warmup-steps``, the held-out accuracy before training and every ``--eval-every`` updates, π_ref refreshed every
    ``--ref-sync-every``, the completions logged every ``--print-samples``; done early at ``--max-completions``."""

    def __init__(self, cfg: Config, run: RunSession, task: Task, step: Step):
        self.cfg, self.run, self.task, self.step = cfg, run, task, step
        self.optimizer = step.optimizer
        self.counters = {"tokens": 0, "completions": 0, "evals": [], "first_rewards": []}
        self.cut_off = CutOffWatch(cfg.generation.max_new_tokens, lambda line: run.write(line, stderr=True))
        self.plan = loop.Plan(updates=cfg.steps, eval_every=cfg.eval_every, evaluate_first=True,
                              learning_rate=loop.LearningRate(cfg.optimisation.lr,
                                                              warmup=cfg.optimisation.warmup_steps),
                              curves=tuple(task.curves), checkpoint_last=False,
                              bar=(("reward", "reward", ".2f"), ("acc", "eval_accuracy", ".2f")))

    def update(self) -> dict:
        """``grpo_step``: sample → rewards → group-relative Â → ``core.update``; the run's counters."""
        cfg, counters = self.cfg, self.counters
        record, rollout, advantages = grpo_step(self.step)
        self.cut_off(record)
        counters["tokens"] += record["tokens"]
        counters["completions"] += record["sampling/completions"]
        refresh = cfg.reference_refresh  # None: π_ref stays the starting model
        if refresh is not None and (self.run.step + 1) % refresh.every == 0:
            self.step.policy.refresh_reference(refresh.mixup)  # every process alike: the weights are equal
        if len(counters["first_rewards"]) < 5:
            counters["first_rewards"].append(record["reward"])
        self.done = bool(cfg.max_completions and counters["completions"] >= cfg.max_completions)
        if cfg.print_samples and (self.run.step + 1) % cfg.print_samples == 0:
            self.log_completions(rollout, advantages)
        return {**record, "tokens_total": counters["tokens"], "completions_total": counters["completions"],
                "lr": self.optimizer.param_groups[0]["lr"]}

    def log_completions(self, rollout: Rollout, advantages: torch.Tensor) -> None:
        """The update's completions to OUT/completions.jsonl, the first one printed."""
        run, step = self.run, self.run.step + 1
        extras = self.row_extras(rollout)
        rows = completion_rows(rollout, advantages, run.procs, self.cfg.group_size, extras)
        run.log_completions(step, rows)
        functions = ", ".join(f"{name} {score:.2f}" for name, score in rows[0]["rewards"].items())
        scores = "".join(f", {name} {rows[0][name]:.2f}" for name in extras)  # a rung's own (distill's reverse KL)
        run.write(f"[{step}] {rows[0]['question']!r} → {rows[0]['completion']!r} → reward "
                  f"{rows[0]['reward']:.2f} ({functions}){scores} (all {len(rows)}: {run.dir / 'completions.jsonl'})")

    def row_extras(self, rollout: Rollout) -> dict[str, torch.Tensor]:
        """What a rung adds to each completion's row in completions.jsonl (name → ``[n]``); GRPO: nothing."""
        return {}

    def evaluate(self) -> dict:
        """Greedy accuracy on the held-out problems (the task's ``accuracy``), kept with the updates done."""
        accuracy = self.task.accuracy(self.step, self.task.held_out)
        self.counters["evals"].append((self.run.step, accuracy))
        return {"eval_accuracy": accuracy}

    def summary(self) -> dict:
        """summary.json; the trained adapter (or model) written to OUT first (π_ref's adapter, if any, stays out)."""
        cfg, run, policy = self.cfg, self.run, self.step.policy
        summary = {**summarize(cfg, run, self.counters, run.procs.gather_object(weights_digest(policy))),
                   "task": self.task.name or cfg.problems.task}
        if run.procs.is_main:
            save_trained(policy.model, run.dir, lora=uses_lora(cfg))
        return summary

    def state(self) -> dict:
        """π_θ, the optimiser, the problems' order, the counters, and what the options add (π_ref's refreshed
        weights, the lagging π_rollout's snapshots, the adaptive c_H)."""
        cfg, step = self.cfg, self.step
        return {"policy": step.policy, "optimizer": step.optimizer, "problems": step.stream,
                **({"reference": ReferenceWeights(step.policy)} if cfg.reference_refresh is not None else {}),
                **({"rollout_lag": step.rollout} if cfg.max_staleness else {}),
                **({"entropy_coef": step.entropy_control} if step.entropy_control is not None else {}),
                "counters": self.counters}

    def load_state(self, restored: dict) -> None:
        self.counters = restored["counters"]
