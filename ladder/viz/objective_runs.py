"""Notebook 6b's runs of the tiny grpo preset: §4 the fifth policy (π_rollout k updates behind π_old, its weights and
their statistics) and §5 the bundles ``--algo`` sets, run with μ passes so that the objectives differ.

    staleness_view      each sampler statistic against the update, one curve per lag k
    staleness_markdown  per k, each statistic over the updates that ran at the full lag
    off_policy_run      one method's run with μ passes: reward, KL to π_ref, accuracy before and after
    bundles_markdown    the flags of each bundle, its policy term, the ratio it reads, its aggregation and β
"""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
from pathlib import Path

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from ladder.rungs import grpo
from ladder.viz._widget import View
from ladder.viz.lm_lab import quiet_run

# ------------------------------------------------------------------------------- 4 · the fifth policy: staleness
STALENESS_METRICS = {"sampler/logp_diff_mean": "mean |log π_old − log π_rollout| over the tokens",
                     "sampler/logp_diff_max": "max |log π_old − log π_rollout|",
                     "sampler/is_ratio_min": "smallest w = π_old/π_rollout after truncation",
                     "sampler/is_ratio_max": "largest w after truncation (≤ C_max)",
                     "sampler/corrected_frac": "share of tokens whose w token_truncate changed"}


def _train(overrides: dict, prefix: str) -> tuple[dict, list[dict]]:
    """(summary, metrics.jsonl records) of ``grpo.train`` on the tiny preset with ``overrides``, in a temporary
    directory that is removed."""
    out = Path(tempfile.mkdtemp(prefix=prefix))
    cfg = grpo.Config(**{**grpo.PRESETS["tiny"], **overrides}, out=str(out / "run"), progress=False)
    try:
        with quiet_run():
            summary = grpo.train(cfg)
        return summary, [json.loads(line) for line in open(out / "run" / "metrics.jsonl")]
    finally:
        shutil.rmtree(out, ignore_errors=True)


@functools.lru_cache(maxsize=4)
def staleness_run(k: int, steps: int = 10, clip_max: float = 1.2, seed: int = 0) -> list[dict]:
    """The records of the tiny preset (4 prompts × 8) for ``steps`` updates with ``--max-staleness k
    --sampler-correction token_truncate --sampler-clip-max clip_max``."""
    overrides = {"steps": steps, "prompts_per_step": 4, "eval_size": 8, "eval_every": 0, "print_samples": 0,
                 "seed": seed, "max_staleness": k, "sampler_correction": "token_truncate",
                 "sampler_clip_max": clip_max}
    return _train(overrides, f"ladder-stale-{k}-")[1]


@functools.lru_cache(maxsize=8)
def off_policy_run(method: str, mu: int = 2, max_completions: int = 192, eval_size: int = 32, seed: int = 0) -> dict:
    """``algo_league.league_run``'s run with μ passes over each batch: after the first optimiser step r ≠ 1, where
    the objectives differ. {"reward", "kl_ref", "accuracy_before", "accuracy_after", "updates", "wall_s"}."""
    overrides = {"steps": 10**6, "max_completions": max_completions, "prompts_per_step": 4, "eval_size": eval_size,
                 "eval_every": 0, "print_samples": 0, "seed": seed, "mu": mu}
    summary, records = _train({**grpo.ALGOS[method], **overrides}, f"ladder-mu-{method}-")
    return {"reward": [r["reward"] for r in records], "kl_ref": [r.get("kl_ref", 0.0) for r in records],
            "clip_frac": [r.get("clip_frac", 0.0) for r in records], "accuracy_before": summary["accuracy_before"],
            "accuracy_after": summary["accuracy_after"], "updates": summary["steps"], "wall_s": summary["wall_s"]}


def ratio_read(term: str, ratio_level: str) -> str:
    """The ratio a bundle's policy term reads. VESPO's φ (``gamma_weighted``) builds its own sequence ratio
    w_i = Π_t ρ_t from the token ratios, which is why its bundle keeps ``ratio_level=token`` (the rung refuses
    ``sequence`` with it); the others read ρ_t per token, or GSPO's s_i per completion at ``ratio_level=sequence``."""
    if term == "gamma_weighted":
        return "w_i = Π_t ρ_t, one per completion, from the token ratios"
    return "ρ_t, one per token" if ratio_level == "token" else "s_i, one per completion"


def bundles_markdown(methods=("grpo", "sapo", "vespo", "gdpo")) -> str:
    """``grpo.ALGOS`` as Markdown: the flags of each bundle, the policy term (its ``core.objectives`` spec's name), the
    ratio it reads (``ratio_read``) and the aggregation its loss type picks (``grpo.LOSS_TYPES``), and its KL
    coefficient β."""
    from ladder.rungs.grpo.loss_types import LOSS_TYPES
    from ladder.specs import option_defaults

    defaults = option_defaults(grpo.Config)
    rows = ["| method | flags `--algo` sets | policy term | the ratio it reads | aggregation | β |",
            "|---|---|---|---|---|---:|"]
    for name in methods:
        flags = {**{k: defaults[k] for k in ("loss_type", "kl_coef", "ratio_level")}, **grpo.ALGOS[name]}
        loss_type = LOSS_TYPES[flags["loss_type"]]
        term, aggregation = loss_type.objective.name, loss_type.aggregation
        listed = ", ".join(f"`{k}={v}`" for k, v in grpo.ALGOS[name].items())
        ratio = ratio_read(term, flags["ratio_level"])
        rows.append(f"| {name} | {listed} | `{term}` | {ratio} | `{aggregation}` | {flags['kl_coef']:g} |")
    return "\n".join(rows)


def largest_gap(runs: dict, a: str, b: str, key: str) -> float:
    """max over the updates of |runs[a][key] − runs[b][key]|: 0 when two runs took the same steps."""
    return max(abs(x - y) for x, y in zip(runs[a][key], runs[b][key]))


def staleness_runs(ks=(0, 1, 2, 4), steps: int = 10, clip_max: float = 1.2, seed: int = 0) -> dict:
    return {k: staleness_run(k, steps, clip_max, seed) for k in ks}


OVER_UPDATES = {"sampler/logp_diff_max": ("max", np.max), "sampler/is_ratio_min": ("min", np.min),
                "sampler/is_ratio_max": ("max", np.max)}   # the other metrics: the mean over the updates


def staleness_markdown(runs: dict) -> str:
    """Per k, each metric over the updates that ran at the full lag k: the max of the per-update maxima, the min of
    the minima, the mean of the means and shares (so a column never looks past what one update logged)."""
    reductions = {m: OVER_UPDATES.get(m, ("mean", np.mean)) for m in STALENESS_METRICS}
    rows = ["| k | updates at lag k | " + " | ".join(f"{how} of `{m}`" for m, (how, _) in reductions.items()) + " |",
            "|---:|---:|" + "---:|" * len(STALENESS_METRICS)]
    for k, records in runs.items():
        at_k = [r for r in records if r.get("sampling/staleness", 0.0) == k]
        values = [reduce([r[m] for r in at_k]) for m, (_, reduce) in reductions.items()]
        rows.append(f"| {k} | {len(at_k)} | " + " | ".join(f"{x:.4g}" for x in values) + " |")
    return "\n".join(rows)


def staleness_view(ks=(0, 1, 2, 4), steps: int = 10, clip_max: float = 1.2) -> View:
    """Each metric of the sampler's weight against the update, one curve per k."""
    runs = staleness_runs(tuple(ks), steps, clip_max)
    controls = {"metric": widgets.Dropdown(options=[(v, k) for k, v in STALENESS_METRICS.items()],
                                           value="sampler/logp_diff_mean", description="metric",
                                           layout=widgets.Layout(width="480px"))}

    def draw(v: dict):
        fig = Figure(figsize=(11, 3.2))
        ax = fig.add_subplot(1, 1, 1)
        for i, (k, records) in enumerate(runs.items()):
            ax.plot([r["step"] for r in records], [r[v["metric"]] for r in records], "o-", color=f"C{i}",
                    ms=4, label=f"k = {k}")
        ax.set_xlabel("update")
        ax.set_title(f"{STALENESS_METRICS[v['metric']]} (token_truncate, C_max = {clip_max:g})", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        last = {k: records[-1][v["metric"]] for k, records in runs.items()}
        return fig, {"runs": runs, "last": last, "table": staleness_markdown(runs),
                     "summary": f"{v['metric']} at the last update: "
                                + ", ".join(f"k = {k}: {x:.4f}" for k, x in last.items())}

    return View(controls, draw, f"π_rollout k updates behind π_old: {steps} updates of the tiny preset per k")
