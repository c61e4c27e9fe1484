"""The views: each function returns a ``View`` (controls + figure + ``.data``) computed by the core."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ladder import core
from ladder.viz import cartpole_lab
from ladder.viz._widget import View

_SLIDER = {"continuous_update": False, "style": {"description_width": "initial"}}


def _objective(ratio: np.ndarray, advantage: float | np.ndarray, eps_low: float, eps_high: float) -> np.ndarray:
    """min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A): the surrogate PPO maximises (−core.clipped_surrogate)."""
    r = torch.as_tensor(ratio, dtype=torch.float64)
    a = torch.as_tensor(advantage, dtype=torch.float64).expand_as(r)
    return (-core.clipped_surrogate(r, a, eps_low, eps_high)).numpy()


# --------------------------------------------------------------------------------------- (a) the clip
def clipped_objective_view(ratios=None, advantages=None, eps_low: float = 0.2, eps_high: float = 0.2) -> View:
    """PPO's clipped surrogate as a function of r, for Â > 0 and Â < 0, with real ratios overlaid.

    ``ratios``/``advantages`` (arrays of equal length): the ratios π_θ/π_old of an update and the
    advantages they multiplied. None: take them from a real 4-pass CartPole update
    (``cartpole_lab.mu_passes``), the ratios after its last pass. The clip fraction counted is
    ``core.clip_fractions``: r < 1 − ε_low with Â < 0, or r > 1 + ε_high with Â > 0.
    """
    if ratios is None or advantages is None:
        run = cartpole_lab.mu_passes(4)
        ratios, advantages = run["ratios"][-1], run["advantages"]
    ratios = np.asarray(ratios, dtype=np.float64).ravel()
    advantages = np.asarray(advantages, dtype=np.float64).ravel()
    controls = {
        "eps_low": widgets.FloatSlider(value=eps_low, min=0.01, max=0.5, step=0.01, description="ε_low", **_SLIDER),
        "eps_high": widgets.FloatSlider(value=eps_high, min=0.01, max=0.5, step=0.01, description="ε_high",
                                        **_SLIDER),
    }

    def draw(v: dict):
        lo, hi = v["eps_low"], v["eps_high"]
        r_max = max(2.0, float(ratios.max()) * 1.05) if ratios.size else 2.0
        grid = np.linspace(0.0, r_max, 401)
        fractions = core.clip_fractions(torch.as_tensor(ratios), torch.as_tensor(advantages),
                                        torch.ones(len(ratios), dtype=torch.float64), lo, hi) if ratios.size else \
            {"clip_frac": 0.0, "clip_frac_low": 0.0, "clip_frac_high": 0.0}
        data = {"r": grid, "objective_pos": _objective(grid, 1.0, lo, hi),
                "objective_neg": _objective(grid, -1.0, lo, hi),
                "ratios": ratios, "advantages": advantages, "eps_low": lo, "eps_high": hi, **fractions}
        fig = Figure(figsize=(10, 3.6))
        for ax, sign, key in ((fig.add_subplot(1, 2, 1), 1.0, "objective_pos"), (fig.add_subplot(1, 2, 2), -1.0,
                                                                                  "objective_neg")):
            ax.plot(grid, sign * grid, ":", color="grey", label="ρ·Â (unclipped)")
            ax.plot(grid, data[key], color="C0", lw=2, label="min(ρ·Â, clip(ρ)·Â)")
            ax.axvspan(1 - lo, 1 + hi, color="C2", alpha=0.12, label="[1 − ε_low, 1 + ε_high]")
            pick = advantages > 0 if sign > 0 else advantages < 0
            r = ratios[pick]
            clipped = r > 1 + hi if sign > 0 else r < 1 - lo
            y = _objective(r, sign, lo, hi)
            ax.scatter(r[~clipped], y[~clipped], s=8, color="C0", alpha=0.5, label="real ratios (gradient flows)")
            ax.scatter(r[clipped], y[clipped], s=8, color="C3", alpha=0.7, label="clipped (no gradient)")
            frac = fractions["clip_frac_high" if sign > 0 else "clip_frac_low"]
            ax.set_title(f"Â {'> 0' if sign > 0 else '< 0'}: {int(clipped.sum())}/{pick.sum()} clipped "
                         f"({frac:.1%} of all)")
            ax.set_xlabel("ρ = π_θ / π_old")
            ax.set_ylabel("objective per unit |Â|")
        fig.axes[0].legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        data["summary"] = (f"clip fraction {fractions['clip_frac']:.3f} (low {fractions['clip_frac_low']:.3f}, "
                           f"high {fractions['clip_frac_high']:.3f}) over {ratios.size} ratios")
        return fig, data

    return View(controls, draw, "PPO's clipped surrogate")


# ------------------------------------------------------------------------------------------ (b) μ
def mu_figure(run: dict, eps: float, ratio_title: str, kl_title: str, log_counts: bool = False,
              bands: bool = False) -> Figure:
    """The four μ panels from ``run`` (lists per pass): ratio histograms, clip fraction, exact KLs,
    and KL(π_θ‖π_ref) estimated from π_old samples, biased and corrected, next to the exact value.

    ``bands``: also shade each estimate's mean ± std over fresh π_old samples (``kl_ref_*_expected/_std``).
    """
    n = len(run["ratios"])
    passes = np.arange(1, n + 1)
    fig = Figure(figsize=(11, 6.5))
    ax = fig.add_subplot(2, 2, 1)
    last = run["ratios"][-1]
    lo_r = min(float(np.quantile(last, 0.005)), 1 - eps) - 0.02
    hi_r = max(float(np.quantile(last, 0.995)), 1 + eps) + 0.02
    bins = np.linspace(lo_r, hi_r, 60)
    colors = [(0.1, 0.3 + 0.6 * k / max(n - 1, 1), 0.9 - 0.6 * k / max(n - 1, 1)) for k in range(n)]
    for k, r in enumerate(run["ratios"]):
        ax.hist(np.clip(r, lo_r, hi_r), bins=bins, histtype="step", color=colors[k], label=f"after pass {k + 1}")
    for x in (1 - eps, 1 + eps):
        ax.axvline(x, color="C3", ls="--", lw=1)
    if log_counts:
        ax.set_yscale("log")
    ax.set_title(ratio_title)
    ax.set_xlabel("ρ (outliers at the edges)")
    ax.legend(fontsize=6)
    ax = fig.add_subplot(2, 2, 2)
    # Hollow markers of two sizes: where the two coincide (pass 1, both 0) both stay visible.
    ax.plot(passes, run["clip_frac_after"], "s--", color="C1", ms=9, mfc="none", label="after the pass")
    ax.plot(passes, run["clip_frac"], "o-", color="C0", ms=5, label="during the pass (core.update)")
    ax.set_title("clip fraction")
    ax.legend(fontsize=7)
    ax = fig.add_subplot(2, 2, 3)
    ax.plot(passes, run["kl_old_exact"], "o-", label="KL(π_θ‖π_old)")
    ax.plot(passes, run["kl_ref_exact"], "s-", label="KL(π_θ‖π_ref)")
    ax.axhline(run["kl_ref_exact_old"], color="grey", ls=":", label="KL(π_old‖π_ref)")
    ax.set_title(kl_title)
    ax.legend(fontsize=7)
    ax = fig.add_subplot(2, 2, 4)
    # The exact value: a large hollow marker under the estimates, so one pass (μ = 1) shows a point too.
    ax.plot(passes, run["kl_ref_exact"], "k-", marker="o", ms=11, mfc="none", mew=1.5, lw=2, label="exact")
    for name, color, marker, label in (("biased", "C3", "o", "k3 on π_old samples (biased)"),
                                       ("corrected", "C2", "s", "k3 · π_θ/π_old (corrected)")):
        ax.plot(passes, run[f"kl_ref_{name}"], marker + "--", color=color, ms=5, label=label)
        if bands:
            mean, std = np.asarray(run[f"kl_ref_{name}_expected"]), np.asarray(run[f"kl_ref_{name}_std"])
            ax.fill_between(passes, mean - std, mean + std, color=color, alpha=0.15,
                            label=f"E ± std over fresh π_old samples ({name})")
    ax.set_title("KL(π_θ‖π_ref) from the batch")
    ax.legend(fontsize=6)
    for ax in fig.axes[1:]:          # the three per-pass panels: whole passes, the first and last not on the frame
        ax.set_xlabel("pass")
        ax.set_xlim(0.5, n + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    fig.tight_layout()
    return fig


def mu_view(mu: int = 4, lr: float = 2e-3, clip_eps: float = 0.2, seed: int = 0) -> View:
    """μ real passes of ``core.update`` over one fixed CartPole batch; what the ratio and the KLs do.

    Panels: the ratio π_θ/π_old after each pass; the clip fraction per pass; the exact
    KL(π_θ‖π_old) and KL(π_θ‖π_ref) per pass; the KL to π_ref estimated from the π_old samples
    with (corrected) and without (biased) the importance weight, next to its exact value.
    """
    controls = {
        "mu": widgets.IntSlider(value=mu, min=1, max=8, description="μ (passes)", **_SLIDER),
        "lr": widgets.FloatLogSlider(value=lr, base=10, min=-4, max=-1.5, step=0.1, description="learning rate",
                                     readout_format=".1e", **_SLIDER),
        "clip_eps": widgets.FloatSlider(value=clip_eps, min=0.05, max=0.5, step=0.01, description="ε", **_SLIDER),
    }

    def draw(v: dict):
        run = cartpole_lab.mu_passes(v["mu"], v["lr"], v["clip_eps"], seed=seed)
        run["ratio_std"] = [float(np.std(r)) for r in run["ratios"]]
        run["bias_biased"] = [b - e for b, e in zip(run["kl_ref_biased"], run["kl_ref_exact"])]
        run["bias_corrected"] = [c - e for c, e in zip(run["kl_ref_corrected"], run["kl_ref_exact"])]
        fig = mu_figure(run, v["clip_eps"], ratio_title="ratio ρ = π_θ/π_old over the batch",
                        kl_title="exact KLs at the batch's states")
        run["summary"] = (f"last pass: ratio std {run['ratio_std'][-1]:.3f}, "
                          f"clip fraction {run['clip_frac_after'][-1]:.3f}"
                          f", KL(π_θ‖π_ref) exact {run['kl_ref_exact'][-1]:.4f} · biased "
                          f"{run['kl_ref_biased'][-1]:.4f} · corrected {run['kl_ref_corrected'][-1]:.4f}")
        return fig, run

    return View(controls, draw, "μ passes over one CartPole batch")


# ---------------------------------------------------------------------------------- (c) k1 / k2 / k3
def kl_estimator_stats(distance: float, num_samples: int = 16, trials: int = 2000, seed: int = 0) -> dict:
    """Bias and standard deviation of k1, k2, k3 for KL(p ‖ q) on a 5-action categorical.

    p = softmax(z), q = softmax(z + distance · d) for fixed z and direction d. Each trial averages
    ``core.kl_estimate`` over ``num_samples`` actions a ~ p; over ``trials`` trials we get the
    estimator's mean (→ bias against the exact Σ_a p log p/q) and its spread.
    """
    g = torch.Generator().manual_seed(seed)
    z = torch.tensor([1.0, 0.5, 0.0, -0.5, -1.0], dtype=torch.float64)
    d = torch.tensor([-1.0, 0.5, 1.0, 0.0, -0.5], dtype=torch.float64)
    logp_all = torch.log_softmax(z, 0)
    logq_all = torch.log_softmax(z + distance * d, 0)
    exact = (logp_all.exp() * (logp_all - logq_all)).sum().item()
    actions = torch.multinomial(logp_all.exp(), trials * num_samples, replacement=True, generator=g)
    logp, logq = logp_all[actions], logq_all[actions]
    out = {"distance": distance, "exact": exact, "num_samples": num_samples, "trials": trials}
    for k in ("k1", "k2", "k3"):
        per_trial = core.kl_estimate(logp, logq, k).view(trials, num_samples).mean(1)
        out[k] = {"mean": per_trial.mean().item(), "bias": per_trial.mean().item() - exact,
                  "std": per_trial.std().item()}
    out["p"], out["q"] = logp_all.exp().tolist(), logq_all.exp().tolist()
    return out


def kl_estimators_view(distance: float = 1.0, num_samples: int = 16) -> View:
    """k1, k2, k3 against the exact KL on a small categorical; a slider moves q away from p."""
    controls = {
        "distance": widgets.FloatSlider(value=distance, min=0.0, max=3.0, step=0.1, description="how far q is from p",
                                        **_SLIDER),
        "num_samples": widgets.IntSlider(value=num_samples, min=1, max=128, description="samples per estimate",
                                         **_SLIDER),
    }
    sweep = np.linspace(0.0, 3.0, 16)

    def draw(v: dict):
        s = kl_estimator_stats(v["distance"], v["num_samples"])
        curves = [kl_estimator_stats(float(x), v["num_samples"], trials=400) for x in sweep]
        s["sweep"] = {"distance": sweep, "exact": [c["exact"] for c in curves],
                      **{k: [c[k]["mean"] for c in curves] for k in ("k1", "k2", "k3")}}
        fig = Figure(figsize=(11, 3.4))
        ax = fig.add_subplot(1, 3, 1)
        x = np.arange(5)
        ax.bar(x - 0.2, s["p"], 0.4, label="p = π_θ")
        ax.bar(x + 0.2, s["q"], 0.4, label="q = π_ref")
        ax.set_title(f"exact KL(p‖q) = {s['exact']:.4f}")
        ax.set_xlabel("action")
        ax.legend(fontsize=7)
        ax = fig.add_subplot(1, 3, 2)
        names = ["k1", "k2", "k3"]
        ax.bar(names, [s[k]["bias"] for k in names], yerr=[s[k]["std"] for k in names], capsize=4,
               color=["C0", "C1", "C2"])
        ax.axhline(0, color="k", lw=0.8)
        ax.set_title(f"bias ± std of a {v['num_samples']}-sample estimate")
        ax = fig.add_subplot(1, 3, 3)
        # a wide pale band: the unbiased estimates' dashes lie on it without hiding it
        ax.plot(sweep, s["sweep"]["exact"], "-", color="grey", lw=6, alpha=0.45, label="exact")
        for k in names:
            ax.plot(sweep, s["sweep"][k], "--", label=f"E[{k}]")
        ax.axvline(v["distance"], color="grey", ls=":")
        ax.set_xlabel("how far q is from p")
        ax.set_title("expected estimate")
        ax.legend(fontsize=7)
        fig.tight_layout()
        s["summary"] = " · ".join(f"{k}: bias {s[k]['bias']:+.4f} std {s[k]['std']:.4f}" for k in names) + \
            f" (exact {s['exact']:.4f})"
        return fig, s

    return View(controls, draw, "KL estimators k1, k2, k3")


# ------------------------------------------------------------------------------ (d) group advantages
SCALES = ("group", "batch", "none")


def group_advantages_view(rewards: str = "1, 0, 0, 0, 1, 1, 1, 0", group_size: int = 4) -> View:
    """A batch of rewards, G completions per prompt → ``core.group_relative`` under each scale."""
    controls = {
        "rewards": widgets.Text(value=rewards, description="rewards", continuous_update=False,
                                layout=widgets.Layout(width="420px")),
        "group_size": widgets.IntSlider(value=group_size, min=2, max=8, description="G (group size)", **_SLIDER),
    }

    def draw(v: dict):
        fig = Figure(figsize=(11, 3.2))
        try:
            r = torch.tensor([float(x) for x in v["rewards"].replace(";", ",").split(",") if x.strip()],
                             dtype=torch.float64)
            adv = {s: core.group_relative(r, v["group_size"], s).tolist() for s in SCALES}
            error = None
        except ValueError as e:
            r, adv, error = torch.zeros(0), {s: [] for s in SCALES}, str(e)
        data = {"rewards": r.tolist(), "group_size": v["group_size"], "advantages": adv, "error": error}
        for i, s in enumerate(SCALES):
            ax = fig.add_subplot(1, 3, i + 1)
            if adv[s]:
                colors = [f"C{j // v['group_size']}" for j in range(len(adv[s]))]
                ax.bar(np.arange(len(adv[s])), adv[s], color=colors)
                for j in range(v["group_size"], len(adv[s]), v["group_size"]):
                    ax.axvline(j - 0.5, color="grey", lw=0.8)
            ax.axhline(0, color="k", lw=0.8)
            ax.set_title(f"--scale-rewards {s}")
            ax.set_xlabel("completion (colour = prompt)")
        fig.axes[0].set_ylabel("advantage Â_i")
        fig.tight_layout()
        data["summary"] = error or "  |  ".join(f"{s}: " + ", ".join(f"{a:+.2f}" for a in adv[s]) for s in SCALES)
        return fig, data

    return View(controls, draw, "Group-relative advantages")
