"""The reward model as the loop runs it: the declaration ``RUNG``, the curves, ``train`` and ``build``, and the recipe
(``BradleyTerry``: each update B pairs → ``core.update`` with the Bradley–Terry loss; the held-out report; the
summary and OUT/reward_model)."""

from __future__ import annotations

import time

from ladder import core, hub
from ladder.plots import Panel
from ladder.policies.causal_lm import is_peft
from ladder.policies.scalar_head import ScoringPolicy, preference_batch
from ladder.rungs import preference_options, preference_recipe
from ladder.rungs.preference_eval import calibration, pair_report
from ladder.rungs.preference_recipe import PairRecipe
from ladder.rungs.protocol import TRAINING_WRITES, Rung
from ladder.rungs.reward_model.model import load, score_pairs
from ladder.rungs.reward_model.options import Config
from ladder.runtime.loop import Recipe
from ladder.runtime.runlog import seed_everything
from ladder.runtime.session import RunSession
from ladder.trl_rows import REWARD

NAME = "reward-model"
RUNG = Rung(name=NAME, position=6,
            summary="a reward model r_φ from preference pairs (Bradley–Terry);"
                    " ppo-sentiment --reward-model trains on it",
            writes=TRAINING_WRITES + ", reward_model/",
            export="ladder.trl.export_preferences:write_reward_model",
            exercises=("ex11_aggregate", "ex17_compute_loss", "ex18_update", "ex26_bradley_terry"),
            vitals=("rm_loss", "ranked", "rm_margin", "length_paid", "calibration", "grad_norm"),
            trl_classes=(REWARD,), trl=preference_options.trl_settings(REWARD, "bradley_terry_loss"))
CURVES = [Panel("Bradley–Terry loss", "−log σ(r_w − r_l), batch mean", {"loss": ""}),
          Panel("pairs ranked right", "share of pairs",
                {"accuracy": "training batch", "eval_accuracy": "held-out pairs (the labeller's order)",
                 "eval_score_accuracy": "held-out pairs (the true order, where known)"}),
          Panel("reward margin", "r_w − r_l (mean)", {"margin": "training batch", "eval_margin": "held-out"}),
          Panel("calibration error", "ECE of σ(r_w − r_l) on held-out pairs", {"eval_calibration_error": ""}),
          Panel("what r_φ pays for length", "correlation of r_φ with words (held out)", {"eval_length_corr": ""})]


def train(cfg: Config) -> dict:
    """Fit r_φ to the pairs; write metrics.jsonl, summary.json, curves.png and OUT/reward_model."""
    return preference_recipe.train(cfg, NAME, build)


def build(cfg: Config, run: RunSession) -> Recipe:
    """Bradley–Terry as the loop runs it (``BradleyTerry``)."""
    return BradleyTerry(cfg, run)


class BradleyTerry(PairRecipe):
    """r_φ fit by Bradley–Terry: B random training pairs → ``core.update``; the held-out report before the first
    update and every ``--eval-every``; ``--steps`` updates (``PairRecipe``)."""

    def __init__(self, cfg: Config, run: RunSession):
        seed_everything(cfg.seed)
        t_load = time.perf_counter()
        self.tokenizer, self.model, train_pairs, self.held_out = load(cfg)
        self.policy = ScoringPolicy(self.model)
        super().__init__(cfg, run, "model", self.model, "bradley_terry", CURVES,
                         (("acc", "accuracy", ".2f"), ("eval", "eval_accuracy", ".2f")), train_pairs,
                         load_s=time.perf_counter() - t_load)
        self.counters["calibration"] = []

    def update(self) -> dict:
        """B pairs → [x + y_w; x + y_l] → ``core.update`` with −log σ(r_w − r_l)."""
        pairs = self.next_pairs()
        batch = preference_batch(self.tokenizer, pairs, self.cfg.device)
        passes = core.update(self.policy, batch, self.optimizer, self.update_cfg, self.generator)
        return self.record(pairs, passes, ("loss", "accuracy", "margin", "grad_norm"))

    def report(self) -> dict:
        """The held-out report (``preference_eval.pair_report``); its reliability table kept for summary.json."""
        if not self.held_out:
            return {}
        cfg = self.cfg
        chosen, rejected = score_pairs(self.model, self.tokenizer, self.held_out, cfg.forward_batch_size, cfg.device)
        report = pair_report(chosen, rejected, self.held_out)
        self.counters["calibration"] = calibration(chosen - rejected)
        return report

    def summary(self) -> dict:
        """OUT/reward_model (with --lora, the adapter merged into the backbone) and its tokenizer; the summary."""
        cfg, counters, target = self.cfg, self.counters, self.run.dir / "reward_model"
        whole = self.model.merge_and_unload() if is_peft(self.model) else self.model
        with hub.quiet_progress():
            whole.save_pretrained(target)
        self.tokenizer.save_pretrained(target)
        return {"rung": NAME, "seed": cfg.seed, "model": cfg.model, "dataset": cfg.dataset, "lora": cfg.lora,
                "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."),
                "train_pairs": len(self.train_pairs), "held_out_pairs": len(self.held_out), "updates": self.run.step,
                "eval_before": counters["before"], "eval_after": counters["after"],
                "calibration": counters["calibration"],
                "wall_s": self.run.wall_s, "load_s": counters["load_s"], "saved": str(target)}
