"""A notebook's self-checks: predictions and reasons checked against what the code computes, and numbers.

A **prediction** is asked in the cell *before* the one that computes its answer; the learner commits to
an answer there, and a later cell checks it against the computed truth, then prints that truth with a
one-line reason::

    p = Predict("After one sweep, is TD(0)'s V(s_0) above or below the Monte-Carlo estimate?",
                choices=("above", "below"))
    p.answer = None           # the learner writes "above" or "below" here, before running the next cells
    ...                       # the cells that compute td_v0 and mc_v0
    p.check("above" if td_v0 > mc_v0 else "below", why="TD(0) has moved V one step from its start of 0")

Without ``choices`` the answer is a number. A whole-number truth (a count, a position, an exact −2) must be
matched exactly, and any other to three significant figures (within 0.5 %), unless the question sets its own
precision: ``decimals=k`` accepts an answer within half a unit of the k-th decimal, ``rtol``/``atol`` within those
(then a whole number too). ``ask`` prints how the answer will be marked.
A **reason** is a multiple choice of explanations, lettered a, b, c, …; its key is given only when it
is checked, in a later cell, with the explanation printed after::

    q = Reason("Why does a time-limit truncation bootstrap with V(s_T)?",
               "the episode's reward stops there", "the state s_T still has a future the rollout did not see",
               "V(s_T) = 0 at every last step")
    q.answer = None           # the learner writes "a", "b" or "c"
    q.check("b", why="the environment did not end; only our rollout stopped, so the return goes on")

``check`` prints "right" or "not right" (or "not answered yet" while ``answer`` is None, which is how CI
runs every notebook), then the truth; it never raises on an answer, and keeps ``mark`` (True / False /
None). ``tally(p, q, …)`` prints how many of them are right.

A piece the learner **computes** is a cell holding ``...`` that the next cell checks against the
notebook's own computation, shown after the verdict (so the notebook runs unanswered too)::

    Q_yours = ...             # the learner: r + γ Σ_s' P(s'|s, a) V(s')
    check_computed(Q_yours, exact["Q"], how="r + gamma * torch.einsum('sat,t->sa', P, V)")

The older check asks for numbers that the notebook computed, read back from its outputs::

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

import torch

NOT_ANSWERED = "not answered yet: set .answer in the cell that asks, then run from there again"


SIG_FIGS_RTOL = 5e-3   # the default precision of a number that is not whole: three significant figures


def _whole(value: float) -> bool:
    """A whole number, float rounding aside (a count computed as 1 / 0.125, a grid point at 1.0)."""
    return abs(value - round(value)) <= 1e-9 * max(1.0, abs(value))


def _show(value) -> str:
    if isinstance(value, float) and _whole(value):
        return str(round(value))
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class Predict:
    """A question asked before its answer is computed: one of ``choices``, or (no choices) a number."""

    def __init__(self, question: str, choices: tuple | None = None, rtol: float | None = None, atol: float = 0.0,
                 decimals: int | None = None):
        if choices is not None and len(choices) < 2:
            raise ValueError("a prediction with choices needs at least two")
        if decimals is not None and rtol is not None:
            raise ValueError("give a number's precision as decimals or as rtol, not both")
        self.question, self.choices, self.decimals = question, choices, decimals
        self.exact_if_whole = rtol is None and not atol and decimals is None   # no precision given: the default
        self.rtol = SIG_FIGS_RTOL if rtol is None and decimals is None else (rtol or 0.0)
        self.atol = 0.5 * 10.0 ** -decimals if decimals is not None else atol
        self.answer = None
        self.mark: bool | None = None

    def precision(self) -> str:
        """How a number answer is marked, in words."""
        if self.decimals is not None:
            return f"a number, to {self.decimals} decimal{'s' if self.decimals != 1 else ''}"
        if self.exact_if_whole:
            return "a number: exactly, if the answer is a whole number; otherwise to three significant figures"
        return "a number, within " + " or ".join(([f"{self.rtol:.1%}"] if self.rtol else []) +
                                                  ([f"±{self.atol:g}"] if self.atol else []))

    def ask(self) -> None:
        """Print the question and its choices, or how a number is marked."""
        print(self.question)
        if self.choices is not None:
            print("choices: " + ", ".join(map(repr, self.choices)))
        else:
            print(f"answer: {self.precision()}")

    def _choice(self, answer):
        """The choice ``answer`` names (text compared without case or surrounding spaces), or None."""
        if isinstance(answer, str):
            return next((c for c in self.choices if str(c).lower() == answer.strip().lower()), None)
        return answer if answer in self.choices else None

    def _problem(self, answer) -> str | None:
        """Why an answer cannot be marked (None: it can)."""
        if self.choices is not None:
            found = self._choice(answer) is not None
            return None if found else f"{answer!r} is not one of {', '.join(map(repr, self.choices))}"
        try:
            return None if math.isfinite(float(answer)) else f"{answer!r} is not a finite number"
        except (TypeError, ValueError):
            return f"{answer!r} is not a number"

    def _right(self, answer, truth) -> bool:
        if self.choices is not None:
            return self._choice(answer) == truth
        answer, truth = float(answer), float(truth)
        if self.exact_if_whole and _whole(truth):
            return answer == round(truth)
        return abs(answer - truth) <= max(self.rtol * abs(truth), self.atol) * (1 + 1e-9) + 1e-12

    def _truth(self, truth):
        """The computed answer, checked to be one this question can have."""
        if self.choices is not None:
            if truth not in self.choices:
                raise ValueError(f"the computed answer {truth!r} is not one of the choices {self.choices}")
            return truth
        truth = float(truth)
        if not math.isfinite(truth):
            raise ValueError(f"the computed answer is {truth}, not a finite number")
        return truth

    def check(self, truth, why: str = "") -> None:
        """Mark ``answer`` against the computed ``truth``, then print the truth and ``why``."""
        truth = self._truth(truth)
        problem = None if self.answer is None else self._problem(self.answer)
        if self.answer is None or problem:
            self.mark = None
            print(NOT_ANSWERED if problem is None else f"not marked: {problem}")
        else:
            self.mark = self._right(self.answer, truth)
            print("right" if self.mark else f"not right: you said {_show(self.answer)}")
        print(f"computed: {_show(truth)}" + (f" — {why}" if why else ""))


class Reason(Predict):
    """A multiple choice of reasons, lettered a, b, c, …; the key is given to ``check``."""

    def __init__(self, question: str, *reasons: str):
        if len(reasons) > 8:
            raise ValueError("a reason question takes at most 8 reasons")
        super().__init__(question, choices=tuple("abcdefgh"[:len(reasons)]))
        self.reasons = dict(zip(self.choices, reasons))

    def ask(self) -> None:
        """Print the question and the lettered reasons."""
        print(self.question)
        for letter, reason in self.reasons.items():
            print(f"  {letter}) {reason}")

    def check(self, truth, why: str = "") -> None:
        """Mark ``answer`` against the key ``truth`` (a letter), then print the keyed reason and ``why``."""
        key = self._truth(truth)
        super().check(key, why=f"{self.reasons[key]}" + (f" ({why})" if why else ""))


def check_computed(yours, truth, how: str = "", atol: float = 1e-6) -> bool | None:
    """Compare the learner's tensor or number ``yours`` (``...`` or None: not answered yet) with ``truth``
    within ``atol``; print the verdict, then ``truth`` and ``how`` it is computed. Returns the mark."""
    truth_t = torch.as_tensor(truth, dtype=torch.float64)
    mark = None
    if yours is ... or yours is None:
        print("not answered yet: replace the ... in the cell before and run both again")
    else:
        try:
            yours_t = torch.as_tensor(yours, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            yours_t = None
        if yours_t is None or yours_t.shape != truth_t.shape:
            shape = "not a number" if yours_t is None else f"shape {tuple(yours_t.shape)}"
            print(f"not right: yours is {shape}, the answer has shape {tuple(truth_t.shape)}")
            mark = False
        else:
            diff = (yours_t - truth_t).abs().max().item() if truth_t.numel() else 0.0
            mark = diff <= atol
            print("right" if mark else f"not right: off by up to {diff:.4g}")
    print(f"computed: {truth}" + (f"   ({how})" if how else ""))
    return mark


def tally(*questions: Predict) -> None:
    """Print how many of the questions are marked right, and how many are not answered yet."""
    right = sum(q.mark is True for q in questions)
    open_ = sum(q.mark is None for q in questions)
    print(f"{right} of {len(questions)} right" + (f" ({open_} not answered yet)" if open_ else ""))


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
