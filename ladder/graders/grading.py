"""Grading one exercise: the learner's function against the core's, case by case.

A case is a handful of small inputs. The learner's function and the core's run on copies of them;
the outputs must match (shape, and values to within 1e-5), the inputs must come back unchanged,
and where a loss is differentiated, the gradient of ``result.sum()`` must match too. The first
case that differs is reported with its inputs, what was expected and what came back.

Three kinds of case compare something else than a return value. ``Case.raises``: the core rejects
these inputs, and the learner's function must raise the same kind of exception (its message is
free). ``Case.updates``: a function that changes some inputs in place and returns None
(``soft_update``); those inputs, after the call, are what is compared, and they must not have
joined the autograd graph unless the core's did. ``Case.check``: a function of (learner's, core's)
that runs both on fresh copies of a small policy and compares what matters — the loss, its gradient
and statistics (``compute_loss``), the parameters after training (``update``, ``grpo_step``).

Each call of the learner's function runs under ``limit_s()``. One still running at the limit, or one that calls
``sys.exit``, fails its grade on that case with one line, and the result is ``fatal``: ``--use-exercises`` does
not train.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ladder.runtime.limits import TimedOut, time_limit

from . import EXERCISES, Exercise, Stopped, exercise_imports, exit_call, limit_s, load
from .cases import OUTPUTS, TOY_CASES, Case, Mismatch, fmt
from .cases_agent import AGENT_CASES
from .cases_design import DESIGN_CASES
from .cases_distill import DISTILL_CASES
from .cases_lm import LM_CASES
from .cases_loop import LOOP_CASES
from .cases_preferences import PREFERENCE_CASES

# exercise → the function that makes its cases
CASES = {**TOY_CASES, **LM_CASES, **LOOP_CASES, **AGENT_CASES, **DESIGN_CASES, **PREFERENCE_CASES,
         **DISTILL_CASES}

NOT_IMPLEMENTED = "not implemented yet"
EXERCISE_FILE = re.compile(r"ex\d\d_\w+")
RTOL, ATOL = 1e-5, 1e-5


@dataclass
class Result:
    exercise: str
    status: str                 # "passed", "failed" or NOT_IMPLEMENTED
    message: str = ""
    checks: int = 0             # cases passed
    cases: int = 0
    function: Callable | None = None   # what was graded (None: the file is missing or does not import)
    fatal: bool = False         # it hung or called sys.exit (at import or on a case): not to be trained with

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _describe(outputs: tuple, names: tuple[str, ...]) -> str:
    if len(names) == 1:
        return fmt(outputs[0])
    return "  ".join(f"{n}={fmt(o)}" for n, o in zip(names, outputs))


def _copy(value):
    """A fresh copy of one input; in a list of tensors, each is copied as a leaf of its own."""
    if isinstance(value, Tensor):
        return value.clone()
    if isinstance(value, list):
        return [v.detach().clone().requires_grad_(v.requires_grad) if isinstance(v, Tensor) else v for v in value]
    return value


def _call(fn, case: Case, grad: bool):
    inputs = {k: _copy(v) for k, v in case.inputs.items()}
    if grad:
        for name in case.grad:
            inputs[name].requires_grad_(True)
    # the function gets lists of its own: what counts is what it does to the tensors, not to the list
    out = fn(**{k: list(v) if isinstance(v, list) else v for k, v in inputs.items()})
    return out, inputs


def _where_in(fn, error: BaseException) -> str:
    """' (at ex03_gae.py:41)': the last line of the learner's file the error went through."""
    fn = inspect.unwrap(fn)   # a function under @torch.no_grad(): the learner's own code
    return _where_in_file(getattr(getattr(fn, "__code__", None), "co_filename", None), error)


def _where_in_file(filename: str | None, error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == filename]
    return f" (at {Path(filename).name}:{frames[-1].lineno})" if frames else ""


def _updated(inputs: dict, case: Case) -> tuple[tuple[str, ...], tuple]:
    """(names, tensors) of the inputs ``case.updates`` names, as they are after the call."""
    pairs = []
    for name in case.updates:
        value = inputs[name]
        pairs += [(f"{name}[{i}]", x) for i, x in enumerate(value)] if isinstance(value, list) else [(name, value)]
    return tuple(n for n, _ in pairs), tuple(x for _, x in pairs)


def check_case(fn, core, case: Case, names: tuple[str, ...]) -> None:
    """Raise ``Mismatch`` if ``fn`` differs from ``core`` on this case; NotImplementedError passes through."""
    if case.raises is not None:
        return _check_raises(fn, core, case)
    if case.check is not None:
        try:
            return case.check(fn, core)
        except (NotImplementedError, Mismatch):
            raise
        except Exception as e:  # an error of the learner's function, raised inside the comparison
            raise Mismatch(f"raised {type(e).__name__}: {e}{_where_in(fn, e)}") from None
    expected, core_inputs = _call(core, case, grad=bool(case.grad))
    expected_t = expected if isinstance(expected, tuple) else (expected,)
    try:
        got, inputs = _call(fn, case, grad=bool(case.grad))
    except NotImplementedError:
        raise
    except Exception as e:  # any error of the learner's is a finding
        raise Mismatch(f"raised {type(e).__name__}: {e}{_where_in(fn, e)}") from None
    got_t = got if isinstance(got, tuple) else (got,)
    if case.updates:        # changes its inputs in place: compare those, after the call
        if got is not None and expected is None:
            raise Mismatch(f"should change {', '.join(case.updates)} in place and return None, "
                           f"returned {type(got).__name__} {fmt(got)}")
        names, expected_t = _updated(core_inputs, case)
        got_t = _updated(inputs, case)[1]
    if len(got_t) != len(expected_t):
        want = "a tensor" if len(names) == 1 else f"a tuple ({', '.join(names)})"
        raise Mismatch(f"should return {want}, returned {type(got).__name__} {fmt(got)}")
    for name, g, e in zip(names, got_t, expected_t):
        if not isinstance(g, Tensor):
            raise Mismatch(f"{name} should be a tensor, got {type(g).__name__} {g!r}")
        if g.shape != e.shape:
            raise Mismatch(f"{name} has shape {list(g.shape)}, expected {list(e.shape)}: "
                           f"{fmt(g)} instead of {fmt(e)}")
        if not torch.allclose(g.detach().to(e.dtype), e.detach(), rtol=RTOL, atol=ATOL, equal_nan=True):
            gap = (g.detach().to(e.dtype) - e.detach()).abs().nan_to_num(nan=math.inf).max().item()
            raise Mismatch(f"wrong values\n  expected  {_describe(expected_t, names)}\n"
                           f"  got       {_describe(got_t, names)}\n"
                           f"  largest |difference| {gap:.3g} (allowed: {ATOL:g} + {RTOL:g} · |expected|)")
        if case.updates and g.requires_grad != e.requires_grad:
            raise Mismatch(f"right values, but {name}.requires_grad is {g.requires_grad}, the core's {e.requires_grad}"
                           + (": it has joined the autograd graph; change it under torch.no_grad()"
                              if g.requires_grad else ""))
    for name, value in case.inputs.items():
        if name not in case.updates and not _unchanged(inputs[name], value):
            raise Mismatch(f"changed its input {name} in place; build new tensors instead")
    if case.grad:
        _check_gradients(case, expected_t[0], core_inputs, got_t[0], inputs)


def _same(a: Tensor, b: Tensor) -> bool:
    return torch.equal(a, b) or (a.is_floating_point() and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True))


def _unchanged(now, before) -> bool:
    """A tensor input, or each tensor of a list input, holds what the case gave."""
    if isinstance(before, Tensor):
        return _same(now.detach(), before.detach())
    if isinstance(before, list):
        return all(_unchanged(a, b) for a, b in zip(now, before))
    return True


def _check_raises(fn, core, case: Case) -> None:
    """The core rejects these inputs with ``case.raises``: the learner's function must raise that kind too."""
    try:
        _call(core, case, grad=False)
    except case.raises as error:
        reason = f"{case.raises.__name__}, as the core does ({error})"
    else:
        raise AssertionError(f"case {case.label!r}: the core does not raise {case.raises.__name__}")
    try:
        got, _ = _call(fn, case, grad=False)
    except NotImplementedError:
        raise
    except case.raises:
        return
    except Exception as e:
        raise Mismatch(f"raised {type(e).__name__}: {e}{_where_in(fn, e)}\n  should raise {reason}") from None
    raise Mismatch(f"should raise {reason}, but returned {fmt(got)}")


def _check_gradients(case: Case, expected: Tensor, core_inputs: dict, got: Tensor, inputs: dict) -> None:
    expected.sum().backward()
    if not got.requires_grad:
        raise Mismatch(f"right values, but no gradient reaches {', '.join(case.grad)}: keep the computation "
                       "in torch (no .detach(), .item(), numpy or torch.no_grad())")
    got.sum().backward()
    for name in case.grad:
        want, have = core_inputs[name].grad, inputs[name].grad
        if want is None:    # the core lets no gradient reach this input: none may reach the learner's (0 at most)
            if have is None or not have.any():
                continue
            raise Mismatch(f"right values, but a gradient of result.sum() reaches {name}, where the core's lets "
                           f"none through (a constant: detach it)\n  expected  None\n  got       {fmt(have)}")
        if have is None or not torch.allclose(have, want, rtol=RTOL, atol=ATOL, equal_nan=True):
            raise Mismatch(f"right values, but the gradient of result.sum() with respect to {name} is wrong\n"
                           f"  expected  {fmt(want)}\n  got       {fmt(have) if have is not None else None}")


def _which_stub(error: NotImplementedError, stem: str) -> str:
    """"not implemented yet", naming the earlier exercise's stub when that is what raised."""
    where = traceback.extract_tb(error.__traceback__)[-1]
    if Path(where.filename).stem == stem or not EXERCISE_FILE.fullmatch(Path(where.filename).stem):
        return NOT_IMPLEMENTED
    return f"{NOT_IMPLEMENTED}: it calls {where.name}() of {Path(where.filename).name}, a stub still"


def _limited(fn, name: str, seconds: float):
    """``fn``, each call of it under ``time_limit(seconds, name)``: the learner's time, not the core's."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        with time_limit(seconds, name):
            return fn(*args, **kwargs)
    return call


def grade(fn, exercise: Exercise) -> Result:
    """Run every case of ``exercise`` on ``fn``, each call of ``fn`` under ``limit_s()``; stop at the first case
    that differs from the core, runs past the limit or calls ``sys.exit`` (those two: a ``fatal`` result)."""
    cases = CASES[exercise.stem]()
    names = OUTPUTS.get(exercise.function, ("result",))
    name, limited = exercise.stem, _limited(fn, exercise.function, limit_s())
    for i, case in enumerate(cases):
        on_case = f"on case {i + 1}/{len(cases)} {case.label!r}"
        try:
            check_case(limited, exercise.core, case, names)
        except TimedOut as e:
            if e.what != exercise.function:   # an outer limit's: not this grade's to report
                raise
            return Result(name, "failed", f"{e} {on_case}{_where_in(fn, e)}", i, len(cases), fatal=True)
        except SystemExit as e:
            return Result(name, "failed", f"{exercise.function} called {exit_call(e)} {on_case}{_where_in(fn, e)}",
                          i, len(cases), fatal=True)
        except NotImplementedError as stub:
            if i == 0:
                return Result(name, NOT_IMPLEMENTED, _which_stub(stub, name), 0, len(cases))
            return Result(name, "failed", f"raised NotImplementedError on case {i + 1}/{len(cases)}: "
                          f"{case.label}\n  input     {case.describe()}", i, len(cases))
        except Mismatch as m:
            return Result(name, "failed", f"case {i + 1}/{len(cases)}: {case.label}\n"
                          f"  input     {case.describe()}\n  {m}", i, len(cases))
    return Result(name, "passed", f"{len(cases)} cases passed", len(cases), len(cases))


def grade_file(directory: str | Path, exercise: Exercise) -> Result:
    """Grade ``directory/<stem>.py``; a file that is missing or does not import fails with that reason."""
    path = Path(directory) / f"{exercise.stem}.py"
    if not path.exists():
        return Result(exercise.stem, "failed", f"{path} is missing")
    try:
        module = load(path)
    except Stopped as e:    # it called sys.exit, or hung, at import
        return Result(exercise.stem, "failed", str(e), fatal=True)
    except Exception as e:  # report it, and go on grading the other files
        where = "" if isinstance(e, SyntaxError) else _where_in_file(str(path), e)  # a SyntaxError names its line
        return Result(exercise.stem, "failed", f"{path.name} does not import: {type(e).__name__}: {e}{where}")
    fn = getattr(module, exercise.function, None)
    if not callable(fn):
        return Result(exercise.stem, "failed", f"{path.name} defines no function {exercise.function}()")
    with exercise_imports(path.parent):   # an import inside the function finds the learner's files too
        result = grade(fn, exercise)
    result.function = fn
    return result


def grade_all(directory: str | Path) -> list[Result]:
    """One result per exercise, in notebook order."""
    return [grade_file(directory, e) for e in EXERCISES]
