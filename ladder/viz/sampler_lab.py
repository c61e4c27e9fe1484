"""Notebook 5, the fourth policy: a real tiny batch drawn by a cheaper sampler, and the exact bias of not
correcting for it (the figures and the widget are in ``sampler_views``).

Four policies (``four_policies``). The tiny grpo preset (LoRA), loaded by the rung's ``load_task`` and
``load_policy``, after ``warmup_updates`` ordinary GRPO updates:

    π_ref      the model with its LoRA adapter disabled
    π_old      the trainer's float32 forward of the current weights
    π_sampler  the same weights rounded to bfloat16 (``policy.sampler_dtype``); it draws the batch and its
               log-probs are recorded as it samples (``generate(record_logp=True)``)
    π_θ        π_old after the μ = ``steps`` passes of one ``grpo.grpo_step`` with ``--sampler-correction``

and the same prompts drawn, with the same seed, by every sampler of SAMPLERS × ``temperatures`` (the trainer
stays at the preset's τ = 1): log π_old and log π_sampler of each, so that the widget only re-reads numbers.
The weight of a token and of a completion (``core.sampler_log_ratio``, ``core.sampler_weights``):

    w_t = π_old(a_t) / π_sampler(a_t),        w_i = Π_t w_t = exp(Σ_t log w_t)

Exact bias (``exact_sampler_gradients``). A K-action categorical, π_old = softmax(θ), π_sampler =
softmax(θ + d·u); an action is one token with its advantage Â(a). Its loss L(a) is the clipped surrogate
(``core.clipped_surrogate``) times the sampler's weight (``core.sampler_correction``), differentiated by
autograd; the actions are drawn by π_sampler, so with every action enumerated

    g      = Σ_a π_sampler(a) ∇L(a)                     what a batch's gradient averages to
    g*     = Σ_a π_old(a) ∇L(a) with no weight          the on-policy gradient (what the loss means)
    bias   = ‖g − g*‖,   variance = Σ_a π_sampler(a) ‖∇L(a) − g‖²   (of one draw; of a mean of N: ÷ N)

Truncating w at C_max gives π_sampler · min(w, C) = min(π_old, C·π_sampler): the bias is
Σ_a (π_old(a) − C·π_sampler(a))⁺ ∇L(a), from the actions the sampler under-draws by more than C, and the
variance is at most C · Σ_a π_old(a) ‖∇L(a)‖².
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np
import torch

from ladder import core
from ladder.core.off_policy import sampler_stat_tensors
from ladder.policies.causal_lm import lm_batch
from ladder.policies.low_precision import SAMPLER_DTYPES
from ladder.rewards import load_all
from ladder.rungs import grpo
from ladder.rungs.grpo.rollout import sample
from ladder.runtime.distributed import Processes
from ladder.runtime.runlog import seed_everything
from ladder.specs import option_defaults
from ladder.tasks import math_problems
from ladder.viz import lab_cache
from ladder.viz.lm_lab import quiet_run, warm_up

SAMPLERS = ("same", "float16", "bfloat16")       # --sampler-dtype
TEMPERATURES = (0.8, 0.9, 1.0, 1.1, 1.25)        # the sampler's τ; the trainer's stays the preset's
MODES = tuple(m for m in core.CORRECTIONS if m != "none")


@dataclass
class SampledBatch:
    """One sampler's draw of the fixed prompts: log π_old (the trainer, float32) and log π_sampler, ``[B, T]``."""

    sampler: str
    temperature: float
    old_logp: torch.Tensor
    sampling_logp: torch.Tensor
    mask: torch.Tensor

    @property
    def log_w(self) -> torch.Tensor:
        """log w_t = log π_old − log π_sampler on the real tokens, 0 on padding, ``[B, T]``."""
        return core.sampler_log_ratio(self.old_logp, self.sampling_logp, self.mask, "token")


@dataclass
class FourPolicies:
    batches: dict            # (sampler, τ) → SampledBatch, the same prompts and seed
    main: SampledBatch       # the bfloat16 sampler at the trainer's τ: the batch of the grpo_step
    logp_theta: torch.Tensor  # log π_θ of the main batch's tokens after the step's μ passes
    ref_logp: torch.Tensor   # log π_ref (adapter off)
    tokens: list             # the main batch's completion tokens, as text, per row
    record: dict             # the grpo_step's own record (its sampler/* metrics)
    cfg: grpo.Config         # the step's configuration
    warmup_updates: int      # ordinary GRPO updates before the step (π_old ≠ π_ref)


def four_policies(seed: int = 0, prompts: int = 4, group_size: int = 8, warmup_updates: int = 4, steps: int = 2,
                  temperatures: tuple = TEMPERATURES) -> FourPolicies:
    """The four policies on one batch, and the same prompts drawn by every sampler (see the module's docstring).

    Cached: the widget and every printed number read the same batch."""
    return _cached(seed, prompts, group_size, warmup_updates, steps, tuple(temperatures))


@functools.lru_cache(maxsize=2)
@lab_cache.on_disk  # notebook 5 and tests/test_viz_sampler.py share it
def _cached(seed, prompts, group_size, warmup_updates, steps, temperatures) -> FourPolicies:
    with quiet_run():
        return _four_policies(seed, prompts, group_size, warmup_updates, steps, temperatures)


def _four_policies(seed, prompts, group_size, warmup_updates, steps, temperatures) -> FourPolicies:
    plain = grpo.Config(**{**grpo.PRESETS["tiny"], "prompts_per_step": prompts, "group_size": group_size,
                           "seed": seed, "progress": False})
    cfg = replace(plain, sampler_dtype="bfloat16", sampler_correction="token_truncate", mu=steps)
    device = torch.device("cpu")
    seed_everything(seed)
    system_prompt, problems, _, model_path, tokenizer = grpo.load_task(plain)
    policy, optimizer = grpo.load_policy(plain, model_path, device)
    stream = grpo.ProblemStream(problems, seed)
    funcs, weights = load_all(plain.rewards.funcs), grpo.reward_weights(plain)

    def step_of(c: grpo.Config) -> grpo.Step:
        return grpo.make_step(c, policy=policy, optimizer=optimizer, tokenizer=tokenizer, stream=stream,
                              system_prompt=system_prompt, procs=Processes(device), trainer=policy, reward_funcs=funcs)

    warm_up(step_of(plain), warmup_updates)  # the rung's own updates, with its learning-rate warm-up
    old_state = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
    state = stream.state_dict()
    picked = stream.draw(prompts)           # the prompts the step below draws too
    stream.load_state_dict(state)
    texts = [math_problems.prompt(tokenizer, p, system_prompt) for p in picked]

    batches = {}
    for name in SAMPLERS:
        for tau in temperatures:
            policy.sampler_dtype, policy.temperature = SAMPLER_DTYPES[name], tau
            torch.manual_seed(seed + 1)
            try:
                rollout = sample(policy, tokenizer, cfg, picked, texts, weights, funcs, device, record_logp=True)
            finally:
                policy.sampler_dtype, policy.temperature = None, plain.generation.temperature
            with torch.no_grad():
                old = policy.evaluate(lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion,
                                               rollout.mask, tokenizer.pad_token_id))[0].float()
            batches[(name, tau)] = SampledBatch(name, tau, old, rollout.sampling_logp.float(), rollout.mask.float())

    # The step itself: grpo_step samples the same prompts with the same seed, records π_sampler, runs μ passes.
    policy.sampler_dtype = SAMPLER_DTYPES["bfloat16"]
    torch.manual_seed(seed + 1)
    record, rollout, _ = grpo.grpo_step(step_of(cfg))
    policy.sampler_dtype = None
    batch = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask,
                     tokenizer.pad_token_id)
    with torch.no_grad():
        logp_theta = policy.evaluate(batch)[0].float()
        ref_logp = policy.ref_logp(batch).float()
        policy.load_state_dict(old_state, strict=False)                    # back to π_old
        old = policy.evaluate(batch)[0].float()
    main = SampledBatch("bfloat16", plain.generation.temperature, old, rollout.sampling_logp.float(),
                        rollout.mask.float())
    tokens = [[tokenizer.decode([t]) for t in row[:int(n)]] for row, n in
              zip(rollout.completion.tolist(), rollout.mask.sum(1).tolist())]
    return FourPolicies(batches, main, logp_theta, ref_logp, tokens, record, cfg, warmup_updates)


# ------------------------------------------------------------------------------------ what the batch shows
def gaps(four: FourPolicies) -> dict[str, dict[str, float]]:
    """|Δ log π| over the main batch's real tokens (mean, max) for the three pairs of policies."""
    b, real = four.main, four.main.mask.bool()
    pairs = {"log π_old − log π_sampler": b.old_logp - b.sampling_logp,
             "log π_θ − log π_old": four.logp_theta - b.old_logp, "log π_old − log π_ref": b.old_logp - four.ref_logp}
    return {name: {"mean": d.abs()[real].mean().item(), "max": d.abs()[real].max().item(),
                   "values": d.abs()[real].numpy()} for name, d in pairs.items()}


def mismatch(b: SampledBatch, c_max: float | None = None, mode: str = "none") -> dict[str, float]:
    """``core.sampler_stat_tensors`` of one batch (with ``mode``'s weights at C_max), as floats."""
    weights = None if mode == "none" else core.sampler_weights(b.old_logp, b.sampling_logp, b.mask, mode, None, c_max)
    return {k: v.item() for k, v in sampler_stat_tensors(b.old_logp, b.sampling_logp, b.mask, mode, weights).items()}


def sequence_spread(b: SampledBatch) -> dict:
    """Why a sequence's weight spreads where a token's does not: the std over completions of the prefix sum
    Σ_{t≤k} log w_t at each length k (padding adds 0), against the std of one token's log w_t over the batch."""
    log_w = b.log_w
    seq_w = core.sampler_log_ratio(b.old_logp, b.sampling_logp, b.mask, "sequence").exp()
    prefix_std = log_w.cumsum(1).std(0).numpy()
    token_std = log_w[b.mask.bool()].std().item()
    T = int(b.mask.sum(1).max().item())
    return {"prefix_std": prefix_std[:T], "token_std": token_std, "seq_std": float(prefix_std[T - 1]), "length": T,
            "sqrt_length_token_std": token_std * T ** 0.5,
            "token_w": (log_w[b.mask.bool()].exp().min().item(), log_w[b.mask.bool()].exp().max().item()),
            "seq_w": (seq_w.min().item(), seq_w.max().item())}


def kept(b: SampledBatch, c_max: float, c_min: float | None = None) -> dict[str, dict]:
    """What each mode does at C_max: how many tokens (token modes) or completions (sequence modes) it changes
    (truncates to C_max or masks to 0), of how many, and the weights' mean after."""
    out = {}
    for mode in MODES:
        weights = core.sampler_weights(b.old_logp, b.sampling_logp, b.mask, mode, c_min, c_max)
        raw = core.sampler_weights(b.old_logp, b.sampling_logp, b.mask, mode, None, None)
        token = mode.startswith("token")
        changed = ((weights != raw) & b.mask.bool()) if token else (weights != raw).squeeze(1)
        of = int(b.mask.sum().item()) if token else len(b.mask)
        shown = weights[b.mask.bool()] if token else weights.squeeze(1)
        out[mode] = {"unit": "tokens" if token else "completions", "changed": int(changed.sum().item()), "of": of,
                     "frac": changed.sum().item() / of, "mean_weight": shown.mean().item(),
                     "verb": "truncated" if mode.endswith("truncate") else "masked"}
    return out


def modes_markdown(b: SampledBatch, c_maxes=(3.0, 1.001)) -> str:
    """``kept`` as a table: one row per mode, one column per C_max."""
    tables = {c: kept(b, c) for c in c_maxes}
    lines = ["| mode | unit | " + " | ".join(f"C_max = {c:g}" for c in c_maxes) + " |",
             "|---|---|" + "---|" * len(c_maxes)]
    for mode in MODES:
        cells = [f"{t[mode]['changed']} of {t[mode]['of']} {t[mode]['verb']} (mean weight {t[mode]['mean_weight']:.4f})"
                 for t in tables.values()]
        lines.append(f"| `{mode}` | {tables[c_maxes[0]][mode]['unit']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def samplers_markdown(four: FourPolicies, settings, c_max: float = 3.0) -> str:
    """One row per (sampler, τ): the mismatch, the token and sequence weights' ranges, and what C_max changes."""
    lines = ["| sampler | τ | mean \\|Δ log π\\| | max | w_t from – to | w_t > 1 | w_i from – to | changed at "
             f"C_max = {c_max:g} |", "|---|---|---|---|---|---|---|---|"]
    for key in settings:
        b = four.batches[key]
        m, s = mismatch(b), sequence_spread(b)
        above = (b.log_w[b.mask.bool()] > 0).float().mean().item()
        changed = sum(d["changed"] for d in kept(b, c_max).values())
        lines.append(f"| `{key[0]}` | {key[1]:g} | {m['sampler/logp_diff_mean']:.2e} "
                     f"| {m['sampler/logp_diff_max']:.3f} | {s['token_w'][0]:.3f} – {s['token_w'][1]:.3f} "
                     f"| {above:.0%} | {s['seq_w'][0]:.3f} – {s['seq_w'][1]:.3f} | {changed} |")
    return "\n".join(lines)


def four_policy_table(four: FourPolicies, width: int = 8) -> str:
    """The tokens around the batch's largest |log π_old − log π_sampler|, with all four log-probs, w_t and ρ_t(θ)."""
    b = four.main
    gap = ((b.old_logp - b.sampling_logp).abs() * b.mask)
    row, col = divmod(int(gap.argmax().item()), gap.shape[1])
    start = max(0, min(col - width // 2, len(four.tokens[row]) - width))
    p_old = b.old_logp[row, col].exp().item()
    lines = [f"completion {row}, tokens {start}–{start + width - 1} (the largest mismatch of the batch is token {col}, "
             f"π_old = {p_old:.2f})",
             "", "| token | log π_sampler | log π_old | log π_θ | log π_ref | w_t = π_old/π_sampler "
             "| ρ_t(θ) = π_θ/π_old |", "|---|---|---|---|---|---|---|"]
    for t in range(start, min(start + width, len(four.tokens[row]))):
        s, o, th, r = (x[row, t].item() for x in (b.sampling_logp, b.old_logp, four.logp_theta, four.ref_logp))
        tok = four.tokens[row][t].replace("\n", "⏎").replace(" ", "␣").replace("|", "\\|")
        lines.append(f"| `{tok}` | {s:.4f} | {o:.4f} | {th:.4f} | {r:.4f} | {np.exp(o - s):.4f} "
                     f"| {np.exp(th - o):.4f} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ the exact bias, categorical
_LOGITS = (1.5, 1.0, 0.5, 0.0, -0.5, -1.0)      # θ_old: π_old = softmax(θ_old)
_REWARDS = (0.0, 1.0, 0.0, 0.0, 1.0, 0.0)       # the right answers; Â(a) = R(a) − Σ_a π_old(a) R(a)
_TO_SAMPLER = (0.4, -0.8, 0.3, 0.2, -1.0, 0.6)  # π_sampler = softmax(θ_old + d · this): it under-draws 1 and 4


def _per_action_grads(logp_sampler: torch.Tensor, mode: str, c_max: float | None) -> tuple[torch.Tensor, dict]:
    """∇_θ L(a) for each action a (rows), L(a) = clipped surrogate × the sampler's weight, at θ = θ_old."""
    dt = torch.float64
    base = torch.tensor(_LOGITS, dtype=dt)
    old = torch.log_softmax(base, 0)[:, None]
    rewards = torch.tensor(_REWARDS, dtype=dt)
    adv = (rewards - (old.exp().squeeze(1) * rewards).sum())[:, None]
    theta = base.clone().requires_grad_(True)
    logp = torch.log_softmax(theta, 0)[:, None]
    loss = core.clipped_surrogate(torch.exp(logp - old), adv, 0.2)
    if logp_sampler is not None:
        options, mask = core.SamplerOptions(mode, None, c_max), torch.ones_like(adv)
        weights = core.corrected_weights(old, logp_sampler[:, None], mask, options)
        loss, _ = core.sampler_correction(loss, logp, old, logp_sampler[:, None], adv, mask, options, weights)
    grads = torch.stack([torch.autograd.grad(loss[a, 0], theta, retain_graph=True)[0] for a in range(len(base))])
    return grads, {"p_old": old.exp().squeeze(1), "advantages": adv.squeeze(1)}


def _moments(p: torch.Tensor, grads: torch.Tensor, target: torch.Tensor) -> tuple[np.ndarray, float, float]:
    mean = (p[:, None] * grads).sum(0)
    return mean.numpy(), (mean - target).norm().item(), (p * ((grads - mean) ** 2).sum(1)).sum().item()


def exact_sampler_gradients(distance: float = 1.5, samples: int = 64, c_maxes=None) -> dict:
    """Bias and variance of the batch gradient under π_sampler, exactly (every action enumerated), for no
    correction, the full weight w, and w truncated or masked at each C_max (see the module's docstring).

    ``samples`` N: the variance of a mean of N draws is the variance of one ÷ N; mse = bias² + variance/N."""
    dt = torch.float64
    sampler = torch.log_softmax(torch.tensor(_LOGITS, dtype=dt) + distance * torch.tensor(_TO_SAMPLER, dtype=dt), 0)
    on_policy, info = _per_action_grads(None, "none", None)
    p_old, p_s = info["p_old"], sampler.exp()
    target = (p_old[:, None] * on_policy).sum(0)
    w = p_old / p_s
    c_maxes = np.geomspace(1.0, 10.0, 49) if c_maxes is None else np.asarray(c_maxes, dtype=float)

    def at(mode: str, c_max: float | None) -> dict:
        mean, bias, var = _moments(p_s, _per_action_grads(sampler, mode, c_max)[0], target)
        return {"mean": mean, "bias": bias, "variance": var, "bias2": bias ** 2, "var_n": var / samples,
                "mse": bias ** 2 + var / samples}

    sweep = {mode: [at(mode, float(c)) for c in c_maxes] for mode in ("token_truncate", "token_mask")}
    out = {"distance": distance, "samples": samples, "p_old": p_old.numpy(), "p_sampler": p_s.numpy(),
           "w": w.numpy(), "advantages": info["advantages"].numpy(), "on_policy": target.numpy(),
           "norm_on_policy": target.norm().item(), "second_moment_old": (p_old * (on_policy ** 2).sum(1)).sum().item(),
           "kl_old_sampler": (p_old * (p_old.log() - sampler)).sum().item(), "c_maxes": c_maxes,
           "none": at("none", None), "full": at("token_truncate", None), "sweep": sweep}
    mse = [s["mse"] for s in sweep["token_truncate"]]
    out["best_c_max"] = float(c_maxes[int(np.argmin(mse))])
    out["best"] = sweep["token_truncate"][int(np.argmin(mse))]
    return out


def sampled_gradient(distance: float, c_max: float | None, mode: str = "token_truncate", n: int = 20000,
                     seed: int = 0) -> tuple[np.ndarray, float]:
    """Mean and per-draw variance (trace) of ∇L over ``n`` seeded draws a ~ π_sampler: the Monte-Carlo check of
    ``exact_sampler_gradients``."""
    dt = torch.float64
    sampler = torch.log_softmax(torch.tensor(_LOGITS, dtype=dt) + distance * torch.tensor(_TO_SAMPLER, dtype=dt), 0)
    grads = _per_action_grads(sampler, mode, c_max)[0]
    draws = torch.multinomial(sampler.exp(), n, replacement=True, generator=torch.Generator().manual_seed(seed))
    g = grads[draws]
    return g.mean(0).numpy(), ((g - g.mean(0)) ** 2).sum(1).mean().item()


def monte_carlo_check(distance: float = 1.5, c_max: float | None = 3.0, n: int = 100000, seed: int = 0) -> dict:
    """``sampled_gradient`` against ``exact_sampler_gradients`` at one C_max (token_truncate)."""
    exact = exact_sampler_gradients(distance, 1, [c_max])["sweep"]["token_truncate"][0] if c_max is not None \
        else exact_sampler_gradients(distance, 1)["full"]
    mean, var = sampled_gradient(distance, c_max, "token_truncate", n, seed)
    return {"n": n, "mean_error": float(np.linalg.norm(mean - exact["mean"])), "variance": var,
            "exact_variance": exact["variance"], "exact_bias": exact["bias"]}


def bias_variance_markdown(exact: dict, c_maxes=(1.0, 1.5, 2.0, 3.0, 5.0)) -> str:
    """The truncation's bias², variance/N and their sum at a few C_max, between no correction and the full w."""
    n = exact["samples"]
    rows = [("no correction (w ignored)", exact["none"]),
            *((f"`token_truncate`, C_max = {c:g}", exact_sampler_gradients(exact["distance"], n, [c])["sweep"]
               ["token_truncate"][0]) for c in c_maxes),
            *((f"`token_mask`, C_max = {c:g}", exact_sampler_gradients(exact["distance"], n, [c])["sweep"]
               ["token_mask"][0]) for c in (3.0, 5.0)),
            ("the full w (no C_max)", exact["full"])]
    lines = [f"| gradient | bias ‖g − g*‖ | bias² | variance / N (N = {n}) | bias² + variance / N |",
             "|---|---|---|---|---|"]
    lines += [f"| {name} | {r['bias']:.4f} | {r['bias2']:.5f} | {r['var_n']:.5f} | {r['mse']:.5f} |"
              for name, r in rows]
    return "\n".join(lines)


def trl_rows() -> list[dict]:
    """The sampler's TRL names (``ladder.trl.map``) with the grpo flag and ladder's default."""
    from ladder.trl import map as trl_map

    every = option_defaults(grpo.Config)
    defaults = {f: every[f] for f in ("sampler_dtype", "sampler_correction", "sampler_clip_min", "sampler_clip_max",
                                      "off_policy_mask")}
    rows = []
    for option in defaults:
        for r in trl_map.for_option(option):
            if r.trl_class == "GRPOConfig" and r.trl_field:
                rows.append({"trl": r.trl_field, "flag": "--" + option.replace("_", "-"), "default": defaults[option],
                             "core": r.core_function})
    return rows


def trl_markdown() -> str:
    lines = ["| TRL `GRPOConfig` | grpo flag | ladder's default | `ladder.core` |", "|---|---|---|---|"]
    lines += [f"| `{r['trl']}` | `{r['flag']}` | `{r['default']}` | " + (f"`{r['core']}` |" if r["core"] else "— |")
              for r in trl_rows()]
    return "\n".join(lines)
