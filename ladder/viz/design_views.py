"""GRPO's design space next to TRL's (notebook 6): the schedule, the loss, the KL's gradient, tokens, the league.

Every number here is computed, none is typed in:

    trl_schedule        TRL's GRPOTrainer: which generation batch and which π_old every micro-step uses, and the
                        ladder configuration (μ, num_minibatches, P) doing the same work — a pure function
    trl_parity          the same tiny model and tensors through TRL's ``GRPOTrainer._compute_loss`` and
                        ``core.compute_loss``: both losses and the largest gradient difference (lazy ``import trl``)
    kl_gradients        on a 5-action categorical, the EXACT expected gradient (all actions enumerated, no sampling)
                        of each way of putting the KL into training, against ∇KL(π_θ‖π_ref) and ∇KL(π_ref‖π_θ)
    gradient_mask       which tokens (and which whole completions) lose their gradient under the token-level (GRPO)
                        or the sequence-level (GSPO) clip, decided by autograd through ``core.clipped_surrogate``
    token_passes        μ passes of ``core.update`` on a real tiny-GRPO batch; per-token tables for ``token_view``
    league              the ``--algo`` bundles trained by the real rung at one budget of sampled completions

and the views (each a ``View``: ``.controls``, ``.data``, ``.figure``): ``schedule_view``, ``parity_view``,
``kl_gradient_view``, ``token_view``, ``league_view``.
"""

from __future__ import annotations

import contextlib
import functools
import html
import io
import json
import math
import shutil
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from ladder import core
from ladder.viz._widget import View
from ladder.viz.views import _SLIDER

# =========================================================================================== (1) the map
MAP_CLASSES = {"GRPOConfig": "TRL's GRPOConfig → the grpo rung", "RLOOConfig": "TRL's RLOOConfig → grpo --algo rloo",
               "PPOConfig": "classic PPOConfig (TRL ≤ 0.11, the RLHF articles) → the ppo-sentiment rung"}


def _flag(option: str | None) -> str:
    return "—" if option is None else f"`--{option.replace('_', '-')}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def trl_map_rows(trl_class: str) -> list[dict]:
    """The rows of ``ladder.trl_map`` for one TRL class: TRL name, ladder flag, core function, note."""
    from ladder import trl_map

    return [{"trl": "—" if r.trl_field is None else f"`{r.trl_field}`",
             "ladder": f"{r.ladder_rung} {_flag(r.ladder_option)}",
             "core": "—" if r.core_function is None else f"`core.{r.core_function}`", "note": r.note}
            for r in trl_map.rows(trl_class)]


def trl_map_markdown(classes=tuple(MAP_CLASSES)) -> str:
    """``ladder.trl_map`` as Markdown tables, one per TRL class: TRL name → ladder option → core function."""
    parts = []
    for cls in classes:
        rows = trl_map_rows(cls)
        lines = [f"**{MAP_CLASSES.get(cls, cls)}** ({len(rows)} rows)", "",
                 "| TRL | ladder | core | note |", "|---|---|---|---|"]
        lines += [f"| {r['trl']} | {r['ladder']} | {r['core']} | {_cell(r['note'])} |" for r in rows]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


# ====================================================================================== (2) the schedule
@dataclass
class MicroStep:
    """One call of TRL's ``training_step`` (one micro-batch; ``gradient_accumulation_steps`` of them make a step)."""

    micro: int            # TRL's self._step when the micro-batch is prepared
    step: int             # the optimiser step it belongs to (global_step)
    generation: int       # which generation batch it reads
    slice: int            # which of the generation batch's steps_per_generation slices (self._step % spg)
    iteration: int        # which of the num_iterations passes over the generation batch
    old_version: int      # π_old: the policy after this many optimiser steps generated the batch
    theta_version: int    # π_θ: the policy after this many optimiser steps computes the loss

    @property
    def stale(self) -> int:
        return self.theta_version - self.old_version


def resolve_generation_batch(steps_per_generation: int | None, gradient_accumulation_steps: int,
                             per_device_train_batch_size: int, generation_batch_size: int | None,
                             num_generations: int, num_processes: int = 1) -> tuple[int, int]:
    """(steps_per_generation, generation_batch_size) as ``GRPOConfig.__post_init__`` resolves them."""
    global_batch = per_device_train_batch_size * num_processes
    if generation_batch_size is None and steps_per_generation is None:
        steps_per_generation = gradient_accumulation_steps
        generation_batch_size = global_batch * steps_per_generation
    elif generation_batch_size is not None and steps_per_generation is None:
        if generation_batch_size % global_batch:
            raise ValueError(f"generation_batch_size ({generation_batch_size}) must be divisible by the global batch "
                             f"size ({global_batch}).")
        steps_per_generation = generation_batch_size // global_batch
    elif generation_batch_size is None:
        generation_batch_size = global_batch * steps_per_generation
    else:
        raise ValueError("'generation_batch_size' and 'steps_per_generation' can not be both configured at the same "
                         "time")
    if generation_batch_size % num_generations:
        raise ValueError(f"generation_batch_size ({generation_batch_size}) must be divisible by num_generations "
                         f"({num_generations}).")
    return steps_per_generation, generation_batch_size


def trl_schedule(num_iterations: int = 1, steps_per_generation: int | None = None,
                 gradient_accumulation_steps: int = 1, per_device_train_batch_size: int = 8,
                 generation_batch_size: int | None = None, num_generations: int = 8, num_processes: int = 1,
                 optimizer_steps: int | None = None) -> dict:
    """TRL 1.16 GRPOTrainer's schedule, micro-step by micro-step, and the ladder configuration doing the same work.

    TRL (``_prepare_inputs``) counts micro-steps ``self._step`` (one per ``training_step``, i.e. per micro-batch;
    ``gradient_accumulation_steps`` of them make one optimiser step) and

        generate_every = steps_per_generation × num_iterations                   (in micro-steps)
        generate       when self._step % generate_every == 0: one batch of generation_batch_size completions,
                       shuffled once and split into steps_per_generation slices
        micro-batch    self._buffered_inputs[self._step % steps_per_generation]
        π_old          the policy at generation time; TRL skips the old-logp forward (old = logp.detach())
                       when gradient_accumulation_steps % generate_every == 0, i.e. exactly when no optimiser
                       step falls between a batch's generation and its last use

    Returns ``micro`` (list of ``MicroStep``), ``steps_per_generation``, ``generation_batch_size``,
    ``generate_every``, ``computes_old_logp`` (TRL's rule), ``off_policy`` (any micro-step with π_θ ≠ π_old: the
    timeline's own answer), ``ladder`` (``ladder_equivalent``) and ``ladder_steps`` (per optimiser step: the
    ladder update, pass and minibatch, and π_old's version as ladder's schedule has it; None without an
    equivalent).
    """
    for name, value in (("num_iterations", num_iterations),
                        ("gradient_accumulation_steps", gradient_accumulation_steps),
                        ("per_device_train_batch_size", per_device_train_batch_size),
                        ("num_processes", num_processes)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if num_generations < 2:
        raise ValueError(f"num_generations must be at least 2, got {num_generations}")
    spg, gen_bs = resolve_generation_batch(steps_per_generation, gradient_accumulation_steps,
                                           per_device_train_batch_size, generation_batch_size, num_generations,
                                           num_processes)
    gas, every = gradient_accumulation_steps, spg * num_iterations
    if optimizer_steps is None:  # two full cycles of generations and optimiser steps
        optimizer_steps = min(32, max(4, 2 * math.lcm(every, gas) // gas))
    micro = []
    for m in range(optimizer_steps * gas):
        generation = m // every
        micro.append(MicroStep(micro=m, step=m // gas, generation=generation, slice=m % spg,
                               iteration=(m % every) // spg, old_version=(generation * every) // gas,
                               theta_version=m // gas))
    out = {"micro": micro, "num_iterations": num_iterations, "steps_per_generation": spg,
           "gradient_accumulation_steps": gas, "per_device_train_batch_size": per_device_train_batch_size,
           "generation_batch_size": gen_bs, "num_generations": num_generations, "num_processes": num_processes,
           "generate_every": every, "optimizer_steps": optimizer_steps,
           "computes_old_logp": gas % every != 0, "off_policy": any(s.stale for s in micro)}
    out["ladder"] = ladder_equivalent(out)
    out["ladder_steps"] = _ladder_steps(out["ladder"], optimizer_steps)
    return out


def ladder_equivalent(schedule: dict) -> dict:
    """The ``grpo`` rung's configuration that does TRL's work: the same completions per rollout, the same
    optimiser steps on the same rows, the same π_old. ``{"exact": False, "reason": ...}`` where none exists.

    Ladder has no gradient accumulation: one minibatch is one forward, one backward, one optimiser step, so a
    ladder minibatch is TRL's gradient_accumulation_steps micro-batches at once (the same gradient, more memory).

        spg a multiple of gas     μ = num_iterations, num_minibatches = spg / gas, P·G = generation_batch_size
        gas a multiple of spg:
          and gas | spg·μ_TRL     μ = spg·num_iterations / gas, num_minibatches = 1 (each step sums every slice
                                  gas/spg times: the whole batch's gradient)
          and spg·μ_TRL | gas     μ = 1, num_minibatches = 1, P·G = k·generation_batch_size, k = gas/(spg·μ_TRL)
                                  generations per step; the num_iterations − 1 repeats recompute the same gradient
        otherwise                 no ladder equivalent: an optimiser step straddles two generation batches, or
                                  (gas | spg·num_iterations) mixes the end of one pass with the start of the next
    """
    ni, spg, gas = schedule["num_iterations"], schedule["steps_per_generation"], schedule["gradient_accumulation_steps"]
    gen_bs, G = schedule["generation_batch_size"], schedule["num_generations"]
    notes = []
    if spg % gas == 0:
        mu, nm, generations = ni, spg // gas, 1
        if nm > 1 and ni > 1:
            notes.append("TRL keeps the same slices on every iteration; ladder reshuffles the minibatches each pass")
    elif gas % spg == 0 and (spg * ni) % gas == 0:
        mu, nm, generations = spg * ni // gas, 1, 1
        if gas > spg:
            notes.append(f"each TRL step sums all {spg} slice(s) {gas // spg} times: the whole batch's gradient")
    elif gas % spg == 0 and gas % (spg * ni) == 0:
        mu, nm, generations = 1, 1, gas // (spg * ni)
        if ni > 1:
            notes.append(f"the {ni - 1} extra iteration(s) recompute the same gradient (π_θ does not move in between)")
    elif (spg * ni) % gas and gas % (spg * ni):
        return {"exact": False, "reason": f"an optimiser step of {gas} micro-batches straddles two generation batches "
                                          f"(one every {spg * ni} micro-batches): no ladder update does that"}
    else:
        return {"exact": False, "reason": f"an optimiser step of {gas} micro-batches mixes the end of one pass over "
                                          f"the {spg} slices with the start of the next: ladder's minibatches "
                                          "partition each pass"}
    rows = generations * gen_bs
    return {"exact": True, "mu": mu, "num_minibatches": nm, "prompts_per_step": rows // G, "group_size": G,
            "rows": rows, "generations_per_update": generations, "optimizer_steps_per_update": mu * nm,
            "records_old_logp": mu > 1 or nm > 1, "notes": notes,
            "flags": f"--prompts-per-step {rows // G} --group-size {G} --mu {mu} --num-minibatches {nm}"}


def _ladder_steps(ladder: dict, optimizer_steps: int) -> list[dict] | None:
    """Per optimiser step: ladder's update, pass and minibatch, and π_old's version (the update's first step)."""
    if not ladder["exact"]:
        return None
    per_update, nm = ladder["optimizer_steps_per_update"], ladder["num_minibatches"]
    return [{"step": j, "update": j // per_update, "pass": (j % per_update) // nm, "minibatch": j % nm,
             "old_version": (j // per_update) * per_update, "theta_version": j} for j in range(optimizer_steps)]


def _schedule_figure(s: dict) -> Figure:
    micro, gas = s["micro"], s["gradient_accumulation_steps"]
    n = len(micro)
    fig = Figure(figsize=(12, 3.3))
    ax = fig.add_subplot(1, 1, 1)
    for ms in micro:
        color = f"C{ms.generation % 10}"
        ax.add_patch(_rect(ms.micro, 2.1, color, hatch="///" if ms.stale else None))
        ax.text(ms.micro + 0.5, 2.55, f"g{ms.generation}·s{ms.slice}" + (f"·i{ms.iteration}" if s["num_iterations"] > 1
                                                                         else ""), ha="center", va="center", fontsize=7)
        ax.text(ms.micro + 0.5, 1.75, f"{ms.old_version}→{ms.theta_version}", ha="center", va="center", fontsize=7,
                color="C3" if ms.stale else "k")
        if ms.micro == ms.generation * s["generate_every"]:
            ax.plot(ms.micro, 3.15, "v", color="k", ms=7)
    if s["ladder_steps"] is not None:
        for st in s["ladder_steps"]:
            stale = st["theta_version"] != st["old_version"]
            ax.add_patch(_rect(st["step"] * gas, 0.3, f"C{st['update'] % 10}", width=gas,
                               hatch="///" if stale else None))
            label = f"u{st['update']}·p{st['pass']}" + (f"·mb{st['minibatch']}" if s["ladder"]["num_minibatches"] > 1
                                                         else "")
            ax.text(st["step"] * gas + gas / 2, 0.75, label, ha="center", va="center", fontsize=7)
    else:
        ax.text(n / 2, 0.75, "no ladder equivalent: " + s["ladder"]["reason"], ha="center", va="center", fontsize=8,
                color="C3")
    for j in range(s["optimizer_steps"] + 1):
        ax.axvline(j * gas, color="k", lw=0.8, alpha=0.5)
    ax.set_xlim(0, n)
    ax.set_ylim(0, 3.4)
    ax.set_yticks([0.75, 1.75, 2.55])
    ax.set_yticklabels(["ladder: update·pass·mb", "π_old → π_θ version", "TRL: generation·slice·iter"], fontsize=8)
    step_ticks = np.arange(s["optimizer_steps"]) * gas + gas / 2
    ax.set_xticks(step_ticks)
    ax.set_xticklabels([str(j) for j in range(s["optimizer_steps"])], fontsize=7)
    ax.set_xlabel(f"optimiser step (each {gas} micro-batch{'es' if gas > 1 else ''}; ▼ = TRL generates; "
                  "hatched = π_θ ≠ π_old)")
    fig.tight_layout()
    return fig


def _rect(x: float, y: float, color: str, width: float = 1.0, hatch: str | None = None):
    from matplotlib.patches import Rectangle

    return Rectangle((x + 0.04, y), width - 0.08, 0.9, facecolor=color, alpha=0.45, edgecolor="k", lw=0.5,
                     hatch=hatch)


def schedule_view(num_iterations: int = 2, steps_per_generation: int = 4, gradient_accumulation_steps: int = 2,
                  per_device_train_batch_size: int = 8, num_generations: int = 8) -> View:
    """TRL's schedule as a timeline, next to the ladder configuration doing the same work (``trl_schedule``).

    generation_batch_size = per_device_train_batch_size × steps_per_generation (one process), as TRL derives it.
    """
    controls = {
        "num_iterations": widgets.IntSlider(value=num_iterations, min=1, max=4, description="num_iterations",
                                            **_SLIDER),
        "steps_per_generation": widgets.IntSlider(value=steps_per_generation, min=1, max=8,
                                                  description="steps_per_generation", **_SLIDER),
        "gradient_accumulation_steps": widgets.IntSlider(value=gradient_accumulation_steps, min=1, max=8,
                                                         description="gradient_accumulation_steps", **_SLIDER),
        "per_device_train_batch_size": widgets.IntSlider(value=per_device_train_batch_size, min=num_generations,
                                                         max=4 * num_generations, step=num_generations,
                                                         description="per_device_train_batch_size", **_SLIDER),
    }

    def draw(v: dict):
        s = trl_schedule(v["num_iterations"], v["steps_per_generation"], v["gradient_accumulation_steps"],
                         v["per_device_train_batch_size"], num_generations=num_generations)
        lad = s["ladder"]
        trl_says = (f"TRL: generation_batch_size {s['generation_batch_size']}, a generation every "
                    f"{s['generate_every']} micro-batches; old-logp forward "
                    f"{'computed' if s['computes_old_logp'] else 'skipped (π_old = π_θ at every use)'}")
        if lad["exact"]:
            recorded = "recorded" if lad["records_old_logp"] else "not needed"
            ladder_says = (f"ladder: {lad['flags']} (μ·minibatches = {lad['optimizer_steps_per_update']} optimiser "
                           f"steps per rollout; old log-probs {recorded})"
                           + "".join(f"; {note}" for note in lad["notes"]))
        else:
            ladder_says = "ladder: " + lad["reason"]
        s["summary"] = trl_says + " | " + ladder_says
        return _schedule_figure(s), s

    return View(controls, draw, "TRL's GRPO schedule and the ladder configuration doing the same work")


# ======================================================================================= (3) TRL parity
PARITY_LOSS_TYPES = {"grpo": ("clipped", "seq_mean_token_mean"), "bnpo": ("clipped", "token_mean"),
                     "dr_grpo": ("clipped", "dr_grpo"), "dapo": ("clipped", "dapo"), "cispo": ("cispo", "dapo")}


def trl_available() -> bool:
    """Whether trl ≥ 1.16 (the version whose ``GRPOTrainer._compute_loss`` this mirrors) is installed."""
    try:
        import trl
    except ImportError:
        return False
    major, minor = (int(x) for x in trl.__version__.split(".")[:2])
    return (major, minor) >= (1, 16)


class ParityBench:
    """TRL's ``GRPOTrainer`` built offline on a tiny Qwen2, ladder's ``CausalLMPolicy`` on the very same model, and
    the inputs ``_generate_and_score_completions`` would hand to ``_compute_loss`` (as tests/test_trl_parity.py).

    Two prompts (one left-padded) × G = 2 completions of lengths 6, 4, 5, 3 (one ending at EOS), advantages of
    both signs, π_old = π_θ shifted per row and per token (ratios on both sides of the clip), π_ref another
    perturbation; padding carries junk in both, as it may in TRL. One process, no gradient accumulation.
    """

    TEMPERATURE, MAX_COMPLETION_LENGTH, EPSILON, G = 0.7, 8, 0.2, 2

    def __init__(self):
        import random

        import transformers
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import GRPOConfig, GRPOTrainer

        from ladder.policies.causal_lm import CausalLMPolicy, lm_batch
        from ladder.tasks import arithmetic, tiny_lm

        self._lm_batch = lm_batch
        self.dir = Path(tempfile.mkdtemp(prefix="ladder-trl-parity-"))
        corpus = ["What is 2 + 3? 5", "Tom has 4 apples and buys 3 more. 7", "How many are left? 6"] * 5
        tokenizer = arithmetic.chat_tokenizer(corpus, vocab_size=300)
        with tiny_lm.isolated_build(seed=0):
            model = tiny_lm.build_model("qwen2", tokenizer, hidden=32, layers=2, heads=2, max_positions=64)
            with torch.no_grad():  # weights wide enough that the distributions are far from uniform
                for p in model.parameters():
                    if p.dim() > 1:
                        p.normal_(0.0, 0.3)
        model.save_pretrained(self.dir / "model")
        tokenizer.save_pretrained(self.dir / "model")
        tokenizer = AutoTokenizer.from_pretrained(self.dir / "model")
        tokenizer.padding_side = "left"
        with warnings.catch_warnings():  # transformers 5 renames gradient_checkpointing; TRL 1.16 still passes it
            warnings.simplefilter("ignore", FutureWarning)
            args = GRPOConfig(output_dir=str(self.dir / "out"), report_to=[], use_cpu=True, bf16=False,
                              per_device_train_batch_size=2 * self.G, num_generations=self.G,
                              max_completion_length=self.MAX_COMPLETION_LENGTH, temperature=self.TEMPERATURE,
                              beta=0.04, epsilon=self.EPSILON, gradient_checkpointing=False, disable_dropout=True,
                              logging_steps=10**9, save_strategy="no", dataloader_num_workers=0)
        py, np_state, verbosity = random.getstate(), np.random.get_state(), transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()
        try:
            with torch.random.fork_rng(devices=[]), contextlib.redirect_stdout(io.StringIO()):
                self.trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(self.dir / "model"),
                                           reward_funcs=lambda completions, **_: [0.0] * len(completions), args=args,
                                           train_dataset=Dataset.from_list([{"prompt": "What is 2 + 3?"}] * 4),
                                           processing_class=tokenizer)
        finally:  # Trainer.__init__ seeds every generator: leave the caller's as they were
            random.setstate(py)
            np.random.set_state(np_state)
            transformers.logging.set_verbosity(verbosity)
        self.trainer.current_gradient_accumulation_steps = 1  # set by Trainer's training loop; _compute_loss reads it
        self.trainer.model.train()
        self.policy = CausalLMPolicy(self.trainer.model, temperature=self.TEMPERATURE)
        self.inputs = self._inputs(tokenizer)

    def _inputs(self, tokenizer) -> dict:
        G = self.G
        enc = tokenizer(["What is 2 + 3?", "Tom has 4 apples and buys 3 more. How many?"], return_tensors="pt",
                        padding=True)
        prompt_ids, prompt_mask = (enc[k].repeat_interleave(G, dim=0) for k in ("input_ids", "attention_mask"))
        gen = torch.Generator().manual_seed(1)
        B, T = len(prompt_ids), 6
        completion_ids = torch.randint(5, len(tokenizer), (B, T), generator=gen)
        completion_mask = (torch.arange(T)[None] < torch.tensor([6, 4, 5, 3])[:, None]).long()
        completion_ids[1, 3] = tokenizer.eos_token_id
        completion_ids = completion_ids.masked_fill(completion_mask == 0, tokenizer.pad_token_id)
        with torch.no_grad():
            batch = self._lm_batch(prompt_ids, prompt_mask, completion_ids, completion_mask, tokenizer.pad_token_id)
            logp = self.policy.evaluate(batch)[0].float()
        noise = 0.3 * torch.randn(B, T, generator=gen) * completion_mask
        noise = noise - noise.sum(1, keepdim=True) / completion_mask.sum(1, keepdim=True)
        old = logp - torch.tensor([0.22, 0.5, -0.1, -0.35])[:, None] - noise
        ref = logp + 0.5 * torch.randn(B, T, generator=gen)
        return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
                "completion_mask": completion_mask, "advantages": torch.tensor([0.8, -1.1, 0.6, -0.9]),
                "old_per_token_logps": torch.where(completion_mask.bool(), old, -3.0),
                "ref_per_token_logps": torch.where(completion_mask.bool(), ref, -7.0),
                "num_items_in_batch": completion_mask.sum()}

    def configure(self, loss_type: str, level: str, correction: bool, eps_high: float, delta: float | None,
                  beta: float) -> core.UpdateConfig:
        """Set TRL's options on the trainer as ``GRPOTrainer.__init__`` copies them from its args; return the
        ``core.UpdateConfig`` they map to."""
        t = self.trainer
        t.args.loss_type = t.loss_type = loss_type
        t.args.importance_sampling_level = t.importance_sampling_level = level
        t.args.use_bias_correction_kl = correction
        t.args.epsilon = t.epsilon_low = self.EPSILON
        t.args.epsilon_high = t.epsilon_high = eps_high
        t.args.delta = delta
        t.args.beta = t.beta = beta
        objective, aggregation = PARITY_LOSS_TYPES[loss_type]
        return core.UpdateConfig(objective=objective, aggregation=aggregation, ratio_level=level,
                                 clip_eps_low=self.EPSILON, clip_eps_high=eps_high, delta=delta,
                                 cispo_max_weight=eps_high, kl_coef=beta, kl_estimator="k3", kl_correction=correction,
                                 max_tokens=t.max_completion_length, normalize_advantages=False)

    def _grads(self) -> dict:
        return {n: p.grad.detach().clone() for n, p in self.trainer.model.named_parameters() if p.grad is not None}

    def compare(self, loss_type: str = "grpo", level: str = "token", correction: bool = True,
                eps_high: float | None = None, delta: float | None = None, beta: float = 0.04) -> dict:
        """Both losses and gradients on the same tensors; the largest differences."""
        eps_high = self.EPSILON if eps_high is None else eps_high
        cfg = self.configure(loss_type, level, correction, eps_high, delta, beta)
        model, inputs = self.trainer.model, self.inputs
        with _threads(1):
            model.zero_grad(set_to_none=True)
            trl_loss = self.trainer._compute_loss(model, inputs)
            trl_loss.backward()
            trl_grads = self._grads()
            mask = inputs["completion_mask"]
            batch = self._lm_batch(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"], mask,
                                   model.config.pad_token_id, advantages=inputs["advantages"][:, None] * mask,
                                   old_logp=inputs["old_per_token_logps"], ref_logp=inputs["ref_per_token_logps"])
            # TRL's DAPO / CISPO normaliser for one micro-batch: num_items_in_batch / processes · accumulation / spg
            num_tokens = (inputs["num_items_in_batch"].clamp(min=1.0).item() / self.trainer.accelerator.num_processes
                          * self.trainer.current_gradient_accumulation_steps / self.trainer.args.steps_per_generation)
            model.zero_grad(set_to_none=True)
            ladder_loss, _, _ = core.compute_loss(self.policy, batch, cfg, num_tokens)
            ladder_loss.backward()
            ladder_grads = self._grads()
            model.zero_grad(set_to_none=True)
        names = sorted(trl_grads)
        t = torch.cat([trl_grads[n].reshape(-1) for n in names]).double()
        ladder = torch.cat([ladder_grads[n].reshape(-1) for n in names]).double()
        return {"loss_type": loss_type, "level": level, "correction": correction, "beta": beta,
                "trl_loss": trl_loss.item(), "ladder_loss": ladder_loss.item(),
                "loss_diff": abs(trl_loss.item() - ladder_loss.item()),
                "max_grad_diff": (t - ladder).abs().max().item(), "max_grad": t.abs().max().item(),
                "num_params": len(names), "num_entries": t.numel(), "trl_grad": t.numpy(),
                "ladder_grad": ladder.numpy(),
                "config": cfg, "same_by_design": not (level == "sequence" and correction and beta > 0)}


@contextlib.contextmanager
def _no_progress_bars():
    """transformers' loading / saving progress bars off (they would land in the notebook's output)."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@functools.lru_cache(maxsize=1)
def parity_bench() -> ParityBench:
    """The bench, built once per process (a few seconds, after ``import trl``'s own)."""
    with _no_progress_bars():
        return ParityBench()


def trl_parity(loss_type: str = "grpo", level: str = "token", correction: bool = True, beta: float = 0.04,
               eps_high: float | None = None, delta: float | None = None) -> dict:
    """TRL's ``GRPOTrainer._compute_loss`` and ``core.compute_loss`` on the same model and tensors (``ParityBench``)."""
    return parity_bench().compare(loss_type, level, correction, eps_high, delta, beta)


def parity_view(loss_type: str = "grpo") -> View:
    """A loss type (and ratio level, KL correction): both losses, and every gradient entry TRL against ladder."""
    controls = {
        "loss_type": widgets.Dropdown(options=list(PARITY_LOSS_TYPES), value=loss_type, description="loss_type"),
        "level": widgets.ToggleButtons(options=["token", "sequence"], value="token",
                                       description="importance_sampling_level", style={"description_width": "initial",
                                                                                       "button_width": "90px"}),
        "correction": widgets.Checkbox(value=True, description="use_bias_correction_kl"),
    }

    def draw(v: dict):
        if v["loss_type"] == "cispo" and v["level"] == "sequence":
            level_note = " (TRL runs CISPO's weight at sequence level; ladder refuses the combination in the rung)"
        else:
            level_note = ""
        r = trl_parity(v["loss_type"], v["level"], v["correction"])
        fig = Figure(figsize=(9, 3.4))
        ax = fig.add_subplot(1, 2, 1)
        ax.scatter(r["trl_grad"], r["ladder_grad"], s=4, alpha=0.5)
        lim = r["max_grad"] * 1.05
        ax.plot([-lim, lim], [-lim, lim], "k:", lw=0.8)
        ax.set_xlabel("∂loss/∂θ in TRL")
        ax.set_ylabel("∂loss/∂θ in ladder")
        ax.set_title(f"{r['num_entries']} gradient entries, {r['num_params']} tensors")
        ax = fig.add_subplot(1, 2, 2)
        diff = np.abs(r["trl_grad"] - r["ladder_grad"])
        ax.hist(np.log10(diff + 1e-12), bins=40)
        ax.set_xlabel("log10 |TRL − ladder| per gradient entry (1e-12 floor)")
        ax.set_title("gradient differences")
        fig.tight_layout()
        r["summary"] = (f"loss TRL {r['trl_loss']:.8f} · ladder {r['ladder_loss']:.8f} (|Δ| {r['loss_diff']:.1e}); "
                        f"largest gradient difference {r['max_grad_diff']:.1e} (largest entry {r['max_grad']:.2f})"
                        + ("" if r["same_by_design"] else " — differs by design: ladder weights each token's KL by its "
                           "own π_θ/π_old, TRL by the sequence ratio") + level_note)
        return fig, r

    return View(controls, draw, "TRL's GRPOTrainer._compute_loss vs ladder.core.compute_loss")


# ================================================================================= (4) the KL's gradient
KL_WAYS = ("k1 in the loss", "k2 in the loss", "k3 in the loss", "k3·π_θ/π_old in the loss", "k1 in the reward")
_LOGITS = (1.0, 0.5, 0.0, -0.5, -1.0)            # θ: π_θ = softmax(θ)
_TO_REF = (-1.0, 0.5, 1.0, 0.0, -0.5)            # π_ref = softmax(θ + d_ref · this)
_TO_OLD = (0.5, -1.0, 0.3, 0.8, -0.6)            # π_old = softmax(θ + d_old · this)


def kl_gradients(ref_distance: float = 1.0, old_distance: float = 0.0) -> dict:
    """Exact expected gradients w.r.t. the logits θ of a 5-action categorical: every action enumerated.

    π_θ = softmax(θ), π_ref = softmax(θ + d_ref·u), π_old = softmax(θ + d_old·v) (fixed directions u, v; π_old and
    π_ref are constants). Actions are sampled by π_old, so each way of training is E_{a~π_old}[·] = Σ_a π_old(a)·(·):

        k1, k2, k3 in the loss       Σ_a π_old(a) · ∇k(a)                      core.kl_estimate(logp, ref)
        k3·π_θ/π_old in the loss     Σ_a π_old(a) · ∇[(π_θ/π_old)(a) · k3(a)]  core.kl_estimate(logp, ref, "k3", old)
        k1 in the reward             Σ_a π_old(a) · ∇[−(π_θ/π_old)(a) · Â(a)],  Â = −k1 on π_old, a constant
                                     (core.kl_in_reward; the surrogate r·Â inside the clip. On-policy it is the
                                     REINFORCE gradient E[k1(a)·∇log π_θ(a)])

    against autograd on the exact KLs: ∇KL(π_θ‖π_ref) (reverse) and ∇KL(π_ref‖π_θ) (forward). Each gradient is
    "per unit β": the gradient the loss's β·(term) contributes, divided by β.
    """
    dt = torch.float64
    theta = torch.tensor(_LOGITS, dtype=dt, requires_grad=True)
    logp = torch.log_softmax(theta, 0)
    ref = torch.log_softmax(torch.tensor(_LOGITS, dtype=dt) + ref_distance * torch.tensor(_TO_REF, dtype=dt), 0)
    old = torch.log_softmax(torch.tensor(_LOGITS, dtype=dt) + old_distance * torch.tensor(_TO_OLD, dtype=dt), 0)
    w = old.exp()                                # the sampling weights: a ~ π_old

    def grad(value: torch.Tensor) -> np.ndarray:
        return torch.autograd.grad(value, theta, retain_graph=True)[0].numpy()

    shaped, _ = core.kl_in_reward(torch.zeros(5, dtype=dt), old[:, None], ref[:, None], torch.ones(5, 1, dtype=dt),
                                  kl_coef=1.0, estimator="k1")          # r̃(a) = 0 − 1·k1(a) on π_old
    ratio = torch.exp(logp - old)
    terms = {"k1 in the loss": core.kl_estimate(logp, ref, "k1"), "k2 in the loss": core.kl_estimate(logp, ref, "k2"),
             "k3 in the loss": core.kl_estimate(logp, ref, "k3"),
             "k3·π_θ/π_old in the loss": core.kl_estimate(logp, ref, "k3", old),
             "k1 in the reward": -ratio * shaped}
    grads = {name: grad((w * term).sum()) for name, term in terms.items()}
    p, q = logp.exp(), ref.exp()
    kl_reverse, kl_forward = (p * (logp - ref)).sum(), (q * (ref - logp)).sum()
    reverse, forward = grad(kl_reverse), grad(kl_forward)
    return {"ref_distance": ref_distance, "old_distance": old_distance, "grads": grads, "reverse": reverse,
            "forward": forward, "kl_reverse": kl_reverse.item(), "kl_forward": kl_forward.item(),
            "kl_old": (w * (old - logp)).sum().item(),
            "norm_reverse": float(np.linalg.norm(reverse)), "norm_forward": float(np.linalg.norm(forward)),
            "error_reverse": {k: float(np.linalg.norm(g - reverse)) for k, g in grads.items()},
            "error_forward": {k: float(np.linalg.norm(g - forward)) for k, g in grads.items()},
            "p_theta": p.detach().numpy(), "p_ref": q.numpy(), "p_old": w.numpy()}


def kl_gradient_view(ref_distance: float = 1.0, old_distance: float = 0.0) -> View:
    """Sliders move π_ref and π_old away from π_θ; bars show each way's gradient error against both true gradients."""
    controls = {
        "ref_distance": widgets.FloatSlider(value=ref_distance, min=0.0, max=3.0, step=0.1,
                                            description="how far π_ref is from π_θ", **_SLIDER),
        "old_distance": widgets.FloatSlider(value=old_distance, min=0.0, max=2.0, step=0.1,
                                            description="how far π_old is from π_θ", **_SLIDER),
    }
    sweep = np.linspace(0.0, 3.0, 16)

    def draw(v: dict):
        d = kl_gradients(v["ref_distance"], v["old_distance"])
        d["sweep"] = {"ref_distance": sweep, **{k: [kl_gradients(float(x), v["old_distance"])["error_reverse"][k]
                                                     for x in sweep] for k in KL_WAYS}}
        fig = Figure(figsize=(12, 3.6))
        ax = fig.add_subplot(1, 3, 1)
        x = np.arange(5)
        for i, (key, label) in enumerate((("p_theta", "π_θ"), ("p_old", "π_old (samples)"), ("p_ref", "π_ref"))):
            ax.bar(x + (i - 1) * 0.27, d[key], 0.27, label=label)
        ax.set_xlabel("action")
        ax.set_title(f"KL(π_θ‖π_ref) {d['kl_reverse']:.3f} · KL(π_ref‖π_θ) {d['kl_forward']:.3f}", fontsize=9)
        ax.legend(fontsize=7)
        ax = fig.add_subplot(1, 3, 2)
        y = np.arange(len(KL_WAYS))
        ax.barh(y - 0.2, [d["error_reverse"][k] for k in KL_WAYS], 0.4, label="vs ∇KL(π_θ‖π_ref) (reverse)")
        ax.barh(y + 0.2, [d["error_forward"][k] for k in KL_WAYS], 0.4, label="vs ∇KL(π_ref‖π_θ) (forward)")
        for yi, k in zip(y, KL_WAYS):
            for off, key in ((-0.2, "error_reverse"), (0.2, "error_forward")):
                if d[key][k] < 1e-9:
                    ax.text(0, yi + off, " exact", va="center", fontsize=7, color="C2")
        ax.set_yticks(y)
        ax.set_yticklabels(KL_WAYS, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"‖E[gradient] − true gradient‖ (‖∇KL rev.‖ = {np.linalg.norm(d['reverse']):.3f})", fontsize=9)
        ax.legend(fontsize=7)
        ax = fig.add_subplot(1, 3, 3)
        for i, k in enumerate(KL_WAYS):
            ax.plot(sweep, d["sweep"][k], ("-", "--", "-.", ":", "-")[i], label=k, lw=1.5 if i != 3 else 2.5)
        ax.axvline(v["ref_distance"], color="grey", ls=":")
        ax.set_xlabel("how far π_ref is from π_θ")
        ax.set_title("error vs the reverse KL's gradient", fontsize=9)
        ax.legend(fontsize=6)
        fig.tight_layout()
        d["summary"] = " · ".join(f"{k}: {d['error_reverse'][k]:.1e} / {d['error_forward'][k]:.1e}" for k in KL_WAYS) \
            + " (error vs reverse / forward)"
        return fig, d

    return View(controls, draw, "KL in the loss: what each way's expected gradient follows")


# =========================================================================================== (5) tokens
def gradient_mask(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                  eps_low: float, eps_high: float | None = None, level: str = "token") -> dict:
    """Which tokens lose their gradient under the clip, asked of autograd rather than re-derived.

        level "token"     r_t = π_θ(a_t)/π_old(a_t)                        (GRPO)
        level "sequence"  s_i = exp(core.sequence_log_ratio), every token of row i shares it   (GSPO)

    The per-token ``core.clipped_surrogate`` is averaged (``core.aggregate``, GRPO's per-sequence mean) and
    differentiated w.r.t. log π_θ; a real token with Â ≠ 0 whose derivative is exactly zero was clipped.
    ``advantages`` is per row ``[B]`` or per token ``[B, T]``. Returns ``ratio`` (the one the clip saw, ``[B, T]``),
    ``no_grad`` (clipped tokens), ``signal`` (real tokens with Â ≠ 0), ``rows_dropped`` (rows with signal in which
    every token is clipped) and ``grad``.
    """
    real = mask.bool()
    adv = advantages[:, None].expand_as(logp) if advantages.dim() == 1 else advantages
    adv = torch.where(real, adv, 0.0).double()
    lp = logp.detach().double().clone().requires_grad_(True)
    old = old_logp.detach().double()
    if level == "token":
        log_ratio = torch.where(real, lp - old, 0.0)
    elif level == "sequence":
        log_ratio = core.sequence_log_ratio(lp, old, mask).expand_as(lp)
    else:
        raise ValueError(f"level must be 'token' or 'sequence', got {level!r}")
    ratio = torch.exp(log_ratio)
    loss = core.aggregate(core.clipped_surrogate(ratio, adv, eps_low, eps_high), mask, "seq_mean_token_mean")
    grad = torch.autograd.grad(loss, lp)[0]
    signal = real & (adv != 0)
    no_grad = signal & (grad == 0)
    has_signal = signal.any(1)
    rows_dropped = has_signal & ~(signal & ~no_grad).any(1)
    return {"ratio": ratio.detach(), "no_grad": no_grad, "signal": signal, "rows_dropped": rows_dropped,
            "grad": grad}


@dataclass
class TokenTable:
    """Per-token tables of one batch after μ passes: what ``token_view`` colours."""

    pieces: list[list[str]]      # the text of each real completion token, per row
    logp: torch.Tensor           # log π_θ(a_t) after the passes            [B, T]
    old_logp: torch.Tensor       # log π_old(a_t), the sampler's              [B, T]
    advantages: torch.Tensor     # Â_i per row                                [B]
    mask: torch.Tensor           # real tokens                                [B, T]
    kl_ref: torch.Tensor         # KL(π_θ‖π_ref) at each position, exact over the vocabulary   [B, T]
    entropy: torch.Tensor        # H(π_θ(·|s_t)), exact                       [B, T]
    rewards: list[float]         # r_i
    prompts: list[str]           # the question of each row
    group_size: int
    mu: int = 0


_TOKEN_RUNS: dict[tuple, list[TokenTable]] = {}


def token_passes(mu: int = 3, lr: float = 1e-3, seed: int = 0, warmup_updates: int = 4, prompts: int = 4,
                 group_size: int = 4) -> TokenTable:
    """μ passes of ``core.update`` (the tiny QLoRA preset's GRPO loss) over one fixed batch sampled by π_old.

    The batch and π_old come from ``lm_lab.fixed_grpo_batch`` (π_old = the tiny preset after ``warmup_updates``
    GRPO updates; ``prompts`` × ``group_size`` completions). Runs are cached: the passes of a larger μ are kept, so a
    smaller μ costs nothing.
    """
    from ladder.policies import quant
    from ladder.tasks import arithmetic
    from ladder.viz import lm_lab

    key = (float(lr), seed, warmup_updates, prompts, group_size)
    tables = _TOKEN_RUNS.get(key, [])
    if len(tables) < mu:
        with _no_progress_bars():
            fixed = lm_lab.fixed_grpo_batch(seed, warmup_updates, prompts, group_size, qlora=True)
        tokenizer = quant.load_tokenizer(str(arithmetic.tiny_math_model()))
        problems = arithmetic.train_eval_split(None, fixed.cfg.eval_size)[0]
        picked = problems[warmup_updates * prompts:(warmup_updates + 1) * prompts]
        with lm_lab.quiet_run(), _no_progress_bars():
            tables = _TOKEN_RUNS[key] = _token_passes(fixed, tokenizer, picked, mu, float(lr))
    return tables[mu - 1]


def _token_passes(fixed, tokenizer, picked: list[dict], mu: int, lr: float) -> list[TokenTable]:
    from ladder.policies import quant
    from ladder.viz import lm_lab

    policy, batch, mask = fixed.policy, fixed.batch, fixed.batch.mask
    real = mask.bool()
    pieces = [[tokenizer.decode([int(a)]) for a, m in zip(row, row_mask) if m] for row, row_mask in
              zip(batch.actions, real)]
    questions = [p["question"] for p in picked for _ in range(fixed.group_size)]
    cfg = lm_lab.grpo_update_config(fixed.cfg, mu=1)
    policy.load_state_dict(fixed.old_state, strict=False)
    optimizer = quant.make_optimizer(policy.parameters(), lr, "adamw", torch.device("cpu"))
    generator = torch.Generator().manual_seed(0)
    tables = []
    try:
        for k in range(mu):
            core.update(policy, batch, optimizer, cfg, generator)
            logp_all = lm_lab.full_log_probs(policy.model, batch, fixed.cfg.temperature)
            p_all = logp_all.exp()
            tables.append(TokenTable(
                pieces=pieces, logp=logp_all.gather(-1, batch.actions[..., None]).squeeze(-1) * mask,
                old_logp=batch.old_logp * mask, advantages=batch.advantages.sum(1) / mask.sum(1).clamp(min=1),
                mask=mask.clone(),
                kl_ref=(p_all * (logp_all - fixed.logp_ref_all)).sum(-1) * mask,
                entropy=-(p_all * logp_all).sum(-1) * mask, rewards=fixed.rewards.tolist(), prompts=questions,
                group_size=fixed.group_size, mu=k + 1))
    finally:
        policy.load_state_dict(fixed.old_state, strict=False)  # the cached policy stays π_old
    return tables


TOKEN_QUANTITIES = ("gradient kept / clipped", "π_θ/π_old", "Â sign", "KL to π_ref", "entropy")


def _rgb(x: float, cmap: str) -> str:
    """#rrggbb of matplotlib colour map ``cmap`` at x ∈ [0, 1], light enough to read text on."""
    from matplotlib import colormaps

    r, g, b, _ = colormaps[cmap](float(np.clip(x, 0.0, 1.0)))
    r, g, b = (0.35 + 0.65 * c for c in (r, g, b))
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def tokens_html(table: TokenTable, clip: dict, quantity: str, eps_low: float, eps_high: float, level: str) -> str:
    """The completions as HTML text, each token coloured by ``quantity``; clipped tokens struck through."""
    B = len(table.pieces)
    ratio = torch.exp(table.logp - table.old_logp)
    seq = clip["ratio"][:, 0]
    kl_hi = max(float(table.kl_ref[table.mask.bool()].max()) if table.mask.any() else 0.0, 1e-6)
    h_hi = max(float(table.entropy[table.mask.bool()].max()) if table.mask.any() else 0.0, 1e-6)
    lines = []
    for i in range(B):
        if i % table.group_size == 0:
            lines.append(f"<div style='margin-top:6px'><b>{html.escape(table.prompts[i])}</b></div>")
        adv = float(table.advantages[i])
        spans = []
        for t, piece in enumerate(table.pieces[i]):
            r, sig, cut = float(ratio[i, t]), bool(clip["signal"][i, t]), bool(clip["no_grad"][i, t])
            if quantity == "gradient kept / clipped":
                color = "#e0e0e0" if not sig else ("#f4a6a6" if cut else "#a8e0a8")
            elif quantity == "π_θ/π_old":
                color = _rgb(0.5 + math.log(max(r, 1e-6)) / (4 * max(eps_low, eps_high, 1e-3)), "coolwarm")
            elif quantity == "Â sign":
                color = "#e0e0e0" if adv == 0 else ("#a8e0a8" if adv > 0 else "#f4a6a6")
            elif quantity == "KL to π_ref":
                color = _rgb(float(table.kl_ref[i, t]) / kl_hi, "Oranges")
            else:
                color = _rgb(float(table.entropy[i, t]) / h_hi, "Purples")
            title = (f"r={r:.3f} Â={adv:+.2f} KL_ref={float(table.kl_ref[i, t]):.3f} "
                     f"H={float(table.entropy[i, t]):.3f}" + (" clipped" if cut else ""))
            style = f"background:{color};padding:0 1px" + (";text-decoration:line-through" if cut else "")
            text = html.escape(piece).replace(" ", "&nbsp;").replace("\n", "⏎")
            spans.append(f"<span title='{title}' style='{style}'>{text}</span>")
        dropped = bool(clip["rows_dropped"][i])
        head = (f"reward {table.rewards[i]:g} Â={adv:+.2f} s={float(seq[i]):.3f}" if level == "sequence"
                else f"reward {table.rewards[i]:g} Â={adv:+.2f}")
        flag = " <b style='color:#c00'>whole completion clipped</b>" if dropped else ""
        lines.append(f"<div style='font-family:monospace;font-size:12px;white-space:nowrap'>"
                     f"<span style='color:#666'>{head}</span> {''.join(spans)}{flag}</div>")
    legend = {"gradient kept / clipped": "green: gradient flows · red, struck: clipped · grey: Â = 0",
              "π_θ/π_old": "blue: π_θ/π_old < 1 · red: > 1 (full scale at the clip's edge ×2)",
              "Â sign": "green: Â > 0 · red: Â < 0 · grey: Â = 0",
              "KL to π_ref": f"white → orange: exact KL(π_θ‖π_ref) at the position, 0 → {kl_hi:.3f}",
              "entropy": f"white → purple: entropy of π_θ at the position, 0 → {h_hi:.3f}"}[quantity]
    return (f"<div><i>{html.escape(legend)}; struck-through tokens lose their gradient at the {level} level "
            f"(ε_low {eps_low:g}, ε_high {eps_high:g}); hover a token for its numbers</i></div>" + "".join(lines))


def token_view(mu: int = 3, eps: float = 0.2, level: str = "token", quantity: str = "gradient kept / clipped",
               passes: Callable[[int], TokenTable] | None = None, max_mu: int = 6) -> View:
    """A real tiny-GRPO batch after μ passes, each completion token coloured; token- vs sequence-level clipping.

    ``passes(μ) -> TokenTable`` gives the tables (default: ``token_passes``). The toggle does not retrain: the same
    π_θ is clipped per token (GRPO) or per completion (GSPO, ``core.sequence_log_ratio``), which shows which tokens
    and which whole completions would lose their gradient in the next pass.
    """
    passes = passes or token_passes
    controls = {
        "mu": widgets.IntSlider(value=mu, min=1, max=max_mu, description="μ (passes)", **_SLIDER),
        "eps": widgets.FloatLogSlider(value=eps, base=10, min=-4, max=math.log10(0.5), step=0.1, description="ε",
                                      readout_format=".1e", **_SLIDER),
        "level": widgets.ToggleButtons(options=["token", "sequence"], value=level, description="clip level",
                                       style={"description_width": "initial", "button_width": "90px"}),
        "quantity": widgets.Dropdown(options=list(TOKEN_QUANTITIES), value=quantity, description="colour by"),
    }
    text = widgets.HTML()

    def draw(v: dict):
        table = passes(v["mu"])
        eps_ = float(v["eps"])
        clips = {lv: gradient_mask(table.logp, table.old_logp, table.advantages, table.mask, eps_, eps_, lv)
                 for lv in ("token", "sequence")}
        clip = clips[v["level"]]
        text.value = tokens_html(table, clip, v["quantity"], eps_, eps_, v["level"])
        real = table.mask.bool()
        token_ratio = torch.exp(table.logp - table.old_logp)
        fig = Figure(figsize=(11, 3.2))
        ax = fig.add_subplot(1, 2, 1)
        rows = torch.arange(len(real))[:, None].expand_as(real)
        sig, cut = clip["signal"], clip["no_grad"]
        for sel, color, label in ((real & ~sig, "0.7", "Â = 0"), (sig & ~cut, "C2", "gradient flows"),
                                  (cut, "C3", f"clipped at the {v['level']} level")):
            ax.scatter(token_ratio[sel].numpy(), rows[sel].numpy(), s=10, color=color, label=f"r_t, {label}")
        ax.scatter(clips["sequence"]["ratio"][:, 0].numpy(), np.arange(len(real)), marker="D", s=22,
                   facecolor="none", edgecolor="k", label="sequence s_i")
        ax.axvspan(1 - eps_, 1 + eps_, color="C0", alpha=0.1)
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_xlabel("π_θ/π_old (log)")
        ax.set_ylabel("completion")
        ax.set_title(f"after μ = {table.mu} pass(es); band = [1 − ε, 1 + ε]", fontsize=9)
        ax.legend(fontsize=6, loc="lower right")
        ax = fig.add_subplot(1, 2, 2)
        n_sig = max(int(clips["token"]["signal"].sum()), 1)
        frac_tok = [float(clips[lv]["no_grad"].sum()) / n_sig for lv in ("token", "sequence")]
        n_rows = max(int(clips["token"]["signal"].any(1).sum()), 1)
        frac_row = [float(clips[lv]["rows_dropped"].sum()) / n_rows for lv in ("token", "sequence")]
        xs = np.arange(2)
        ax.bar(xs - 0.2, frac_tok, 0.4, label="tokens clipped")
        ax.bar(xs + 0.2, frac_row, 0.4, label="whole completions clipped")
        ax.set_xticks(xs)
        ax.set_xticklabels(["token level (GRPO)", "sequence level (GSPO)"])
        ax.set_ylim(0, 1)
        ax.set_title(f"share of the {n_sig} tokens / {n_rows} completions with Â ≠ 0", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        data = {"table": table, "clip": clip, "clips": clips, "frac_tokens": dict(zip(("token", "sequence"), frac_tok)),
                "frac_rows": dict(zip(("token", "sequence"), frac_row)), "html": text.value}
        data["summary"] = (f"μ = {table.mu}, ε = {eps_:.1e}: token level clips {frac_tok[0]:.0%} of the tokens "
                           f"({frac_row[0]:.0%} of the completions whole); sequence level {frac_tok[1]:.0%} "
                           f"({frac_row[1]:.0%})")
        return fig, data

    view = View(controls, draw, "Tokens after μ passes: who loses the gradient, token by token or sequence by sequence")
    view.text = text
    view.children = (*view.children, text)
    return view


# ========================================================================================== (6) the league
LEAGUE_METRICS = {"eval_accuracy": "greedy held-out accuracy", "reward": "mean reward of the sampled completions",
                  "kl_ref": "KL(π_θ‖π_ref) in the loss"}


@functools.lru_cache(maxsize=16)
def league_run(method: str, max_completions: int = 192, prompts_per_step: int = 4, eval_size: int = 32,
               eval_every: int = 2, seed: int = 0) -> dict:
    """One ``grpo.train`` run: ``grpo.PRESETS["tiny"]`` + ``grpo.ALGOS[method]``, stopped by the budget of sampled
    completions (``max_completions``); the records of its metrics.jsonl. Cached per process."""
    from ladder.rungs import grpo
    from ladder.viz.lm_lab import quiet_run

    out = Path(tempfile.mkdtemp(prefix=f"ladder-league-{method}-"))
    overrides = {"steps": 10**6, "max_completions": max_completions, "prompts_per_step": prompts_per_step,
                 "eval_size": eval_size, "eval_every": eval_every, "print_samples": 0, "seed": seed}
    cfg = grpo.Config(**{**grpo.PRESETS["tiny"], **grpo.ALGOS[method], **overrides}, out=str(out / "run"),
                      progress=False)
    try:
        with quiet_run():
            summary = grpo.train(cfg)
        records = [json.loads(line) for line in open(out / "run" / "metrics.jsonl")]
    finally:
        shutil.rmtree(out, ignore_errors=True)
    curve = [(0, summary["accuracy_before"])] + [(r["completions_total"], r["eval_accuracy"]) for r in records
                                                 if "eval_accuracy" in r]
    return {"method": method, "flags": grpo.ALGOS[method], "completions": [r["completions_total"] for r in records],
            "reward": [r["reward"] for r in records], "kl_ref": [r.get("kl_ref", 0.0) for r in records],
            "eval_accuracy": curve, "accuracy_before": summary["accuracy_before"],
            "accuracy_after": summary["accuracy_after"], "updates": summary["steps"],
            "completions_total": summary["completions"], "wall_s": summary["wall_s"]}


def league(methods=("grpo", "dapo", "rloo"), max_completions: int = 192, prompts_per_step: int = 4,
           eval_size: int = 32, eval_every: int = 2, seed: int = 0) -> dict:
    """{method: ``league_run``} for each ``--algo`` bundle, all at the same budget."""
    return {m: league_run(m, max_completions, prompts_per_step, eval_size, eval_every, seed) for m in methods}


def league_table(runs: dict) -> str:
    rows = ["| method | acc before | acc after | updates | completions | wall s |", "|---|---:|---:|---:|---:|---:|"]
    for m, r in runs.items():
        rows.append(f"| {m} | {r['accuracy_before']:.3f} | {r['accuracy_after']:.3f} | {r['updates']} | "
                    f"{r['completions_total']} | {r['wall_s']:.0f} |")
    return "\n".join(rows)


def league_view(methods=("grpo", "dapo", "rloo"), max_completions: int = 192, prompts_per_step: int = 4,
                eval_size: int = 32, eval_every: int = 2, seed: int = 0) -> View:
    """The methods side by side against completions sampled; pick the metric and the method to highlight."""
    runs = league(tuple(methods), max_completions, prompts_per_step, eval_size, eval_every, seed)
    controls = {
        "metric": widgets.ToggleButtons(options=[(v, k) for k, v in LEAGUE_METRICS.items()], value="eval_accuracy",
                                        description="metric", style={"button_width": "230px"}),
        "highlight": widgets.Dropdown(options=list(runs), value=list(runs)[0], description="highlight"),
    }

    def draw(v: dict):
        fig = Figure(figsize=(11, 3.4))
        ax = fig.add_subplot(1, 2, 1)
        metric = v["metric"]
        for i, (m, r) in enumerate(runs.items()):
            if metric == "eval_accuracy":
                xs, ys = zip(*r["eval_accuracy"])
            else:
                xs, ys = r["completions"], r[metric]
            lw = 2.5 if m == v["highlight"] else 1.2
            ax.plot(xs, ys, "o-", color=f"C{i}", lw=lw, ms=4, label=m)
        ax.set_xlabel("completions sampled")
        ax.set_title(LEAGUE_METRICS[metric], fontsize=9)
        ax.legend(fontsize=7)
        ax = fig.add_subplot(1, 2, 2)
        names = list(runs)
        ax.bar(np.arange(len(names)) - 0.2, [runs[m]["accuracy_before"] for m in names], 0.4, label="before",
               color="0.7")
        ax.bar(np.arange(len(names)) + 0.2, [runs[m]["accuracy_after"] for m in names], 0.4, label="after",
               color=[f"C{i}" for i in range(len(names))])
        ax.set_xticks(np.arange(len(names)))
        ax.set_xticklabels(names)
        ax.set_ylim(0, 1)
        ax.set_title(f"greedy accuracy on {eval_size} held-out sums, after {max_completions} completions", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        r = runs[v["highlight"]]
        data = {"runs": runs, "metric": metric, "highlight": v["highlight"], "table": league_table(runs),
                "summary": f"{v['highlight']}: flags {r['flags']}; accuracy {r['accuracy_before']:.3f} → "
                           f"{r['accuracy_after']:.3f} in {r['updates']} updates"}
        return fig, data

    return View(controls, draw, f"The league: {', '.join(runs)} at {max_completions} completions each")
