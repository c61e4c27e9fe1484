"""A notebook's closing self-check: a few questions whose answers are numbers the notebook computed.

    quiz = SelfCheck(
        ratio_std=("After μ = 4 passes, what is the std of the ratio? (2 significant digits)", stats[3]["ratio_std"]),
        solved_at=("At how many env steps did the run solve CartPole?", summary["env_steps"]),
    )
    quiz.ask()                                   # prints the questions
    quiz.check(ratio_std=None, solved_at=None)   # the learner fills in numbers and runs it again
    quiz.marks                                   # name → True (right), False, or None (not answered yet)

An answer counts as right within ``rtol`` (relative, default 5 %) or ``atol`` of the notebook's own
number; ``None`` is "not answered yet". The true values stay hidden until ``reveal()``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    text: str
    value: float


class SelfCheck:
    """Questions named by keyword: ``name=(question, the notebook's number)``."""

    def __init__(self, rtol: float = 0.05, atol: float = 1e-9, **questions: tuple[str, float]):
        if not questions:
            raise ValueError("a self-check needs at least one question")
        self.rtol, self.atol = rtol, atol
        self.questions = {}
        self.marks: dict[str, bool | None] = {}
        for name, (text, value) in questions.items():
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"question {name!r}: the notebook's number is {value}, not a finite number")
            self.questions[name] = Question(text, value)

    def ask(self) -> None:
        """Print the questions (nothing is returned, so a notebook shows them once)."""
        for i, (name, q) in enumerate(self.questions.items(), 1):
            print(f"{i}. {name}: {q.text}")

    def right(self, name: str, answer: float) -> bool:
        return math.isclose(float(answer), self.questions[name].value, rel_tol=self.rtol, abs_tol=self.atol)

    def check(self, **answers: float | None) -> None:
        """One line per question: right, not yet right, or not answered yet; ``self.marks`` keeps them
        (name → True / False / None)."""
        unknown = sorted(set(answers) - set(self.questions))
        if unknown:
            raise ValueError(f"no question named {', '.join(unknown)}; the questions are {', '.join(self.questions)}")
        marks = {}
        for name in self.questions:
            answer = answers.get(name)
            marks[name] = None if answer is None else self.right(name, answer)
            print(f"{name:<24} " + ("not answered yet" if answer is None else
                                     "right" if marks[name] else f"not {answer}: look again"))
        done = sum(m is True for m in marks.values())
        print(f"{done} of {len(marks)} right")
        self.marks = marks

    def reveal(self) -> None:
        """Print the notebook's own numbers."""
        for name, q in self.questions.items():
            print(f"{name:<24} {q.value:.4g}")
