"""Rung 6, the reward model: r_φ(x, y) from preference pairs — the first step of every RLHF pipeline.

Each update, on the same ``ladder.core`` as every other rung:

    B pairs (x, y_w, y_l) drawn from the training pairs                       tasks.preference_pairs
    batch  = [x + y_w; x + y_l] as 2B rows, each pair kept whole (rows_per_group 2)   policies.scalar_head
    L_BT   = −mean log σ(r_φ(x, y_w) − r_φ(x, y_l))                           core.update, objective "bradley_terry"

r_φ is the model's backbone with a scalar head on its last real token (``AutoModelForSequenceClassification``,
one label: the model TRL's ``RewardTrainer`` trains), full or with ``--lora`` adapters. Every ``--eval-every``
updates the held-out pairs are scored: their accuracy, mean margin and calibration (``rungs.preference_eval``), and
on the tiny task — whose true preference is known — the accuracy against the truth and how much r_φ pays for
length, the labeller's spurious pull. ``--preset tiny`` learns the tiny task offline on a CPU in a minute or two.

metrics.jsonl, one line per update: loss, accuracy and margin of the batch; eval_accuracy, eval_margin,
eval_calibration_error, eval_score_accuracy, eval_length_corr when evaluated. summary.json adds the final
calibration table; OUT/reward_model holds the model (with ``--lora``, the adapters merged into the backbone) and its
tokenizer, which ``ppo-sentiment --reward-model`` loads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ladder import core, hub
from ladder.cli import MAX_ROWS, Text, count, option
from ladder.plots import Panel
from ladder.policies import quant
from ladder.policies.causal_lm import disable_dropout, is_peft
from ladder.policies.scalar_head import ScoringPolicy, load_reward_model, preference_batch, rewards
from ladder.rungs import preference_options, preference_recipe
from ladder.rungs.preference_eval import calibration, pair_report
from ladder.rungs.preference_options import DEFAULT_MODEL, PreferenceOptions
from ladder.rungs.preference_recipe import PairRecipe
from ladder.rungs.protocol import TRAINING_WRITES, Rung
from ladder.runtime.loop import Recipe
from ladder.runtime.runlog import seed_everything
from ladder.runtime.session import RunSession
from ladder.tasks import preference_pairs, review_models

NAME = "reward-model"
RUNG = Rung(name=NAME, position=6,
            summary="a reward model r_φ from preference pairs (Bradley–Terry);"
                    " ppo-sentiment --reward-model trains on it",
            writes=TRAINING_WRITES + ", reward_model/",
            export="ladder.trl.export_preferences:write_reward_model",
            exercises=("ex11_aggregate", "ex17_compute_loss", "ex18_update", "ex26_bradley_terry"),
            vitals=("rm_loss", "ranked", "rm_margin", "length_paid", "calibration", "grad_norm"))
CURVES = [Panel("Bradley–Terry loss", "−log σ(r_w − r_l), batch mean", {"loss": ""}),
          Panel("pairs ranked right", "share of pairs",
                {"accuracy": "training batch", "eval_accuracy": "held-out pairs (the labeller's order)",
                 "eval_score_accuracy": "held-out pairs (the true order, where known)"}),
          Panel("reward margin", "r_w − r_l (mean)", {"margin": "training batch", "eval_margin": "held-out"}),
          Panel("calibration error", "ECE of σ(r_w − r_l) on held-out pairs", {"eval_calibration_error": ""}),
          Panel("what r_φ pays for length", "correlation of r_φ with words (held out)", {"eval_length_corr": ""})]


@dataclass
class Config(PreferenceOptions):
    model: str = option(DEFAULT_MODEL, "the reward model's backbone: hub id or directory ('tiny': the project's "
                                       "tiny review GPT-2); a scalar head is added on it", Text())
    forward_batch_size: int = option(64, "pairs per gradient-free forward of the evaluation", count(1, MAX_ROWS))
    dtype: str = option("float32", "the dtype r_φ loads and trains in, whatever its checkpoint is stored in "
                                   "(float32: TRL's RewardTrainer's)", choices=("float32", "bfloat16"))


PRESETS = {"tiny": {"model": "tiny", "dataset": "tiny", "steps": 120, "batch_size": 32, "lr": 3e-4,
                    "eval_every": 20, "eval_pairs": 500, "threads": 1}}
ALGOS: dict = {}
RESOLVED: dict = {}


validate = preference_options.validate


def train(cfg: Config) -> dict:
    """Fit r_φ to the pairs; write metrics.jsonl, summary.json, curves.png and OUT/reward_model."""
    return preference_recipe.train(cfg, NAME, build)


def load(cfg: Config):
    """(tokenizer, reward model, training pairs, held-out pairs); a loading problem is one line, and so is a pair the
    model cannot take (``policies.dpo_batch.check_pairs``: checked before any weights load)."""
    from ladder.policies.dpo_batch import check_pairs

    path = hub.resolve(review_models.resolve_review_model(cfg.model), "--model")
    tokenizer, config = quant.load_tokenizer(path), quant.load_config(path)
    train_pairs, held_out = preference_pairs.train_and_held_out(
        cfg.dataset, cfg.eval_pairs, cfg.max_pairs or None,
        check=lambda train, test: check_pairs(tokenizer, config, train + test, cfg.dataset, cfg.model))
    model = load_reward_model(path, tokenizer, torch.device(cfg.device), lora=cfg.lora, lora_r=cfg.lora_r,
                              lora_alpha=cfg.lora_alpha, dtype=getattr(torch, cfg.dtype))
    disable_dropout(model)
    return tokenizer, model, train_pairs, held_out


@torch.no_grad()
def score_pairs(model, tokenizer, pairs: list[dict], rows: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``[P]`` r_φ(x, y_w) and ``[P]`` r_φ(x, y_l) of ``pairs``, ``rows`` pairs per forward."""
    chosen, rejected = [], []
    for start in range(0, len(pairs), rows):
        batch = preference_batch(tokenizer, pairs[start:start + rows], device)
        r = rewards(model, batch.inputs["input_ids"], batch.inputs["attention_mask"]).cpu()
        chosen.append(r[0::2])
        rejected.append(r[1::2])
    return torch.cat(chosen), torch.cat(rejected)


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
