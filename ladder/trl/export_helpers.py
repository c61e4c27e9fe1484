"""The functions every exported TRL script defines, as text (``ladder.trl.export`` appends them to the script's
constants): loading a user's file, ladder's reward functions in TRL's form, the dataset, the GRPOConfig from the
script's command line, and ``main``. The agent's script adds ``environment_factory`` to the trainer (``AGENT_HELPERS``).
"""

HELPERS = '''
def local_path(path: str) -> Path:
    """A relative path as given: from the working directory, else from where the script was exported."""
    p = Path(path).expanduser()
    return p if p.is_absolute() or p.exists() else Path(EXPORTED_FROM) / p


def load_user_function(spec: str):
    """FILE.py:FUNCTION or MODULE:FUNCTION, as ladder's --reward-funcs reads it."""
    where, _, name = spec.rpartition(":")
    if where.endswith(".py"):
        path = local_path(where)
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    return getattr(module, name)


def completion_text(completion) -> str:
    """TRL hands a conversational completion over as its messages, [{"role": "assistant", "content": ...}] (with
    tools: the model's turns and the tools' replies in order); the rewards read the last assistant message."""
    if not isinstance(completion, list):
        return completion
    said = [m for m in completion if m.get("role") == "assistant"]
    return (said[-1].get("content") or "") if said else ""


def for_trl(name: str, fn):
    """ladder's reward fn(completions, answers) -> list[float] as TRL's fn(completions, **columns): the
    dataset's columns arrive as keywords, the reference answers as `answer`."""
    def reward(completions, answer, **columns):
        return [float(r) for r in fn([completion_text(c) for c in completions], list(answer))]

    reward.__name__ = name  # TRL logs rewards/NAME/mean, as ladder does
    return reward


def chat(question: str) -> list[dict]:
    """The prompt as ladder builds it: the system prompt, then the question (TRL applies the chat template)."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]


def train_dataset() -> Dataset:
    """One row per problem: its fields (the reward functions get them as keywords) and the chat prompt."""
    problems = train_problems()
    return Dataset.from_list([{**p, "prompt": chat(p["question"])} for p in problems])


def literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def grpo_config(args) -> GRPOConfig:
    kwargs = {**GRPO_CONFIG, **BY_DEVICE[args.device]}
    world = int(os.environ.get("WORLD_SIZE", "1"))  # ladder's --prompts-per-step is a total over all processes
    if kwargs["per_device_train_batch_size"] % world:
        sys.exit(f"per_device_train_batch_size {kwargs['per_device_train_batch_size']} cannot be shared by "
                 f"{world} processes")
    kwargs["per_device_train_batch_size"] //= world
    if args.max_steps is not None:
        kwargs["max_steps"] = args.max_steps
    if args.output_dir is not None:
        kwargs["output_dir"] = args.output_dir
    for item in args.set:
        name, _, text = item.partition("=")
        kwargs[name.strip()] = literal(text.strip())
    if "activation_checkpointing" in GRPOConfig.__dataclass_fields__:  # transformers >= 5.24's name for it
        kwargs["activation_checkpointing"] = kwargs.pop("gradient_checkpointing")
    return GRPOConfig(**kwargs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, help=f"optimiser steps (default {GRPO_CONFIG['max_steps']})")
    parser.add_argument("--output-dir", help=f"default {GRPO_CONFIG['output_dir']}")
    parser.add_argument("--device", choices=tuple(BY_DEVICE), default=DEVICE, help=f"default {DEVICE}")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="any GRPOConfig field (a Python literal, else text); repeatable")
    args = parser.parse_args(argv)
    if THREADS:
        torch.set_num_threads(THREADS)
    config = grpo_config(args)
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:  # as ladder: pad with EOS (padding is masked out)
        tokenizer.pad_token = tokenizer.eos_token
    trainer = GRPOTrainer(model=MODEL, reward_funcs=reward_funcs(), args=config, train_dataset=train_dataset(),
                          processing_class=tokenizer, peft_config=PEFT_CONFIG,
                          quantization_config=quantization_config(args.device))
    if config.use_cpu:
        # bitsandbytes repacks 4-bit weights for fast CPU inference on a no-grad forward in eval mode (CPUs with
        # AVX512-BF16); a later forward with gradients then fails. Keep the training layout (ladder.policies.quant).
        for module in trainer.model.modules():
            if hasattr(module, "support_avx512bf16_for_cpu"):
                module.support_avx512bf16_for_cpu = False
    trainer.train()
    trainer.save_model(config.output_dir)  # the adapter with --lora/--qlora, else the model


if __name__ == "__main__":
    main()
'''

# The agent's script: the trainer gets the environment's class (ladder-only methods hidden from TRL's tools), and
# TRL reads tool calls with the tokenizer's response template.
TRAINER_CALL = ("    trainer = GRPOTrainer(model=MODEL, reward_funcs=reward_funcs(), args=config, "
                "train_dataset=train_dataset(),\n")
AGENT_HELPERS = HELPERS.replace(TRAINER_CALL, "    parse_tool_calls(tokenizer)\n" + TRAINER_CALL
                                + "                          environment_factory=environment_class(),\n")
assert AGENT_HELPERS.count("environment_factory") == 1, "HELPERS' trainer call changed: update TRAINER_CALL"

TOOL_PARSING = '''
def parse_tool_calls(tokenizer) -> None:
    """TRL reads a turn's tool calls with a response template it knows for a few chat templates (Qwen2.5's among
    them). ladder's tiny model writes Qwen2.5's <tool_call> JSON in a short template of its own: read it as Qwen's."""
    try:
        add_response_schema(tokenizer)
    except ValueError:
        tokenizer.response_template = qwen3_template

'''
