"""Notebook 2's autoreset widget: the recorded vector-env run (``vector_envs.record``) under SAME_STEP and
NEXT_STEP side by side, with a slider over the step t.

Top: a timeline per mode, one row per env; each step is a real transition (dot), a termination (red ×), a
truncation (orange ■) or, under NEXT_STEP only, a reset step whose action is ignored (hollow ○). Bottom: step t of
each env as ``step()`` returned it: the action, the flags, the obs returned, info["final_obs"] where set, and the
state s_{t+1} the transition reached.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from ladder.viz import vector_envs as ve
from ladder.viz._widget import View

_SLIDER = {"continuous_update": False, "style": {"description_width": "initial"}}
_KINDS = {"transition": ("o", "#4c72b0", "full"), "terminated": ("X", "#c44e52", "full"),
          "truncated": ("s", "#dd8452", "full"), "reset step (action ignored)": ("o", "#777777", "none")}


def step_kinds(rec: dict[str, np.ndarray], mode: str) -> np.ndarray:
    """[steps, N] labels: which of ``_KINDS`` each step of each env is."""
    kinds = np.full(rec["terminated"].shape, "transition", dtype=object)
    kinds[rec["truncated"]] = "truncated"
    kinds[rec["terminated"]] = "terminated"
    kinds[~ve.real_transitions(rec, mode)] = "reset step (action ignored)"
    return kinds


def _vec(v: np.ndarray) -> str:
    return "—" if np.isnan(v).any() else "[" + " ".join(f"{x:+.2f}" for x in v) + "]"


def step_lines(rec: dict[str, np.ndarray], mode: str, t: int) -> list[str]:
    """Step t of each env as text: action, reward, flags, obs returned, final_obs, and s_{t+1}."""
    real, s_next = ve.real_transitions(rec, mode), ve.next_states(rec, mode)
    lines = []
    for i, rule in enumerate(ve.RULES):
        term, trunc = int(rec["terminated"][t, i]), int(rec["truncated"][t, i])
        lines.append(f"env {i} ({rule}): a = {rec['actions'][t, i]}, r = {rec['rewards'][t, i]:.0f}, "
                     f"terminated {term}, truncated {trunc}")
        lines.append(f"   obs returned {_vec(rec['obs'][t, i])}   final_obs {_vec(rec['final_obs'][t, i])}")
        lines.append(f"   s_t+1 = {_vec(s_next[t, i])}" if real[t, i] else
                     "   no transition: this step only reset the env")
    return lines


def _timeline(ax, rec: dict[str, np.ndarray], mode: str, t: int) -> None:
    kinds = step_kinds(rec, mode)
    for kind, (marker, color, fill) in _KINDS.items():
        steps, envs = np.nonzero(kinds == kind)
        ax.plot(steps, envs, marker, color=color, fillstyle=fill, ls="none", ms=7, label=kind)
    ax.axvline(t, color="k", ls=":")
    ax.set_yticks(range(len(ve.RULES)), [f"env {i}: {r}" for i, r in enumerate(ve.RULES)])
    ax.set_ylim(len(ve.RULES) - 0.5, -0.5)
    ax.set_xticks(range(0, len(kinds), 2))
    ax.set_xlabel("vector step t")
    ax.set_title(f"{mode} (time limit {ve.TIME_LIMIT} steps)")


def autoreset_view(t: int = 8) -> View:
    """The two recorded runs, with a slider over the step t."""
    recs = {mode: ve.record(mode) for mode in ve.MODES}
    controls = {"t": widgets.IntSlider(value=t, min=0, max=ve.STEPS - 1, description="step t", **_SLIDER)}

    def draw(v: dict):
        t = int(v["t"])
        fig = Figure(figsize=(13, 5.4))
        axes = fig.subplots(2, 2, gridspec_kw={"height_ratios": [1, 0.75]})
        for col, mode in enumerate(recs):
            _timeline(axes[0, col], recs[mode], mode, t)
            axes[1, col].axis("off")
            axes[1, col].text(0, 1, "\n".join(step_lines(recs[mode], mode, t)), va="top", family="monospace",
                              fontsize=8, transform=axes[1, col].transAxes)
        axes[0, 1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
        kinds = {mode: step_kinds(rec, mode)[t].tolist() for mode, rec in recs.items()}
        data = {"records": recs, "kinds": kinds,
                "summary": f"t = {t}: " + "; ".join(f"{mode} {', '.join(k)}" for mode, k in kinds.items())}
        return fig, data

    return View(controls, draw, "A vector env's autoreset: SAME_STEP and NEXT_STEP")
