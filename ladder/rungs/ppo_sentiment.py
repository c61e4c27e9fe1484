"""Rung 3: RLHF-PPO — make a causal LM continue movie reviews positively, with a KL-shaped reward.

Each update, on the same ``ladder.core`` as CartPole:

    prompts (2–8 tokens, left-padded) → sample completions from π_θ (= π_old)
    score_b       = reward_model(prompt_b + completion_b)                   one number per completion
    r_t           = −β·KL_t(π_old ‖ π_ref) + [t = last] · score             core.kl_penalized_rewards
    Â_t, R_t      = GAE(r, V_old; γ, λ) over completion tokens, Â whitened  core.masked_gae, core.whiten
    μ passes × minibatches of clipped surrogate + clipped value loss      core.update
    β             ← adaptive controller on the mean per-sequence KL         core.AdaptiveKLController

π_ref is a frozen copy of the starting model, or with ``--lora``/``--qlora`` the same weights with the adapter
disabled. ``--preset tiny`` runs offline on a CPU in minutes: a tiny GPT-2 trained here on generated
reviews, bundled review openings as prompts, VADER as the reward model.

metrics.jsonl, one line per update: score_mean/std (the reward model's score), reward_mean/std
(score − β·Σ_t KL_t per completion: what PPO maximises), non_score_reward_mean, kl_ref (mean
per-sequence Σ_t KL_t, what the controller sees), kl_coef (the β of this batch), clip fractions,
approx KL to π_old, value loss, explained variance, entropy, response_length. summary.json adds the
first/last scores, the final KL and the before/after samples (also in samples.md).
"""

from __future__ import annotations

import copy
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ladder import core, hub
from ladder.cli import (
    MAX_EXAMPLES,
    MAX_PASSES,
    MAX_ROWS,
    MAX_SCALE,
    MAX_STEPS,
    MAX_TOKENS,
    Text,
    coefficient,
    count,
    int_range,
    interval,
    learning_rate,
    option,
    positive,
    probability,
)
from ladder.plots import Panel
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, ReferenceWeights, is_peft, lm_batch
from ladder.rungs import lm_options
from ladder.rungs.lm_options import (
    EFFICIENCY_PLACED,
    Efficiency,
    Generation,
    LMOptions,
    efficiency_params,
    generation_params,
    gradient_checkpointing,
)
from ladder.rungs.protocol import Rung, Words, check_minibatches
from ladder.runtime import loop
from ladder.runtime.distributed import Processes, launched_processes, process_device, weights_digest
from ladder.runtime.loop import Recipe
from ladder.runtime.runlog import UsageError, seed_everything
from ladder.runtime.session import RunSession
from ladder.specs import FixedSpec, accepts_flags
from ladder.tasks import review_models, review_prompts, sentiment_rewards, tiny_preferences

NAME = "ppo-sentiment"
RUNG = Rung(name=NAME, position=3,
            summary="RLHF-PPO: a causal LM continues movie reviews positively (KL-shaped rewards, value head)",
            exercises=("ex04_whiten", "ex05_clipped_surrogate", "ex06_value_loss", "ex08_kl_corrected",
                       "ex09_kl_rewards", "ex11_aggregate", "ex15_soft_update", "ex16_token_logp",
                       "ex17_compute_loss", "ex18_update", "ex19_masked_gae"),
            vitals=("ppo_reward", "true_reward", "kl_per_completion", "beta", "rlhf_explained", "value_loss",
                    "kl_old", "clip", "entropy", "length", "grad_norm"),
            words={"kl_blowup": Words(
                "KL to π_ref blowing up", "problem",
                "the penalty in the reward does not hold the KL per completion: PPO climbs r_φ − β·KL, so a held "
                "policy spends a nat of KL only where r_φ pays β for it and then settles; this one spends KL that "
                "costs more than r_φ pays (or, at β = 0, has nothing to stop it), into text r_φ was never trained on, "
                "where its score means little",
                "lower --lr, raise --kl-coef (or --adaptive-kl with a --kl-target), lower --max-grad-norm",
                "lower learning_rate, raise kl_coef (PPOConfig), lower max_grad_norm",
                ("notebooks/4_ppo_rlhf_sentiment.ipynb", r"## Reward vs KL: what $\beta$ buys"))})
CURVES = [Panel("reward", "per completion (mean)",
                {"score_mean": "reward-model score", "reward_mean": "score − β·Σ_t KL_t (what PPO maximises)",
                 "true_reward_mean": "the true reward (--true-reward)"}),
          Panel("KL(π_θ‖π_ref)", "nats, summed over the completion", {"kl_ref": ""}),
          Panel("β, the KL coefficient", "β", {"kl_coef": ""}),
          Panel("clip fraction", "share of tokens clipped", {"clip_frac": ""}),
          Panel("KL(π_old‖π_θ) in the last pass", "nats per token (k3 estimate)", {"approx_kl_old_k3": ""}),
          Panel("value loss", "value loss", {"value_loss": ""}),
          Panel("explained variance of V", "1 − Var(R − V) / Var(R)", {"explained_variance": ""}),
          Panel("entropy of π_θ", "nats per token", {"entropy": ""}),
          Panel("completion length", "tokens (mean)", {"response_length": ""}),
          Panel("what the true reward charges for (--true-reward)", "share of completions",
                {"hedged_share": "hedge with a 'but'", "padded_share": "repeat a word"})]


@accepts_flags
@dataclass
class Config(LMOptions):
    model: str = option(review_models.DEFAULT_MODEL, "policy: causal LM hub id or directory ('tiny': the project's "
                                                     "tiny review model, shipped with the package)", Text())
    reward_model: str = option(sentiment_rewards.DEFAULT_REWARD_MODEL, "reward: sequence-classifier id or directory "
                                                                       "(its POSITIVE logit), a reward model with one "
                                                                       "label (r_φ: OUT/reward_model of the "
                                                                       "reward-model rung), or 'vader'", Text())
    true_reward: str = option("none", "also log a reward the task knows to be true beside the reward model's score, "
                                      "as true_reward_mean: 'tiny-preferences' (the tiny preference task's r*, "
                                      "which its labeller only approximates)", choices=tiny_preferences.TRUE_REWARDS)
    dataset: str = option(review_prompts.DEFAULT_DATASET, "prompts: dataset id, a local .jsonl/.json/.csv/.txt file "
                                                          "of reviews, or 'bundled' (review openings shipped with "
                                                          "ladder)", Text())
    max_prompts: int = option(25_000, "use at most this many reviews of --dataset", count(1, MAX_EXAMPLES))
    min_prompt_tokens: int = option(2, "shortest review prefix used as a prompt (tokens)", count(1, MAX_TOKENS))
    max_prompt_tokens: int = option(8, "longest review prefix used as a prompt (tokens)", count(1, MAX_TOKENS))
    steps: int = option(200, "PPO updates (each one batch of fresh completions)", count(1, MAX_STEPS),
                        aliases=("--num-updates",))
    batch_size: int = option(128, "completions per update B (at most 65536)", int_range(1, 65536))
    num_minibatches: int = option(4, "shuffled minibatches per pass", count(1, MAX_ROWS))
    mu: int = option(4, "μ: optimisation passes over each batch", count(1, MAX_PASSES))
    forward_batch_size: int = option(32, "rows per gradient-free forward (π_old, π_ref, V_old, reward model)",
                                     count(1, MAX_ROWS))
    generation: Generation = option(Generation(max_new_tokens=16), "LMOptions', 16 tokens a completion",
                                    spec=FixedSpec("generation", Generation, generation_params(max_new_tokens=16)))
    top_k: int = option(0, "top-k sampling (0: off)", count(0, MAX_TOKENS))
    lr: float = option(1.41e-5, "Adam learning rate", learning_rate())
    clip_eps: float = option(0.2, "PPO clip ε of the ratio π_θ/π_old", interval(0, 1, open_low=True, open_high=True))
    value_clip: float = option(0.2, "clip of V around V_old in the value loss", positive(MAX_SCALE))
    value_coef: float = option(0.1, "value-loss coefficient c_v", coefficient())
    max_grad_norm: float | None = option(1.0, "gradient-norm clip", positive(MAX_SCALE))
    gamma: float = option(1.0, "discount γ over completion tokens", probability())
    gae_lambda: float = option(0.95, "GAE λ", probability())
    kl_coef: float = option(0.2, "β: initial (adaptive) or fixed coefficient of the KL penalty in the reward",
                            coefficient())
    adaptive_kl: bool = option(True, "steer β towards --kl-target (Ziegler et al. 2019); off: fixed β")
    kl_target: float = option(6.0, "target of the mean per-sequence KL(π‖π_ref)", positive(MAX_SCALE))
    kl_horizon: float = option(10_000.0, "horizon of the adaptive controller (in completions)", positive(MAX_EXAMPLES))
    kl_estimator: str = option("k1", "per-token KL estimator in the reward", choices=("k1", "k2", "k3"))
    ref_sync_every: int = option(0, "refresh π_ref every N updates: π_ref ← α·π_θ + (1 − α)·π_ref (0: never)",
                                 count(0, MAX_STEPS))
    ref_mixup: float = option(0.6, "α of the π_ref refresh, in [0, 1]", probability())
    efficiency: Efficiency = option(Efficiency(chunk_size=64), "LMOptions', 64 positions per chunk",
                                    spec=FixedSpec("efficiency", Efficiency, efficiency_params(chunk_size=64),
                                                   placed=EFFICIENCY_PLACED))
    print_samples: int = option(10, "print a few prompt → completion → score lines every N updates (0: never)",
                                count(0, MAX_STEPS), aliases=("--sample-every",))
    num_samples: int = option(3, "lines printed each --print-samples", count(0, MAX_ROWS))
    num_eval_prompts: int = option(16, "prompts in the before/after table (same prompts and sampling seed)",
                                   count(0, MAX_ROWS))


PRESETS = {
    "tiny": {"model": "tiny", "reward_model": "vader", "dataset": "bundled", "steps": 100, "batch_size": 64,
             "num_minibatches": 2, "lr": 5e-5, "threads": 1, "print_samples": 20},
}
ALGOS: dict = {}
RESOLVED = lm_options.RESOLVED


def validate(cfg: Config) -> None:
    """Rules that relate several options (each option's domain is checked when the Config is built)."""
    check_minibatches(cfg.batch_size, cfg.num_minibatches, f"a batch of {cfg.batch_size} completions")
    if cfg.min_prompt_tokens > cfg.max_prompt_tokens:
        raise UsageError("need --min-prompt-tokens ≤ --max-prompt-tokens")
    if cfg.ref_sync_every and cfg.kl_coef == 0:
        raise UsageError("--ref-sync-every refreshes π_ref, but --kl-coef 0 never uses it; set --kl-coef > 0")


def update_config(cfg: Config) -> core.UpdateConfig:
    """The KL to π_ref lives in the reward here, so the loss has none (kl_coef = 0)."""
    return core.UpdateConfig(mu=cfg.mu, num_minibatches=cfg.num_minibatches, objective="clipped",
                             clip_eps_low=cfg.clip_eps, value_coef=cfg.value_coef, value_clip=cfg.value_clip,
                             entropy_coef=0.0, kl_coef=0.0, normalize_advantages=False,
                             max_grad_norm=cfg.max_grad_norm)


def kl_controller(cfg: Config) -> core.FixedKLController:
    if cfg.adaptive_kl:
        return core.AdaptiveKLController(cfg.kl_coef, cfg.kl_target, cfg.kl_horizon)
    return core.FixedKLController(cfg.kl_coef)


def build_policy(cfg: Config, model) -> CausalLMPolicy:
    """π_θ with a zero-initialised value head; π_ref the disabled adapter (LoRA, QLoRA) or a frozen copy."""
    ref_model = None if is_peft(model) else copy.deepcopy(model)
    policy = CausalLMPolicy(model, value_head=True, temperature=cfg.generation.temperature,
                            chunk_size=cfg.efficiency.chunk_size, ref_model=ref_model,
                            sampler_loop=cfg.efficiency.sampler_loop)
    if cfg.ref_sync_every:
        policy.make_reference_refreshable()  # LoRA: a second, frozen adapter; full: the copy above
    return policy


@torch.no_grad()
def old_and_ref(policy: CausalLMPolicy, batch: core.Batch, rows_per_forward: int):
    """log π_old, V_old and log π_ref of the completion tokens, ``rows_per_forward`` rows at a time."""
    old, values, ref = [], [], []
    for start in range(0, len(batch), rows_per_forward):
        sub = batch.select(torch.arange(start, min(start + rows_per_forward, len(batch))))
        logp, v = policy.old_logp_and_values(sub)
        old.append(logp.float())
        values.append(v.float())
        ref.append(policy.ref_logp(sub).float())
    return torch.cat(old), torch.cat(values), torch.cat(ref)


def ppo_targets(scores: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor, values: torch.Tensor,
                mask: torch.Tensor, kl_coef: float, cfg: Config) -> dict[str, torch.Tensor]:
    """Per-token rewards, advantages and value targets of one batch of completions, all ``[B, T]``.

        KL_t  = k(log π_old(c_t), log π_ref(c_t))               k1 = log π_old − log π_ref (default)
        r_t   = −β · KL_t + [t = last] · score                   core.kl_penalized_rewards
        Â, R  = GAE(r, V_old; γ, λ), the episode ending at the last completion token  core.masked_gae
        Â     ← whiten(Â) over the completion tokens

    Everything is zero on padding.
    """
    rewards, kl = core.kl_penalized_rewards(scores, old_logp, ref_logp, mask, kl_coef, cfg.kl_estimator)
    advantages, returns = core.masked_gae(rewards, values, mask, cfg.gamma, cfg.gae_lambda)
    return {"rewards": rewards, "kl": kl, "values": values * mask, "advantages": core.whiten(advantages, mask),
            "returns": returns}


def rollout(policy: CausalLMPolicy, tokenizer, prompts: list[str], cfg: Config):
    """Sample one completion per prompt; return (batch without advantages, completion texts, full texts)."""
    enc = tokenizer(prompts, padding=True, return_tensors="pt").to(cfg.device)
    completion, mask = policy.generate(enc["input_ids"], enc["attention_mask"], cfg.generation.max_new_tokens,
                                       pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                                       top_k=cfg.top_k, top_p=cfg.generation.top_p)
    batch = lm_batch(enc["input_ids"], enc["attention_mask"], completion, mask, tokenizer.pad_token_id)
    ids, attention = batch.inputs["input_ids"], batch.inputs["attention_mask"].bool()
    completions = [tokenizer.decode(c[m.bool()], skip_special_tokens=True) for c, m in zip(completion, mask)]
    texts = [tokenizer.decode(row[keep], skip_special_tokens=True) for row, keep in zip(ids, attention)]
    return batch, completions, texts


def score(reward_fn, texts: list[str], rows: int) -> torch.Tensor:
    return torch.cat([reward_fn(texts[i:i + rows]) for i in range(0, len(texts), rows)]).float()


def sample_table(policy, tokenizer, reward_fn, prompts: list[str], cfg: Config) -> list[dict]:
    """Completions of fixed prompts under a fixed sampling seed (the global RNG is left untouched)."""
    if not prompts:
        return []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed + 12_345)
        _, completions, texts = rollout(policy, tokenizer, prompts, cfg)
    scores = score(reward_fn, texts, cfg.forward_batch_size)
    return [{"prompt": p, "completion": c, "score": round(s.item(), 4)} for p, c, s in zip(prompts, completions,
                                                                                        scores)]


def _cell(text: str, width: int) -> str:
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= width else text[:width - 1] + "…"


def before_after_table(before: list[dict], after: list[dict], width: int = 44) -> str:
    """A Markdown table: prompt | completion before | score | completion after | score."""
    lines = ["| prompt | before training | score | after training | score |", "|---|---|---:|---|---:|"]
    for b, a in zip(before, after):
        lines.append(f"| {_cell(b['prompt'], 28)} | {_cell(b['completion'], width)} | {b['score']:+.2f} "
                     f"| {_cell(a['completion'], width)} | {a['score']:+.2f} |")
    if before:
        mean_b = sum(b["score"] for b in before) / len(before)
        mean_a = sum(a["score"] for a in after) / len(after)
        lines.append(f"| **mean** | | {mean_b:+.2f} | | {mean_a:+.2f} |")
    return "\n".join(lines)


def load_model(cfg: Config):
    """(policy model, tokenizer), loaded as every causal LM of the ladder is (``quant.load_causal_lm``):
    full precision, LoRA adapters, or QLoRA's 4-bit base with LoRA adapters."""
    path = hub.resolve(review_models.resolve_review_model(cfg.model), "--model")
    model = quant.load_causal_lm(path, torch.device(cfg.device), qlora=cfg.adapter.qlora, lora=cfg.adapter.lora,
                                 lora_r=cfg.adapter.r, lora_alpha=cfg.adapter.alpha,
                                 gradient_checkpointing=gradient_checkpointing(cfg),
                                 dtype=None if cfg.adapter.qlora else torch.float32)
    return model, quant.load_tokenizer(path)


def load_parts(cfg: Config):
    """(model, tokenizer, reward function, prompt pool); any loading problem is one UsageError line."""
    model, tokenizer = load_model(cfg)
    reward_fn = sentiment_rewards.load_reward(cfg.reward_model, cfg.device, cfg.forward_batch_size)
    prompts = review_prompts.load_prompts(cfg.dataset, tokenizer, cfg.min_prompt_tokens, cfg.max_prompt_tokens,
                                     cfg.max_prompts, cfg.seed)
    return model, tokenizer, reward_fn, prompts


def _mean_std(x: torch.Tensor) -> tuple[float, float]:
    return x.mean().item(), (x.std().item() if x.numel() > 1 else 0.0)


def train(cfg: Config) -> dict:
    """Run RLHF-PPO; write metrics.jsonl, summary.json, samples.md and curves.png into ``cfg.out``."""
    validate(cfg)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    cfg.device = str(process_device(torch.device(cfg.device)))
    if cfg.batch_size % launched_processes():
        raise UsageError(f"--batch-size {cfg.batch_size} cannot be shared equally by {launched_processes()} "
                         f"processes")
    review_models.resolve_review_model(cfg.model)  # the tiny model built and cached before the process group exists
    procs = Processes(torch.device(cfg.device))  # (see ladder.runtime.distributed)
    summary = loop.train(cfg, NAME, build, procs=procs)
    procs.close()
    return summary


def build(cfg: Config, run: RunSession) -> Recipe:
    """RLHF-PPO as the loop runs it (``SentimentPPO``): the model, the reward and the prompts loaded here."""
    return SentimentPPO(cfg, run)


class SentimentPPO(Recipe):
    """RLHF-PPO: each update ``ppo_step`` on ``--batch-size`` prompts drawn from the prompt pool; ``--steps``
    updates; a before/after table of fixed prompts around the training (samples.md)."""

    def __init__(self, cfg: Config, run: RunSession):
        """Load the model, the reward function and the prompts; build π_θ (π_ref beside it), the optimiser, the KL
        controller and the plan."""
        self.cfg, self.run, self.procs = cfg, run, run.procs
        seed_everything(cfg.seed)
        t_load = time.perf_counter()
        model, self.tokenizer, self.reward_fn, self.prompt_pool = load_parts(cfg)
        seed_everything(cfg.seed)  # building a tiny model on first use must not change the run
        self.policy = build_policy(cfg, model).to(cfg.device)
        self.trainer = self.procs.wrap(self.policy)  # the policy, or its data-parallel wrapper
        self.optimizer = torch.optim.Adam([p for p in self.policy.parameters() if p.requires_grad], lr=cfg.lr)
        self.controller, self.update_cfg = kl_controller(cfg), update_config(cfg)
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.true_reward = tiny_preferences.true_reward(cfg.true_reward)  # None unless the task knows its truth
        self.load_s = time.perf_counter() - t_load
        self.prompt_rng = random.Random(cfg.seed)
        self.eval_prompts = random.Random(cfg.seed + 1).sample(self.prompt_pool,
                                                               min(cfg.num_eval_prompts, len(self.prompt_pool)))
        self.counters: dict = {"before": []}
        self.samples: list = []  # this update's (prompt, completion, score) triples
        run.seed_each_process()  # the weights are the same everywhere; the samples from here on are not
        self.plan = loop.Plan(updates=cfg.steps, curves=tuple(CURVES), bar=(
            ("score", "score_mean", "+.3f"), ("kl", "kl_ref", ".2f"), ("beta", "kl_coef", ".3f")))

    def update(self) -> dict:
        """``ppo_step`` on this update's prompts (this process's share); π_ref refreshed every --ref-sync-every;
        a few samples printed every --print-samples. A fresh run's first update samples the "before" table first."""
        cfg, done = self.cfg, self.run.step + 1  # done: the updates done after this one
        if self.run.step == 0 and self.plan.evaluations:
            self.counters["before"] = sample_table(self.policy, self.tokenizer, self.reward_fn, self.eval_prompts, cfg)
        prompts = self.procs.shard(self.prompt_rng.choices(self.prompt_pool, k=cfg.batch_size))
        record, self.samples = self.ppo_step(prompts)
        if cfg.ref_sync_every and done % cfg.ref_sync_every == 0:
            self.policy.refresh_reference(cfg.ref_mixup)
        record = {"completions": done * cfg.batch_size, **record}
        if cfg.print_samples and done % cfg.print_samples == 0:
            self.run.write(f"update {done}: score {record['score_mean']:+.3f}  KL {record['kl_ref']:.2f}  "
                           f"β {record['kl_coef']:.3f}")
            for p, c, s in self.samples[:cfg.num_samples]:
                self.run.write(f"  {p!r} → {c!r} → {s:+.3f}")
        return record

    def ppo_step(self, prompts: list[str]) -> tuple[dict, list]:
        """Sample → score → KL-shaped rewards, GAE → ``core.update`` → β update; the record and
        (prompt, completion, score) triples of this process."""
        cfg, policy, procs = self.cfg, self.policy, self.procs
        batch, completions, texts = rollout(policy, self.tokenizer, prompts, cfg)
        old_logp, values, ref_logp = old_and_ref(policy, batch, cfg.forward_batch_size)
        my_scores = score(self.reward_fn, texts, cfg.forward_batch_size).to(old_logp.device)
        kl_coef = self.controller.value
        targets = ppo_targets(my_scores, old_logp, ref_logp, values, batch.mask, kl_coef, cfg)
        batch = replace(batch, old_logp=old_logp, ref_logp=ref_logp, values=targets["values"],
                        rewards=targets["rewards"], advantages=targets["advantages"], returns=targets["returns"])
        passes = core.update(self.trainer, batch, self.optimizer, self.update_cfg, self.generator)
        kl_per_seq = procs.gather(targets["kl"].sum(dim=1))  # statistics of the whole batch, from every process
        self.controller.update(kl_per_seq.mean().item(), cfg.batch_size)
        shaped, scores = procs.gather(batch.rewards.sum(dim=1)), procs.gather(my_scores)
        last = procs.mean(dict(passes[-1]))
        last["kl_ref_token_k3"] = last.pop("kl_ref", None)
        record = {"num_passes": len(passes), **last, **core.step_counts(passes, self.update_cfg.num_minibatches)}
        record["score_mean"], record["score_std"] = _mean_std(scores)
        record["reward_mean"], record["reward_std"] = _mean_std(shaped)
        record["non_score_reward_mean"] = (shaped - scores).mean().item()
        record["kl_ref"] = kl_per_seq.mean().item()
        record["kl_coef"] = kl_coef
        record["response_length"] = procs.gather(batch.mask.sum(dim=1)).mean().item()
        if self.true_reward is not None:
            record["true_reward_mean"] = procs.gather(self.true_reward(prompts, completions)).mean().item()
            for name, values in tiny_preferences.anatomy(completions).items():   # where the completions' length went
                record[tiny_preferences.ANATOMY_KEYS[name]] = procs.gather(values).mean().item()
        return record, list(zip(prompts, completions, my_scores.tolist()))

    def summary(self) -> dict:
        """The before/after table (samples.md), summary.json's dict, and the trained policy in OUT/policy."""
        cfg, run, procs, policy = self.cfg, self.run, self.procs, self.policy
        before = self.counters["before"]
        after = sample_table(policy, self.tokenizer, self.reward_fn, self.eval_prompts, cfg)
        table = before_after_table(before, after)
        summary = summarize(run.records(), before, after, cfg, self.controller.value,
                            {"wall_s": run.wall_s, "load_s": self.load_s, "processes": procs.world,
                             "weights_digest_per_process": procs.gather_object(weights_digest(policy))})
        if procs.is_main:
            print("\nSample completions before → after training (same prompts, same sampling seed):\n" + table)
            (run.dir / "samples.md").write_text(table + "\n")
            save_policy(policy, self.tokenizer, run.dir)
        return summary

    def state(self) -> dict:
        """π_θ, the optimiser, the KL controller, the generators, π_ref when it is refreshed, and the counters."""
        return {"policy": self.policy, "optimizer": self.optimizer, "controller": self.controller,
                "generator": self.generator, "prompt_rng": self.prompt_rng,
                **({"reference": ReferenceWeights(self.policy)} if self.cfg.ref_sync_every else {}),
                "counters": self.counters}

    def load_state(self, restored: dict) -> None:
        """Keep the restored counters (the "before" table); the other parts came back restored in place."""
        self.counters = restored["counters"]


def summarize(records: list[dict], before: list[dict], after: list[dict], cfg: Config, kl_coef: float,
              extra: dict) -> dict:
    """summary.json: first and last scores and rewards, the final KL and β, the before/after samples."""
    scores = [r["score_mean"] for r in records]
    k = min(5, len(records))
    summary = {
        "rung": NAME, "seed": cfg.seed, "model": cfg.model, "reward_model": cfg.reward_model,
        "dataset": cfg.dataset, "lora": cfg.adapter.lora, "updates": len(records),
        "score_first": scores[0], "score_last": scores[-1],
        "score_first5_mean": sum(scores[:k]) / k, "score_last5_mean": sum(scores[-k:]) / k,
        "reward_first": records[0]["reward_mean"], "reward_last": records[-1]["reward_mean"],
        "kl_final": records[-1]["kl_ref"], "kl_max": max(r["kl_ref"] for r in records), "kl_coef_final": kl_coef,
        "eval_score_before": sum(b["score"] for b in before) / max(len(before), 1),
        "eval_score_after": sum(a["score"] for a in after) / max(len(after), 1),
        "samples": [{"prompt": b["prompt"], "before": b["completion"], "before_score": b["score"],
                     "after": a["completion"], "after_score": a["score"]} for b, a in zip(before, after)],
        **extra}
    summary["score_gain"] = summary["score_last5_mean"] - summary["score_first5_mean"]
    return summary


def save_policy(policy: CausalLMPolicy, tokenizer, out: Path) -> None:
    """The trained model (or LoRA adapter) and tokenizer in ``out/policy``, the value head beside them."""
    target = Path(out) / "policy"
    with hub.quiet_progress():
        policy.model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    torch.save(policy.value_head.state_dict(), target / "value_head.pt")
    if is_peft(policy.model):
        (target / "README.ladder.txt").write_text("LoRA adapter: load the base model, then PeftModel.from_pretrained\n")
