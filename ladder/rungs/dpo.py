"""Rung 6, DPO: fit the policy to preference pairs directly, with no reward model and no sampling.

The KL-regularised objective max E[r] − β·KL(π_θ‖π_ref) has the optimum π*(y|x) ∝ π_ref(y|x)·exp(r(x, y)/β), so the
reward it implies is r(x, y) = β·log π*(y|x)/π_ref(y|x) + β·log Z(x); in the Bradley–Terry likelihood of a pair
Z(x) cancels, and DPO fits π_θ in the place of π*. Each update, on the same ``ladder.core`` as every other rung:

    B pairs (x, y_w, y_l) drawn from the training pairs                    tasks.preference_pairs
    batch  = [x + y_w; x + y_l] as 2B rows, each pair kept whole            policies.dpo_batch
    log π_ref of every completion token, once                               π_ref: a frozen copy, or the adapter off
    L_DPO  = −mean log σ(β·[log π_θ/π_ref (y_w) − log π_θ/π_ref (y_l)])     core.update, objective DPO(β)

Every ``--eval-every`` updates: the held-out pairs ranked by the implicit reward r̂ = β·log π_θ/π_ref (accuracy,
margin, calibration: ``rungs.preference_eval``), and completions sampled from π_θ on held-out prompts — their
KL(π_θ‖π_ref) summed over the completion (the same quantity as ppo-sentiment's kl_ref) and, where the task knows
it (``--true-reward``), the true reward they reach. ``--preset tiny`` runs the tiny preference task offline on a CPU
in a minute or two; the RM + PPO route on the same pairs is ``reward-model`` then ``ppo-sentiment --reward-model``.

metrics.jsonl, one line per update: loss, rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins,
logps/chosen, logps/rejected (TRL's names), kl_ref_token_k3; when evaluated eval_accuracy, eval_margin,
eval_calibration_error, eval_score_accuracy, eval_length_corr, sample_kl, response_length, and with a true reward
true_reward_mean, words_mean, hedged_share, padded_share. OUT/policy holds the trained model (or adapter).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, replace

import torch

from ladder import core, hub
from ladder.cli import MAX_COEF, MAX_ROWS, MAX_TOKENS, Text, count, int_range, learning_rate, option, positive
from ladder.plots import Panel
from ladder.policies import quant
from ladder.policies.causal_lm import CausalLMPolicy, is_peft
from ladder.policies.dpo_batch import dpo_batch
from ladder.rungs import preference_options, preference_recipe, preference_sampling
from ladder.rungs.preference_eval import pair_report
from ladder.rungs.preference_options import DEFAULT_MODEL, PreferenceOptions
from ladder.rungs.preference_recipe import PairRecipe
from ladder.rungs.protocol import TRAINING_WRITES, Rung, Words
from ladder.runtime.loop import Recipe
from ladder.runtime.runlog import seed_everything
from ladder.runtime.session import RunSession
from ladder.tasks import preference_pairs, review_models, tiny_preferences

NAME = "dpo"
RUNG = Rung(name=NAME, position=7,
            summary="DPO: the policy fitted to preference pairs directly (the reward read off π_θ/π_ref)",
            writes=TRAINING_WRITES + ", policy/",
            export="ladder.trl.export_preferences:write_dpo",
            exercises=("ex11_aggregate", "ex17_compute_loss", "ex18_update", "ex27_dpo_loss"),
            vitals=("dpo_loss", "dpo_ranked", "dpo_margin", "implicit", "logps", "sample_kl", "sample_true",
                    "sample_length", "grad_norm"),
            words={"length_drift": Words(
                "length drift: DPO paying for length", "problem",
                "DPO's implicit reward is a sum over tokens, so where the chosen completions are the longer ones the "
                "margin grows with length alone (Park et al. 2024): the sampled completions grow longer while the "
                "true reward does not",
                "a larger --beta or fewer --steps; pairs matched in length", "larger beta, ld_alpha (LD-DPO), or "
                "loss_type='sigmoid_norm' (the log-ratios per token)",
                ("notebooks/9_where_the_reward_comes_from.ipynb",
                 "## 5 · DPO's own failure modes: the likelihood it loses, the length it gains"))})
CURVES = [Panel("DPO loss", "−log σ(r̂_w − r̂_l), batch mean", {"loss": ""}),
          Panel("implicit reward r̂ = β·log π_θ/π_ref", "batch mean",
                {"rewards/chosen": "chosen", "rewards/rejected": "rejected", "rewards/margins": "margin"}),
          Panel("log π_θ of the pairs' completions", "nats per completion (batch mean)",
                {"logps/chosen": "chosen", "logps/rejected": "rejected"}),
          Panel("pairs ranked right by r̂ (a tie: wrong, as TRL)",
                "share of pairs (update 0: all ties)",
                {"rewards/accuracies": "training batch", "eval_accuracy": "held-out pairs (the labeller's order)",
                 "eval_score_accuracy": "held-out pairs (the true order, where known)"}),
          Panel("KL(π_θ‖π_ref) of sampled completions", "nats, summed over the completion", {"sample_kl": ""}),
          Panel("true reward of sampled completions", "r* (mean)", {"true_reward_mean": ""}),
          Panel("completion length", "tokens (mean)", {"response_length": ""}),
          Panel("what the true reward charges for", "share of sampled completions",
                {"hedged_share": "hedge with a 'but'", "padded_share": "repeat a word"})]


@dataclass
class Config(PreferenceOptions):
    model: str = option(DEFAULT_MODEL, "policy: causal LM hub id or directory ('tiny': the project's tiny review "
                                       "GPT-2); π_ref is its starting point", Text())
    batch_size: int = option(8, "pairs per update B (at most 65536)", int_range(1, 65536))
    lr: float = option(1e-6, "AdamW learning rate (TRL's DPO default)", learning_rate())
    beta: float = option(0.1, "β: the KL-regularised objective's coefficient, the implicit reward's scale",
                         positive(MAX_COEF))
    num_eval_prompts: int = option(32, "held-out prompts whose sampled completions measure KL and the true reward "
                                       "(with --eval-pairs 0, the training pairs' prompts; 0: no sampling)",
                                   count(0, MAX_ROWS))
    max_new_tokens: int = option(128, "length limit of the sampled completions (tokens)", count(1, MAX_TOKENS))
    true_reward: str = option("none", "the true reward of the sampled completions, where the task knows it: "
                                      "'tiny-preferences' (the tiny task's r*)", choices=tiny_preferences.TRUE_REWARDS)
    chunk_size: int = option(64, "positions per chunk of the lm_head / log-softmax", count(1, MAX_TOKENS))


PRESETS = {"tiny": {"model": "tiny", "dataset": "tiny", "steps": 120, "batch_size": 32, "lr": 1e-4,
                    "eval_every": 20, "eval_pairs": 500, "num_eval_prompts": 64, "max_new_tokens": 32,
                    "true_reward": "tiny-preferences", "threads": 1}}
ALGOS: dict = {}
RESOLVED: dict = {}


validate = preference_options.validate


def train(cfg: Config) -> dict:
    """Fit π_θ to the pairs by DPO; write metrics.jsonl, summary.json, curves.png and OUT/policy."""
    return preference_recipe.train(cfg, NAME, build)


def load(cfg: Config):
    """(tokenizer, π_θ's policy with π_ref, training pairs, held-out pairs); a loading problem is one line, and so is
    a pair the model cannot take (``preference_sampling.check_dpo``: checked before any weights load)."""
    path = hub.resolve(review_models.resolve_review_model(cfg.model), "--model")
    tokenizer, config = quant.load_tokenizer(path), quant.load_config(path)
    train_pairs, held_out = preference_pairs.train_and_held_out(
        cfg.dataset, cfg.eval_pairs, cfg.max_pairs or None,
        check=lambda train, test: preference_sampling.check_dpo(tokenizer, config, train, test, cfg))
    model = quant.load_causal_lm(path, torch.device(cfg.device), lora=cfg.lora, lora_r=cfg.lora_r,
                                 lora_alpha=cfg.lora_alpha, dtype=torch.float32)
    ref_model = None if is_peft(model) else copy.deepcopy(model)
    policy = CausalLMPolicy(model, chunk_size=cfg.chunk_size, ref_model=ref_model)
    return tokenizer, policy, train_pairs, held_out


@torch.no_grad()
def with_reference(policy: CausalLMPolicy, batch: core.Batch, rows: int) -> core.Batch:
    """The batch with log π_ref of every completion token, ``rows`` rows per forward."""
    ref = [policy.ref_logp(batch.select(torch.arange(start, min(start + rows, len(batch))))).float()
           for start in range(0, len(batch), rows)]
    return replace(batch, ref_logp=torch.cat(ref))


@torch.no_grad()
def implicit_rewards(policy: CausalLMPolicy, tokenizer, pairs: list[dict], cfg: Config):
    """``[P]`` r̂(x, y_w) and ``[P]`` r̂(x, y_l) = β·Σ_t (log π_θ − log π_ref) of ``pairs``."""
    chosen, rejected = [], []
    for start in range(0, len(pairs), cfg.forward_batch_size):
        batch = with_reference(policy, dpo_batch(tokenizer, pairs[start:start + cfg.forward_batch_size], cfg.device),
                               2 * cfg.forward_batch_size)
        logp = core.sequence_logp(policy.evaluate(batch)[0].float(), batch.mask)
        r = core.implicit_reward(logp, core.sequence_logp(batch.ref_logp, batch.mask), cfg.beta).cpu()
        chosen.append(r[0::2])
        rejected.append(r[1::2])
    return torch.cat(chosen), torch.cat(rejected)


def build(cfg: Config, run: RunSession) -> Recipe:
    """DPO as the loop runs it (``DirectPreference``)."""
    return DirectPreference(cfg, run)


class DirectPreference(PairRecipe):
    """π_θ fit by DPO: B random training pairs → log π_ref → ``core.update``; the held-out report and completions
    sampled on held-out prompts before the first update and every ``--eval-every``; ``--steps`` updates
    (``PairRecipe``)."""

    def __init__(self, cfg: Config, run: RunSession):
        seed_everything(cfg.seed)
        t_load = time.perf_counter()
        self.tokenizer, self.policy, train_pairs, self.held_out = load(cfg)
        super().__init__(cfg, run, "policy", self.policy, core.DPO(beta=cfg.beta), CURVES,
                         (("acc", "rewards/accuracies", ".2f"), ("kl", "sample_kl", ".2f")), train_pairs,
                         load_s=time.perf_counter() - t_load)
        self.eval_prompts = preference_sampling.eval_prompts(train_pairs, self.held_out, cfg.num_eval_prompts)
        self.true_reward = tiny_preferences.true_reward(cfg.true_reward)

    def update(self) -> dict:
        """B pairs → [x + y_w; x + y_l] with log π_ref → ``core.update`` with the DPO loss; TRL's names."""
        pairs = self.next_pairs()
        batch = with_reference(self.policy, dpo_batch(self.tokenizer, pairs, self.cfg.device),
                               2 * self.cfg.forward_batch_size)
        passes = core.update(self.policy, batch, self.optimizer, self.update_cfg, self.generator)
        names = ("loss", "rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
                 "logps/rejected", "grad_norm")
        return self.record(pairs, passes, names, {"kl_ref_token_k3": passes[-1]["kl_ref"]})

    def report(self) -> dict:
        """The held-out pairs ranked by r̂, and completions sampled on held-out prompts (``preference_sampling``)."""
        policy, tokenizer, held_out, cfg = self.policy, self.tokenizer, self.held_out, self.cfg
        report = pair_report(*implicit_rewards(policy, tokenizer, held_out, cfg), held_out) if held_out else {}
        report.update(preference_sampling.sampled_report(policy, tokenizer, self.eval_prompts, self.true_reward, cfg))
        return report

    def summary(self) -> dict:
        """OUT/policy (the model, or its LoRA adapter) and its tokenizer; the summary."""
        cfg, counters = self.cfg, self.counters
        preference_sampling.save_policy(self.policy, self.tokenizer, self.run.dir / "policy")
        return {"rung": NAME, "seed": cfg.seed, "model": cfg.model, "dataset": cfg.dataset, "beta": cfg.beta,
                "lora": cfg.lora, "train_pairs": len(self.train_pairs), "held_out_pairs": len(self.held_out),
                "updates": self.run.step, "eval_before": counters["before"], "eval_after": counters["after"],
                "wall_s": self.run.wall_s, "load_s": counters["load_s"]}
