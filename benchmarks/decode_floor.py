"""How far sampling can fall below TRL's while the model's forward is transformers': the tiny GRPO batch
(``grpo_vs_trl.py``'s model and prompts: 2 prompts × G = 8, 32 new tokens forced, one thread) sampled four ways,
interleaved, on the same inputs:

    forwards alone   the prefill (each distinct prompt once) and the 31 cached forwards of one token per row that
                     any sampler of 32 tokens runs — fixed tokens, nothing drawn, nothing recorded: a floor for
                     every sampler that calls the model's own forward
    ladder           ``policies.decode.decode`` (the rungs' sampler: the same forwards, plus drawing and log q)
    generate         ``model.generate(do_sample=True, min_new_tokens=32)``
    TRL              ``GRPOTrainer._generate_single_turn`` of TRL 1.16 (its sampling phase without vLLM: the
                     prompts padded, ``generate`` under its generation config), on the same 16 rows

Each is called ``--repeats`` times in turn (after two untimed calls); the medians and their ratios to TRL's are
printed, with the load average. A ratio of the forwards alone to TRL's above 0.5 means no sampler that runs the
model's own forward — whatever its loop — can reach half of TRL's sampling time on this machine.

    python benchmarks/decode_floor.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

import grpo_vs_trl as tiny  # the model, its prompts, the batch's sizes


def inputs(model_dir: str):
    """(tokenizer, the left-padded prompt ids and mask [16, P]: each of 2 prompts G times)."""
    from ladder.policies import quant
    from ladder.tasks import arithmetic

    tokenizer = quant.load_tokenizer(model_dir)
    prompts = [arithmetic.chat_prompt(tokenizer, p["question"], "Solve it.") for p in tiny.problems()[:2]]
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    G = tiny.G
    return tokenizer, enc.input_ids.repeat_interleave(G, 0), enc.attention_mask.repeat_interleave(G, 0)


def forwards_alone(model, ids, mask, new_tokens: int):
    """The model's forwards a sampler of ``new_tokens`` tokens runs: the prefill and new_tokens − 1 cached forwards
    of one token per row (a fixed token), nothing drawn."""
    import torch

    from ladder.patches import cache_of, with_cache
    from ladder.policies import decode

    with torch.no_grad():
        cache, _ = decode.prefill(model, ids, mask)
        attention, position = mask.long(), decode.position_ids_for(mask)[:, -1]
        token = torch.full((len(ids), 1), 5)
        for _ in range(new_tokens - 1):
            attention = torch.cat([attention, attention.new_ones(len(ids), 1)], dim=1)
            position = position + 1
            cache = cache_of(model(input_ids=token, attention_mask=attention, position_ids=position[:, None],
                                   use_cache=True, **with_cache(cache)))


def trl_sampler(model_dir: str, out: str, tokenizer, ids, mask):
    """TRL's sampling phase on the same rows: a GRPOTrainer set up as ``grpo_vs_trl.run_trl``'s, its
    ``_generate_single_turn`` called on the 16 prompts' token ids."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    config = GRPOConfig(output_dir=out, per_device_train_batch_size=tiny.COMPLETIONS_PER_STEP,
                        num_generations=tiny.G, max_completion_length=tiny.LENGTH,
                        generation_kwargs={"min_new_tokens": tiny.LENGTH}, beta=tiny.BETA, loss_type="grpo",
                        temperature=1.0, use_cpu=True, bf16=False, report_to="none", disable_dropout=True, seed=0)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir), reward_funcs=[lambda **_: [0.0]],
                          args=config, train_dataset=Dataset.from_list([{"prompt": "x"}]),
                          processing_class=tokenizer)
    prompt_ids = [row[m.bool()].tolist() for row, m in zip(ids, mask)]
    return lambda: trainer._generate_single_turn(prompt_ids, None, {}, tiny.G)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    import torch
    from transformers import AutoModelForCausalLM

    from ladder.policies import decode

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as out:
        model_dir = os.path.join(out, "model")
        tiny.build_model(model_dir)
        tokenizer, ids, mask = inputs(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        sampling = decode.Sampling(min_new_tokens=tiny.LENGTH)
        ways = {
            "forwards alone": lambda: forwards_alone(model, ids, mask, tiny.LENGTH),
            "ladder": lambda: decode.decode(model, ids, mask, tiny.LENGTH, tokenizer.pad_token_id,
                                            tokenizer.eos_token_id, sampling),
            "generate": lambda: model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=tiny.LENGTH,
                                               min_new_tokens=tiny.LENGTH, do_sample=True, top_k=0,
                                               pad_token_id=tokenizer.pad_token_id),
            "TRL": trl_sampler(model_dir, os.path.join(out, "trl"), tokenizer, ids, mask),
        }
        report(ways, args.repeats)


def report(ways: dict, repeats: int) -> None:
    import torch
    import transformers
    import trl

    for way in ways.values():
        way(), way()
    seconds = {name: [] for name in ways}
    for _ in range(repeats):
        for name, way in ways.items():
            start = time.perf_counter()
            way()
            seconds[name].append(time.perf_counter() - start)
    print(f"# sampling floor on CPU -- {time.strftime('%Y-%m-%d %H:%M')}\n# {platform.platform()}, {os.cpu_count()} "
          f"CPUs; python {platform.python_version()}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}, TRL {trl.__version__}; 1 thread; load average {os.getloadavg()[0]:.2f}")
    print(f"# {tiny.COMPLETIONS_PER_STEP} rows (2 prompts x G={tiny.G}), {tiny.LENGTH} new tokens forced, "
          f"{repeats} interleaved repeats after 2 untimed calls each")
    trl_median = statistics.median(seconds["TRL"])
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"{name:15s} median {median * 1000:6.1f} ms  min {min(values) * 1000:6.1f} ms  "
              f"/ TRL's median {median / trl_median:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
