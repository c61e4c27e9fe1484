"""The language-model views: β's reward-vs-KL trade-off (RLHF-PPO) and μ passes on one GRPO batch."""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from ladder.viz import lm_lab
from ladder.viz._widget import View
from ladder.viz.views import _SLIDER, mu_figure


# ------------------------------------------------------------------------------------- (e) β trade-off
def _samples_html(run: dict, steps: int) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(s['prompt'])}</td><td>{html.escape(s['before'])}</td><td>{s['before_score']:+.2f}</td>"
        f"<td>{html.escape(s['after'])}</td><td>{s['after_score']:+.2f}</td></tr>" for s in run["samples"])
    return (f"<b>β = {run['beta']:g}: the same prompts and sampling seed before training and after all {steps} "
            f"updates</b> (mean score {run['eval_score_before']:+.2f} → {run['eval_score_after']:+.2f})"
            "<table><tr><th>prompt</th><th>before</th><th>score</th><th>after</th><th>score</th></tr>"
            f"{rows}</table>")


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
        ax_trade, ax_kl, ax_score = (fig.add_subplot(1, 3, i) for i in (1, 2, 3))
        for i, b in enumerate(betas):
            run = runs[b]
            kl, score = np.asarray(run["kl"][:s]), np.asarray(run["score"][:s])
            kl_avg, score_avg = lm_lab.trailing_mean(kl, window), lm_lab.trailing_mean(score, window)
            reward_avg = lm_lab.trailing_mean(run["reward"][:s], window)
            data["runs"][b] = {"step": run["step"][:s], "kl": kl, "score": score, "kl_avg": kl_avg,
                               "score_avg": score_avg, "reward_avg": reward_avg,
                               "kl_end": float(kl_avg[-1]), "score_end": float(score_avg[-1]),
                               "reward_end": float(reward_avg[-1])}
            lw, alpha = (2.5, 1.0) if b == chosen else (1.2, 0.6)
            steps_x = np.arange(1, s + 1)
            ax_trade.plot(kl_avg, score_avg, color=f"C{i}", lw=lw, alpha=alpha, label=f"β = {b:g}")
            ax_trade.plot(kl_avg[-1], score_avg[-1], "o", color=f"C{i}", ms=8 if b == chosen else 5)
            ax_kl.plot(steps_x, kl, color=f"C{i}", lw=0.6, alpha=0.3)
            ax_kl.plot(steps_x, kl_avg, color=f"C{i}", lw=lw, alpha=alpha, label=f"β = {b:g}")
            ax_score.plot(steps_x, score, color=f"C{i}", lw=0.6, alpha=0.3)
            ax_score.plot(steps_x, score_avg, color=f"C{i}", lw=lw, alpha=alpha, label=f"score, β = {b:g}")
            if b == chosen:
                ax_score.plot(steps_x, reward_avg, "--", color=f"C{i}", lw=1.5, label="score − β·KL")
        ax_trade.set_xscale("symlog", linthresh=0.1)
        ax_trade.set_xlabel("KL(π_θ‖π_ref) per sequence (symlog)")
        ax_trade.set_ylabel("reward-model score")
        ax_trade.set_title(f"the trade-off after {s} updates")
        ax_trade.legend(fontsize=7)
        ax_kl.set_yscale("symlog", linthresh=0.1)
        ax_kl.set_title("KL to π_ref per update (symlog)")
        ax_kl.set_xlabel("update")
        ax_score.set_title("reward-model score per update")
        ax_score.set_xlabel("update")
        ax_score.legend(fontsize=7)
        fig.tight_layout()
        samples.value = _samples_html(runs[chosen], steps)
        data["samples"] = runs[chosen]["samples"]
        data["summary"] = f"after {s} updates (mean of the last {window}): " + " | ".join(
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
        fig = mu_figure(run, eps, ratio_title=f"ratio r = π_θ/π_old over {run['num_tokens']} completion tokens",
                        kl_title="exact KLs per token, over the vocabulary", log_counts=True, bands=True)
        run["summary"] = (f"last pass: ratio std {run['ratio_std'][-1]:.3f}, clip fraction "
                          f"{run['clip_frac_after'][-1]:.3f}, KL(π_θ‖π_old) {run['kl_old_exact'][-1]:.4f}, "
                          f"KL(π_θ‖π_ref) exact {run['kl_ref_exact'][-1]:.4f} · biased {run['kl_ref_biased'][-1]:.4f}"
                          f" · corrected {run['kl_ref_corrected'][-1]:.4f} "
                          f"({run['frac_reward_zero_std']:.0%} of the groups have Â = 0)")
        return fig, run

    return View(controls, draw, "μ passes over one GRPO batch (tiny model, QLoRA)" if qlora
                else "μ passes over one GRPO batch (tiny model, LoRA)")
