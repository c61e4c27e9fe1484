"""Notebook 6's bookkeeping sections: TRL's names on ladder's, and TRL's GRPO schedule on ladder's μ and minibatches.

Every number here is computed, none is typed in:

    trl_map_markdown    ``ladder.trl.map`` as Markdown tables: TRL name → ladder option → core function
    trl_schedule        TRL's GRPOTrainer: which generation batch and which π_old every micro-step uses, and the
                        ladder configuration (μ, num_minibatches, P) doing the same work — a pure function

and the view ``schedule_view`` (a ``View``: ``.controls``, ``.data``, ``.figure``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from ladder.viz._widget import View
from ladder.viz.views import _SLIDER

# ------------------------------------------------------------------------------------------------- the map
MAP_CLASSES = {"GRPOConfig": "TRL's GRPOConfig → the grpo rung", "RLOOConfig": "TRL's RLOOConfig → grpo --algo rloo",
               "PPOConfig": "classic PPOConfig (TRL ≤ 0.11, the RLHF articles) → the ppo-sentiment rung"}


def _flag(option: str | None) -> str:
    return "—" if option is None else f"`--{option.replace('_', '-')}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def trl_map_rows(trl_class: str) -> list[dict]:
    """The rows of ``ladder.trl.map`` for one TRL class: TRL name, ladder flag, core function, note."""
    from ladder.trl import map as trl_map

    return [{"trl": "—" if r.trl_field is None else f"`{r.trl_field}`",
             "ladder": f"{r.ladder_rung} {_flag(r.ladder_option)}",
             "core": "—" if r.core_function is None else f"`core.{r.core_function}`", "note": r.note}
            for r in trl_map.rows(trl_class)]


def trl_map_markdown(classes=tuple(MAP_CLASSES)) -> str:
    """``ladder.trl.map`` as Markdown tables, one per TRL class: TRL name → ladder option → core function."""
    parts = []
    for cls in classes:
        rows = trl_map_rows(cls)
        lines = [f"**{MAP_CLASSES.get(cls, cls)}** ({len(rows)} rows)", "",
                 "| TRL | ladder | core | note |", "|---|---|---|---|"]
        lines += [f"| {r['trl']} | {r['ladder']} | {r['core']} | {_cell(r['note'])} |" for r in rows]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)



# ------------------------------------------------------------------------------------------- the schedule
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
    ``generate_every``, ``computes_old_logp`` (TRL 1.16's rule without vLLM; with vLLM and its default
    importance-sampling correction TRL always computes it), ``off_policy`` (any micro-step with π_θ ≠ π_old: the
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
        _label(ax, ms.micro + 0.5, 2.55, f"g{ms.generation}·s{ms.slice}" + (f"·i{ms.iteration}" if s["num_iterations"]
                                                                            > 1 else ""), 1 / n)
        _label(ax, ms.micro + 0.5, 1.75, f"{ms.old_version}→{ms.theta_version}", 1 / n,
               color="C3" if ms.stale else "k")
        if ms.micro == ms.generation * s["generate_every"]:
            ax.plot(ms.micro + 0.5, 3.15, "v", color="k", ms=7)
    if s["ladder_steps"] is not None:
        for st in s["ladder_steps"]:
            stale = st["theta_version"] != st["old_version"]
            ax.add_patch(_rect(st["step"] * gas, 0.3, f"C{st['update'] % 10}", width=gas,
                               hatch="///" if stale else None))
            label = f"u{st['update']}·p{st['pass']}" + (f"·mb{st['minibatch']}" if s["ladder"]["num_minibatches"] > 1
                                                         else "")
            _label(ax, st["step"] * gas + gas / 2, 0.75, label, gas / n)
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


_AXES_WIDTH_PT = 12 * 72 * 0.8      # the timeline's axes, about 80 % of the 12-inch figure


def _label(ax, x: float, y: float, text: str, share: float, **kw) -> None:
    """A box's label: across the box if it fits (``share`` = the box's share of the axes' width), else upright,
    smaller, and none at all where even that would not fit."""
    width = share * _AXES_WIDTH_PT
    if len(text) * 7 * 0.6 <= width:
        ax.text(x, y, text, ha="center", va="center", fontsize=7, **kw)
    elif width >= 5:
        ax.text(x, y, text, ha="center", va="center", fontsize=min(7.0, width / 1.3), rotation=90, **kw)


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
