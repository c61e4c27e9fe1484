"""Notebook 6, the league: the ``--algo`` bundles trained by the real ``grpo`` rung at one budget of completions.

    algo_table          the ``--algo`` bundles as a Markdown table: the flags each method's paper sets
    loss_weights        what each ``--loss-type`` divides by at M minibatches and P processes: the weight of one
                        token in the gradient of the optimiser step that holds it (autograd through ``core.aggregate``
                        with the constant ``grpo.loss_normaliser`` gives the rung)
    league              {method: the records of one ``grpo.train`` run}, every method at the same number of sampled
                        completions

and the view ``league_view`` (a ``View``: ``.controls``, ``.data``, ``.figure``).
"""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from ladder import core
from ladder.viz._widget import View

LEAGUE_METRICS = {"eval_accuracy": "greedy held-out accuracy", "reward": "mean reward of the samples",
                  "kl_ref": "KL(π_θ‖π_ref) estimate"}


def algo_table(methods=None) -> str:
    """``grpo.ALGOS`` as Markdown: one row per ``--algo``, the flags it sets, and its ε against GRPO's."""
    from ladder.rungs import grpo

    default_eps = grpo.Config().ratio.clip_eps
    rows = ["| method | flags `--algo` sets | clip ε_low / ε_high | GRPO's ε ÷ its ε_high |", "|---|---|---|---:|"]
    for name in methods or grpo.ALGOS:
        flags = grpo.ALGOS[name]
        low = flags.get("clip_eps", default_eps)
        high = flags.get("clip_eps_high") or low
        objective = grpo.LOSS_TYPES[flags.get("loss_type", "grpo")].objective.name
        clipped = objective == "clipped"
        clip = f"{low:g} / {high:g}" if clipped else f"— ({objective}: no clip of the ratio)"
        ratio = f"{default_eps / high:.3g}×" if clipped else ""
        rows.append(f"| {name} | " + ", ".join(f"`{k}={v}`" for k, v in flags.items()) + f" | {clip} | {ratio} |")
    return "\n".join(rows)


def loss_weights(lengths: list[list[int]], num_minibatches: int, max_new_tokens: int) -> dict:
    """The weight ∂L/∂ℓ_t of one token's loss ℓ_t in the gradient of the optimiser step that holds it, per loss type.

    ``lengths[p]`` are the completion lengths on process p (the same number of rows on each); each process cuts its
    rows, in order, into ``num_minibatches`` = M minibatches, one optimiser step each. As in ``grpo.grpo_step``, the
    constant N of "sum_over_constant" comes from ``loss_normaliser`` (dapo, cispo: the real tokens of the whole
    update over all processes ÷ P; dr_grpo: this process's rows × L_max), ``core.update`` gives each minibatch N / M,
    ``core.aggregate`` computes the minibatch's loss, and the P processes average their gradients (÷ P).
    Returns {loss_type: [[w per row] per process]}, and "tokens" (the real tokens of the update).
    """
    from ladder.rungs.grpo import LOSS_TYPES, loss_normaliser

    P, M = len(lengths), num_minibatches
    if len({len(rows) for rows in lengths}) != 1 or len(lengths[0]) % M:
        raise ValueError(f"every process needs the same number of rows, divisible by M = {M}: {lengths}")
    tokens = sum(map(sum, lengths))
    out = {"tokens": tokens, "lengths": lengths, "num_minibatches": M, "max_new_tokens": max_new_tokens}
    for loss_type, registered in LOSS_TYPES.items():
        aggregation = registered.aggregation
        per_process = []
        for rows in lengths:
            mask = (torch.arange(max_new_tokens)[None] < torch.tensor(rows)[:, None]).double()
            n = loss_normaliser(loss_type, len(rows), max_new_tokens, tokens / P)
            weights = []
            for mb in mask.chunk(M):
                x = torch.zeros_like(mb, requires_grad=True)                  # ℓ_t: each token's loss
                loss = core.aggregate(x, mb, aggregation, None if n is None else n / M)
                weights += (torch.autograd.grad(loss, x)[0][:, 0] / P).tolist()  # ÷ P: the processes' average
            per_process.append(weights)
        out[loss_type] = per_process
    return out


def loss_weights_table(weights: dict) -> str:
    """``loss_weights`` as Markdown: one row per completion, each weight written 1/x (x: what its token's loss is
    divided by)."""
    from ladder.rungs.grpo.loss_types import LOSS_TYPES

    lengths, M = weights["lengths"], weights["num_minibatches"]
    rows = ["| process | minibatch | length | " + " | ".join(LOSS_TYPES) + " |",
            "|---:|---:|---:|" + "---:|" * len(LOSS_TYPES)]
    for p, lens in enumerate(lengths):
        per_mb = len(lens) // M
        for i, n in enumerate(lens):
            cells = " | ".join(f"1/{1 / weights[lt][p][i]:.4g}" for lt in LOSS_TYPES)
            rows.append(f"| {p} | {i // per_mb} | {n} | {cells} |")
    return "\n".join(rows)


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
        pos = np.arange(len(names))
        ax.bar(pos - 0.2, [runs[m]["accuracy_before"] for m in names], 0.4, label="before", color="0.7")
        ax.bar(pos + 0.2, [runs[m]["accuracy_after"] for m in names], 0.4, label="after",
               color=[f"C{i}" for i in range(len(names))])
        ax.set_xticks(pos)
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
