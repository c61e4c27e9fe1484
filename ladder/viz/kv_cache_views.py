"""The figures of notebook 5's section on decoding with a key/value cache (``kv_cache`` computes their numbers)."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ladder.policies.causal_lm import position_ids_for
from ladder.viz import kv_cache
from ladder.viz._widget import View, render_png
from ladder.viz.views import _SLIDER


def _mask_panel(ax, mask: np.ndarray, positions: np.ndarray, step: int, prompt_len: int) -> None:
    """The attention mask of step ``step``'s forward (1 coloured, 0 grey), each cell's position id written in it,
    and a frame round the columns the cached forward feeds: all P at the prefill, then the last one."""
    rows, columns = mask.shape
    ax.imshow(mask, cmap=ListedColormap(["0.9", "#9ecae1"]), vmin=0, vmax=1, aspect="auto")
    for b in range(rows):
        for j in range(columns):
            label = str(positions[b, j]) if mask[b, j] else "pad"
            ax.text(j, b, label, ha="center", va="center", fontsize=7, color="black" if mask[b, j] else "0.5")
    first = 0 if step == 0 else columns - 1
    ax.add_patch(Rectangle((first - 0.5, -0.5), columns - first, rows, fill=False, edgecolor="C3", lw=2))
    ax.axvline(prompt_len - 0.5, color="0.3", lw=1, ls="--")
    ax.set_xticks(range(columns))
    ax.set_yticks(range(rows), [f"row {b}" for b in range(rows)])
    ax.set_xlabel("column (prompt | new tokens); red frame: what the cached forward feeds")


def _work_panel(ax, fed: dict, step: int) -> None:
    """Tokens fed to the model up to each step, by each loop, with the slider's step marked."""
    t = np.arange(len(fed["cached"]))
    for name, colour in (("uncached", "C1"), ("cached", "C0")):
        total = np.cumsum(fed[name].numpy())
        ax.plot(t, total, "o-", ms=3, color=colour, label=f"{name}: {fed[name][step]} tokens at step t")
        ax.plot([step], [total[step]], "o", ms=9, color=colour)
    ax.set_xlabel("decode step t")
    ax.set_ylabel("tokens fed to the model, steps 0 … t")
    ax.legend(fontsize=8, loc="upper left")


def decode_view(step: int = 0, steps: int = 10) -> View:
    """A slider over the decode step t of the left-padded prompts ``kv_cache.PROMPTS['rotary']``: the attention
    mask and position ids of step t's forward, the length of the cache after it, and the tokens each loop feeds."""
    lm = kv_cache.tiny_lm("rotary")
    ids, prompt_mask = kv_cache.left_padded(lm, kv_cache.PROMPTS["rotary"])
    rows, prompt_len = ids.shape
    fed = kv_cache.tokens_fed(rows, prompt_len, steps)
    controls = {"step": widgets.IntSlider(value=step, min=0, max=steps - 1, description="step t", **_SLIDER)}

    def draw(v: dict):
        t = v["step"]
        mask = kv_cache.grown_mask(prompt_mask, t)
        positions = position_ids_for(mask)
        fig = Figure(figsize=(13, 3.6))
        grid = fig.add_gridspec(1, 3)
        ax_mask, ax_work = fig.add_subplot(grid[0, :2]), fig.add_subplot(grid[0, 2])
        _mask_panel(ax_mask, mask.numpy(), positions.numpy(), t, prompt_len)
        ax_mask.set_title(f"step {t}: mask [B, P + t] = [{rows}, {prompt_len + t}]; the cache holds "
                          f"{prompt_len + t} columns after this forward", fontsize=10)
        _work_panel(ax_work, fed, t)
        fig.tight_layout()
        data = {"mask": mask, "positions": positions, "cache_len": prompt_len + t,
                "fed_cached": int(fed["cached"][t]), "fed_uncached": int(fed["uncached"][t]),
                "summary": f"step {t}: new tokens at positions {positions[:, -1].tolist()}; the cached forward feeds "
                           f"{int(fed['cached'][t])} tokens, the uncached {int(fed['uncached'][t])}"}
        return fig, data

    return View(controls, draw, "decoding a left-padded batch with a key/value cache (tiny Qwen2)")


def step_times_figure(loops: dict) -> bytes:
    """Each loop's measured time per decode step (``kv_cache.both_loops``), in milliseconds."""
    fig = Figure(figsize=(7, 3.4))
    ax = fig.add_subplot(1, 1, 1)
    for name, colour in (("uncached", "C1"), ("cached", "C0")):
        ax.plot(1000 * np.array(loops[name].step_seconds), ".-", color=colour, label=name)
    ax.set_xlabel("decode step t")
    ax.set_ylabel("ms per step (least of the repeats)")
    ax.set_title(f"{loops['rows']} prompts of P = {loops['prompt_len']} columns, T = {loops['steps']} new tokens")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return render_png(fig)
