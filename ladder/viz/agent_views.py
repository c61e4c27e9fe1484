"""Notebook 7's widgets, on the numbers of ``agent_lab``: a trajectory token by token, the environment's tokens in
the loss, per-trajectory vs per-turn credit.

    trajectory_view   one group of calculator trajectories: each token the model's or the environment's, its mask,
                      attention and Â; a slider moves through the group
    env_tokens_view   the default run and the ``--train-env-tokens`` run, update by update: the probe's log π of the
                      tool's reply, the exact KL at the model's and the environment's positions, held-out accuracy
    credit_view       one group of the guessing game, Â per token under ``--credit trajectory`` or ``turn``
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from ladder.viz._widget import View
from ladder.viz.agent_lab import Group, calculator_update, env_token_runs, guess_group, turn_table

_SLIDER = {"continuous_update": False, "style": {"description_width": "initial"}}
MODEL, ENV = "#cfe3f7", "#f3dcc2"   # the model's tokens (blue), the environment's (sand)


def _shown(piece: str) -> str:
    return html.escape(piece).replace(" ", "&nbsp;").replace("\n", "⏎")


def tokens_html(group: Group, row: int, credit: str = "trajectory") -> str:
    """Trajectory ``row`` as text: the model's tokens on blue, the environment's on sand; each model token's Â
    written under it in green (> 0) or red (< 0). Hover a token for its mask, attention, turn and Â."""
    advantages = group.advantages[credit][row]
    spans = []
    for t, piece in enumerate(group.pieces[row]):
        model = bool(group.mask[row, t])
        a = float(advantages[t])
        colour = "#1a7f1a" if a > 0 else ("#b00" if a < 0 else "#888")
        label = f"{round(a, 2) + 0:+.2f}" if model else "·"  # + 0: no "-0.00"
        title = (f"t={t} mask={int(group.mask[row, t])} attention={int(group.attention_mask[row, t])} "
                 f"turn={int(group.turn[row, t])} Â={a:+.3f}")
        spans.append(f"<span title='{title}' style='display:inline-block;text-align:center;margin:1px;"
                     f"background:{MODEL if model else ENV};font-family:monospace;font-size:12px'>"
                     f"{_shown(piece)}<br><span style='font-size:9px;color:{colour}'>{label}</span></span>")
    legend = (f"<span style='background:{MODEL}'>&nbsp;the model's token (mask 1, attention 1)&nbsp;</span> "
              f"<span style='background:{ENV}'>&nbsp;the environment's (mask 0, attention 1)&nbsp;</span> "
              f"number under a token: its Â ({credit} credit); pad (attention 0) not shown; hover a token for its row")
    head = (f"<b>{html.escape(group.question)}</b> trajectory {row}: reward {float(group.rewards[row]):g}, "
            f"{int(group.tool_calls[row])} tool call(s), {int(group.mask[row].sum())} model tokens, "
            f"{int((group.attention_mask[row] - group.mask[row]).sum())} environment tokens")
    body = "".join(spans)
    return f"<div>{head}</div><div style='font-size:11px'>{legend}</div><div style='line-height:2'>{body}</div>"


def _strips(fig: Figure, row: int, rows: list[tuple[str, np.ndarray, str]], columns: int | None = None) -> None:
    """One heat map [G, T] per entry (title, values, colour map; ``"advantage"``: green > 0, pink < 0, white 0,
    with a colour bar), the selected trajectory outlined; ``columns`` subplots in the row (default: one each)."""
    for k, (title, values, cmap) in enumerate(rows):
        ax = fig.add_subplot(1, columns or len(rows), k + 1)
        if cmap == "advantage":
            top = max(float(np.abs(values).max()), 1e-6)
            image = ax.imshow(values, aspect="auto", cmap="PiYG", norm=TwoSlopeNorm(0.0, -top, top),
                              interpolation="nearest")
            fig.colorbar(image, ax=ax, fraction=0.04)
        else:
            ax.imshow(values, aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
        ax.add_patch(_outline(row, values.shape[1]))
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("position t in the trajectory")
        ax.set_ylabel("trajectory i" if k == 0 else "")


def _outline(row: int, width: int):
    from matplotlib.patches import Rectangle

    return Rectangle((-0.5, row - 0.5), width, 1, fill=False, edgecolor="k", linewidth=1.5)


def trajectory_view(row: int = 0, update: dict | None = None) -> View:
    """One group of the calculator's first update (``agent_lab.calculator_update``): the trajectory as text, and
    the group's mask, attention and Â as ``[G, T]`` maps."""
    update = update or calculator_update()
    group = update["group"]
    controls = {"row": widgets.IntSlider(value=row, min=0, max=len(group.pieces) - 1,
                                         description="trajectory i in the group", **_SLIDER)}
    text = widgets.HTML()

    def draw(v: dict):
        i = v["row"]
        text.value = tokens_html(group, i)
        fig = Figure(figsize=(11, 2.8))
        _strips(fig, i, [("mask (the loss: the model's tokens)", group.mask.numpy(), "Blues"),
                         ("attention_mask (what the model reads)", group.attention_mask.numpy(), "Greys"),
                         ("Â · mask (the advantage each token gets)", group.advantages["trajectory"].numpy(),
                          "advantage")])
        fig.tight_layout()
        model, read = int(group.mask[i].sum()), int(group.attention_mask[i].sum())
        on_model = group.advantages["trajectory"][i][group.mask[i].bool()]
        advantage = float(on_model[0]) if len(on_model) else 0.0
        data = {"group": group, "row": i, "html": text.value, "model_tokens": model, "env_tokens": read - model,
                "advantage": advantage,
                "summary": f"trajectory {i}: {model} of its {read} tokens get gradient (mask 1), {read - model} are "
                           f"read only (mask 0, attention 1); Â = {advantage:+.3f} on each of its model tokens"}
        return fig, data

    view = View(controls, draw, "One group of calculator trajectories: one [G, T] block, two masks")
    view.text = text
    view.children = (*view.children, text)
    return view


METRICS = {"log π(reply digits)": "logp_digits", "log π(every reply token)": "logp_reply",
           "exact KL at the environment's positions": "kl_env",
           "exact KL at the model's positions (the call)": "kl_model",
           "held-out greedy accuracy": "eval_accuracy", "tool calls per trajectory": "tool_calls"}


def env_tokens_view(update: int | None = None, metric: str = "log π(reply digits)", probe: int = 0,
                    runs: dict | None = None) -> View:
    """The two runs of ``agent_lab.env_token_runs`` side by side: a metric over updates (the chosen update marked),
    and one probe's reply token by token: π_θ(token) in each run at that update."""
    runs = runs or env_token_runs()
    steps = next(iter(runs.values()))["steps"]
    n_probes = len(next(iter(runs.values()))["probe"].questions)
    controls = {"update": widgets.IntSlider(value=steps if update is None else update, min=0, max=steps,
                                            description="after update", **_SLIDER),
                "metric": widgets.Dropdown(options=list(METRICS), value=metric, description="metric",
                                           layout=widgets.Layout(width="420px")),
                "probe": widgets.IntSlider(value=probe, min=0, max=n_probes - 1, description="probe problem",
                                           **_SLIDER)}

    def draw(v: dict):
        k, key, j = v["update"], METRICS[v["metric"]], v["probe"]
        fig = Figure(figsize=(11, 3.6))
        ax = fig.add_subplot(1, 2, 1)
        for (name, run), colour in zip(runs.items(), ("C0", "C3")):
            xs = [r["update"] for r in run["rows"] if key in r]
            ax.plot(xs, [r[key] for r in run["rows"] if key in r], "o-" if key == "eval_accuracy" else "-",
                    color=colour, label=name, markersize=4)
        ax.axvline(k, color="k", linestyle=":")
        ax.set_xlabel("update")
        ax.set_title(v["metric"], fontsize=9)
        ax.legend(fontsize=8)
        ax = fig.add_subplot(1, 2, 2)
        first = next(iter(runs.values()))
        probe_ = first["probe"]
        pieces = probe_.pieces[j]
        xs = np.arange(len(pieces))
        for n, ((name, run), colour) in enumerate(zip(runs.items(), ("C0", "C3"))):
            ax.bar(xs + (n - 0.5) * 0.4, np.exp(run["rows"][k]["reply_logp"][j]), 0.4, color=colour, label=name)
        ax.plot(xs, np.exp(first["rows"][0]["reply_logp"][j]), "k_", markersize=12, label="before training")
        ax.set_xticks(xs)
        ax.set_xticklabels([p.replace("\n", "\\n") for p in pieces], rotation=90, fontsize=8)
        for label, piece in zip(ax.get_xticklabels(), pieces):
            if piece.strip().isdigit():     # the reply's digits: what the probe's log π averages over
                label.set_fontweight("bold")
                label.set_color("C3")
        ax.set_ylim(0, 1)
        ax.set_ylabel("π_θ(token | everything before)")
        ax.set_title(f"the tool's reply to {probe_.questions[j]!r} after update {k} (red: its digits)", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        at = {name: run["rows"][k] for name, run in runs.items()}
        summary = "; ".join(f"{name}: log π(reply digits) {r['logp_digits']:+.2f}, KL env {r['kl_env']:.3f}"
                            for name, r in at.items())
        return fig, {"at": at, "update": k, "summary": f"after update {k}: {summary}"}

    return View(controls, draw, "The environment's tokens in the loss, or not: two runs from the same seed")


def credit_view(row: int = 0, credit: str = "trajectory", group: Group | None = None) -> View:
    """One group of the guessing game (``agent_lab.guess_group``): the chosen trajectory's tokens with their Â, the
    group's Â under the chosen credit, and the chosen trajectory's Â per model token under both."""
    group = group or guess_group()
    controls = {"credit": widgets.ToggleButtons(options=["trajectory", "turn"], value=credit, description="--credit",
                                                style={"description_width": "initial", "button_width": "90px"}),
                "row": widgets.IntSlider(value=row, min=0, max=len(group.pieces) - 1,
                                         description="trajectory i in the group", **_SLIDER)}
    text = widgets.HTML()

    def draw(v: dict):
        i, c = v["row"], v["credit"]
        text.value = tokens_html(group, i, c)
        fig = Figure(figsize=(11, 3.2))
        _strips(fig, i, [(f"Â · mask, --credit {c}", group.advantages[c].numpy(), "advantage")], columns=2)
        ax = fig.add_subplot(1, 2, 2)
        model = group.mask[i].bool().numpy()
        for name, colour in (("trajectory", "C0"), ("turn", "C1")):
            on_model = np.where(model, group.advantages[name][i].numpy(), np.nan)   # a gap where the env speaks
            ax.plot(np.arange(len(model)), on_model, color=colour, drawstyle="steps-mid",
                    linewidth=2.5 if name == c else 1.0, label=f"--credit {name}")
        ax.axhline(0, color="0.6", linewidth=0.8)
        ax.set_xlabel("position t (gaps: the environment's tokens)")
        ax.set_ylabel("Â_t")
        ax.set_title(f"trajectory {i}: reward {float(group.rewards[i]):g}", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        turns = turn_table(group, i)
        per_turn = ", ".join(f"{round(t_[c], 2) + 0:+.2f}" for t_ in turns)  # + 0: no "-0.00"
        summary = f"trajectory {i}, --credit {c}: Â per turn {per_turn}"
        return fig, {"turns": turns, "row": i, "credit": c, "html": text.value, "summary": summary}

    view = View(controls, draw, "Per-trajectory vs per-turn credit: one group of the guessing game")
    view.text = text
    view.children = (*view.children, text)
    return view
