"""What values an option accepts, declared once beside its default and help (``ladder.options.option``): an integer
with bounds, a number in an interval (finite unless it says otherwise), a probability, one of some choices, text, a
path of a given kind, or a torch device this machine has — each says its words (``--lr must be positive``) and what
is wrong with a value (``problem``), and the ``MAX_*`` limits keep absurd values out.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Number:
    """An int or a float in [low, high] (either end open or absent); finite unless ``finite=False``.

    ``limit``: ``high`` only keeps absurd values out (2**63, 1e300: they overflow, hang or allocate what no machine
    has) and is no part of what the option means, so a value outside is told the one bound it crossed
    (``--lr must be positive``, ``--lr must be ≤ 1``), as an integer in a closed range always is.
    """

    kind: type = float
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    finite: bool = True
    limit: bool = False

    def _shown(self, x: float) -> str:
        return str(int(x)) if self.kind is int else f"{x:g}"

    def words(self) -> str:
        lo = None if self.low is None else self._shown(self.low)
        hi = None if self.high is None else self._shown(self.high)
        if lo is not None and hi is not None:
            return f"in {'(' if self.open_low else '['}{lo}, {hi}{')' if self.open_high else ']'}"
        if lo is not None:
            if self.low == 0 and self.open_low:
                return "positive"
            if self.kind is int and not self.open_low:
                return f"at least {lo}"
            return f"{'>' if self.open_low else '≥'} {lo}"
        if hi is not None:
            return f"{'<' if self.open_high else '≤'} {hi}"
        return "a finite number" if self.finite else "a number"

    def problem(self, value) -> str | None:
        kinds = (int,) if self.kind is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            return "an integer" if self.kind is int else "a number"
        one_sided = self.limit or (self.kind is int and not (self.open_low or self.open_high))
        if self.kind is float and math.isnan(value):
            if self.low is None and self.high is None:
                return "a number"
            return self._side(below=self.low is not None) if one_sided else self.words()
        if self.finite and not math.isfinite(value):
            return "a finite number"
        below = self.low is not None and (value <= self.low if self.open_low else value < self.low)
        above = self.high is not None and (value >= self.high if self.open_high else value > self.high)
        if (below or above) and one_sided:
            return self._side(below)
        return self.words() if below or above else None

    def _side(self, below: bool) -> str:
        """The words of the one bound a value crossed: ``at least 1``, ``positive``, ``≥ 0.01``; ``at most 1000``."""
        if below:
            return dataclasses.replace(self, high=None).words()
        if self.kind is int and not self.open_high:
            return f"at most {self._shown(self.high)}"
        return f"{'<' if self.open_high else '≤'} {self._shown(self.high)}"


@dataclass(frozen=True)
class OneOf:
    choices: tuple

    def words(self) -> str:
        return "one of " + ", ".join(map(str, self.choices))

    def problem(self, value) -> str | None:
        return None if value in self.choices else self.words()


@dataclass(frozen=True)
class Text:
    """A non-empty string (a hub id, a file, a comma-separated list: the rung reads it further)."""

    def words(self) -> str:
        return "a non-empty text"

    def problem(self, value) -> str | None:
        return None if isinstance(value, str) and value.strip() else self.words()


@dataclass(frozen=True)
class Flag:
    def words(self) -> str:
        return "on or off (--flag / --no-flag)"

    def problem(self, value) -> str | None:
        return None if isinstance(value, bool) else self.words()


@dataclass(frozen=True)
class PathKind:
    """``dir``: a directory to create or reuse; ``run``: a run directory (resume); ``existing_dir``."""

    kind: str

    def words(self) -> str:
        return {"dir": "a directory to create or reuse (not a file)", "run": "a run directory (with config.json)",
                "existing_dir": "an existing directory"}[self.kind]

    def problem(self, value) -> str | None:
        if not isinstance(value, str) or not value.strip():
            return self.words()
        path = Path(value)
        if self.kind == "dir":
            blocked = [q for q in (path, *path.parents) if q.exists() and not q.is_dir()]
            return None if not blocked else self.words()
        if self.kind == "run":
            return None if (path / "config.json").is_file() else self.words()
        return None if path.is_dir() else self.words()


@dataclass(frozen=True)
class Device:
    """A torch device this torch build and this machine really have."""

    def words(self) -> str:
        import torch

        here = ", ".join(available_devices()) + ("" if torch.cuda.is_available() else "; no CUDA GPU here")
        return f"a torch device that exists here ({here})"

    def problem(self, value) -> str | None:
        import torch

        try:
            dev = torch.device(value)
        except (RuntimeError, TypeError):
            return self.words()
        if dev.type == "cpu":
            return None
        if dev.type == "cuda" and torch.cuda.is_available() and (dev.index or 0) < torch.cuda.device_count():
            return None
        if dev.type == "mps" and getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return None
        return self.words()


def available_devices() -> list[str]:
    import torch

    devices = ["cpu"] + (["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
                         if torch.cuda.is_available() else [])
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        devices.append("mps")
    return devices


# The upper limits of the rungs' numbers: generous for any real run, small enough that a value past them (2**63 or
# 1e300: a slip of the keyboard or a script's arithmetic) is refused in one line when the options are read, not met
# later as an overflow, a loop that never ends or an allocation no machine has.
MAX_STEPS = 10**9            # updates or environment steps, and every interval counted in them (every N, warm-up;
                             # 10**9 also serves as "never", as the benchmarks' --checkpoint-every does)
MAX_EPISODES = 10**6         # episodes of one evaluation
MAX_TOKENS = 10**6           # tokens of a prompt or a completion, positions per chunk, top-k (beyond any vocabulary)
MAX_ROWS = 65536             # rows of one batch or forward: completions, pairs, prompts, minibatches
MAX_EXAMPLES = 10**8         # examples, problems or pairs taken from a dataset, completions sampled in a run
MAX_PASSES = 1000            # passes, rounds and tool calls that repeat within one update
MAX_LORA_ALPHA = 65536       # LoRA α: 16 × the largest rank (α / r scales the adapter's update)
MAX_LR = 1.0                 # a learning rate (Adam's step is about lr per weight: 1 already erases a model)
MAX_COEF = 1000.0            # a loss or reward coefficient (β, c_v, c_H, a penalty)
MAX_SCALE = 1e9              # a threshold or scale (a clip that never binds, a cap, a target KL, a gate's τ)


# Shorthands for the common domains.
def at_least(k: int) -> Number:
    """An integer of at least k, with no upper limit: a rung's option says its limit (``count``)."""
    return Number(int, low=k)


def int_range(low: int, high: int) -> Number:
    """An integer in [low, high]: the upper bound where a larger value would overflow or could never be allocated."""
    return Number(int, low=low, high=high)


def count(low: int, high: int) -> Number:
    """How many of something: an integer in [low, high], ``high`` one of the MAX_* limits above."""
    return int_range(low, high)


def positive(high: float | None = None) -> Number:
    """A float > 0; ``high``: its limit (a larger value is refused as ``≤ high``)."""
    return Number(float, low=0.0, open_low=True, high=high, limit=high is not None)


def non_negative(high: float | None = None) -> Number:
    """A float ≥ 0; ``high``: its limit (a larger value is refused as ``≤ high``)."""
    return Number(float, low=0.0, high=high, limit=high is not None)


def learning_rate() -> Number:
    """A learning rate in (0, MAX_LR]."""
    return positive(MAX_LR)


def coefficient() -> Number:
    """A coefficient in [0, MAX_COEF] (0: the term is off)."""
    return non_negative(MAX_COEF)


def interval(low: float, high: float, open_low: bool = False, open_high: bool = False) -> Number:
    return Number(float, low=low, high=high, open_low=open_low, open_high=open_high)


def probability() -> Number:
    return interval(0.0, 1.0)


def outside_domain(flag: str, domain, value, default, why: str = "") -> str | None:
    """The one line that refuses ``value`` for ``flag`` (None: in its domain, or None where the default is None)."""
    if domain is None or (value is None and default is None):
        return None
    wanted = domain.problem(value)
    if wanted is None:
        return None
    shown = repr(value) if isinstance(value, str) else value
    return f"{flag} must be {wanted}{f' ({why})' if why else ''}, got {shown}"
