"""Notebook 6, tokens: who loses the gradient, token by token (GRPO) or sequence by sequence (GSPO).

    gradient_mask       which tokens (and which whole completions) lose their gradient under the token-level (GRPO)
                        or the sequence-level (GSPO) clip, decided by autograd through ``core.clipped_surrogate``
    token_passes        μ passes of ``core.update`` on a real tiny-GRPO batch; per-token tables for ``token_view``

and the view ``token_view`` (a ``View``: ``.controls``, ``.data``, ``.figure``, and ``.text``, the coloured tokens).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ladder import core
from ladder.hub import quiet_progress
from ladder.viz._widget import View
from ladder.viz.views import _SLIDER


def gradient_mask(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                  eps_low: float, eps_high: float | None = None, level: str = "token") -> dict:
    """Which tokens lose their gradient under the clip, asked of autograd rather than re-derived.

        level "token"     ρ_t = π_θ(a_t)/π_old(a_t)                        (GRPO)
        level "sequence"  s_i = exp(core.sequence_log_ratio), every token of row i shares it   (GSPO)

    The per-token ``core.clipped_surrogate`` is averaged (``core.aggregate``, GRPO's per-sequence mean) and
    differentiated w.r.t. log π_θ; a real token with Â ≠ 0 whose derivative is exactly zero was clipped.
    ``advantages`` is per row ``[B]`` or per token ``[B, T]``. Returns ``ratio`` (the one the clip saw, ``[B, T]``),
    ``no_grad`` (clipped tokens), ``signal`` (real tokens with Â ≠ 0), ``rows_dropped`` (rows with signal in which
    every token is clipped) and ``grad``.
    """
    real = mask.bool()
    adv = advantages[:, None].expand_as(logp) if advantages.dim() == 1 else advantages
    adv = torch.where(real, adv, 0.0).double()
    lp = logp.detach().double().clone().requires_grad_(True)
    old = old_logp.detach().double()
    if level == "token":
        log_ratio = torch.where(real, lp - old, 0.0)
    elif level == "sequence":
        log_ratio = core.sequence_log_ratio(lp, old, mask).expand_as(lp)
    else:
        raise ValueError(f"level must be 'token' or 'sequence', got {level!r}")
    ratio = torch.exp(log_ratio)
    loss = core.aggregate(core.clipped_surrogate(ratio, adv, eps_low, eps_high), mask, "seq_mean_token_mean")
    grad = torch.autograd.grad(loss, lp)[0]
    signal = real & (adv != 0)
    no_grad = signal & (grad == 0)
    has_signal = signal.any(1)
    rows_dropped = has_signal & ~(signal & ~no_grad).any(1)
    return {"ratio": ratio.detach(), "no_grad": no_grad, "signal": signal, "rows_dropped": rows_dropped,
            "grad": grad}


@dataclass
class TokenTable:
    """Per-token tables of one batch after μ passes: what ``token_view`` colours."""

    pieces: list[list[str]]      # the text of each real completion token, per row
    logp: torch.Tensor           # log π_θ(a_t) after the passes            [B, T]
    old_logp: torch.Tensor       # log π_old(a_t), the sampler's              [B, T]
    advantages: torch.Tensor     # Â_i per row                                [B]
    mask: torch.Tensor           # real tokens                                [B, T]
    kl_ref: torch.Tensor         # KL(π_θ‖π_ref) at each position, exact over the vocabulary   [B, T]
    entropy: torch.Tensor        # H(π_θ(·|s_t)), exact                       [B, T]
    rewards: list[float]         # r_i
    prompts: list[str]           # the question of each row
    group_size: int
    mu: int = 0


_TOKEN_RUNS: dict[tuple, list[TokenTable]] = {}


def token_passes(mu: int = 3, lr: float = 1e-3, seed: int = 0, warmup_updates: int = 4, prompts: int = 4,
                 group_size: int = 4) -> TokenTable:
    """μ passes of ``core.update`` (the tiny QLoRA preset's GRPO loss) over one fixed batch sampled by π_old.

    The batch and π_old come from ``lm_lab.fixed_grpo_batch`` (π_old = the tiny preset after ``warmup_updates``
    GRPO updates; ``prompts`` × ``group_size`` completions). Runs are cached: the passes of a larger μ are kept, so a
    smaller μ costs nothing.
    """
    from ladder.policies import quant
    from ladder.tasks import arithmetic
    from ladder.viz import lm_lab

    key = (float(lr), seed, warmup_updates, prompts, group_size)
    tables = _TOKEN_RUNS.get(key, [])
    if len(tables) < mu:
        with quiet_progress():
            fixed = lm_lab.fixed_grpo_batch(seed, warmup_updates, prompts, group_size, qlora=True)
        tokenizer = quant.load_tokenizer(str(arithmetic.tiny_math_model()))
        problems = arithmetic.train_eval_split(None, fixed.cfg.problems.eval_size)[0]
        picked = problems[warmup_updates * prompts:(warmup_updates + 1) * prompts]
        with lm_lab.quiet_run(), quiet_progress():
            tables = _TOKEN_RUNS[key] = _token_passes(fixed, tokenizer, picked, mu, float(lr))
    return tables[mu - 1]


def _token_passes(fixed, tokenizer, picked: list[dict], mu: int, lr: float) -> list[TokenTable]:
    from ladder.policies import quant
    from ladder.viz import lm_lab

    policy, batch, mask = fixed.policy, fixed.batch, fixed.batch.mask
    real = mask.bool()
    pieces = [[tokenizer.decode([int(a)]) for a, m in zip(row, row_mask) if m] for row, row_mask in
              zip(batch.actions, real)]
    questions = [p["question"] for p in picked for _ in range(fixed.group_size)]
    cfg = lm_lab.grpo_update_config(fixed.cfg, mu=1)
    policy.load_state_dict(fixed.old_state, strict=False)
    optimizer = quant.make_optimizer(policy.parameters(), lr, "adamw", torch.device("cpu"))
    generator = torch.Generator().manual_seed(0)
    tables = []
    try:
        for k in range(mu):
            core.update(policy, batch, optimizer, cfg, generator)
            logp_all = lm_lab.full_log_probs(policy.model, batch, fixed.cfg.generation.temperature)
            p_all = logp_all.exp()
            tables.append(TokenTable(
                pieces=pieces, logp=logp_all.gather(-1, batch.actions[..., None]).squeeze(-1) * mask,
                old_logp=batch.old_logp * mask, advantages=batch.advantages.sum(1) / mask.sum(1).clamp(min=1),
                mask=mask.clone(),
                kl_ref=(p_all * (logp_all - fixed.logp_ref_all)).sum(-1) * mask,
                entropy=-(p_all * logp_all).sum(-1) * mask, rewards=fixed.rewards.tolist(), prompts=questions,
                group_size=fixed.group_size, mu=k + 1))
    finally:
        policy.load_state_dict(fixed.old_state, strict=False)  # the cached policy stays π_old
    return tables


TOKEN_QUANTITIES = ("gradient kept / clipped", "π_θ/π_old", "Â sign", "KL to π_ref", "entropy")


def _rgb(x: float, cmap: str) -> str:
    """#rrggbb of matplotlib colour map ``cmap`` at x ∈ [0, 1], light enough to read text on."""
    from matplotlib import colormaps

    r, g, b, _ = colormaps[cmap](float(np.clip(x, 0.0, 1.0)))
    r, g, b = (0.35 + 0.65 * c for c in (r, g, b))
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def tokens_html(table: TokenTable, clip: dict, quantity: str, eps_low: float, eps_high: float, level: str) -> str:
    """The completions as HTML text, each token coloured by ``quantity``; clipped tokens struck through."""
    B = len(table.pieces)
    ratio = torch.exp(table.logp - table.old_logp)
    seq = clip["ratio"][:, 0]
    real = table.mask.bool()

    def top(x: torch.Tensor) -> float:  # the largest value over real tokens: the colour scale's end
        return max(float(x[real].max()) if real.any() else 0.0, 1e-6)

    kl_hi, h_hi = top(table.kl_ref), top(table.entropy)
    lines = []
    for i in range(B):
        if i % table.group_size == 0:
            lines.append(f"<div style='margin-top:6px'><b>{html.escape(table.prompts[i])}</b></div>")
        adv = float(table.advantages[i])
        spans = []
        for t, piece in enumerate(table.pieces[i]):
            r, sig, cut = float(ratio[i, t]), bool(clip["signal"][i, t]), bool(clip["no_grad"][i, t])
            if quantity == "gradient kept / clipped":
                color = "#e0e0e0" if not sig else ("#f4a6a6" if cut else "#a8e0a8")
            elif quantity == "π_θ/π_old":
                color = _rgb(0.5 + math.log(max(r, 1e-6)) / (4 * max(eps_low, eps_high, 1e-3)), "coolwarm")
            elif quantity == "Â sign":
                color = "#e0e0e0" if adv == 0 else ("#a8e0a8" if adv > 0 else "#f4a6a6")
            elif quantity == "KL to π_ref":
                color = _rgb(float(table.kl_ref[i, t]) / kl_hi, "Oranges")
            else:
                color = _rgb(float(table.entropy[i, t]) / h_hi, "Purples")
            title = (f"ρ={r:.3f} Â={adv:+.2f} KL_ref={float(table.kl_ref[i, t]):.3f} "
                     f"H={float(table.entropy[i, t]):.3f}" + (" clipped" if cut else ""))
            style = f"background:{color};padding:0 1px" + (";text-decoration:line-through" if cut else "")
            text = html.escape(piece).replace(" ", "&nbsp;").replace("\n", "⏎")
            spans.append(f"<span title='{title}' style='{style}'>{text}</span>")
        dropped = bool(clip["rows_dropped"][i])
        head = f"reward {table.rewards[i]:g} Â={adv:+.2f}" + (f" s={float(seq[i]):.3f}" if level == "sequence" else "")
        flag = " <b style='color:#c00'>whole completion clipped</b>" if dropped else ""
        lines.append(f"<div style='font-family:monospace;font-size:12px;white-space:nowrap'>"
                     f"<span style='color:#666'>{head}</span> {''.join(spans)}{flag}</div>")
    legend = {"gradient kept / clipped": "green: gradient flows · red, struck: clipped · grey: Â = 0",
              "π_θ/π_old": "blue: π_θ/π_old < 1 · red: > 1 (full scale at the clip's edge ×2)",
              "Â sign": "green: Â > 0 · red: Â < 0 · grey: Â = 0",
              "KL to π_ref": f"white → orange: exact KL(π_θ‖π_ref) at the position, 0 → {kl_hi:.3f}",
              "entropy": f"white → purple: entropy of π_θ at the position, 0 → {h_hi:.3f}"}[quantity]
    return (f"<div><i>{html.escape(legend)}; struck-through tokens lose their gradient at the {level} level "
            f"(ε_low {eps_low:g}, ε_high {eps_high:g}); hover a token for its numbers</i></div>" + "".join(lines))


EPS_HIGH_RATIOS = {"ε_high = ε": 1.0, "ε_high = 1.4·ε (DAPO: 0.28 / 0.2)": 1.4,
                   "ε_high = 4/3·ε (GSPO: 4e-4 / 3e-4)": 4 / 3}


def _ratio_panel(ax, table: TokenTable, clips: dict, level: str, eps_low: float, eps_high: float) -> None:
    """Each real token's ρ_t against its completion, coloured by whether its gradient flows; each completion's
    sequence ratio s_i as a diamond; the band [1 − ε_low, 1 + ε_high]."""
    real = table.mask.bool()
    token_ratio = torch.exp(table.logp - table.old_logp)
    rows = torch.arange(len(real))[:, None].expand_as(real)
    sig, cut = clips[level]["signal"], clips[level]["no_grad"]
    for sel, color, label in ((real & ~sig, "0.7", "Â = 0"), (sig & ~cut, "C2", "gradient flows"),
                              (cut, "C3", f"clipped at the {level} level")):
        ax.scatter(token_ratio[sel].numpy(), rows[sel].numpy(), s=10, color=color, label=f"ρ_t, {label}")
    ax.scatter(clips["sequence"]["ratio"][:, 0].numpy(), np.arange(len(real)), marker="D", s=22,
               facecolor="none", edgecolor="k", label="sequence s_i")
    ax.axvspan(1 - eps_low, 1 + eps_high, color="C0", alpha=0.1)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("π_θ/π_old (log)")
    ax.set_ylabel("completion")
    ax.set_title(f"after μ = {table.mu} pass(es); band = [1 − ε_low, 1 + ε_high]", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)


def _shares_panel(ax, clips: dict) -> tuple[list[float], list[float], int, int]:
    """The share of the tokens with Â ≠ 0, and of the completions whole, each level clips: (token shares,
    completion shares, tokens with Â ≠ 0, completions with Â ≠ 0)."""
    n_sig = max(int(clips["token"]["signal"].sum()), 1)
    frac_tok = [float(clips[lv]["no_grad"].sum()) / n_sig for lv in ("token", "sequence")]
    n_rows = max(int(clips["token"]["signal"].any(1).sum()), 1)
    frac_row = [float(clips[lv]["rows_dropped"].sum()) / n_rows for lv in ("token", "sequence")]
    xs = np.arange(2)
    ax.bar(xs - 0.2, frac_tok, 0.4, label="tokens clipped")
    ax.bar(xs + 0.2, frac_row, 0.4, label="whole completions clipped")
    ax.set_xticks(xs)
    ax.set_xticklabels(["token level (GRPO)", "sequence level (GSPO)"])
    ax.set_ylim(0, 1)
    ax.set_title(f"share of the {n_sig} tokens / {n_rows} completions with Â ≠ 0", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    return frac_tok, frac_row, n_sig, n_rows


def token_view(mu: int = 3, eps: float = 0.2, level: str = "token", quantity: str = "gradient kept / clipped",
               passes: Callable[[int], TokenTable] | None = None, max_mu: int = 6, eps_high_ratio: float = 1.0) -> View:
    """A real tiny-GRPO batch after μ passes, each completion token coloured; token- vs sequence-level clipping.

    ``passes(μ) -> TokenTable`` gives the tables (default: ``token_passes``). The toggle does not retrain: the same
    π_θ is clipped per token (GRPO) or per completion (GSPO, ``core.sequence_log_ratio``), which shows which tokens
    and which whole completions would lose their gradient in the next pass. ε is ε_low; ε_high = ε · the chosen
    ratio (``EPS_HIGH_RATIOS``: symmetric, DAPO's clip-higher, GSPO's pair).
    """
    passes = passes or token_passes
    controls = {
        "mu": widgets.IntSlider(value=mu, min=1, max=max_mu, description="μ (passes)", **_SLIDER),
        "eps": widgets.FloatLogSlider(value=eps, base=10, min=-4, max=math.log10(0.5), step=0.1,
                                      description="ε (ε_low)", readout_format=".1e", **_SLIDER),
        "high": widgets.Dropdown(options=list(EPS_HIGH_RATIOS.items()), value=eps_high_ratio, description="ε_high",
                                 layout=widgets.Layout(width="330px")),
        "level": widgets.ToggleButtons(options=["token", "sequence"], value=level, description="clip level",
                                       style={"description_width": "initial", "button_width": "90px"}),
        "quantity": widgets.Dropdown(options=list(TOKEN_QUANTITIES), value=quantity, description="colour by"),
    }
    text = widgets.HTML()

    def draw(v: dict):
        table = passes(v["mu"])
        eps_, eps_high = float(v["eps"]), float(v["eps"]) * v["high"]
        clips = {lv: gradient_mask(table.logp, table.old_logp, table.advantages, table.mask, eps_, eps_high, lv)
                 for lv in ("token", "sequence")}
        clip = clips[v["level"]]
        text.value = tokens_html(table, clip, v["quantity"], eps_, eps_high, v["level"])
        fig = Figure(figsize=(11, 3.8))
        _ratio_panel(fig.add_subplot(1, 2, 1), table, clips, v["level"], eps_, eps_high)
        frac_tok, frac_row, n_sig, n_rows = _shares_panel(fig.add_subplot(1, 2, 2), clips)
        fig.tight_layout()
        data = {"table": table, "clip": clip, "clips": clips, "frac_tokens": dict(zip(("token", "sequence"), frac_tok)),
                "frac_rows": dict(zip(("token", "sequence"), frac_row)), "html": text.value, "eps_low": eps_,
                "eps_high": eps_high}
        data["summary"] = (f"μ = {table.mu}, ε_low / ε_high = {eps_:.1e} / {eps_high:.1e}, of the {n_sig} tokens "
                           f"({n_rows} completions) with Â ≠ 0: token level clips {frac_tok[0]:.0%} of the tokens "
                           f"({frac_row[0]:.0%} of the completions whole), sequence level {frac_tok[1]:.0%} "
                           f"({frac_row[1]:.0%})")
        return fig, data

    view = View(controls, draw, "Tokens after μ passes: who loses the gradient, token by token or sequence by sequence")
    view.text = text
    view.children = (*view.children, text)
    return view
