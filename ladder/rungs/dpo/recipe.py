"""DPO as the loop runs it: the declaration ``RUNG``, the curves, ``train`` and ``build``, and the recipe
(``DirectPreference``: each update B pairs with log π_ref → ``core.update`` with the DPO loss; the held-out report
and sampled completions; the summary and OUT/policy)."""

from __future__ import annotations

import time

from ladder import core
from ladder.plots import Panel
from ladder.policies.dpo_batch import dpo_batch
from ladder.rungs import preference_options, preference_recipe, preference_sampling
from ladder.rungs.dpo.options import Config
from ladder.rungs.dpo.policy import implicit_rewards, load, with_reference
from ladder.rungs.preference_eval import pair_report
from ladder.rungs.preference_recipe import PairRecipe
from ladder.rungs.protocol import TRAINING_WRITES, Rung, Words
from ladder.runtime.loop import Recipe
from ladder.runtime.runlog import seed_everything
from ladder.runtime.session import RunSession
from ladder.tasks import tiny_preferences
from ladder.trl_rows import DPO, TRL, const

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
                 "## 5 · DPO's own failure modes: the likelihood it loses, the length it gains"))},
            trl_classes=(DPO,),
            trl=(*preference_options.trl_settings(DPO, "dpo_loss"),
                 TRL("loss_type", "dpo_loss", "core.DPO is the sigmoid loss", const(["sigmoid"]), cls=DPO)))
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


def train(cfg: Config) -> dict:
    """Fit π_θ to the pairs by DPO; write metrics.jsonl, summary.json, curves.png and OUT/policy."""
    return preference_recipe.train(cfg, NAME, build)


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
