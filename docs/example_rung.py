"""A new rung in one file: a three-armed bandit learnt with the policy gradient, through the ladder's one loop.

Each update: B pulls a_i ~ π_θ → Bernoulli rewards r_i → Â_i = r_i − mean(r) (the batch's mean as the baseline)
→ ``core.update`` with the REINFORCE loss −Â·log π_θ(a). The run is the loop's: metrics.jsonl, a checkpoint every
``--checkpoint-every`` updates (``--resume`` continues it), summary.json and curves.png, a progress bar, Ctrl-C.

Saved as ``ladder/rungs/bandit.py`` it is a command, and nothing else lists it: its ``RUNG`` declares it
(``ladder.rungs.registry`` finds it). ``tests/test_example_rung.py`` runs it so, and checks it against
``ladder.rungs.protocol.RungCode``.

    python -m ladder.run bandit --steps 40
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ladder import core
from ladder.domains import at_least, int_range, positive
from ladder.options import RunOptions, option
from ladder.plots import Panel
from ladder.rungs.protocol import Rung, no_cross_option_rules
from ladder.runtime import loop
from ladder.runtime.loop import Recipe
from ladder.runtime.runlog import seed_everything
from ladder.runtime.session import RunSession

NAME = "bandit"
RUNG = Rung(name=NAME, position=9, summary="a three-armed bandit learnt with the policy gradient",
            exercises=("ex11_aggregate", "ex17_compute_loss", "ex18_update"))
PRESETS: dict = {}
ALGOS: dict = {}
RESOLVED: dict = {}
validate = no_cross_option_rules
MEANS = (0.2, 0.5, 0.8)  # each arm's chance of a reward of 1: the last arm is the best
CURVES = [Panel("reward", "mean over the update's pulls", {"reward": ""}),
          Panel("π_θ(best arm)", "probability", {"p_best": ""})]


@dataclass
class Config(RunOptions):
    steps: int = option(40, "updates", at_least(1))
    pulls: int = option(64, "arm pulls per update: the batch, [pulls, 1] (at most 65536)", int_range(1, 65536))
    lr: float = option(0.1, "Adam learning rate", positive())


class ArmPolicy(nn.Module):
    """π_θ(a) = softmax(θ)_a over the arms: no observation, no critic."""

    def __init__(self, arms: int):
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(arms))

    def evaluate(self, batch: core.Batch):
        """log π_θ(a_t), the entropy of π_θ, and no values, each ``[B, T]`` (``core.update``'s contract)."""
        logp_all = torch.log_softmax(self.logits, dim=-1).expand(*batch.actions.shape, -1)
        logp = logp_all.gather(-1, batch.actions[..., None]).squeeze(-1)
        return logp, -(logp_all.exp() * logp_all).sum(-1), None


def train(cfg: Config) -> dict:
    """Train on the bandit; write metrics.jsonl, summary.json and curves.png into ``cfg.out``."""
    return loop.train(cfg, NAME, build)


def build(cfg: Config, run: RunSession) -> Recipe:
    """The bandit as the loop runs it (``Bandit``)."""
    return Bandit(cfg, run)


class Bandit(Recipe):
    """Pull, reward, Â_i = r_i − mean(r), one REINFORCE pass; ``cfg.steps`` updates."""

    def __init__(self, cfg: Config, run: RunSession):
        seed_everything(cfg.seed)
        self.cfg, self.run = cfg, run
        self.policy = ArmPolicy(len(MEANS))
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=cfg.lr)
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.update_cfg = core.UpdateConfig(mu=1, num_minibatches=1, objective="reinforce")
        self.plan = loop.Plan(updates=cfg.steps, curves=tuple(CURVES), bar=(("p_best", "p_best", ".2f"),))

    def update(self) -> dict:
        with torch.no_grad():
            probs = torch.softmax(self.policy.logits, dim=-1)
        arms = torch.multinomial(probs, self.cfg.pulls, replacement=True, generator=self.generator)[:, None]  # [B, 1]
        rewards = torch.bernoulli(torch.tensor(MEANS)[arms], generator=self.generator)                      # [B, 1]
        batch = core.Batch(actions=arms, mask=torch.ones_like(rewards), rewards=rewards,
                           advantages=rewards - rewards.mean())
        passes = core.update(self.policy, batch, self.optimizer, self.update_cfg)
        return {"reward": rewards.mean().item(), "p_best": probs[-1].item(), **passes[-1],
                **core.step_counts(passes, self.update_cfg.num_minibatches)}

    def summary(self) -> dict:
        records = self.run.records()
        return {"rung": NAME, "p_best_first": records[0]["p_best"], "p_best_last": records[-1]["p_best"],
                "reward_last": records[-1]["reward"], "wall_s": self.run.wall_s, "seed": self.cfg.seed}

    def state(self) -> dict:
        return {"policy": self.policy, "optimizer": self.optimizer, "generator": self.generator}
