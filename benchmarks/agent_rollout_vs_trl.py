"""Multi-turn rollouts on the CPU: ladder's agent rollout against TRL 1.16's tool loop, same model and environment.

One rollout is what a GRPO step of the agent rung samples: 8 problems × G = 8 trajectories = 64, each the model's
turns and the environment's replies within the preset's token budget (``--max-new-tokens``, the replies included)
and tool calls (``--max-tool-calls``; TRL: ``max_tool_calling_iterations``), sampled at temperature 1 from the
preset's tiny tool-calling model (``@tiny-agent``, ``@tiny-guess``; float32, no LoRA), on one torch thread.

    ladder   ``agent.play`` → ``agent_rollout.multi_turn``: one draw per step for every row still going, on one
             key/value cache; a tool's reply is fed whole with the EOS that ended the turn (one forward, the rows'
             chunks left-padded to the longest); ended rows leave the batch (each distinct prompt encoded once)
    TRL      ``GRPOTrainer._generate`` (transformers backend, no vLLM): ``generate`` for the first turn, then for
             every round of tool calls a new ``generate`` over prompt + history + reply, re-encoded from scratch
             (``_tool_call_loop`` → ``_generate_single_turn``), timed inside ``trainer.train()`` with the update
             at learning rate 0 so every step samples from the same weights

Each side prints the seconds per rollout (median of ``--repeats`` after ``--warmup``) and the positions it pushes
through the model per rollout (a forward pre-hook sums ``input_ids.numel()``: rows × length of every forward,
padding included, which is what the model computes), beside the tokens the trajectories hold (the model's, the
environment's) and their tool calls, so a difference in what was sampled can be told from a difference in cost;
and the seconds spent inside the model's forwards (a forward hook), the part no loop around the model can save.

    python benchmarks/agent_rollout_vs_trl.py [--envs calculator guess] [--repeats 5] [--warmup 1]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PRESETS = {"calculator": "tiny", "guess": "tiny-guess"}  # the agent rung's preset of each environment
PROMPTS, G = 8, 8


def setting(env: str):
    """(the preset's Config, the environment's class, its system prompt, the 64 problems: 8 × G)."""
    from ladder.rungs import agent

    cfg = agent.Config(**{**agent.PRESETS[PRESETS[env]], "progress": False, "group_size": G})
    train, _ = agent.problems(cfg)
    batch = [p for p in train[:PROMPTS] for _ in range(G)]
    return cfg, agent.environment(cfg), agent.system_prompt(cfg), batch


class Fed:
    """Hooks that sum, while ``on``, the positions (rows × length) of every forward of the model and the seconds
    spent inside them (the model's own forward: no loop, no drawing, no environment)."""

    def __init__(self, model):
        self.on, self.positions, self.forward_s, self.started = False, 0, 0.0, None
        model.register_forward_pre_hook(self.count, with_kwargs=True)
        model.register_forward_hook(self.stop)

    def count(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if self.on and ids is not None:
            self.positions += ids.numel()
        self.started = time.perf_counter()

    def stop(self, module, args, output):
        if self.on and self.started is not None:
            self.forward_s += time.perf_counter() - self.started


def run_ladder(env: str, model_dir: str, warmup: int, repeats: int) -> list[dict]:
    import torch
    from transformers import AutoModelForCausalLM

    from ladder.policies import quant
    from ladder.policies.causal_lm import CausalLMPolicy
    from ladder.rungs import agent

    cfg, env_class, system, batch = setting(env)
    tokenizer = quant.load_tokenizer(model_dir)
    policy = CausalLMPolicy(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32))
    fed, records = Fed(policy.model), []
    for i in range(warmup + repeats):
        torch.manual_seed(i)
        fed.on, fed.positions, fed.forward_s = True, 0, 0.0
        start = time.perf_counter()
        trajectories, _, _ = agent.play(policy, tokenizer, env_class, batch, system, cfg, do_sample=True)
        seconds = time.perf_counter() - start
        fed.on = False
        records.append({"seconds": seconds, "fed": fed.positions, "forward_s": fed.forward_s,
                        "model": int(trajectories.mask.sum()),
                        "env": int(trajectories.env_tokens.sum()), "calls": int(trajectories.tool_calls.sum())})
    return records[warmup:]


def run_trl(env: str, model_dir: str, warmup: int, repeats: int) -> list[dict]:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, PrinterCallback
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    cfg, env_class, system, batch = setting(env)
    rows = [{**p, "prompt": [{"role": "system", "content": system}, {"role": "user", "content": p["question"]}]}
            for p in batch[::G]]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.response_template = qwen3_template  # as the exported script: Qwen's <tool_call> JSON

    def correctness(completions, answer, **_):
        return [0.0 for _ in completions]

    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(output_dir=out, per_device_train_batch_size=PROMPTS * G, num_generations=G,
                          max_completion_length=cfg.max_new_tokens, max_tool_calling_iterations=cfg.max_tool_calls,
                          max_steps=warmup + repeats, learning_rate=0.0, beta=0.0, temperature=1.0, top_p=1.0,
                          loss_type="grpo", use_cpu=True, bf16=False, model_init_kwargs={"dtype": "float32"},
                          report_to="none", logging_steps=1, save_strategy="no", disable_tqdm=True, seed=0)
        # TRL offers every public method but reset and get_reward as a tool: hide ladder's get_turn_rewards, as
        # the exported script does (export_trl_helpers.for_trl_environment), so both show the model the same tools
        trl_class = type(env_class.__name__, (env_class,), {"get_turn_rewards": None})
        trainer = GRPOTrainer(model=model_dir, reward_funcs=[correctness], args=args,
                              train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                              environment_factory=trl_class)
        trainer.remove_callback(PrinterCallback)  # its per-step logs
        fed, records, generate = Fed(trainer.model), [], trainer._generate

        def timed(prompts):
            fed.on, fed.positions, fed.forward_s = True, 0, 0.0
            start = time.perf_counter()
            result = generate(prompts)
            seconds = time.perf_counter() - start
            fed.on = False
            completion_ids, tool_mask, completions = result[1], result[2], result[3]
            model = sum(sum(m) for m in tool_mask)
            records.append({"seconds": seconds, "fed": fed.positions, "forward_s": fed.forward_s, "model": model,
                            "env": sum(len(c) for c in completion_ids) - model,
                            "calls": sum(m.get("role") == "tool" for c in completions for m in c)})
            return result

        trainer._generate = timed
        torch.set_num_threads(1)
        trainer.train()
    return records[warmup:]


def summary(records: list[dict]) -> dict:
    n = PROMPTS * G
    return {"seconds": statistics.median(r["seconds"] for r in records),
            "forward_s": statistics.median(r["forward_s"] for r in records),
            "all": [round(r["seconds"], 2) for r in records],
            **{k: statistics.mean(r[k] for r in records) / n for k in ("fed", "model", "env", "calls")}}


def line(name: str, s: dict) -> str:
    return (f"{name:>7}: {s['seconds']:.2f} s/rollout (median of {s['all']}; {s['forward_s']:.2f} s inside the "
            f"model's forwards), {s['fed']:.0f} positions fed "
            f"per trajectory; trajectories: {s['model']:.1f} model + {s['env']:.1f} environment tokens, "
            f"{s['calls']:.2f} tool calls")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    import torch
    import transformers
    import trl

    from ladder.rungs.agent import options as agent_options

    torch.set_num_threads(1)
    print(f"# multi-turn rollouts on CPU, ladder vs TRL {trl.__version__} -- {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"# {platform.platform()}, {os.cpu_count()} CPUs; python {platform.python_version()}; torch "
          f"{torch.__version__}, transformers {transformers.__version__}; 1 thread; load average "
          f"{os.getloadavg()[0]:.2f}")
    for env in args.envs:
        cfg = setting(env)[0]
        model_dir = agent_options.model_path(cfg)
        print(f"\n## {env} (--preset {PRESETS[env]}): {PROMPTS} problems x G={G} = {PROMPTS * G} trajectories, "
              f"--max-new-tokens {cfg.max_new_tokens}, --max-tool-calls {cfg.max_tool_calls}, "
              f"{args.warmup} warm-up + {args.repeats} timed rollouts")
        ours = summary(run_ladder(env, model_dir, args.warmup, args.repeats))
        print(line("ladder", ours), flush=True)
        theirs = summary(run_trl(env, model_dir, args.warmup, args.repeats))
        print(line("trl", theirs), flush=True)
        per_token = [s["fed"] / (s["model"] + s["env"]) for s in (ours, theirs)]
        print(f"ladder / TRL: seconds per rollout {ours['seconds'] / theirs['seconds']:.2f}x, positions fed per "
              f"trajectory {ours['fed'] / theirs['fed']:.2f}x (per trajectory token: {per_token[0]:.1f} vs "
              f"{per_token[1]:.1f}); ladder's forwards alone / TRL's rollout "
              f"{ours['forward_s'] / theirs['seconds']:.2f}x")


if __name__ == "__main__":
    main()
