"""Notebook 10's figures and its widget over β, drawn from ``distill_lab``'s numbers.

    three_kls_figure(kls)                   KL(π_θ‖π_old), KL(π_θ‖π_ref) and KL(π_θ‖π_teacher) per update of a distill
                                            run, side by side — as PNG bytes
    teacher_reward_figure(forgot, carried)  two completions of one group, each token coloured by the teacher's
                                            reward r_t; under them r_t, Â_t at γ = 1 and GRPO's one Â_i — as PNG bytes
    jsd_view(fits)                          a slider over β: the two-mode teacher p, the bump q fitted from each start
                                            and the family's best, the landscape JSD_β(p, q_{c,w}) with each descent's
                                            path, and where each descent ends for every β
    gradient_figure(grads)                  the enumerated gradients: −∇KL beside the policy gradient at γ = 1, GKD's
                                            β = 1 beside the policy gradient at γ = 0 — as PNG bytes
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ladder.viz._widget import View, render_png
from ladder.viz.distill_lab import CENTRES, STARTS, VOCAB, WIDTHS, Scored

START_COLOURS = {"left start": "C0", "right start": "C3"}


def three_kls_figure(kls) -> bytes:
    """Three panels, one per policy the student is compared with, each KL in nats per completion."""
    fig = Figure(figsize=(12, 3.4))
    axes = [fig.add_subplot(1, 3, i) for i in (1, 2, 3)]
    k = np.arange(1, len(kls.trust) + 1)
    axes[0].plot(k, kls.trust, "o-", color="C2")
    axes[0].set(title="π_old: the trust region", ylabel="KL(π_θ‖π_old), nats per completion",
                xlabel="update k (π_θ after it, on its batch)")
    axes[1].plot(k, kls.anchor_k1, "o-", color="C0", label="k1")
    axes[1].plot(k, kls.anchor_k3, "s--", color="C0", alpha=0.6, label="k3")
    axes[1].set(title="π_ref: the anchor", ylabel="KL(π_θ‖π_ref), nats per completion",
                xlabel="update k (π_θ sampling its batch)")
    axes[1].legend(fontsize=8)
    axes[2].plot(k, kls.target, "o-", color="C1")
    axes[2].set(title="π_teacher: the target", ylabel="KL(π_θ‖π_teacher), nats per completion",
                xlabel="update k (π_θ sampling its batch)")
    correct = axes[2].twinx()   # the batch's correctness, logged by the rung at weight 0
    correct.plot(k, [r["rewards/correctness/mean"] for r in kls.records], ":", color="grey")
    correct.set(ylim=(0, 1), ylabel="share of the batch correct (dotted)")
    for ax in axes:
        ax.axhline(0.0, color="grey", lw=0.6)
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    return render_png(fig)


def _shown(piece: str) -> str:
    return piece.replace("\n", "⏎").replace("<|im_end|>", "⟨end⟩").replace(" ", "·") or "∅"


def _token_strip(ax, scored: Scored, norm) -> None:
    """The completion's tokens left to right, each on the colour of its r_t (red < 0, blue > 0), its r_t under it,
    the carry boxed."""
    cmap = colormaps["RdBu"]
    for t, (piece, r) in enumerate(zip(scored.pieces, scored.rewards.tolist(), strict=True)):
        edge = "black" if t == scored.carry else "none"
        ink = "white" if abs(float(norm(r)) - 0.5) > 0.3 else "black"   # readable on the darkest colours
        ax.text(t, 0.65, _shown(piece), ha="center", va="center", fontsize=9, family="monospace", color=ink,
                bbox={"facecolor": cmap(norm(r)), "edgecolor": edge, "boxstyle": "square,pad=0.3"})
        ax.text(t, 0.12, f"{r:+.1f}" if abs(r) >= 0.05 else "0", ha="center", va="center", fontsize=7,
                color="#b00" if r <= -0.05 else "#1f4e99" if r >= 0.05 else "#888")
    ax.set(xlim=(-0.6, len(scored.pieces) - 0.4), ylim=(0, 1))
    ax.axis("off")
    verdict = "right" if scored.correct else "wrong: the carry forgotten"
    ax.set_title(f"{scored.question} → {scored.text.splitlines()[-1]} ({verdict}); under each token its r_t",
                 fontsize=9, loc="left")


def _credit_panel(ax, scored: Scored) -> None:
    t = np.arange(len(scored.pieces))
    ax.bar(t, scored.rewards.numpy(), color="C1", alpha=0.6, label="r_t = Â_t at γ = 0")
    ax.step(t, scored.returns_1.numpy(), where="mid", color="C0", label="Â_t at γ = 1: Σ_{t'≥t} r_t'")
    ax.axhline(scored.grpo_advantage, color="C2", ls="--", label=f"GRPO: Â_i = {scored.grpo_advantage:+.2f}")
    if scored.carry is not None:
        ax.axvline(scored.carry, color="black", lw=0.6, ls=":")
    ax.axhline(0.0, color="grey", lw=0.6)
    ax.set(xlim=(-0.6, len(t) - 0.4), xlabel="token t of the completion (dotted: the carry)")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)


def teacher_reward_figure(forgot: Scored, carried: Scored) -> bytes:
    """Each completion's tokens on the colour of r_t (one scale for both), and under them the credit each token
    gets: r_t (γ = 0), the return at γ = 1, and GRPO's one Â_i."""
    top = max(float(s.rewards.abs().max()) for s in (forgot, carried))
    norm = TwoSlopeNorm(0.0, -top, top)
    fig = Figure(figsize=(12, 5.6))
    grid = fig.add_gridspec(3, 2, height_ratios=(0.55, 0.55, 2.4))
    for row, scored in enumerate((forgot, carried)):
        _token_strip(fig.add_subplot(grid[row, :]), scored, norm)
        ax = fig.add_subplot(grid[2, row])
        _credit_panel(ax, scored)
        ax.set_title(f"the {'wrong' if row == 0 else 'right'} completion: the credit of each token", fontsize=9)
        ax.set_ylabel("nats" if row == 0 else "")
    fig.tight_layout()
    return render_png(fig)


def _distributions_panel(ax, fits: dict, beta: float) -> None:
    v = np.arange(VOCAB)
    ax.bar(v, fits["p"].numpy(), color="lightgrey", label="teacher p")
    at = fits["fits"][beta]
    for name in STARTS:
        ax.plot(v, at[name]["q"].numpy(), "o-", ms=3, color=START_COLOURS[name],
                label=f"{name}: {at[name]['value']:.3f}")
    ax.plot(v, at["best"]["q"].numpy(), "k--", lw=1, label=f"the best q: {at['best']['value']:.3f}")
    top = max(float(fits["p"].max()), *(float(at[name]["q"].max()) for name in (*STARTS, "best")))
    ax.set(title=f"β = {beta:g}: p and the fitted bumps q", xlabel="token v", ylabel="probability",
           ylim=(0, 1.6 * top))   # headroom for the legend
    ax.legend(fontsize=7, loc="upper center", ncol=2, title="q fitted, its JSD_β", title_fontsize=7)


def _landscape_panel(ax, fits: dict, beta: float) -> None:
    at = fits["fits"][beta]
    values = at["landscape"].clamp(min=1e-6).log10().numpy().T   # [widths, centres]
    extent = (float(CENTRES[0]), float(CENTRES[-1]), float(WIDTHS[0].log10()), float(WIDTHS[-1].log10()))
    ax.imshow(values, origin="lower", aspect="auto", extent=extent, cmap="viridis")
    for name in STARTS:
        path = at[name]["path"]
        ax.plot([float(CENTRES[i]) for i, _ in path], [float(WIDTHS[j].log10()) for _, j in path], "-",
                color=START_COLOURS[name], lw=2)
        ax.plot(float(CENTRES[path[0][0]]), float(WIDTHS[path[0][1]].log10()), "o", color=START_COLOURS[name])
        ax.plot(float(CENTRES[path[-1][0]]), float(WIDTHS[path[-1][1]].log10()), "*", ms=12, mec="white",
                color=START_COLOURS[name])
    ax.set(title="log₁₀ JSD_β(p, q_{c,w}): each descent's path", xlabel="centre c", ylabel="log₁₀ width w")


def _ends_panel(ax, fits: dict, beta: float) -> None:
    betas = list(fits["fits"])
    for name in STARTS:
        ax.plot(betas, [fits["fits"][b][name]["centre"] for b in betas], "o-", ms=3, color=START_COLOURS[name],
                label=f"from the {name}")
    ax.plot(betas, [fits["fits"][b]["best"]["centre"] for b in betas], "k--", lw=1, label="the family's best")
    ax.axvline(beta, color="grey", lw=0.8)
    ax.set(title="where each fit's centre ends", xlabel="β (0: forward KL, 1: reverse KL)", ylabel="centre c",
           ylim=(0, VOCAB - 1))
    ax.legend(fontsize=7)


def jsd_view(fits: dict, beta: float = 0.0) -> View:
    """A slider over β (the precomputed grid): p with the bumps fitted from both starts, the landscape and paths."""
    controls = {"beta": widgets.SelectionSlider(options=list(fits["fits"]), value=beta, description="β",
                                                continuous_update=False, layout=widgets.Layout(width="480px"))}

    def draw(v: dict):
        fig = Figure(figsize=(13, 3.6))
        axes = [fig.add_subplot(1, 3, i) for i in (1, 2, 3)]
        _distributions_panel(axes[0], fits, v["beta"])
        _landscape_panel(axes[1], fits, v["beta"])
        _ends_panel(axes[2], fits, v["beta"])
        fig.tight_layout()
        at = fits["fits"][v["beta"]]
        summary = "; ".join(f"{name}: centre {at[name]['centre']:.2f}, width {at[name]['width']:.2f}, "
                            f"mass on the left half {at[name]['left_mass']:.2f}" for name in STARTS)
        return fig, {"beta": v["beta"], "summary": f"β = {v['beta']:g} — {summary} (p: {fits['p_left_mass']:.2f})",
                     **{name: at[name] for name in (*STARTS, "best")}}

    return View(controls, draw, title="Fitting one bump q to a two-mode teacher p by JSD_β")



def _gradient_panel(ax, exact: torch.Tensor, policy_gradient: torch.Tensor, position: torch.Tensor,
                    labels: tuple) -> None:
    x = np.arange(len(exact))
    for t in sorted(set(position.tolist())):
        where = x[position.numpy() == t]
        ax.axvspan(where[0] - 0.5, where[-1] + 0.5, color="grey", alpha=0.08 * (t + 1))
        ax.text(where.mean(), 0.02, f"position {t + 1}", transform=ax.get_xaxis_transform(), ha="center",
                va="bottom", fontsize=8)
    ax.bar(x, exact.numpy(), color="lightgrey", edgecolor="grey", label=labels[0])
    ax.plot(x, policy_gradient.numpy(), "o", color="C3", label=labels[1])
    ax.axhline(0.0, color="grey", lw=0.6)
    ax.set(xlabel="logit of the student's tables (by position, then prefix and token)", xticks=[])
    ax.legend(fontsize=8)


def gradient_figure(grads: dict) -> bytes:
    fig = Figure(figsize=(12, 3.4))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    _gradient_panel(left, grads["minus_kl"], grads["pg_1"], grads["position"],
                    ("−∇KL(π_θ‖π_teacher), whole sequences", "policy gradient, k1 rewards, γ = 1"))
    _gradient_panel(right, grads["minus_gkd"], grads["pg_0"], grads["position"],
                    ("−∇ GKD β = 1 at the student's prefixes", "policy gradient, k1 rewards, γ = 0"))
    left.set(ylabel="gradient component", title="γ = 1: the whole sequence's reverse KL")
    right.set(title="γ = 0: each position's own reverse KL, at the student's prefixes")
    fig.tight_layout()
    return render_png(fig)
