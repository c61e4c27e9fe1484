"""Notebook 4's token-level numbers: one batch of the tiny RLHF rung, token by token.

Token log-probs. ``token_logps`` computes one sampled batch's log-probs from the whole logits with
``core.token_logp`` and beside them the policy's own (chunked, prompts shared): the same numbers.

Per-token rewards and GAE (notebook 4). The tiny ``ppo-sentiment`` preset after a few updates at a fixed β
samples one batch, exactly as an update of the rung does (``ppo_sentiment.rollout``, ``old_and_ref``,
``score``); ``token_table`` then takes one completion through the rung's targets, with ``ladder.core``:

    KL_t = log π_old(c_t) − log π_ref(c_t)                      core.kl_penalized_rewards (k1)
    r_t  = −β · KL_t + [t = last] · score                        ″
    δ_t  = r_t + γ V_{t+1} (1 − d_t) − V_t,   d = last-token mask  core.gae, core.last_step_mask
    Â_t  = δ_t + γλ (1 − d_t) Â_{t+1},   R_t = Â_t + V_t           ″
    Â    ← whiten(Â) over the batch's real tokens                 core.whiten
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import transformers

from ladder import core
from ladder.policies.causal_lm import position_ids_for
from ladder.rungs import ppo_sentiment
from ladder.runtime import loop
from ladder.viz.lm_lab import quiet_run


@dataclass
class PPOBatch:
    """One batch sampled by the tiny RLHF policy π_old: what ``SentimentPPO.ppo_step`` computes before GAE."""

    tokens: list[list[str]]          # each completion's tokens, decoded one by one (padding left out)
    texts: list[str]                 # prompt + completion, as the reward model read them
    scores: torch.Tensor             # the reward model's score per completion, [B]
    old_logp: torch.Tensor           # log π_old(c_t), [B, T]
    ref_logp: torch.Tensor           # log π_ref(c_t), [B, T]
    values: torch.Tensor             # V_old(s_t) from the value head, 0 on padding, [B, T]
    mask: torch.Tensor               # 1 on real completion tokens, [B, T]
    kl_coef: float                   # β
    cfg: ppo_sentiment.Config        # the preset it was built from (γ = cfg.gamma, λ = cfg.gae_lambda)


def ppo_batch(seed: int = 0, updates: int = 10, kl_coef: float = 0.2, batch_size: int = 16) -> PPOBatch:
    """The tiny ``ppo-sentiment`` preset after ``updates`` updates at a fixed β, and one batch it then samples.

    The updates are the rung's own (its recipe, ``ppo_sentiment.build``, driven by ``ladder.runtime.loop``), so
    the value head has learnt something and π_old has moved away from π_ref (at update 0, KL_t = 0 and V = 0
    exactly). Cached.
    """
    return _cached_ppo_batch(int(seed), int(updates), float(kl_coef), int(batch_size))


@functools.lru_cache(maxsize=2)
def _cached_ppo_batch(seed: int, updates: int, kl_coef: float, batch_size: int) -> PPOBatch:
    with quiet_run():
        return _ppo_batch(seed, updates, kl_coef, batch_size)


def _ppo_batch(seed: int, updates: int, kl_coef: float, batch_size: int) -> PPOBatch:
    """``updates`` of the rung's own recipe held in memory (``loop.in_memory``, its before/after table left out),
    then one batch sampled from the recipe's prompt stream as the next update would."""
    overrides = {"batch_size": batch_size, "kl_coef": kl_coef, "adaptive_kl": False, "seed": seed,
                 "print_samples": 0}
    cfg = ppo_sentiment.Config(**{**ppo_sentiment.PRESETS["tiny"], **overrides}, progress=False)
    session, recipe = loop.in_memory(cfg, ppo_sentiment.NAME, ppo_sentiment.build, evaluations=False)
    for _ in range(updates):
        loop.one_update(session, recipe)
    policy, tokenizer = recipe.policy, recipe.tokenizer
    prompts = recipe.prompt_rng.choices(recipe.prompt_pool, k=batch_size)
    batch, _, texts = ppo_sentiment.rollout(policy, tokenizer, prompts, cfg)
    old_logp, values, ref_logp = ppo_sentiment.old_and_ref(policy, batch, cfg.forward_batch_size)
    scores = ppo_sentiment.score(recipe.reward_fn, texts, cfg.forward_batch_size)
    tokens = [[tokenizer.decode([int(c)]) for c in row[m.bool()]] for row, m in zip(batch.actions, batch.mask)]
    return PPOBatch(tokens, texts, scores, old_logp, ref_logp, values * batch.mask, batch.mask, kl_coef, cfg)


def token_logps(seed: int = 0, batch_size: int = 4) -> dict:
    """One batch the tiny ``ppo-sentiment`` policy samples, its log-probs computed two ways:

        full     core.token_logp(z[:, P−1:], x[:, P−1:], mask, τ) on the whole [B, P + T, V] logits
        policy   CausalLMPolicy.evaluate: the same function, on chunks of positions, prompts shared

    Returns the shapes, both [B, T] results, and the first completion's tokens with their log-probs.
    """
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # generate's "input_ids may be padded": the mask is passed
    try:
        with quiet_run():
            cfg = ppo_sentiment.Config(**{**ppo_sentiment.PRESETS["tiny"], "seed": seed}, progress=False)
            torch.manual_seed(seed)
            model, tokenizer, _, pool = ppo_sentiment.load_parts(cfg)
            policy = ppo_sentiment.build_policy(cfg, model)
            batch, _, _ = ppo_sentiment.rollout(policy, tokenizer, pool[:batch_size], cfg)
    finally:
        transformers.logging.set_verbosity(verbosity)
    ids, attention = batch.inputs["input_ids"], batch.inputs["attention_mask"]
    P = ids.shape[1] - batch.actions.shape[1]
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attention, position_ids=position_ids_for(attention)).logits
        full = core.token_logp(logits[:, P - 1:], ids[:, P - 1:], batch.mask, cfg.generation.temperature)
        evaluated = policy.evaluate(batch)[0] * batch.mask
    first = [(tokenizer.decode([int(a)]), float(lp)) for a, lp, m in zip(batch.actions[0], full[0], batch.mask[0]) if m]
    return {"logits_shape": list(logits.shape), "prompt_len": P, "completion_len": batch.actions.shape[1],
            "temperature": cfg.generation.temperature, "full": full, "policy": evaluated,
            "max_abs_diff": (full - evaluated).abs().max().item(), "first_row": first}


def token_table(fixed: PPOBatch, row: int = 0, gamma: float | None = None, lam: float | None = None) -> dict:
    """Completion ``row`` of the batch through the rung's per-token rewards and GAE, token by token.

    γ, λ None: the preset's (the rung's own targets). GAE runs on the whole batch (as the rung does), so
    ``advantage_whitened`` is Â whitened over all the batch's real tokens. Returns lists, one entry per real
    token of the row: ``token``, ``kl`` (KL_t), ``reward`` (r_t), ``value`` (V_t), ``delta`` (δ_t),
    ``advantage`` (Â_t), ``ret`` (R_t = Â_t + V_t), ``advantage_whitened``; and ``score``, ``kl_coef``,
    ``gamma``, ``lam``.
    """
    gamma = fixed.cfg.gamma if gamma is None else float(gamma)
    lam = fixed.cfg.gae_lambda if lam is None else float(lam)
    mask, values = fixed.mask, fixed.values
    rewards, kl = core.kl_penalized_rewards(fixed.scores, fixed.old_logp, fixed.ref_logp, mask, fixed.kl_coef)
    dones = core.last_step_mask(mask)
    advantages, returns = core.gae(rewards, values, dones, gamma, lam)
    next_values = torch.cat([values[:, 1:], torch.zeros_like(values[:, :1])], dim=1)
    deltas = rewards + gamma * next_values * (1 - dones) - values
    whitened = core.whiten(advantages, mask)
    real = mask[row].bool()
    columns = {"kl": kl, "reward": rewards, "value": values, "delta": deltas, "advantage": advantages,
               "ret": returns, "advantage_whitened": whitened}
    table = {name: x[row][real].tolist() for name, x in columns.items()}
    return {"token": list(fixed.tokens[row]), **table, "score": fixed.scores[row].item(), "kl_coef": fixed.kl_coef,
            "gamma": gamma, "lam": lam}


def token_table_markdown(table: dict, digits: int = 3) -> str:
    """The table as Markdown: one line per token, t = 0 first."""
    head = (r"| $t$ | token | $\mathrm{KL}_t$ | $r_t$ | $V_t$ | $\delta_t$ | $\hat A_t$ | $\hat A_t$ whitened |"
            "\n|---:|---|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for t, token in enumerate(table["token"]):
        cells = [table[k][t] for k in ("kl", "reward", "value", "delta", "advantage", "advantage_whitened")]
        shown = token.replace("|", "\\|").replace("`", "'").replace(" ", "␣").replace("\n", "⏎")
        lines.append(f"| {t} | `{shown}` | " + " | ".join(f"{c:+.{digits}f}" for c in cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- β sweep
