"""What a GRPO step records, beside the algorithm: the batch's statistics, the phases' times, the
passes' counters gathered over the processes, the logged completions and the cut-off warning; and what
a run's summary.json says.

``grpo.grpo_step`` reads as the algorithm (sample → reward → advantages → update) and hands its
pieces to ``step_record``, which makes the update's one record (what ``metrics.jsonl`` holds).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch

from ladder import core
from ladder.rungs.grpo.rollout import Rollout
from ladder.runtime.distributed import Processes


class Laps:
    """Seconds between marks: ``lap("sampling")`` records ``time/sampling_s`` since the previous mark."""

    def __init__(self):
        self.last, self.seconds = time.perf_counter(), {}

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[f"time/{phase}_s"], self.last = now - self.last, now


def step_record(step, rollout: Rollout, rewards: torch.Tensor, passes: list[dict], rounds: int,
                generated: int, laps: Laps) -> dict:
    """The record of the update of ``step`` (a ``grpo.Step``) over all processes: ``batch_statistics``,
    the last pass's statistics, the number of passes, the phases' times, the sampling rounds and
    completions, and the skipped steps (optimiser steps skipped for a non-finite gradient) of the update's
    ``optimizer_steps`` (which the loop's non-finite guard reads; it is not logged)."""
    procs = step.procs
    record = batch_statistics(rollout, rewards, procs, step.cfg.group_size)
    record.update(procs.mean(passes[-1]), num_passes=len(passes), **laps.seconds, **{
        "sampling/rounds": rounds,
        "sampling/completions": int(procs.gather(torch.tensor([float(generated)])).sum().item())})
    counts = core.step_counts(passes, step.update_cfg.num_minibatches)
    record["skipped_steps"] = procs.mean({"skipped_steps": counts["skipped_steps"]})["skipped_steps"]
    record["optimizer_steps"] = counts["optimizer_steps"]  # with skipped_steps: the loop's non-finite guard
    return record


def batch_statistics(rollout: Rollout, shaped: torch.Tensor, procs: Processes, G: int) -> dict:
    """Rewards (each function's too), completion lengths and the cut-off share, over the whole batch."""
    all_rewards = procs.gather(rollout.rewards)
    lengths = procs.gather(rollout.mask.sum(1).cpu())
    record = {"reward": all_rewards.mean().item(), "reward_std": all_rewards.std().item(),
              "frac_reward_zero_std": (all_rewards.view(-1, G).std(1) == 0).float().mean().item(),
              "completions/mean_length": lengths.float().mean().item(),
              "completions/min_length": lengths.min().item(), "completions/max_length": lengths.max().item(),
              "completions/clipped_ratio": procs.gather(rollout.truncated.float().cpu()).mean().item(),
              "tokens": int(lengths.sum().item())}
    if shaped is not rollout.rewards:
        record["reward_shaped"] = procs.gather(shaped).mean().item()
    for name, values in (rollout.stats or {}).items():
        record[name] = procs.gather(values.float().cpu()).mean().item()
    for name, r in rollout.per_function.items():
        r = procs.gather(r)
        record[f"rewards/{name}/mean"], record[f"rewards/{name}/std"] = r.mean().item(), r.std().item()
    return record


def completion_rows(rollout: Rollout, advantages: torch.Tensor, procs: Processes, G: int,
                    extra: dict[str, torch.Tensor] | None = None) -> list[dict]:
    """The update's completions, all processes' in order, one dict each — what TRL's ``log_completions``
    shows: the question, the completion, its reward and each reward function's score, its advantage Â_i,
    its length in tokens and whether it was cut off at ``--max-new-tokens``; ``group`` numbers the prompt;
    ``extra``: name → ``[n]`` values a rung adds to each row (the distill rung's reverse KL)."""
    lengths = rollout.mask.sum(1).tolist()
    extra = extra or {}
    mine = [{"question": rollout.questions[i], "completion": rollout.texts[i], "reward": rollout.rewards[i].item(),
             "rewards": {name: r[i].item() for name, r in rollout.per_function.items()},
             "advantage": advantages[i].item(), "length": int(lengths[i]), "truncated": bool(rollout.truncated[i]),
             **{name: values[i].item() for name, values in extra.items()}}
            for i in range(len(rollout))]
    rows = [row for share in procs.gather_object(mine) for row in share]
    return [{"group": i // G, **row} for i, row in enumerate(rows)]


class CutOffWatch:
    """Warns once, in one line, when most completions are cut off at ``--max-new-tokens`` for several
    updates in a row: a cut-off completion has no final answer, scores 0, and its group carries little
    signal. Reads ``completions/clipped_ratio`` from each update's record."""

    def __init__(self, max_new_tokens: int, warn: Callable[[str], None], share: float = 0.5, updates: int = 3):
        self.max_new_tokens, self.warn, self.share, self.updates = max_new_tokens, warn, share, updates
        self.recent: list[float] = []
        self.warned = False

    def __call__(self, record: dict) -> None:
        clipped = record["completions/clipped_ratio"]
        self.recent = [*self.recent, clipped][-self.updates:] if clipped > self.share else []
        if len(self.recent) == self.updates and not self.warned:
            self.warned = True
            self.warn(f"warning: {np.mean(self.recent):.0%} of completions were cut off at --max-new-tokens "
                      f"{self.max_new_tokens} over the last {self.updates} updates (no final answer, reward 0); "
                      f"raise --max-new-tokens or use --mask-truncated")


def finite_mean(values: list) -> float | None:
    """The mean of ``values`` where it is a finite number (a record logs a non-finite one as null), else None."""
    mean = float(np.mean(values)) if values and all(v is not None for v in values) else math.nan
    return mean if math.isfinite(mean) else None


def summarize(cfg, run, counters: dict, digests: list[str]) -> dict:
    """summary.json: greedy accuracy before and after, the first and last rewards, the final KL."""
    records, evals, first = run.records(), counters["evals"], counters["first_rewards"]
    return {"rung": run.rung, "model": cfg.model, "task": cfg.problems.task, "steps": run.step,
            "tokens": counters["tokens"],
            "completions": counters["completions"], "accuracy_before": evals[0][1], "accuracy_after": evals[-1][1],
            "accuracy_gain": evals[-1][1] - evals[0][1], "evals": evals,
            "reward_first5": finite_mean(first),
            "reward_last5": finite_mean([r["reward"] for r in records[-5:]]),
            "final_kl": records[-1].get("kl_ref") if records else None, "wall_s": run.wall_s, "seed": cfg.seed,
            "processes": run.procs.world, "weights_digest_per_process": digests}
