"""Capstone II's grader: ``check(name, module)`` runs one property on the learner's module.

    tiny_task()        the task, as plain objects (``capstone_grpo_task``): model, tokenizer, training and
                       held-out sums, each with its chat-formatted prompt
    greedy_accuracy()  the grader's own greedy decode and rule check, on held-out sums
    check(name, sol)   one property: passed, failed (a line or two: the property, the input, expected vs got)
                       or not implemented yet

The properties are in ``capstone_grpo_checks`` (sampler, log-probs, reward, advantages),
``capstone_grpo_update`` (loss, update) and ``capstone_grpo_train`` (the loop: its wiring, watched by spies on
the module's functions during a two-step run, and the training check), named in ``PROPERTIES``; each is graded
by behaviour and by tolerance, against ``ladder.core`` or the model's own forward, never for bit-equality. Each
runs under ``limit_s()`` (those that call ``train``: ``limit_s(training=True)``); one still running then, or one
whose code calls ``sys.exit``, fails in one line naming the learner's function and line.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

from ladder.runtime.limits import TimedOut, time_limit

from . import capstone_grpo_checks, capstone_grpo_train, capstone_grpo_update, exit_call, innermost, limit_s
from .capstone_grpo_task import Broken, greedy_accuracy, read_once, tiny_task

__all__ = ["NOT_IMPLEMENTED", "PROPERTIES", "SLOW", "Verdict", "check", "greedy_accuracy", "properties", "tiny_task"]

NOT_IMPLEMENTED = "not implemented yet"


@dataclass
class Verdict:
    name: str
    status: str               # "passed", "failed" or NOT_IMPLEMENTED
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _where_in(error: BaseException, module) -> str:
    """' (at capstone2_grpo.py:41)': the last line of the learner's file the error went through."""
    file = getattr(module, "__file__", None)
    frames = [f for f in traceback.extract_tb(error.__traceback__) if file and f.filename == file]
    return f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""


def _whose(error: BaseException, module) -> str:
    """'sample ': the learner's function the error went through last ('' if none)."""
    frame = innermost(error, {getattr(module, "__file__", None)})
    return f"{frame.name} " if frame else ""


PROPERTIES = ("sampler_is_a_cached_loop", "sampler_records_logp", "sampler_stops_at_eos", "sampler_left_padding",
              "sampler_temperature", "completion_logp_matches_forward", "completion_logp_padding",
              "reward_on_strings", "group_advantages", "loss_and_gradient", "update_mu_steps",
              "update_pi_old_before_first_step", *capstone_grpo_train.WIRING, "train_learns")
SLOW = ("train_learns",)      # trains the tiny model: about half a minute on one thread; every other is seconds
TRAINS = (*capstone_grpo_train.WIRING, "train_learns")   # call the learner's train: the training limit


def properties() -> dict:
    """Name → property: a function of the learner's module that raises ``Broken`` when it does not hold."""
    modules = (capstone_grpo_checks, capstone_grpo_update, capstone_grpo_train)
    return {name: next(getattr(m, name) for m in modules if hasattr(m, name)) for name in PROPERTIES}


def check(name: str, module) -> Verdict:
    """Run the property ``name`` on the learner's module: passed, failed (one or two lines: the property, the
    input, expected and got; or the learner's function still running at ``limit_s()``, or calling ``sys.exit``)
    or not implemented yet (a function it calls raises NotImplementedError)."""
    prop, seconds = properties()[name], limit_s(training=name in TRAINS)
    read_once()
    try:
        with torch.random.fork_rng(), time_limit(seconds, name):
            prop(module)
    except TimedOut as e:
        if e.what != name:   # an outer limit's: not this property's to report
            raise
        whose = _whose(e, module)
        return Verdict(name, "failed", f"{name}: {whose}did not {'return' if whose else 'finish'} within "
                       f"{seconds:g} s{_where_in(e, module)}")
    except SystemExit as e:
        return Verdict(name, "failed", f"{name}: {_whose(e, module)}called {exit_call(e)}{_where_in(e, module)}")
    except NotImplementedError:
        return Verdict(name, NOT_IMPLEMENTED, NOT_IMPLEMENTED)
    except Broken as e:
        return Verdict(name, "failed", f"{name}: {e}")
    except Exception as e:  # noqa: BLE001 - the learner's code raised: one line naming where
        return Verdict(name, "failed", f"{name}: raised {type(e).__name__}: {e}{_where_in(e, module)}")
    return Verdict(name, "passed")
