"""The agent rung's environments, each a class in TRL's protocol (``ladder.tasks.tool_calls``), and their problems.

    calculator   "What is 37 * 48?" with a ``multiply`` tool: the tiny model cannot multiply, the tool can
    guess        find a number from 1 to 10 with ``guess``, which answers higher / lower (with the numbers still
                 possible) / correct: what the environment said decides a good next guess
    gsm8k        GSM8K word problems with a ``calculate`` tool (the real preset, Qwen2.5-0.5B-Instruct)

A problem is a dict ``{"question", "answer", …}``; the trainer calls ``env.reset(**problem)``.
"""

from __future__ import annotations

import ast
import operator
import random

CALCULATOR_PROMPT = "Use the tool. End with #### and the number."
GUESS_PROMPT = "Find the number. End with #### and the number."
GSM8K_PROMPT = ("You are a careful math tutor. Use the calculate tool for arithmetic. Reason step by step, then give "
                "the final answer on its own last line in the form '#### <number>'.")
GUESS_RANGE = (1, 10)


class Calculator:
    """Products of two 2-digit numbers; the answer is checked by the correctness reward."""

    def reset(self, **problem) -> None:
        return None

    def multiply(self, a: int, b: int) -> str:
        """Multiply two whole numbers.

        Args:
            a: the first factor
            b: the second factor
        """
        return str(int(a) * int(b))


class GuessingGame:
    """A secret number from 1 to 10; each guess is answered "higher: 6 to 10", "lower: 1 to 4" (the direction, then
    the numbers the replies so far still allow) or "correct".

    ``get_reward`` is 1 once the secret was guessed, else 0. ``turn_rewards`` (ladder's per-turn credit) gives each
    guess 1 if it was still possible given the replies before it (a guess that uses the feedback), else 0."""

    def reset(self, **problem) -> None:
        self.secret, self.low, self.high = int(problem["secret"]), *GUESS_RANGE
        self.found, self.turn_rewards = False, []
        return None

    def guess(self, n: int) -> str:
        """Guess the secret number.

        Args:
            n: the guess
        """
        n = int(n)
        self.turn_rewards.append(float(self.low <= n <= self.high and not self.found))
        if n == self.secret:
            self.found = True
            return "correct"
        if n < self.secret:
            self.low = max(self.low, n + 1)
            return f"higher: {self.low} to {self.high}"
        self.high = min(self.high, n - 1)
        return f"lower: {self.low} to {self.high}"

    def get_reward(self) -> float:
        return float(self.found)


_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.USub: operator.neg, ast.UAdd: operator.pos}


def evaluate(expression: str) -> float:
    """+, −, ×, ÷ and brackets over numbers, nothing else (no names, no calls): ``ast``, not ``eval``."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.operand))
        raise ValueError("only numbers, + - * / and brackets are allowed")

    return value(ast.parse(expression.replace(",", ""), mode="eval").body)


class GSM8KCalculator:
    """GSM8K with a calculator; the answer is checked by the correctness reward."""

    def reset(self, **problem) -> None:
        return None

    def calculate(self, expression: str) -> str:
        """Evaluate an arithmetic expression with + - * / and brackets.

        Args:
            expression: the expression, e.g. "(12 + 30) * 4 / 3"
        """
        result = evaluate(expression)
        return f"{result:g}" if isinstance(result, float) else str(result)


def product_problems(n_eval: int = 200, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """All products of two 2-digit numbers, shuffled once: (training, held out: the first ``n_eval``)."""
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    random.Random(seed).shuffle(pairs)
    problems = [{"question": f"What is {a} * {b}?", "answer": str(a * b)} for a, b in pairs]
    return problems[n_eval:], problems[:n_eval]


def guess_problems(n_eval: int = 200, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Secrets from 1 to 10 (each a problem; the held-out ones are the same game, other draws)."""
    rng = random.Random(seed)
    low, high = GUESS_RANGE

    def draw() -> dict:
        secret = rng.randint(low, high)
        return {"question": f"Guess my number from {low} to {high}.", "answer": str(secret), "secret": secret}

    held_out = [draw() for _ in range(n_eval)]
    return [draw() for _ in range(5000)], held_out
