"""Notebook 6b: the newer objectives as functions of the ratio, GDPO's two rewards, the top-entropy mask on real
tokens and top-p's kept mass (its runs of the tiny preset: ``objective_runs``).

    objective_curves      L(ρ) and ∂L/∂ρ of one token (log π_old = 0, so log π_θ = log ρ) for Â = ±1, by autograd
                          through ``core.clipped_surrogate``, ``core.cispo_loss``, ``core.soft_gated_surrogate`` and
                          ``core.gamma_weight`` (a one-token completion: VESPO's sequence ratio ρ_seq is the token's ρ)
    gdpo_advantages       ``core.group_relative`` of Σ_f w_f·r_f against ``core.decoupled_group_relative``
    sampled_tokens        a few completions of the tiny preset's model, with log π and the entropy H_t from
                          ``CausalLMPolicy.evaluate``
    top_p_weights         w_t = π_old/π_sampler of a top-p draw against the nucleus mass the warper kept

and the views ``objective_view`` and ``entropy_mask_view``.
"""

from __future__ import annotations

import functools
import html
from dataclasses import replace

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure

from ladder import core
from ladder.policies.causal_lm import lm_batch
from ladder.policies.low_precision import sampling_warpers
from ladder.rungs import grpo
from ladder.tasks import arithmetic
from ladder.viz._widget import View
from ladder.viz.lm_lab import full_log_probs, quiet_run
from ladder.viz.token_clipping import _rgb

_SLIDER = dict(continuous_update=False, style={"description_width": "initial"}, layout=widgets.Layout(width="250px"))
OBJECTIVES = ("clip ε 0.2", "clip-higher 0.2 / 0.28", "CISPO (ε_max 5)", "SAPO gate", "VESPO φ(ρ_seq)")


# ------------------------------------------------------------------------------ 1 · objectives as functions of r
def _token_losses(r: torch.Tensor, adv: torch.Tensor, p: dict) -> dict[str, torch.Tensor]:
    """Each objective's per-token loss at ratios ``r`` [N, 1], from ladder.core (log π_θ = log r, log π_old = 0)."""
    logp = torch.log(r)
    phi = core.gamma_weight(logp, torch.ones_like(r), adv, p["k_pos"], p["lambda_pos"], p["k_neg"], p["lambda_neg"])
    return {OBJECTIVES[0]: core.clipped_surrogate(r, adv, 0.2),
            OBJECTIVES[1]: core.clipped_surrogate(r, adv, 0.2, 0.28),
            OBJECTIVES[2]: core.cispo_loss(logp, r, adv, 5.0),
            OBJECTIVES[3]: core.soft_gated_surrogate(r, adv, p["tau_pos"], p["tau_neg"]),
            OBJECTIVES[4]: -phi * adv * logp}        # VESPO's gamma_weighted term: −φ(ρ_seq)·Â·log π_θ


def objective_curves(adv: float, ratios=None, tau_pos: float = 1.0, tau_neg: float = 1.05, k_pos: float = 2.0,
                     lambda_pos: float = 3.0, k_neg: float = 3.0, lambda_neg: float = 2.0) -> dict:
    """{objective: (L(ρ), ∂L/∂ρ)} as numpy arrays over ``ratios`` (default 0.3 … 2.5), and "r" (the ratios ρ).

    ∂L/∂ρ is autograd's: 0 where the objective no longer moves the token, > 0 (Â < 0) or < 0 (Â > 0) where a
    gradient step still pushes ρ. CISPO's and VESPO's weights are detached, so for them
    ∂L/∂ρ = −sg(g(ρ))·Â/ρ, with g = min(·, ε_max) or φ."""
    r = torch.linspace(0.3, 2.5, 221, dtype=torch.float64) if ratios is None else torch.as_tensor(
        ratios, dtype=torch.float64)
    leaf = r[:, None].clone().requires_grad_(True)
    adv_t = torch.full_like(leaf, float(adv))
    params = dict(tau_pos=tau_pos, tau_neg=tau_neg, k_pos=k_pos, lambda_pos=lambda_pos, k_neg=k_neg,
                  lambda_neg=lambda_neg)
    out = {"r": r.numpy(), "adv": float(adv)}
    for name, loss in _token_losses(leaf, adv_t, params).items():
        (grad,) = torch.autograd.grad(loss.sum(), leaf, retain_graph=True)  # log r is shared
        out[name] = (loss.detach()[:, 0].numpy(), grad[:, 0].numpy())
    return out


def pushing_at(r: float, adv: float, **params) -> dict[str, float]:
    """{objective: ∂L/∂ρ at one ratio}; an objective "still pushes" where it is not 0."""
    curves = objective_curves(adv, [r], **params)
    return {name: float(curves[name][1][0]) for name in OBJECTIVES}


def vespo_against_clip(curves: dict) -> dict:
    """VESPO's strongest push ∂L/∂ρ = −φ(ρ)·Â/ρ (Â > 0; φ(ρ)/ρ = e^λ ρ^(k−1) e^(−λρ) peaks at ρ = (k − 1)/λ, not at
    φ's k/λ) and its push against the clip's below ρ = 1 ("harder": larger |∂L/∂ρ| at every drawn ρ < 1).
    ``curves`` is ``objective_curves(+1, …)``."""
    r = curves["r"]
    vespo, clip = curves[OBJECTIVES[4]][1], curves[OBJECTIVES[0]][1]
    peak, below = int(np.argmin(vespo)), r < 1.0
    return {"peak_r": float(r[peak]), "peak_push": float(vespo[peak]), "r_first": float(r[0]),
            "vespo_first": float(vespo[0]), "clip_first": float(clip[0]), "times_first": float(vespo[0] / clip[0]),
            "harder_below_1": bool((np.abs(vespo[below]) > np.abs(clip[below])).all())}


def objective_view(tau_pos: float = 1.0, tau_neg: float = 1.05, k_pos: float = 2.0, lambda_pos: float = 3.0,
                   k_neg: float = 3.0, lambda_neg: float = 2.0) -> View:
    """The five curves' loss and ∂L/∂ρ against ρ (four formulas, the clip at two ε), for Â = +1 and Â = −1."""
    controls = {name: widgets.FloatSlider(value=value, min=low, max=high, step=step, description=name, **_SLIDER)
                for name, value, low, high, step in (
                    ("tau_pos", tau_pos, 0.25, 8.0, 0.25), ("tau_neg", tau_neg, 0.25, 8.0, 0.05),
                    ("k_pos", k_pos, 0.5, 8.0, 0.5), ("lambda_pos", lambda_pos, 0.5, 8.0, 0.5),
                    ("k_neg", k_neg, 0.5, 8.0, 0.5), ("lambda_neg", lambda_neg, 0.5, 8.0, 0.5))}

    def draw(v: dict):
        fig = Figure(figsize=(11, 5.6))
        curves = {adv: objective_curves(adv, **v) for adv in (1.0, -1.0)}
        for row, (adv, c) in enumerate(curves.items()):
            for col, (what, index) in enumerate((("per-token loss L(ρ)", 0), ("∂L/∂ρ (autograd)", 1))):
                ax = fig.add_subplot(2, 2, 2 * row + col + 1)
                for i, name in enumerate(OBJECTIVES):
                    ax.plot(c["r"], c[name][index], color=f"C{i}", lw=2.2 if i == 0 else 1.4,
                            ls="--" if i == 1 else "-", label=name)
                ax.axvline(1.0, color="0.6", lw=0.8)
                ax.axhline(0.0, color="0.6", lw=0.8)
                ax.set_title(f"Â = {adv:+g}: {what}", fontsize=9)
                ax.set_xlabel("ρ = π_θ/π_old", fontsize=8)
                if index == 1:
                    ax.set_ylim(-2.5, 2.5)
        fig.axes[0].legend(fontsize=7, loc="best")
        fig.tight_layout()
        at = pushing_at(1.5, 1.0, **v)
        data = {"curves": curves, "at_1_5": at, "vespo_vs_clip": vespo_against_clip(curves[1.0]),
                "summary": "∂L/∂ρ at ρ = 1.5, Â = +1: " + ", ".join(f"{n} {g:+.3f}" for n, g in at.items())}
        return fig, data

    return View(controls, draw, "Five objectives as functions of the ratio (one token, π_θ = ρ·π_old)")


# ------------------------------------------------------------------------------------- 2 · two rewards: GDPO
def example_rewards(groups: int = 4, group_size: int = 4, seed: int = 1) -> torch.Tensor:
    """[groups·G, 2]: correctness in {0, 1} and a length score in 0 … 10, drawn with a seeded generator;
    the last group is all correct (only the length score differs there)."""
    g = torch.Generator().manual_seed(seed)
    correct = torch.bernoulli(torch.full((groups * group_size,), 0.5), generator=g)
    correct[-group_size:] = 1.0
    length = torch.randint(0, 11, (groups * group_size,), generator=g).double()
    return torch.stack([correct.double(), length], dim=1)


def _share_explained(adv: torch.Tensor, reward: torch.Tensor, group_size: int) -> float:
    """corr(Â, r_f − mean_group r_f) over the batch: how closely the advantage follows this reward."""
    centred = reward.view(-1, group_size) - reward.view(-1, group_size).mean(1, keepdim=True)
    x, y = adv - adv.mean(), centred.reshape(-1)
    return float((x * y).sum() / ((x.norm() * y.norm()).clamp(min=1e-12)))


def gdpo_advantages(per_function: torch.Tensor, weights=(1.0, 1.0), group_size: int = 4) -> dict:
    """Â of the weighted sum (``core.group_relative``, sum_then_normalize) and GDPO's
    (``core.decoupled_group_relative``, normalize_then_sum), and each one's correlation with each reward."""
    w = torch.tensor(weights, dtype=per_function.dtype)
    summed = core.group_relative((per_function * w).sum(1), group_size)
    decoupled = core.decoupled_group_relative(per_function, w, group_size)
    corr = {name: [_share_explained(adv, per_function[:, f], group_size) for f in range(per_function.shape[1])]
            for name, adv in (("sum_then_normalize", summed), ("normalize_then_sum", decoupled))}
    return {"rewards": per_function, "sum_then_normalize": summed, "normalize_then_sum": decoupled,
            "corr": corr, "group_size": group_size, "weights": list(weights)}


def rank_in_group(result: dict, group: int = 0) -> dict:
    """Per aggregation, in one group: the Â of its wrong completion with the highest length score and of its right
    one with the lowest, and whether every right completion ranks above every wrong one."""
    size = result["group_size"]
    rows = result["rewards"][group * size:(group + 1) * size].tolist()
    wrong = [group * size + i for i, (c, _) in enumerate(rows) if c == 0]
    right = [group * size + i for i, (c, _) in enumerate(rows) if c == 1]
    score = result["rewards"][:, 1].tolist()
    top_wrong, low_right = max(wrong, key=score.__getitem__), min(right, key=score.__getitem__)
    out = {"wrong_score": score[top_wrong], "right_score": score[low_right]}
    for how in ("sum_then_normalize", "normalize_then_sum"):
        adv = result[how]
        out[how] = {"wrong": float(adv[top_wrong]), "right": float(adv[low_right]),
                    "right_above_wrong": bool(min(adv[right]) > max(adv[wrong]))}
    return out


def gdpo_markdown(result: dict) -> str:
    rows = ["| group | correct | length score | Â sum_then_normalize | Â normalize_then_sum (GDPO) |",
            "|---:|---:|---:|---:|---:|"]
    for i, (c, n) in enumerate(result["rewards"].tolist()):
        rows.append(f"| {i // result['group_size']} | {c:g} | {n:g} | {result['sum_then_normalize'][i]:+.2f} | "
                    f"{result['normalize_then_sum'][i]:+.2f} |")
    return "\n".join(rows)


# ------------------------------------------------------------------------ 3 · the tiny model: entropy and top-p
@functools.lru_cache(maxsize=1)
def tiny_policy(seed: int = 0):
    """(policy, tokenizer, cfg, held-out problems) of the tiny grpo preset, loaded by the rung, offline."""
    cfg = grpo.Config(**{**grpo.PRESETS["tiny"], "seed": seed, "progress": False})
    with quiet_run():
        torch.manual_seed(seed)
        system_prompt, problems, held_out, model_path, tokenizer = grpo.load_task(cfg)
        policy, _ = grpo.load_policy(cfg, model_path, torch.device("cpu"))
    return policy, tokenizer, replace(cfg, system_prompt=system_prompt), problems


def _draw(prompts: int, group_size: int, seed: int, top_p: float) -> tuple:
    policy, tokenizer, cfg, problems = tiny_policy()
    picked = problems[:prompts]
    texts = [arithmetic.chat_prompt(tokenizer, p["question"], cfg.problems.system_prompt) for p in picked]
    enc = tokenizer(texts, return_tensors="pt", padding=True)
    prompt_ids = enc.input_ids.repeat_interleave(group_size, 0)
    prompt_mask = enc.attention_mask.repeat_interleave(group_size, 0)
    with quiet_run():
        torch.manual_seed(seed)
        completion, mask, sampler_logp = policy.generate(prompt_ids, prompt_mask, cfg.generation.max_new_tokens,
                                                         tokenizer.pad_token_id, tokenizer.eos_token_id,
                                                         top_p=top_p, record_logp=True)
        batch = lm_batch(prompt_ids, prompt_mask, completion, mask, tokenizer.pad_token_id)
        with torch.no_grad():
            logp, entropy, _ = policy.evaluate(batch)
    lengths = mask.sum(1).tolist()
    pieces = [[tokenizer.decode([t]) for t in row[:int(n)]] for row, n in zip(completion.tolist(), lengths)]
    return policy, batch, logp.float(), entropy.float(), sampler_logp.float(), mask.float(), pieces, picked


@functools.lru_cache(maxsize=2)
def sampled_tokens(prompts: int = 6, group_size: int = 1, seed: int = 0) -> dict:
    """Completions of the tiny model (τ = 1, no top-p), with log π and H_t = −Σ_v π log π from ``evaluate``."""
    _, _, logp, entropy, _, mask, pieces, picked = _draw(prompts, group_size, seed, 1.0)
    return {"logp": logp, "entropy": entropy, "mask": mask, "pieces": pieces, "group_size": group_size,
            "questions": [p["question"] for p in picked]}


def top_p_weights(top_p: float = 0.8, prompts: int = 6, group_size: int = 1, seed: int = 0) -> dict:
    """A top-p draw: w_t = exp(log π_old − log π_sampler) (evaluate vs the recorded log-probs) against the mass
    Σ_{b∈N} π_old(b) of the nucleus N that generate's own warper keeps at each position."""
    policy, batch, logp, _, sampler_logp, mask, _, _ = _draw(prompts, group_size, seed, top_p)
    real = mask.bool()
    with torch.no_grad():
        logp_all = full_log_probs(policy.model, batch, policy.temperature)          # [B, T, V]
    flat = logp_all.reshape(-1, logp_all.shape[-1])
    kept = torch.isfinite(sampling_warpers(1.0, 0, top_p)(None, flat.clone())).view_as(logp_all)
    mass = (logp_all.exp() * kept).sum(-1)
    w = torch.exp(logp - sampler_logp)
    return {"w": w[real], "kept_mass": mass[real], "max_diff": float((w - mass)[real].abs().max()),
            "top_p": top_p, "tokens": int(real.sum()), "share_w_below_1": float((w[real] < 1 - 1e-6).float().mean())}


def entropy_html(tokens: dict, kept: torch.Tensor) -> str:
    """The completions, each token shaded by its entropy; the tokens the mask keeps boxed and bold."""
    h_max = max(float(tokens["entropy"][tokens["mask"].bool()].max()), 1e-6)
    lines = []
    for i, pieces in enumerate(tokens["pieces"]):
        if i % tokens["group_size"] == 0:
            lines.append(f"<div style='margin-top:6px'><b>{html.escape(tokens['questions'][i // tokens['group_size']])}"
                         "</b></div>")
        spans = []
        for t, piece in enumerate(pieces):
            h = float(tokens["entropy"][i, t])
            style = f"background:{_rgb((h / h_max) ** 0.5, 'Purples')};padding:0 1px"   # √: the small H visible
            if kept[i, t]:
                style += ";font-weight:bold;outline:1px solid #c00"
            text = html.escape(piece).replace(" ", "&nbsp;").replace("\n", "⏎")
            spans.append(f"<span title='H={h:.3f}' style='{style}'>{text}</span>")
        lines.append(f"<div style='font-family:monospace;font-size:12px;white-space:nowrap'>{''.join(spans)}</div>")
    legend = (f"white → purple: entropy H_t, 0 → {h_max:.3f} nats (square-root scale); boxed in red and bold: kept by "
              "core.high_entropy_mask (the policy term trains only these); hover for H_t")
    return f"<div><i>{html.escape(legend)}</i></div>" + "".join(lines)


def entropy_mask_view(q: float = 0.2, tokens: dict | None = None) -> View:
    """The top-q entropy tokens of real completions (``core.high_entropy_mask``), and the entropies' histogram."""
    tokens = tokens or sampled_tokens()
    controls = {"q": widgets.FloatSlider(value=q, min=0.0, max=1.0, step=0.05, description="q (keep)", **_SLIDER)}
    text = widgets.HTML()

    def draw(v: dict):
        mask = tokens["mask"]
        kept = core.high_entropy_mask(tokens["entropy"], mask, v["q"])
        text.value = entropy_html(tokens, kept)
        real = mask.bool()
        h = tokens["entropy"][real].numpy()
        fig = Figure(figsize=(11, 2.8))
        ax = fig.add_subplot(1, 1, 1)
        bins = np.linspace(0.0, max(h.max(), 1e-3), 40)
        ax.hist(h, bins=bins, color="0.75", label="all real tokens")
        ax.hist(tokens["entropy"][kept.bool()].numpy(), bins=bins, color="C3", label="kept by the mask")
        ax.set_yscale("log")
        ax.set_xlabel("entropy H_t of π_θ at the position (nats)")
        ax.legend(fontsize=8)
        share = float(kept.sum() / mask.sum())
        ax.set_title(f"q = {v['q']:.2f}: {int(kept.sum())} of {int(mask.sum())} tokens kept ({share:.0%})",
                     fontsize=9)
        fig.tight_layout()
        data = {"kept": kept, "share": share, "q": v["q"], "html": text.value,
                "summary": f"q = {v['q']:.2f}: kept {int(kept.sum())} / {int(mask.sum())} real tokens = {share:.1%}"}
        return fig, data

    view = View(controls, draw, "The top-entropy mask on the tiny model's tokens")
    view.text = text
    view.children = (*view.children, text)
    return view


def most_uncertain(tokens: dict, n: int = 2) -> list[dict]:
    """The ``n`` real tokens of ``sampled_tokens`` with the largest entropy, each with where it sits in the worked
    sum: its text up to the token, the line it ends (1: the units column, 2: the tens column), which addend of that
    line it is, and the carry the units sum calls for (None where the first line is not a finished sum)."""
    h = tokens["entropy"].masked_fill(~tokens["mask"].bool(), -1.0)
    out = []
    for flat in h.flatten().topk(n).indices.tolist():
        i, t = divmod(flat, h.shape[1])
        text = "".join(tokens["pieces"][i][:t + 1])
        lines = text.split("\n")
        units = lines[0].split(" = ")
        finished = len(lines) >= 2 and len(units) == 2 and units[1].strip().isdigit()
        out.append({"entropy": float(h[i, t]), "piece": tokens["pieces"][i][t], "text": text, "line": len(lines),
                    "addend": len(lines[-1].split(" + ")),
                    "carry": int(int(units[1]) >= 10) if finished else None})
    return out
