"""The options both preference rungs share (``reward-model``, ``dpo``), declared once, and what their runs share around
the recipe: the minibatch rule, ``train`` and ``PairRecipe`` (the recipe's common part).

A rung's ``Config`` inherits the options and re-declares a field only to give it its own default or help (the model,
the batch, the learning rate).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ladder import core
from ladder.cli import (
    MAX_EXAMPLES,
    MAX_LORA_ALPHA,
    MAX_ROWS,
    MAX_SCALE,
    MAX_STEPS,
    RunOptions,
    Text,
    count,
    int_range,
    learning_rate,
    option,
    positive,
)
from ladder.rungs.protocol import check_minibatches
from ladder.runtime import loop
from ladder.runtime.session import RunSession
from ladder.tasks import preference_pairs

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"  # the model of TRL's RewardTrainer and DPOTrainer examples


@dataclass
class PreferenceOptions(RunOptions):
    model: str = option(DEFAULT_MODEL, "hub id or directory ('tiny': the project's tiny review GPT-2)", Text())
    dataset: str = option(preference_pairs.DEFAULT_DATASET, "preference pairs: hub dataset id, a local .jsonl/.json "
                                                            "file of prompt/chosen/rejected rows, or 'tiny' (the "
                                                            "tiny preference task shipped with ladder)", Text())
    max_pairs: int = option(0, "train on at most this many pairs of --dataset (0: all)", count(0, MAX_EXAMPLES))
    eval_pairs: int = option(200, "held-out pairs scored at each evaluation (a local file's last rows; else its "
                                  "test split)", count(0, MAX_EXAMPLES))
    lora: bool = option(False, "LoRA adapters on the backbone (reward-model: the scalar head trains whole and the "
                               "adapters are merged on save; dpo: π_ref is the base with the adapter off)")
    lora_r: int = option(16, "LoRA rank r", int_range(1, 4096))
    lora_alpha: int = option(32, "LoRA α (at most 65536)", count(1, MAX_LORA_ALPHA))
    steps: int = option(500, "updates (each one batch of pairs)", count(1, MAX_STEPS))
    batch_size: int = option(32, "pairs per update B (at most 65536)", int_range(1, 65536))
    num_minibatches: int = option(1, "shuffled minibatches of whole pairs per update (each one optimiser step)",
                                  count(1, MAX_ROWS))
    lr: float = option(1e-5, "AdamW learning rate", learning_rate())
    max_grad_norm: float | None = option(1.0, "gradient-norm clip", positive(MAX_SCALE))
    eval_every: int = option(50, "evaluate on the held-out pairs every N updates", count(1, MAX_STEPS))
    forward_batch_size: int = option(32, "pairs per gradient-free forward (π_ref, the evaluation)", count(1, MAX_ROWS))
    threads: int = option(0, "torch CPU threads (0: torch's default; at most 1024)", int_range(0, 1024))
    export_trl: str | None = option(None, "write this run as a runnable TRL script (reward-model: trl.RewardTrainer; "
                                          "dpo: trl.DPOTrainer) to this file and exit: nothing is trained, no run "
                                          "directory is created", Text())


def validate(cfg: PreferenceOptions) -> None:
    check_minibatches(cfg.batch_size, cfg.num_minibatches, f"a batch of {cfg.batch_size} pairs")


def train(cfg: PreferenceOptions, rung: str, build: Callable) -> dict:
    """The rung's recipe (``build``) run by the one loop, ``cfg.steps`` updates."""
    validate(cfg)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    return loop.train(cfg, rung, build)


class PairRecipe(loop.Recipe):
    """What both preference rungs' recipes share: AdamW on the trained module's trainable parameters, B random
    training pairs per update (``next_pairs``), ``--steps`` updates, the held-out evaluation (the rung's ``report``)
    before the first update and every ``--eval-every`` — the first kept as the summary's "before", the latest as its
    "after" — and the checkpoint: the trained module, the optimiser, both generators and the progress."""

    def __init__(self, cfg: PreferenceOptions, run: RunSession, name: str, trained: torch.nn.Module, objective,
                 curves: list, bar: tuple, train_pairs: list[dict], load_s: float):
        """``trained``: the module whose trainable parameters the optimiser steps, ``name`` its part in the
        checkpoint; ``objective``: ``core.update``'s; ``load_s``: the seconds its loading took (the summary's)."""
        self.cfg, self.run, self.train_pairs = cfg, run, train_pairs
        self.trained_name, self.trained = name, trained
        self.optimizer = torch.optim.AdamW([p for p in trained.parameters() if p.requires_grad], lr=cfg.lr,
                                           weight_decay=0.0)
        self.update_cfg = core.UpdateConfig(objective=objective, num_minibatches=cfg.num_minibatches,
                                            max_grad_norm=cfg.max_grad_norm)
        self.pair_rng, self.generator = random.Random(cfg.seed), torch.Generator().manual_seed(cfg.seed)
        self.plan = loop.Plan(updates=cfg.steps, eval_every=cfg.eval_every, evaluate_first=True,
                              curves=tuple(curves), bar=bar)
        self.progress: dict = {"before": {}, "after": {}, "load_s": load_s}

    def next_pairs(self) -> list[dict]:
        """The update's B pairs, drawn without replacement from the training pairs."""
        return self.pair_rng.sample(self.train_pairs, min(self.cfg.batch_size, len(self.train_pairs)))

    def record(self, pairs: list[dict], passes: list[dict], names: tuple[str, ...], extra: dict | None = None) -> dict:
        """The update's record: the pairs seen so far, the last pass's ``names`` (a step the guard skipped, not
        finite, has no grad_norm: the record leaves it out), ``extra`` and the optimiser steps
        (``core.step_counts``)."""
        last = passes[-1]
        return {"pairs": (self.run.step + 1) * len(pairs), **{k: last[k] for k in names if k in last},
                **(extra or {}), **core.step_counts(passes, self.cfg.num_minibatches)}

    def report(self) -> dict:
        """The rung's held-out evaluation: the record's fields."""
        raise NotImplementedError

    def evaluate(self) -> dict:
        """``report``, kept as the run's "after" (and, before the first update, as its "before")."""
        report = self.report()
        self.progress["after"] = report
        if self.run.step == 0:
            self.progress["before"] = report
        return report

    def state(self) -> dict:
        """The checkpoint's parts: the trained module, the optimiser, both generators and the progress."""
        return {self.trained_name: self.trained, "optimizer": self.optimizer, "pair_rng": self.pair_rng,
                "generator": self.generator, "progress": self.progress}

    def load_state(self, restored: dict) -> None:
        """The progress as the checkpoint saved it (the modules, optimiser and generators are restored in place)."""
        self.progress = restored["progress"]
