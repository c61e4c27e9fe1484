"""Notebook 5, the fourth policy: the figures and the widget over ``sampler_lab``'s numbers.

    four_policies_figure    |Δ log π| between the four policies on one batch; the spread of Σ_{t≤k} log w_t with k
    bias_variance_figure    the exact categorical: π_old vs π_sampler, and bias² / variance / their sum against C_max
    sampler_view            the sampler's precision and temperature, C_max (and C_min): the weights and what is kept
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ladder.viz import sampler_lab
from ladder.viz._widget import View, render_png
from ladder.viz.views import _SLIDER

C_MAXES = (1.001, 1.003, 1.01, 1.03, 1.1, 1.3, 1.5, 2.0, 3.0, 5.0, 10.0)
_FLOOR = 1e-7          # |Δ log π| below it (identical in float32) is drawn in the first bin


def four_policies_figure(four: sampler_lab.FourPolicies) -> bytes:
    """PNG: (a) the histogram of |Δ log π| over the batch's tokens for three pairs of policies (log axis);
    (b) the std over completions of the prefix sum Σ_{t≤k} log w_t against k, with √k · (one token's std)."""
    gaps = sampler_lab.gaps(four)
    spread = sampler_lab.sequence_spread(four.main)
    fig = Figure(figsize=(12, 3.8))
    ax = fig.add_subplot(1, 2, 1)
    bins = np.geomspace(_FLOOR, 10.0, 41)
    top = 1
    for i, (name, g) in enumerate(gaps.items()):
        counts, _, _ = ax.hist(np.clip(g["values"], _FLOOR, None), bins=bins, histtype="step", lw=1.8,
                               color=f"C{i}", label=f"|{name}|: mean {g['mean']:.1e}, max {g['max']:.2f}")
        top = max(top, counts.max())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(0.7, top * 40)                 # room for the legend above the bars
    ax.set_xlabel(f"|Δ log π| per token (values below {_FLOOR:g} in the first bin)")
    ax.set_ylabel("tokens")
    ax.set_title(f"four policies, {int(four.main.mask.sum())} completion tokens (π_sampler: bfloat16)", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    ax = fig.add_subplot(1, 2, 2)
    k = np.arange(1, spread["length"] + 1)
    ax.plot(k, spread["prefix_std"], "o-", ms=3, label=r"std over completions of $\Sigma_{t \leq k}\, \log w_t$")
    ax.plot(k, spread["token_std"] * np.sqrt(k), "--", color="0.4", label="√k · std of one token's log w_t")
    ax.axhline(spread["token_std"], color="C1", lw=1.2, label=f"std of one token's log w_t ({spread['token_std']:.1e})")
    ax.set_xlabel("k: tokens into the completion")
    ax.set_title("the sequence weight's log spreads with length; a token's does not", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return render_png(fig)


def bias_variance_figure(exact: dict) -> bytes:
    """PNG: (a) π_old and π_sampler with w = π_old/π_sampler over each action; (b) bias², variance / N and their sum
    against C_max (token_truncate), with no correction and the full w as levels."""
    fig = Figure(figsize=(12, 3.9))
    ax = fig.add_subplot(1, 2, 1)
    x = np.arange(len(exact["w"]))
    ax.bar(x - 0.2, exact["p_old"], 0.4, label="π_old (the on-policy gradient's)")
    ax.bar(x + 0.2, exact["p_sampler"], 0.4, label="π_sampler (draws the actions)")
    top = max(exact["p_old"].max(), exact["p_sampler"].max())
    for xi, w, a in zip(x, exact["w"], exact["advantages"]):
        ax.text(xi, top * 1.04, f"w={w:.2f}", ha="center", fontsize=8, color="C3" if w > 3 else "0.2")
        ax.text(xi, -top * 0.08, f"Â={a:+.2f}", ha="center", fontsize=7, color="0.3")
    ax.set_ylim(-top * 0.14, top * 1.18)
    ax.set_xticks(x, [f"action {i}" for i in x], fontsize=8)
    ax.set_title(f"π_sampler under-draws the right answers (Â > 0)\nKL(π_old‖π_sampler) = "
                 f"{exact['kl_old_sampler']:.3f}", fontsize=10)
    ax.legend(fontsize=7, loc="upper right", bbox_to_anchor=(1.0, 0.9))
    ax = fig.add_subplot(1, 2, 2)
    c = exact["c_maxes"]
    rows = exact["sweep"]["token_truncate"]
    for key, color, label in (("bias2", "C3", "bias² (exact)"), ("var_n", "C0", "variance / N (exact)"),
                              ("mse", "k", "bias² + variance / N")):
        ax.plot(c, [r[key] for r in rows], color=color, lw=1.8, label=label)
    ax.axhline(exact["none"]["mse"], color="C2", ls=":", lw=1.5, label=f"no correction: {exact['none']['mse']:.4f}")
    ax.axhline(exact["full"]["mse"], color="C4", ls=":", lw=1.5, label=f"the full w: {exact['full']['mse']:.4f}")
    ax.axvline(exact["best_c_max"], color="0.6", lw=0.8)
    ax.set_xscale("log")
    ax.set_xticks([1, 2, 3, 5, 10], ["1", "2", "3", "5", "10"])
    ax.set_xlabel("C_max (token_truncate)")
    ax.set_title(f"error of the mean gradient of N = {exact['samples']} draws\nleast at C_max ≈ "
                 f"{exact['best_c_max']:.1f}", fontsize=10)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return render_png(fig)


def _span(values: np.ndarray, hi: float, lo: float | None) -> float:
    """Half the axis: the values, and the bounds log C_max (log C_min) when they are within 3× of the values."""
    reach = max(float(np.abs(values).max()), 1e-6)
    bounds = [abs(x) for x in (hi, lo) if x is not None and abs(x) <= 3 * reach]
    return 1.15 * max([reach, *bounds])


def _bounds(line, hi: float, lo: float | None, span: float) -> str:
    """Dashed lines at log C_max (and log C_min) within the axis; a note naming those beyond it."""
    off = []
    for level, name in ((hi, "log C_max"), (lo, "log C_min")):
        if level is None:
            continue
        if abs(level) <= span:
            line(level, color="C3", ls="--", lw=1)
        else:
            off.append(f"{name} = {level:+.2f}")
    return f"\n({', '.join(off)}: beyond the axis)" if off else ""


def _summary(b: sampler_lab.SampledBatch, c_max: float, c_min: float | None) -> dict:
    stats = sampler_lab.mismatch(b)
    spread = sampler_lab.sequence_spread(b)
    modes = sampler_lab.kept(b, c_max, c_min)
    return {"stats": stats, "spread": spread, "modes": modes, "sampler": b.sampler, "temperature": b.temperature,
            "c_max": c_max, "c_min": c_min,
            "summary": (f"|log π_old − log π_sampler| mean {stats['sampler/logp_diff_mean']:.2e}, max "
                        f"{stats['sampler/logp_diff_max']:.2e} · std of Σ_t log w_t {spread['seq_std']:.3f} · "
                        + " · ".join(f"{m}: {d['changed']}/{d['of']}" for m, d in modes.items()))}


def _token_panel(ax, b, data: dict, hi: float, lo: float | None) -> None:
    """The histogram of the real tokens' log w_t, with the bounds log C_max (and log C_min)."""
    real = b.mask.bool()
    values = b.log_w[real].numpy()
    span = _span(values, hi, lo)
    ax.hist(np.clip(values, -span, span), bins=np.linspace(-span, span, 41), color="C0")
    note = _bounds(ax.axvline, hi, lo, span)
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.set_yscale("log")
    ax.set_xlabel("log w_t = log π_old − log π_sampler")
    ax.set_ylabel("tokens")
    ax.set_title(f"{int(real.sum())} tokens: {data['modes']['token_truncate']['changed']} outside the bounds"
                 + note, fontsize=10)


def _sequence_panel(ax, b, data: dict, hi: float, lo: float | None) -> None:
    """Σ_{t≤k} log w_t along each completion; the completions whose sum ends outside the bounds in red."""
    prefix = b.log_w.cumsum(1).numpy()
    lengths = b.mask.sum(1).int().tolist()
    seq = prefix[np.arange(len(lengths)), np.array(lengths) - 1]
    outside = (seq > hi) | ((seq < lo) if lo is not None else False)
    for row, n in enumerate(lengths):
        ax.plot(np.arange(1, n + 1), prefix[row, :n], color="C3" if outside[row] else "0.55",
                lw=1.2 if outside[row] else 0.7)
    seq_span = _span(prefix[b.mask.bool().numpy()], hi, lo)
    ax.set_ylim(-seq_span, seq_span)
    note = _bounds(ax.axhline, hi, lo, seq_span)
    ax.set_xlabel("k: tokens into the completion")
    ax.set_ylabel(r"$\Sigma_{t \leq k}\, \log w_t$")
    cut = data["modes"]["sequence_mask"]
    ax.set_title(f"{len(lengths)} completions: {cut['changed']} end outside the bounds (red)" + note, fontsize=10)


def _modes_panel(ax, data: dict, c_max: float, c_min: float | None) -> None:
    """The share of the batch each mode truncates or masks."""
    modes = list(data["modes"])
    for i, m in enumerate(modes):
        ax.barh(i, data["modes"][m]["frac"], color="C0" if m.startswith("token") else "C3")
    labels = [f"{m}\n{d['changed']} of {d['of']} {d['unit']} {d['verb']}" for m, d in data["modes"].items()]
    ax.set_yticks(np.arange(len(modes)), labels, fontsize=7.5)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the batch changed")
    bounds = f"C_max = {c_max:g}" + (f", C_min = {c_min:.3f}" if c_min else "")
    ax.set_title(f"changed at {bounds}", fontsize=10)


def sampler_view(sampler: str = "bfloat16", temperature: float = 1.0, c_max: float = 3.0,
                 two_sided: bool = False, **batch) -> View:
    """The same prompts drawn by each sampler (``sampler_lab.four_policies``, computed once): the precision of its
    weights and its temperature (the trainer's stays 1), C_max and optionally C_min = 1/C_max. Panels: the token
    log-weights log w_t; Σ_{t≤k} log w_t along each completion (the sequence weight's log as it grows), with the
    completions a sequence mode cuts in red; the share each mode truncates or masks."""
    four = sampler_lab.four_policies(**batch)
    temperatures = sorted({tau for _, tau in four.batches})
    controls = {
        "sampler": widgets.ToggleButtons(options=list(sampler_lab.SAMPLERS), value=sampler,
                                         description="sampler precision", style={"button_width": "80px"}),
        "temperature": widgets.SelectionSlider(options=temperatures, value=temperature,
                                               description="sampler's τ (trainer's: 1)", **_SLIDER),
        "c_max": widgets.SelectionSlider(options=list(C_MAXES), value=c_max, description="C_max", **_SLIDER),
        "two_sided": widgets.Checkbox(value=two_sided, description="C_min = 1/C_max", indent=False),
    }

    def draw(v: dict):
        b = four.batches[(v["sampler"], v["temperature"])]
        c_max, c_min = v["c_max"], (1.0 / v["c_max"] if v["two_sided"] else None)
        data = _summary(b, c_max, c_min)
        hi, lo = np.log(c_max), (np.log(c_min) if c_min else None)
        fig = Figure(figsize=(12, 3.8))
        _token_panel(fig.add_subplot(1, 3, 1), b, data, hi, lo)
        _sequence_panel(fig.add_subplot(1, 3, 2), b, data, hi, lo)
        _modes_panel(fig.add_subplot(1, 3, 3), data, c_max, c_min)
        fig.suptitle(f"sampler: {v['sampler']} weights at τ = {v['temperature']:g}; trainer (π_old): float32 at τ = 1",
                     fontsize=10)
        fig.tight_layout()
        return fig, data

    return View(controls, draw, "the fourth policy: a sampler that is not π_old (tiny grpo preset, LoRA)")
