"""Notebook 9's figures and its widget over β, drawn from ``preference_lab``'s runs and numbers.

    reward_model_figure(records, summary)   held-out accuracy (labeller's order, true order), length correlation,
                                            and the calibration diagram of σ(r_w − r_l) — as PNG bytes
    overoptimisation_figure(ppo)            r_φ's score and the true reward against KL(π_θ‖π_ref), one line per β
                                            — as PNG bytes
    beta_view(samples, ppo)                 β → the KL-regularised optimum over samples of π_ref: where it sits on the
                                            curve of E[r*] and E[r_φ] against KL, and its implicit reward against r_φ
    dpo_figure(records, summary, pairs)     DPO's implicit rewards of the chosen and rejected (both can fall while the
                                            margin grows), and its sampled completions' length, hedges and repeats
    study_figure(study)                     the true reward against KL, every method on seeds 0–2 (native kernels)
"""

from __future__ import annotations

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ladder.viz._widget import View, render_png
from ladder.viz.preference_lab import optimum, smoothed
from ladder.viz.preference_study import kl_and_true

BETAS = [round(10 ** (e / 8), 4) for e in range(-20, 9)]  # 0.0032 … 10, eight to a decade


def reward_model_figure(records: list[dict], summary: dict) -> bytes:
    fig = Figure(figsize=(11, 3.2))
    left, mid, right = (fig.add_subplot(1, 3, i) for i in (1, 2, 3))
    evals = [{"step": 0, **summary["eval_before"]}] + [r for r in records if "eval_accuracy" in r]
    steps = [r["step"] for r in evals]
    left.plot(steps, [r["eval_accuracy"] for r in evals], "o-", label="the labeller's order")
    left.plot(steps, [r["eval_score_accuracy"] for r in evals], "o-", label="the true order")
    left.set(title="held-out pairs ranked right by r_φ", xlabel="update", ylim=(0, 1))
    left.legend(fontsize=8)
    mid.plot(steps, [r["eval_length_corr"] for r in evals], "o-", color="C2")
    mid.set(title="correlation of r_φ with length (words)", xlabel="update")
    table = summary["calibration"]
    right.plot([0, 1], [0, 1], ":", color="grey")
    right.plot([row["predicted"] for row in table], [row["observed"] for row in table], "o-", color="C3")
    right.set(title="calibration, held out", xlabel="predicted σ(r_a − r_b)", ylabel="observed share a ≻ b")
    fig.tight_layout()
    return render_png(fig)


def overoptimisation_figure(ppo: dict[float, list[dict]]) -> bytes:
    fig = Figure(figsize=(11, 3.4))
    proxy_ax, true_ax = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for i, (beta, records) in enumerate(ppo.items()):
        kl = smoothed(records, "kl_ref")
        proxy_ax.plot(kl, smoothed(records, "score_mean"), color=f"C{i}", label=f"β = {beta:g}")
        true_ax.plot(kl, smoothed(records, "true_reward_mean"), color=f"C{i}", label=f"β = {beta:g}")
    proxy_ax.set(title="what PPO optimises: r_φ's score", xlabel="KL(π_θ‖π_ref), nats per completion")
    true_ax.set(title="what we wanted: the true reward r*", xlabel="KL(π_θ‖π_ref), nats per completion")
    for ax in (proxy_ax, true_ax):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return render_png(fig)


def beta_view(samples: dict, ppo: dict[float, list[dict]]) -> View:
    """A slider over β: the optimum π*_β ∝ π_ref·exp(r_φ/β) over the held-out samples of π_ref."""
    curve = [optimum(samples, beta) for beta in BETAS]
    controls = {"beta": widgets.SelectionSlider(options=BETAS, value=0.1, description="β",
                                                layout=widgets.Layout(width="480px"))}

    def draw(v: dict):
        point = optimum(samples, v["beta"])
        fig = Figure(figsize=(11, 3.6))
        left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
        left.plot([c["kl"] for c in curve], [c["truth"] for c in curve], "-", color="black",
                  label="π*_β over the samples: E[r*]")
        for i, (beta, records) in enumerate(ppo.items()):   # the colours of overoptimisation_figure
            left.plot(smoothed(records, "kl_ref"), smoothed(records, "true_reward_mean"), color=f"C{i}",
                      alpha=0.7, label=f"PPO, β = {beta:g}: r*")
        left.plot([point["kl"]], [point["truth"]], "o", color="black", ms=9)
        left.set(title="the true reward against KL", xlabel="nats per completion: π*'s KL to π̂_ref (the samples), "
                 "PPO's to π_ref")
        left.legend(fontsize=8)
        right.scatter(samples["proxy"], point["implicit"], s=4, alpha=0.4)
        right.set(title=f"π*_β's implicit reward β·log π*/π̂_ref (β = {v['beta']:g})", xlabel="r_φ(x, y)",
                  ylabel="β·log π*(y|x)/π̂_ref(y|x)")
        fig.tight_layout()
        gap = samples["proxy"] - point["implicit"]
        return fig, {"point": {k: point[k] for k in ("beta", "kl", "proxy", "truth")}, "curve": curve,
                     "summary": f"β = {v['beta']:g}: KL(π*‖π̂_ref) = {point['kl']:.2f} nats (at most log n = "
                                f"{point['log_n']:.2f} on average), E[r_φ] = "
                                f"{point['proxy']:+.2f}, E[r*] = {point['truth']:+.2f}; r_φ − implicit reward = "
                                f"β·log Z(x) ranges over {gap.min():+.2f} … {gap.max():+.2f}, one value per prompt "
                                f"({torch.unique(samples['prompt']).numel()} prompts)"}

    return View(controls, draw, "the KL-regularised optimum over 1,000 samples of π_ref, as β moves")


def dpo_figure(records: list[dict], summary: dict, pairs: dict) -> bytes:
    """Left: r̂(y_w), r̂(y_l) and their gap on the training batches (5-update means). Middle and right: the sampled
    completions on held-out prompts at each evaluation — tokens and words; hedged and padded shares, beside the
    pairs' chosen completions (dashed)."""
    fig = Figure(figsize=(12, 3.4))
    left, mid, right = (fig.add_subplot(1, 3, i) for i in (1, 2, 3))
    steps = [r["step"] for r in records][4:]
    for key, label in (("rewards/chosen", "r̂(y_w), chosen"), ("rewards/rejected", "r̂(y_l), rejected"),
                       ("rewards/margins", "r̂(y_w) − r̂(y_l)")):
        left.plot(steps, smoothed(records, key), label=label)
    left.axhline(0, color="grey", lw=0.8)
    left.set(title="implicit reward β·log π_θ/π_ref, training pairs", xlabel="update")
    left.legend(fontsize=8)
    evals = [{"step": 0, **summary["eval_before"]}] + [r for r in records if "words_mean" in r]
    at = [r["step"] for r in evals]
    mid.plot(at, [r["response_length"] for r in evals], "o-", label="tokens")
    mid.plot(at, [r["words_mean"] for r in evals], "o-", label="words")
    mid.axhline(pairs["chosen"]["words_mean"], ls="--", color="C1", lw=0.8, label="the chosen pairs' words")
    mid.set(title="sampled completions: length (mean)", xlabel="update")
    mid.legend(fontsize=8)
    for i, (key, label) in enumerate((("hedged_share", "hedge with a 'but'"), ("padded_share", "repeat a word"))):
        right.plot(at, [r[key] for r in evals], "o-", color=f"C{i + 3}", label=label)
        right.axhline(pairs["chosen"][key], ls="--", color=f"C{i + 3}", lw=0.8)
    right.set(title="hedges, repeats (dashed: chosen pairs)", xlabel="update", ylabel="share of samples",
              ylim=(0, 1))
    right.legend(fontsize=8)
    fig.tight_layout()
    return render_png(fig)


def study_figure(study: list[dict]) -> bytes:
    """r* against KL(π_θ‖π_ref) in nats per completion, one line per run of the native kernels, a colour per method."""
    fig = Figure(figsize=(9, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    colours: dict[str, str] = {}
    for run in (r for r in study if r["variant"] == "native"):
        colour = colours.setdefault(run["method"], f"C{len(colours)}")
        kl, true = kl_and_true(run)
        ax.plot(kl, true, color=colour, alpha=0.8, marker="o" if run["kl_key"] == "sample_kl" else None, ms=3,
                label=run["method"] if run["seed"] == min(r["seed"] for r in study) else None)
    ax.set(title="the true reward against KL, seeds 0–2 (one line each)", ylabel="r* (mean)",
           xlabel="KL(π_θ‖π_ref), nats per completion (PPO: 5-update means of its batches; DPO: its evaluations)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return render_png(fig)
