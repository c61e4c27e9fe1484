"""RLHF-PPO as the loop runs it: the declaration ``RUNG``, the curves, ``train`` and ``build``, the recipe
(``SentimentPPO``: each update ``ppo_step``; π_ref refreshed, samples printed; the summary, samples.md and
OUT/policy) and summary.json (``summarize``)."""

from __future__ import annotations

import random
import time
from dataclasses import replace

import torch

from ladder import core
from ladder.plots import Panel
from ladder.policies.causal_lm import ReferenceWeights
from ladder.rungs.ppo_sentiment.experience import old_and_ref, ppo_targets, rollout, score
from ladder.rungs.ppo_sentiment.options import Config, kl_controller, update_config, validate
from ladder.rungs.ppo_sentiment.samples import before_after_table, sample_table
from ladder.rungs.ppo_sentiment.setup import build_policy, load_parts, save_policy
from ladder.rungs.protocol import Rung, Words
from ladder.runtime import loop
from ladder.runtime.distributed import Processes, launched_processes, process_device, weights_digest
from ladder.runtime.loop import Recipe
from ladder.runtime.runlog import UsageError, seed_everything
from ladder.runtime.session import RunSession
from ladder.tasks import review_models, tiny_preferences
from ladder.trl_rows import PPO, PPO_TRAINER, TRL

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
                ("notebooks/4_ppo_rlhf_sentiment.ipynb", r"## Reward vs KL: what $\beta$ buys"))},
            trl_classes=(PPO, PPO_TRAINER),
            trl=(TRL("forward_batch_size", note="a deprecated alias of mini_batch_size; not ladder's "
                     "--forward-batch-size (rows per no-grad forward)", cls=PPO),
                 TRL("target_kl", "update", "with early_stopping: skip the rest once KL(π_old‖π_θ) > 1.5·target_kl; "
                     "core.UpdateConfig.target_kl stops after a pass instead, and ppo-sentiment has no flag for it",
                     cls=PPO),
                 TRL("ratio_threshold", note="ladder skips only non-finite steps", cls=PPO),
                 TRL("use_score_scaling", note="ladder does not rescale scores", cls=PPO),
                 TRL("step", "update", "PPOTrainer.step(queries, responses, scores) = one ladder update: π_old, V_old, "
                     "π_ref forwards → rewards → GAE → μ passes of minibatches → β update", cls=PPO_TRAINER),
                 TRL("compute_advantages", "whiten", "Â whitened over the batch's tokens", cls=PPO_TRAINER)))
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
