"""What both preference rungs' runs share around their recipe (``reward-model``, ``dpo``): ``train`` (the options
checked, the recipe run by the one loop) and ``PairRecipe``, the recipe's common part (the optimiser, the pairs of
each update, the evaluations, the checkpoint)."""

from __future__ import annotations

import random
from collections.abc import Callable

import torch

from ladder import core
from ladder.rungs.preference_options import PreferenceOptions, validate
from ladder.runtime import loop
from ladder.runtime.session import RunSession


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
    "after" — and the checkpoint: the trained module, the optimiser, both generators and the counters."""

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
        self.counters: dict = {"before": {}, "after": {}, "load_s": load_s}

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
        self.counters["after"] = report
        if self.run.step == 0:
            self.counters["before"] = report
        return report

    def state(self) -> dict:
        """The checkpoint's parts: the trained module, the optimiser, both generators and the counters."""
        return {self.trained_name: self.trained, "optimizer": self.optimizer, "pair_rng": self.pair_rng,
                "generator": self.generator, "counters": self.counters}

    def load_state(self, restored: dict) -> None:
        """The counters as the checkpoint saved them (the modules, optimiser and generators are restored in place)."""
        self.counters = restored["counters"]
