"""π_old and π_ref in one pass or two, for a LoRA policy where an update needs both (μ > 1, --kl-in reward).

    two forwards   ``policy.old_logp_and_values`` then ``policy.ref_logp`` (the adapter on, then off), each encoding
                   a group's shared prompt once and the G completions over its cache — what the grpo rung runs
    one forward    the batch twice in one forward, peft's mixed-adapter batch (``adapter_names``: the adapter for
                   one half, ``"__base__"`` for the other): one pass, but every row carries its whole prompt, since
                   a prompt's cache cannot be shared between the two halves' different weights

The tiny preset's model and LoRA (r 16) on 2 prompts × G = 8 completions of up to 28 tokens, one thread,
``--repeats`` interleaved calls after two untimed ones; the medians, their ratio and the load average.

    python benchmarks/reference_fused.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    import torch

    from ladder.policies.causal_lm import _eval_mode, lm_batch
    from ladder.rungs import grpo
    from ladder.tasks import arithmetic

    torch.set_num_threads(1)
    cfg = grpo.Config(**{**grpo.PRESETS["tiny"], "progress": False})
    system_prompt, problems, _, model_path, tokenizer = grpo.load_task(cfg)
    policy, _ = grpo.load_policy(cfg, model_path, torch.device("cpu"))
    enc = tokenizer([arithmetic.chat_prompt(tokenizer, p["question"], system_prompt) for p in problems[:2]],
                    return_tensors="pt", padding=True)
    ids, mask = enc.input_ids.repeat_interleave(8, 0), enc.attention_mask.repeat_interleave(8, 0)
    torch.manual_seed(0)
    completion, completion_mask = policy.generate(ids, mask, 28, tokenizer.pad_token_id, tokenizer.eos_token_id)
    batch = lm_batch(ids, mask, completion, completion_mask, tokenizer.pad_token_id)
    model, rows = policy.model, len(ids)
    both_ids = torch.cat([ids, completion], 1).repeat(2, 1)
    both_mask = torch.cat([mask, completion_mask.long()], 1).repeat(2, 1)
    adapters = [model.active_adapter] * rows + ["__base__"] * rows

    def two_forwards():
        with torch.no_grad():
            policy.old_logp_and_values(batch)
            policy.ref_logp(batch)

    def one_forward():
        with torch.no_grad(), _eval_mode(model):
            model(input_ids=both_ids, attention_mask=both_mask, adapter_names=adapters)

    ways = {"two forwards, prompts shared": two_forwards, "one mixed-adapter forward": one_forward}
    for way in ways.values():
        way(), way()
    seconds = {name: [] for name in ways}
    for _ in range(args.repeats):
        for name, way in ways.items():
            start = time.perf_counter()
            way()
            seconds[name].append(time.perf_counter() - start)
    print(f"# π_old + π_ref, LoRA, {rows} completions, {args.repeats} interleaved repeats, 1 thread; load average "
          f"{os.getloadavg()[0]:.2f}")
    for name, values in seconds.items():
        print(f"{name:30s} median {statistics.median(values) * 1000:6.1f} ms  min {min(values) * 1000:6.1f} ms")
    two, one = (statistics.median(seconds[name]) for name in ways)
    print(f"one / two: {one / two:.2f}x")


if __name__ == "__main__":
    main()
