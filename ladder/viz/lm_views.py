"""The language-model views: per-token rewards and GAE on one RLHF completion, the run's learning curves,
β's reward-vs-KL trade-off (RLHF-PPO) and μ passes on one GRPO batch."""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ladder.viz import lm_lab, lm_tokens
from ladder.viz._widget import View, render_png
from ladder.viz.views import _SLIDER, mu_figure


# ------------------------------------------------------------------------- (d) per-token rewards and GAE
def gae_tokens_view(row: int = 0, gamma: float | None = None, lam: float | None = None, seed: int = 0,
                    updates: int = 10, kl_coef: float = 0.2, batch_size: int = 16) -> View:
    """One real completion of the tiny RLHF policy through r_t = −β·KL_t + [t = last]·score and GAE.

    The batch is ``lm_tokens.ppo_batch`` (the rung's policy after ``updates`` updates at a fixed β); the numbers
    are ``lm_tokens.token_table``. Controls: which completion, γ and λ (default: the preset's). Panels: the
    per-token rewards r_t with the value V_t; δ_t and Â_t (before whitening) with the return R_t = Â_t + V_t.
    """
    fixed = lm_tokens.ppo_batch(seed, updates, kl_coef, batch_size)
    controls = {
        "row": widgets.IntSlider(value=row, min=0, max=len(fixed.tokens) - 1, description="completion", **_SLIDER),
        "gamma": widgets.FloatSlider(value=fixed.cfg.gamma if gamma is None else gamma, min=0.0, max=1.0, step=0.05,
                                     description="γ", **_SLIDER),
        "lam": widgets.FloatSlider(value=fixed.cfg.gae_lambda if lam is None else lam, min=0.0, max=1.0, step=0.05,
                                   description="λ", **_SLIDER),
    }

    def draw(v: dict):
        table = lm_tokens.token_table(fixed, v["row"], v["gamma"], v["lam"])
        t = np.arange(len(table["token"]))
        labels = [tok.replace("\n", "⏎") for tok in table["token"]]
        fig = Figure(figsize=(12, 3.8))
        ax_r, ax_a = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
        ax_r.bar(t, table["reward"], color="C0", label="r_t = −β·KL_t (+ score at the last token)")
        ax_r.plot(t, table["value"], "o-", color="C1", label="V_t (value head)")
        ax_r.set_title(f"rewards and values (β = {table['kl_coef']:g}, score {table['score']:+.3f})")
        ax_a.bar(t - 0.2, table["delta"], width=0.4, color="C2", label="δ_t")
        ax_a.bar(t + 0.2, table["advantage"], width=0.4, color="C3", label="Â_t (before whitening)")
        ax_a.plot(t, table["ret"], "k.--", lw=1, label="R_t = Â_t + V_t")
        ax_a.set_title(f"GAE with γ = {table['gamma']:g}, λ = {table['lam']:g}")
        for ax in (ax_r, ax_a):
            ax.axhline(0, color="0.6", lw=0.8)
            ax.set_xticks(t, labels, rotation=60, ha="right", fontsize=8)
            ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        table["summary"] = (f"Â_0 = {table['advantage'][0]:+.3f} (with γ = λ = 1 it is Σ_t r_t − V_0 = "
                            f"{sum(table['reward']) - table['value'][0]:+.3f});  last token: Â = r − V = "
                            f"{table['advantage'][-1]:+.3f} for every γ, λ")
        return fig, table

    return View(controls, draw, "per-token rewards and GAE on one completion (RLHF-PPO, tiny sentiment preset)")


def learning_curves(records: list[dict], curves: dict[str, str] | None = None) -> bytes:
    """PNG of a run's metrics per update (``metrics.jsonl`` records), one panel per key; updates on integer ticks."""
    curves = curves or {"score_mean": "reward-model score (batch mean)", "reward_mean": "score − β·Σ_t KL_t",
                        "kl_ref": "KL to π_ref per sequence Σ_t KL_t", "clip_frac": "clip fraction",
                        "value_loss": "value loss", "explained_variance": "explained variance"}
    fig = Figure(figsize=(12, 5.2))
    steps = [r["step"] for r in records]
    for i, (key, title) in enumerate(curves.items(), 1):
        ax = fig.add_subplot(2, (len(curves) + 1) // 2, i)
        ax.plot(steps, [r[key] for r in records], "o-", ms=3)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("update")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return render_png(fig)


# ------------------------------------------------------------------------------------- (e) β trade-off
def _samples_html(run: dict, steps: int) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(s['prompt'])}</td><td>{html.escape(s['before'])}</td><td>{s['before_score']:+.2f}</td>"
        f"<td>{html.escape(s['after'])}</td><td>{s['after_score']:+.2f}</td></tr>" for s in run["samples"])
    return (f"<b>β = {run['beta']:g}: the same prompts and sampling seed before training and after all {steps} "
            f"updates</b> (mean score of these {len(run['samples'])} prompts {run['eval_score_before']:+.2f} → "
            f"{run['eval_score_after']:+.2f})"
            "<table><tr><th>prompt</th><th>before</th><th>score</th><th>after</th><th>score</th></tr>"
            f"{rows}</table>")


def _tradeoff_run(run: dict, s: int, window: int) -> dict:
    """One β's first ``s`` updates: raw KL and score, and their trailing means over ``window`` updates."""
    kl, score = np.asarray(run["kl"][:s]), np.asarray(run["score"][:s])
    kl_avg, score_avg = lm_lab.trailing_mean(kl, window), lm_lab.trailing_mean(score, window)
    reward_avg = lm_lab.trailing_mean(run["reward"][:s], window)
    return {"step": run["step"][:s], "kl": kl, "score": score, "kl_avg": kl_avg, "score_avg": score_avg,
            "reward_avg": reward_avg, "kl_end": float(kl_avg[-1]), "score_end": float(score_avg[-1]),
            "reward_end": float(reward_avg[-1])}


def _draw_tradeoff_run(axes, i: int, b: float, d: dict, chosen: bool) -> None:
    """One β's curves on the three panels (trade-off, KL, score), the chosen β drawn heavier."""
    ax_trade, ax_kl, ax_score = axes
    lw, alpha = (2.5, 1.0) if chosen else (1.2, 0.6)
    steps_x = np.arange(1, len(d["kl"]) + 1)
    ax_trade.plot(d["kl_avg"], d["score_avg"], color=f"C{i}", lw=lw, alpha=alpha, label=f"β = {b:g}")
    ax_trade.plot(d["kl_avg"][-1], d["score_avg"][-1], "o", color=f"C{i}", ms=8 if chosen else 5)
    ax_kl.plot(steps_x, d["kl"], color=f"C{i}", lw=0.6, alpha=0.3)
    ax_kl.plot(steps_x, d["kl_avg"], color=f"C{i}", lw=lw, alpha=alpha, label=f"β = {b:g}")
    ax_score.plot(steps_x, d["score"], color=f"C{i}", lw=0.6, alpha=0.3)
    ax_score.plot(steps_x, d["score_avg"], color=f"C{i}", lw=lw, alpha=alpha, label=f"score, β = {b:g}")
    if chosen:  # on top, in black: at β = 0 it lies exactly on the score curve
        ax_score.plot(steps_x, d["reward_avg"], "--", color="k", lw=1.3, zorder=5,
                      label=f"score − β·KL, β = {b:g}" + (" (= score)" if b == 0 else ""))


def _finish_tradeoff_axes(axes, kl_all: np.ndarray, s: int) -> None:
    """symlog KL axes that always show the ticks 0, 0.1 and 1; titles, labels and legends."""
    ax_trade, ax_kl, ax_score = axes
    kl_lim = (min(0.0, 1.1 * kl_all.min()), max(1.0, 1.1 * kl_all.max()))
    ax_trade.set_xscale("symlog", linthresh=0.1)
    ax_kl.set_yscale("symlog", linthresh=0.1)
    ax_trade.set_xlim(*kl_lim)
    ax_kl.set_ylim(*kl_lim)
    for axis in (ax_trade.xaxis, ax_kl.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
    ax_trade.set_xlabel("KL(π_θ‖π_ref) per sequence (symlog)")
    ax_trade.set_ylabel("reward-model score")
    ax_trade.set_title(f"the trade-off after {s} updates")
    ax_trade.legend(fontsize=7)
    ax_kl.set_title("KL to π_ref per update (symlog)")
    ax_score.set_title("reward-model score per update")
    for ax in (ax_kl, ax_score):
        ax.set_xlabel("update")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_score.legend(fontsize=7)


def kl_tradeoff_view(betas=(0.0, 0.2, 1.0), steps: int = 30, batch_size: int = 32, seed: int = 0,
                     window: int = 5) -> View:
    """RLHF-PPO on the tiny sentiment preset, once per fixed β: reward-model score against KL to π_ref.

    Each β is a real ``ppo_sentiment.train`` run of ``steps`` updates (``lm_lab.ppo_run``, cached);
    the per-token reward is r_t = −β·KL_t + [t = last]·score. Controls: which β to highlight (and
    show the before/after completions of), and how many updates to read along the curves. Panels:
    the path of each run in the (KL, score) plane, its per-sequence KL Σ_t KL_t per update, and its
    score per update. Curves are trailing means over ``window`` updates (raw values faint).
    """
    betas = tuple(float(b) for b in betas)
    runs = lm_lab.beta_sweep(betas, steps, batch_size, seed)
    controls = {
        "beta": widgets.ToggleButtons(options=[(f"β = {b:g}", b) for b in betas], value=betas[len(betas) // 2],
                                      description="β", style={"button_width": "70px"}),
        "steps": widgets.IntSlider(value=steps, min=1, max=steps, description="updates", **_SLIDER),
    }
    samples = widgets.HTML()

    def draw(v: dict):
        s, chosen = v["steps"], v["beta"]
        data = {"steps": s, "beta": chosen, "betas": list(betas), "runs": {}}
        fig = Figure(figsize=(12, 3.8))
        axes = tuple(fig.add_subplot(1, 3, i) for i in (1, 2, 3))
        for i, b in enumerate(betas):
            data["runs"][b] = _tradeoff_run(runs[b], s, window)
            _draw_tradeoff_run(axes, i, b, data["runs"][b], b == chosen)
        _finish_tradeoff_axes(axes, np.concatenate([data["runs"][b]["kl"] for b in betas]), s)
        fig.tight_layout()
        samples.value = _samples_html(runs[chosen], steps)
        data["samples"] = runs[chosen]["samples"]
        data["summary"] = f"after {s} updates, training batches (mean of the last {window}): " + " | ".join(
            f"β={b:g}: score {data['runs'][b]['score_end']:+.2f}, KL {data['runs'][b]['kl_end']:.2f}" for b in betas)
        return fig, data

    view = View(controls, draw, "β: reward-model score vs KL to π_ref (RLHF-PPO, tiny sentiment preset)")
    view.samples = samples
    view.children = (*view.children, samples)
    return view


# ------------------------------------------------------------------------------------------ (f) μ on the LM
def lm_mu_view(mu: int = 4, lr: float = 3e-4, clip_eps: float = 0.2, seed: int = 0, warmup_updates: int = 8,
               qlora: bool = True) -> View:
    """μ real passes of ``core.update`` over one fixed GRPO batch of the tiny QLoRA preset.

    Panels: the ratio π_θ/π_old over the batch's completion tokens after each pass; the clip fraction
    per pass; the exact KL(π_θ‖π_old) and KL(π_θ‖π_ref) per pass (sums over the vocabulary at every
    visited position); KL(π_θ‖π_ref) as the GRPO loss estimates it from the π_old samples with
    (corrected) and without (biased) the importance weight, next to the exact value, each with the
    band mean ± std it would fall in over fresh samples c_t ~ π_old at the same positions.
    """
    controls = {
        "mu": widgets.IntSlider(value=mu, min=1, max=8, description="μ (passes)", **_SLIDER),
        "lr": widgets.FloatLogSlider(value=lr, base=10, min=-5, max=-2, step=0.1, description="learning rate",
                                     readout_format=".1e", **_SLIDER),
        "clip_eps": widgets.FloatSlider(value=clip_eps, min=0.05, max=0.5, step=0.01, description="ε", **_SLIDER),
    }

    def draw(v: dict):
        n, eps = v["mu"], v["clip_eps"]
        run = lm_lab.lm_mu_passes(n, v["lr"], eps, seed=seed, warmup_updates=warmup_updates, qlora=qlora)
        run["ratio_std"] = [float(np.std(r)) for r in run["ratios"]]
        run["bias_biased"] = [b - e for b, e in zip(run["kl_ref_biased"], run["kl_ref_exact"])]
        run["bias_corrected"] = [c - e for c, e in zip(run["kl_ref_corrected"], run["kl_ref_exact"])]
        run["bias_biased_expected"] = [b - e for b, e in zip(run["kl_ref_biased_expected"], run["kl_ref_exact"])]
        fig = mu_figure(run, eps, ratio_title=f"ratio ρ_t(θ) = π_θ/π_old over {run['num_tokens']} completion tokens",
                        kl_title="exact KLs per token, over the vocabulary", log_counts=True, bands=True)
        run["summary"] = (f"last pass: ratio std {run['ratio_std'][-1]:.3f}, clip fraction "
                          f"{run['clip_frac_after'][-1]:.3f}, KL(π_θ‖π_old) {run['kl_old_exact'][-1]:.4f}, "
                          f"KL(π_θ‖π_ref) exact {run['kl_ref_exact'][-1]:.4f} · biased {run['kl_ref_biased'][-1]:.4f}"
                          f" · corrected {run['kl_ref_corrected'][-1]:.4f} "
                          f"({run['frac_reward_zero_std']:.0%} of the groups have Â = 0)")
        return fig, run

    return View(controls, draw, "μ passes over one GRPO batch (tiny model, QLoRA)" if qlora
                else "μ passes over one GRPO batch (tiny model, LoRA)")
