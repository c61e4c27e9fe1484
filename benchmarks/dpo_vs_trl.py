"""DPO's update on the tiny preference task: ladder's ``dpo`` rung against TRL 1.16's ``DPOTrainer``, the same model
(the tiny review GPT-2, full fine-tuning, float32), the same pairs in the same order, one thread.

    ladder   the rung's update: ``dpo_batch`` → log π_ref once per batch → ``core.update`` with ``core.DPO(beta)``
    TRL      ``DPOTrainer.train`` with the ``--export-trl`` config (``ladder.trl.map``'s DPOConfig rows), its own
             collator, reference forward and loss; per-step times from a callback

Each takes ``--steps`` optimiser steps of ``--batch-size`` pairs after ``--warmup`` untimed ones; the medians of the
per-step times and their ratio are printed, with the load average.

    python benchmarks/dpo_vs_trl.py [--steps 20] [--warmup 3] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch


def pairs_for(steps: int, batch: int) -> list[dict]:
    from ladder.tasks import tiny_preferences

    pairs = tiny_preferences.pairs("train")
    return [pairs[i % len(pairs)] for i in range(steps * batch)]


def ladder_times(pairs: list[dict], batch: int, beta: float) -> list[float]:
    from ladder import core
    from ladder.rungs import dpo

    cfg = dpo.Config(**{**dpo.PRESETS["tiny"], "beta": beta, "batch_size": batch})
    tokenizer, policy, _, _ = dpo.load(cfg)
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=0.0)
    update_cfg = core.UpdateConfig(objective=core.DPO(beta=beta))
    times = []
    for start in range(0, len(pairs), batch):
        t = time.perf_counter()
        step = dpo.with_reference(policy, dpo.dpo_batch(tokenizer, pairs[start:start + batch]), 2 * batch)
        core.update(policy, step, optimizer, update_cfg)
        times.append(time.perf_counter() - t)
    return times


def trl_times(pairs: list[dict], batch: int, beta: float) -> list[float]:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import DPOConfig, DPOTrainer

    from ladder.rungs import dpo
    from ladder.tasks import review_models
    from ladder.trl.export_preferences import fields

    cfg = dpo.Config(**{**dpo.PRESETS["tiny"], "beta": beta, "batch_size": batch, "steps": len(pairs) // batch})
    config = {name: value for name, (value, _) in fields(cfg, "dpo").items()}
    times, marks = [], []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            marks.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - marks[-1])

    with tempfile.TemporaryDirectory() as out:
        args = DPOConfig(**config, output_dir=out, use_cpu=True, save_strategy="no", dataloader_drop_last=True)
        trainer = DPOTrainer(model=review_models.resolve_review_model("tiny"), args=args,
                             train_dataset=Dataset.from_list(pairs), callbacks=[Clock()])
        trainer.train()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beta", type=float, default=0.1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    pairs = pairs_for(args.steps + args.warmup, args.batch_size)
    ours = ladder_times(pairs, args.batch_size, args.beta)[args.warmup:]
    theirs = trl_times(pairs, args.batch_size, args.beta)[args.warmup:]
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"{args.steps} steps of {args.batch_size} pairs after {args.warmup} warm-up, one thread; load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"ladder dpo        median {a * 1000:.0f} ms per step")
    print(f"TRL DPOTrainer    median {b * 1000:.0f} ms per step")
    print(f"ladder / TRL      {a / b:.2f}")


if __name__ == "__main__":
    main()
