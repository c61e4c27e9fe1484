"""Math word problems with rule rewards: GSM8K for real, synthetic arithmetic offline.

A problem is ``{"question": str, "answer": str}`` where ``answer`` is the gold number as text.
The model is asked to reason and to end with a line ``#### <number>`` (GSM8K's own format).
Which problems train and which are held out is ``ladder.tasks.math_problems`` (GSM8K's loading
included); the evaluation protocol is ``ladder.tasks.math_eval``.

Reward functions have TRL's shape, ``fn(completions, answers) -> list[float]``, and each is logged
under its own name.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

SYSTEM_PROMPT = ("You are a careful math tutor. Reason step by step, then give the final answer on its own "
                 "last line in the form '#### <number>'.")
TINY_SYSTEM_PROMPT = "Solve it. End with #### and the number."

_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?")
_FINAL_LINE = re.compile(r"####\s*(-?\$?\d[\d,]*(?:\.\d+)?)")


def parse_number(text: str) -> float | None:
    """'1,234.50' → 1234.5; '$72' → 72; None when there is no number."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    try:
        return float(match.group().replace(",", "").replace("$", ""))
    except ValueError:
        return None


def extract_answer(completion: str) -> float | None:
    """The model's final numeric answer.

    The number after the last '####' if there is one (tolerant of commas, '$', units and a trailing
    period: '#### 1,234 dollars.' → 1234), otherwise the last number in the text.
    """
    finals = _FINAL_LINE.findall(completion)
    if finals:
        return parse_number(finals[-1])
    numbers = _NUMBER.findall(completion)
    return parse_number(numbers[-1]) if numbers else None


def gold_answer(gsm8k_answer: str) -> str:
    """GSM8K's answer field is the worked solution ending in '#### N'; keep N."""
    return gsm8k_answer.split("####")[-1].strip().replace(",", "")


def correctness_reward(completions: list[str], answers: list[str]) -> list[float]:
    """1 if the extracted answer equals the gold number (to 1e-6), else 0."""
    rewards = []
    for completion, answer in zip(completions, answers):
        got, want = extract_answer(completion), parse_number(answer)
        rewards.append(float(got is not None and want is not None and abs(got - want) < 1e-6))
    return rewards


def format_reward(completions: list[str], answers: list[str]) -> list[float]:
    """1 if the completion's last non-empty line is '#### <number>' (an optional period allowed)."""
    rewards = []
    for completion in completions:
        lines = [line.strip() for line in completion.strip().splitlines() if line.strip()]
        ok = bool(lines) and re.fullmatch(r"####\s*-?\$?\d[\d,]*(?:\.\d+)?\.?", lines[-1]) is not None
        rewards.append(float(ok))
    return rewards


REWARD_FUNCTIONS = {"correctness": correctness_reward, "format": format_reward}


# --- synthetic arithmetic (offline) ------------------------------------------------------------

def column_addition(a: int, b: int, carry: bool = True) -> str:
    """Two-digit addition worked column by column, units first, carrying — a tiny chain of thought.

        37 + 45  →  "7 + 5 = 12\n3 + 4 + 1 = 8\n#### 82"

    ``carry=False`` is the classic slip of forgetting to carry the one (a wrong answer whenever the
    units overflow): "7 + 5 = 12\n3 + 4 + 0 = 7\n#### 72".
    """
    units = a % 10 + b % 10
    carried = units // 10 if carry else 0
    tens = a // 10 + b // 10 + carried
    return f"{a % 10} + {b % 10} = {units}\n{a // 10} + {b // 10} + {carried} = {tens}\n#### {tens * 10 + units % 10}"


def synthetic_problem(a: int, b: int) -> dict:
    return {"question": f"What is {a} + {b}?", "answer": str(a + b), "solution": column_addition(a, b)}


def train_eval_split(n_train: int | None = None, n_eval: int = 200, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """All 8,100 sums of two 2-digit numbers, shuffled once: the first ``n_eval`` are held out for
    evaluation (never trained on), the rest (or ``n_train`` of them) are for training — the arithmetic
    task's rule in ``math_problems.split``."""
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    random.Random(seed).shuffle(pairs)
    problems = [synthetic_problem(a, b) for a, b in pairs]
    held_out, train = problems[:n_eval], problems[n_eval:]
    return (train[:n_train] if n_train else train), held_out


def solution_text(problem: dict) -> str:
    """The completion a model should produce: the worked columns, then the final-answer line."""
    return problem["solution"]


# --- the tiny instruct model (offline) --------------------------------------------------------

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TINY_MODEL_VERSION = "tiny-qwen2-addition-v2"
TINY_TEACHER_VERSION = "tiny-qwen2-addition-teacher-v1"  # the same, taught by a tutor who always carries


def chat_prompt(tokenizer, question: str, system_prompt: str) -> str:
    """The prompt text with the model's chat template applied, ending where the assistant speaks."""
    messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": question}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def build_tiny_math_model(path: Path, sft_steps: int = 450, seed: int = 0, forget_carry: float = 0.6,
                          batch_size: int = 32) -> None:
    """A Qwen2-architecture instruct model that knows the format and its sums, but forgets to carry.

    Tokenizer: byte-level BPE with single-digit numbers and Qwen's chat markers. Model: 3 layers,
    hidden 128. Warm start: ``sft_steps`` of supervised fine-tuning on worked solutions written by
    a sloppy tutor who forgets to carry the one in a fraction ``forget_carry`` of the sums that need
    it (``column_addition(..., carry=False)``), quantisation-aware so that 4-bit nf4 keeps it all.
    The model imitates its demonstrations, slip included: greedy decoding forgets the carry (wrong
    on the ~45% of problems whose units overflow) while sampling still carries now and then. The
    correctness reward tells those samples apart, and GRPO learns to carry — RL with a verifier
    going beyond its demonstrations. ``batch_size``: worked solutions per step.
    """

    from ladder.tasks import tiny_lm

    train, _ = train_eval_split()
    corpus = [f"<|im_start|>system\n{TINY_SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n{p['question']}<|im_end|>\n"
              f"<|im_start|>assistant\n{solution_text(p)}<|im_end|>" for p in train[:500]]
    tokenizer = chat_tokenizer(corpus, vocab_size=400)
    rng = random.Random(seed)
    examples = []
    for p in train:
        a, b = (int(x) for x in re.findall(r"\d+", p["question"]))
        slip = a % 10 + b % 10 >= 10 and rng.random() < forget_carry  # the tutor forgets this carry
        prompt = chat_prompt(tokenizer, p["question"], TINY_SYSTEM_PROMPT)
        examples.append((prompt, column_addition(a, b, carry=not slip)))
    with tiny_lm.isolated_build(seed):  # the same model whatever the caller's RNG, which it leaves alone
        model = tiny_lm.build_model("qwen2", tokenizer, hidden=128, layers=3, heads=4, max_positions=512)
        tiny_lm.quantization_aware(model, True)  # so that `--qlora` (4-bit nf4) keeps what it learned
        tiny_lm.pretrain(model, tokenizer, examples, steps=sft_steps, batch_size=batch_size, lr=3e-3, seed=seed)
        tiny_lm.quantization_aware(model, False)
    tiny_lm.save(model, tokenizer, path)


def chat_tokenizer(corpus: list[str], vocab_size: int):
    """A byte-level BPE tokenizer trained on ``corpus``, digits split one per token, with Qwen's chat
    markers and template; ``<|im_end|>`` ends a turn (the EOS of generation)."""
    from ladder.tasks import tiny_lm

    return tiny_lm.train_tokenizer(corpus, vocab_size=vocab_size, chat_template=CHAT_TEMPLATE, individual_digits=True,
                                   extra_special=("<|im_start|>", "<|im_end|>"), eos_token="<|im_end|>")


def build_tiny_math_teacher(path: Path, sft_steps: int = 900) -> None:
    """The tiny model's tutor who never forgets to carry: the same tokenizer and architecture, every demonstration
    carried (``forget_carry=0``), twice the steps (at the student's 450 it has not yet learnt the carry: greedy
    accuracy 0.16 on the held-out sums; at 900, 1.0) — a teacher that really is better, for the distill rung."""
    build_tiny_math_model(path, sft_steps=sft_steps, forget_carry=0.0)


def tiny_math_teacher() -> Path:
    """The tiny teacher: the copy the package ships (``tiny_lm.cached``, as ``tiny_math_model``)."""
    from ladder.tasks import tiny_lm

    return tiny_lm.cached(TINY_TEACHER_VERSION, build_tiny_math_teacher)


def tiny_math_model() -> Path:
    """The tiny instruct model: the copy the package ships (``tiny_lm.cached``; built into the cache on first use
    with ``LADDER_BUILD_TINY=1``: about 1.5 minutes on one CPU core)."""
    from ladder.tasks import tiny_lm

    return tiny_lm.cached(TINY_MODEL_VERSION, build_tiny_math_model)
