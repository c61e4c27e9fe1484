"""Real numbers for the language-model views: a β sweep of the RLHF rung, and μ passes on one GRPO batch
(the token-level views of one RLHF batch are in ``lm_tokens``).

β sweep (notebook 4). The tiny ``ppo-sentiment`` preset trained once per β, with β fixed (no adaptive
controller), so that each run pays the same price for the same distance to π_ref:

    r_t = −β · KL_t + [t = last] · score,      KL_t = log π_old(c_t) − log π_ref(c_t)

Each run's ``metrics.jsonl`` gives the reward-model score and the mean per-sequence KL Σ_t KL_t per
update; its ``summary.json`` gives completions of fixed prompts before and after training.

μ passes (notebook 5). The three policies of the tiny GRPO preset, on the QLoRA path by default:

    π_ref  the tiny instruct model with its LoRA adapter disabled (the 4-bit base)
    π_old  the same model after ``warmup_updates`` ordinary GRPO updates (``grpo.grpo_step``); it
           samples one fixed batch of P prompts × G completions, so ``batch.old_logp`` = log π_old
    π_θ    π_old's adapter, optimised for μ passes over that batch by ``core.update``

The vocabulary is small (a few hundred tokens), so every KL between the three policies is computed
exactly at each visited position s_t (prompt + completion prefix sampled by π_old):

    KL(π_θ ‖ π_x)(s_t) = Σ_v π_θ(v|s_t) · log π_θ(v|s_t) / π_x(v|s_t)

and set next to what the GRPO loss estimates from the one sampled token c_t ~ π_old per position:

    biased     mean_t k3(c_t)                        (assumes c_t ~ π_θ, wrong once π_θ ≠ π_old)
    corrected  mean_t (π_θ/π_old)(c_t) · k3(c_t)     (importance-sampled: unbiased for any μ and M)

Both are ``core.kl_estimate`` — without and with ``old_logp``. Their means and spreads over fresh draws
c_t ~ π_old are exact sums over the vocabulary too: E[corrected] is the exact KL, E[biased] =
Σ_v π_old(v) k3(v) is not; one batch's corrected estimate is unbiased but noisy, because a few positions
(and tokens π_old seldom samples) carry much of the KL.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ladder import core
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, lm_batch, position_ids_for
from ladder.rungs import grpo, ppo_sentiment
from ladder.runtime import loop
from ladder.runtime.distributed import Processes
from ladder.runtime.runlog import rng_state, set_rng_state
from ladder.tasks import arithmetic
from ladder.viz import lab_cache
from ladder.viz.cartpole_lab import one_thread


def warm_up(step: grpo.Step, updates: int) -> None:
    """``updates`` of the grpo rung's own training on ``step`` before a lab measures: its recipe through the training
    loop, held in memory, its evaluations left out (``loop.in_memory``)."""
    task = grpo.Task(step.system_prompt, problems=[], held_out=[], model_path="", tokenizer=step.tokenizer,
                     source=(None, None))

    def build(cfg: grpo.Config, run) -> loop.Recipe:
        return grpo.GRPO(cfg, run, task, step)

    session, recipe = loop.in_memory(step.cfg, grpo.NAME, build, evaluations=False)
    for _ in range(updates):
        loop.one_update(session, recipe)


@contextlib.contextmanager
def quiet_run():
    """One torch thread, the caller's RNG state restored, the rung's printed tables swallowed."""
    state = rng_state()
    try:
        with one_thread(), contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        set_rng_state(state)


# ------------------------------------------------------------------------ per-token rewards and GAE
@functools.lru_cache(maxsize=16)
@lab_cache.on_disk  # notebook 4 and tests/test_viz_lm.py share these runs
def ppo_run(beta: float, steps: int = 30, batch_size: int = 32, seed: int = 0, num_eval_prompts: int = 6) -> dict:
    """Train the tiny ``ppo-sentiment`` preset for ``steps`` updates with a fixed β; read what it wrote.

    Returns per-update lists ``step``, ``score`` (reward-model score), ``kl`` (mean per-sequence
    Σ_t KL_t to π_ref), ``reward`` (score − β·Σ_t KL_t, what PPO maximises), and ``samples``: the
    completions of the same ``num_eval_prompts`` prompts before and after training (summary.json).
    Cached: each β trains once per machine and code version (``lab_cache``).
    """
    out = Path(tempfile.mkdtemp(prefix="ladder-beta-"))
    overrides = {"steps": steps, "batch_size": batch_size, "kl_coef": float(beta), "adaptive_kl": False,
                 "num_eval_prompts": num_eval_prompts, "print_samples": 0, "seed": seed}
    cfg = ppo_sentiment.Config(**{**ppo_sentiment.PRESETS["tiny"], **overrides}, out=str(out / "run"),
                               progress=False)
    try:
        with quiet_run():
            ppo_sentiment.train(cfg)
        records = [json.loads(line) for line in open(out / "run" / "metrics.jsonl")]
        summary = json.loads((out / "run" / "summary.json").read_text())
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"beta": float(beta), "step": [r["step"] for r in records],
            "score": [r["score_mean"] for r in records], "kl": [r["kl_ref"] for r in records],
            "reward": [r["reward_mean"] for r in records], "samples": summary["samples"],
            "eval_score_before": summary["eval_score_before"], "eval_score_after": summary["eval_score_after"]}


def beta_sweep(betas=(0.0, 0.2, 1.0), steps: int = 30, batch_size: int = 32, seed: int = 0) -> dict:
    """{β: ``ppo_run(β, ...)``} for every β (each run cached)."""
    return {float(b): ppo_run(float(b), steps, batch_size, seed) for b in betas}


def trailing_mean(x, window: int) -> np.ndarray:
    """y_k = mean(x_{k−w+1..k}) (fewer terms at the start): a curve's level without its batch noise."""
    x = np.asarray(x, dtype=np.float64)
    c = np.concatenate([[0.0], np.cumsum(x)])
    k = np.arange(1, len(x) + 1)
    lo = np.maximum(k - window, 0)
    return (c[k] - c[lo]) / (k - lo)


# ----------------------------------------------------------------------------------- μ passes (LM)
@dataclass
class FixedGRPOBatch:
    """π_old (a policy whose adapter holds ``old_state``), the batch it sampled, and full log-prob tables."""

    policy: CausalLMPolicy           # the tiny model with its LoRA adapter; π_ref = the adapter disabled
    old_state: dict                  # π_old's adapter weights
    batch: core.Batch                # P·G completions: old_logp, ref_logp, advantages Â_i on every token
    logp_old_all: torch.Tensor       # log π_old(·|s_t) over the vocabulary, [B, T, V]
    logp_ref_all: torch.Tensor       # log π_ref(·|s_t) over the vocabulary, [B, T, V]
    rewards: torch.Tensor            # the P·G rule rewards
    group_size: int                  # G
    cfg: grpo.Config                 # the preset it was built from


def grpo_update_config(cfg, mu: int = 1, clip_eps: float | None = None) -> core.UpdateConfig:
    """The rung's ``grpo.update_config`` with μ (and a symmetric ε) set by the widget."""
    update_cfg = grpo.update_config(cfg)
    update_cfg.mu = mu
    if clip_eps is not None:
        update_cfg.clip_eps_low = update_cfg.clip_eps_high = clip_eps
    return update_cfg


@torch.no_grad()
def full_log_probs(model, batch: core.Batch, temperature: float = 1.0) -> torch.Tensor:
    """log π(·|s_t) over the whole vocabulary at every completion position, ``[B, T, V]`` (float32).

    The same positions and temperature as ``CausalLMPolicy.evaluate``: the hidden state at P − 1 + t
    predicts completion token t.
    """
    input_ids, attention_mask = batch.inputs["input_ids"], batch.inputs["attention_mask"]
    T = batch.actions.shape[1]
    P = input_ids.shape[1] - T
    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask,
                                 position_ids=position_ids_for(attention_mask), use_cache=False)[0]
    logits = model.get_output_embeddings()(hidden[:, P - 1:P - 1 + T]).float() / temperature
    return torch.log_softmax(logits, dim=-1)


def exact_kl(logp_p: torch.Tensor, logp_q: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean over the completion tokens of Σ_v p(v|s_t) log p(v|s_t)/q(v|s_t), from ``[B, T, V]`` tables."""
    return core.masked_mean((logp_p.exp() * (logp_p - logp_q)).sum(-1), mask).item()


def expected_kl_estimate(logp_all: torch.Tensor, ref_all: torch.Tensor, old_all: torch.Tensor, mask: torch.Tensor,
                         corrected: bool, estimator: str = "k3") -> tuple[float, float]:
    """Mean and standard deviation of the batch's token-mean estimate when each c_t ~ π_old(·|s_t).

    Exact sums over the vocabulary at the visited positions s_t (N completion tokens):

        E_t = Σ_v π_old(v|s_t) · est_t(v)          mean  = (1/N) Σ_t E_t
        V_t = Σ_v π_old(v|s_t) · est_t(v)² − E_t²  std   = √(Σ_t V_t) / N

    with est = k3 (biased) or (π_θ/π_old) · k3 (corrected). The corrected mean is the exact KL:
    Σ_v π_old(v) · (π_θ/π_old)(v) · k3(v) = Σ_v π_θ(v) · k3(v) = KL(π_θ ‖ π_ref) at every s_t.
    """
    est = core.kl_estimate(logp_all, ref_all, estimator, old_all if corrected else None)
    p_old = old_all.exp()
    e_t = (p_old * est).sum(-1)
    v_t = ((p_old * est**2).sum(-1) - e_t**2).clamp(min=0.0)
    n = mask.sum()
    return (core.masked_mean(e_t, mask).item(), ((v_t * mask).sum().sqrt() / n).item())


@functools.lru_cache(maxsize=2)
def fixed_grpo_batch(seed: int = 0, warmup_updates: int = 8, prompts: int = 8, group_size: int = 8,
                     qlora: bool = True) -> FixedGRPOBatch:
    """π_old after ``warmup_updates`` GRPO updates of the tiny preset, and one batch it sampled.

    Cached: every μ starts from the same batch, the same π_old and the same π_ref.
    """
    with quiet_run():
        return _fixed_grpo_batch(seed, warmup_updates, prompts, group_size, qlora)


class _InOrder:
    """The problems one after the other (the rung's ``ProblemStream`` without the shuffle)."""

    def __init__(self, problems: list[dict]):
        self.problems, self.next = problems, 0

    def draw(self, n: int) -> list[dict]:
        self.next += n
        return self.problems[self.next - n:self.next]


def _fixed_grpo_batch(seed: int, warmup_updates: int, prompts: int, group_size: int, qlora: bool) -> FixedGRPOBatch:
    preset = {**grpo.PRESETS["tiny"], "qlora": qlora, "lora": not qlora, "prompts_per_step": prompts,
              "group_size": group_size, "seed": seed}
    cfg = grpo.Config(**preset, progress=False)
    device = torch.device("cpu")
    torch.manual_seed(seed)
    path = str(arithmetic.tiny_math_model())
    tokenizer = quant.load_tokenizer(path)
    model = quant.load_causal_lm(path, device, qlora=cfg.adapter.qlora, lora=cfg.adapter.lora, lora_r=cfg.adapter.r,
                                 lora_alpha=cfg.adapter.alpha)
    policy = CausalLMPolicy(model, temperature=cfg.generation.temperature, chunk_size=cfg.efficiency.chunk_size)
    optimizer = quant.make_optimizer(policy.parameters(), cfg.optimisation.lr, "adamw", device)
    system_prompt = arithmetic.TINY_SYSTEM_PROMPT
    problems, _ = arithmetic.train_eval_split(None, cfg.problems.eval_size)
    step = grpo.make_step(cfg, policy=policy, optimizer=optimizer, tokenizer=tokenizer, stream=_InOrder(problems),
                          system_prompt=system_prompt, procs=Processes(device), trainer=policy,
                          update_cfg=grpo_update_config(cfg))
    warm_up(step, warmup_updates)  # the rung's own updates, with its learning-rate warm-up

    # The fixed batch, sampled by π_old with the rung's own sampler (grpo_step's).
    picked = problems[warmup_updates * prompts:(warmup_updates + 1) * prompts]
    rollout = grpo.sample_completions(step, picked)
    rewards = rollout.rewards
    advantages = core.group_relative(rewards, group_size, grpo.advantage_spec.scale(cfg))
    batch = lm_batch(rollout.prompt_ids, rollout.prompt_mask, rollout.completion, rollout.mask,
                     tokenizer.pad_token_id, advantages=advantages[:, None] * rollout.mask)
    with torch.no_grad():
        batch.old_logp = policy.evaluate(batch)[0].float()
        batch.ref_logp = policy.ref_logp(batch).float()
    logp_old_all = full_log_probs(model, batch, cfg.generation.temperature)
    with policy.reference_context():
        logp_ref_all = full_log_probs(model, batch, cfg.generation.temperature)
    old_state = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
    return FixedGRPOBatch(policy, old_state, batch, logp_old_all, logp_ref_all, rewards, group_size, cfg)


_PASSES: dict[tuple, dict] = {}
_KEYS = ("ratios", "clip_frac", "clip_frac_after", "kl_old_exact", "kl_ref_exact", "kl_ref_biased",
         "kl_ref_corrected", "kl_ref_biased_expected", "kl_ref_biased_std", "kl_ref_corrected_expected",
         "kl_ref_corrected_std", "approx_kl_old_k3")


def lm_mu_passes(mu: int, lr: float | None = None, clip_eps: float = 0.2, seed: int = 0, warmup_updates: int = 8,
                 qlora: bool = True) -> dict:
    """Run ``core.update`` for μ passes on a copy of π_old's adapter over the fixed GRPO batch.

    ``lr`` None: the tiny preset's. One call of μ passes equals μ calls of one pass (same batch, same
    ``old_logp``, same optimiser state), so a run of more passes also answers every smaller μ; runs
    are cached per (lr, ε, seed, warm-up, qlora). Per pass k (lists of length μ, measured after the
    optimiser step of pass k):

        ratios                    π_θ/π_old at every completion token                     [N]
        clip_frac                 core's clip fraction during the pass (0 in pass 1: one minibatch, r = 1)
        clip_frac_after           clip fraction of the ratios after the pass
        kl_old_exact              KL(π_θ‖π_old), exact      kl_ref_exact   KL(π_θ‖π_ref), exact
        kl_ref_biased             core.kl_estimate (k3) without old_logp, token mean
        kl_ref_corrected          core.kl_estimate (k3) with old_logp (importance-sampled), token mean
        kl_ref_biased_expected    E_{c~π_old} of the biased estimate (what it converges to)
        kl_ref_corrected_expected E_{c~π_old} of the corrected estimate (= kl_ref_exact)
        kl_ref_*_std              the spread of either estimate over fresh draws c_t ~ π_old
        approx_kl_old_k3          core's KL(π_old‖π_θ) estimate during the pass
    """
    fixed = fixed_grpo_batch(seed, warmup_updates, qlora=qlora)
    lr = fixed.cfg.optimisation.lr if lr is None else float(lr)
    key = (lr, float(clip_eps), seed, warmup_updates, qlora)
    run = _PASSES.get(key)
    if run is None or len(run["ratios"]) < mu:
        with quiet_run():
            run = _PASSES[key] = _lm_mu_passes(fixed, mu, lr, clip_eps)
    out = {k: run[k][:mu] for k in _KEYS}
    out.update({k: v for k, v in run.items() if k not in _KEYS})
    return out


def _lm_mu_passes(fixed: FixedGRPOBatch, mu: int, lr: float, clip_eps: float) -> dict:
    policy, batch, mask = fixed.policy, fixed.batch, fixed.batch.mask
    real = mask.bool()
    cfg = grpo_update_config(fixed.cfg, mu=1, clip_eps=clip_eps)
    out: dict[str, list] = {k: [] for k in _KEYS}
    policy.load_state_dict(fixed.old_state, strict=False)
    optimizer = quant.make_optimizer(policy.parameters(), lr, "adamw", torch.device("cpu"))
    generator = torch.Generator().manual_seed(0)
    try:
        for _ in range(mu):
            record = core.update(policy, batch, optimizer, cfg, generator)[0]
            logp_all = full_log_probs(policy.model, batch, fixed.cfg.generation.temperature)
            logp = logp_all.gather(-1, batch.actions[..., None]).squeeze(-1)
            ratio = torch.exp(logp - batch.old_logp)
            biased = core.kl_estimate(logp, batch.ref_logp, "k3")
            corrected = core.kl_estimate(logp, batch.ref_logp, "k3", batch.old_logp)
            after = core.clip_fractions(ratio, batch.advantages, mask, clip_eps, clip_eps)
            old_all, ref_all = fixed.logp_old_all, fixed.logp_ref_all
            out["ratios"].append(ratio[real].numpy())
            out["clip_frac"].append(record["clip_frac"])
            out["clip_frac_after"].append(after["clip_frac"])
            out["kl_old_exact"].append(exact_kl(logp_all, old_all, mask))
            out["kl_ref_exact"].append(exact_kl(logp_all, ref_all, mask))
            out["kl_ref_biased"].append(core.masked_mean(biased, mask).item())
            out["kl_ref_corrected"].append(core.masked_mean(corrected, mask).item())
            for name, corrected_form in (("biased", False), ("corrected", True)):
                mean, std = expected_kl_estimate(logp_all, ref_all, old_all, mask, corrected_form)
                out[f"kl_ref_{name}_expected"].append(mean)
                out[f"kl_ref_{name}_std"].append(std)
            out["approx_kl_old_k3"].append(record["approx_kl_old_k3"])
    finally:
        policy.load_state_dict(fixed.old_state, strict=False)  # the cached policy stays π_old
    G = fixed.group_size
    out["advantages"] = batch.advantages[real].numpy()
    out["rewards"] = fixed.rewards.tolist()
    out["frac_reward_zero_std"] = (fixed.rewards.view(-1, G).std(1) == 0).float().mean().item()
    out["num_tokens"] = batch.num_tokens
    out["kl_ref_exact_old"] = exact_kl(fixed.logp_old_all, fixed.logp_ref_all, mask)
    out["lr"], out["clip_eps"] = lr, clip_eps
    return out
