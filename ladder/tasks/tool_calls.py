"""The environment protocol of TRL 1.16's ``GRPOTrainer(environment_factory=…)``, so one class works in both.

An environment is a class; the trainer makes one instance per trajectory and calls

    Env()                              no arguments (TRL's environment_factory)
    env.reset(**row) -> str | None     before the trajectory: the text it returns (if any) is appended to the
                                       user's message; ``row`` is the problem ({"question", "answer", …})
    env.<tool>(**arguments) -> str     every public method other than reset / get_reward is a tool the model may
                                       call; its signature and docstring (Google style, ``Args:``) are the tool's
                                       schema (``transformers.utils.get_json_schema``), shown to the model by the
                                       chat template's ``tools=``
    env.get_reward() -> float          optional: the environment scores the trajectory itself (a reward column
                                       named after the class, weight 1, beside the reward functions); a finite
                                       number

ladder reads one optional attribute TRL does not: ``env.turn_rewards``, a list with a reward (a finite number) per
model turn that calls a tool (the credit of ``--credit turn``). An attribute, not a method: TRL would offer a method
as a tool. The agent rung checks each of these where it is crossed and names the method and what it returned.

Tool calls are written the Hermes / Qwen2.5 way, inside the assistant's turn:

    <tool_call>
    {"name": "multiply", "arguments": {"a": 37, "b": 48}}
    </tool_call>

A call that cannot be parsed, names no tool, has wrong arguments, raises, or comes past ``--max-tool-calls`` is
answered with an error, as TRL answers it (``{'error': '…'}``): the model reads it and goes on. So is a tool that
calls ``sys.exit`` (``argparse``, say), one that does not return within the limit in force (``tool_time_limit``:
the agent rung's ``--env-timeout``; ``ladder.runtime.limits`` interrupts it, no thread is left running), and one whose
result ``str()`` cannot make text. What a tool prints is held while it runs and passed on once it returns. A tool
needs a type hint on every argument and a docstring describing each (``tool_schemas``: one line naming the tool if
not). The text the environment adds after the model's end of turn (the tool's reply, and the template's markers
around it) is rendered by the chat template, exactly as TRL's ``_get_tool_suffix_ids`` renders it.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
from collections.abc import Callable
from contextvars import ContextVar

from ladder.runtime.errors import UsageError
from ladder.runtime.limits import TimedOut, time_limit
from ladder.runtime.user_code import exited, held_output, said

NOT_TOOLS = ("reset", "get_reward")
_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_TOOL_LIMIT_S: ContextVar[float | None] = ContextVar("tool_limit_s", default=None)  # see tool_time_limit


def tools_of(env) -> dict[str, Callable]:
    """Name → bound method of every public method of the environment's class but ``reset`` and ``get_reward``
    (TRL's rule)."""
    return {name: getattr(env, name) for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
            if name not in NOT_TOOLS and not name.startswith("_")}


def tool_schemas(env) -> list[dict]:
    """The JSON schema of each tool, what ``apply_chat_template(..., tools=…)`` shows the model; a tool whose
    signature or docstring cannot make one (an argument without a type hint, no ``Args:`` line for it) is one line."""
    from transformers.utils import get_json_schema
    from transformers.utils.chat_template_utils import DocstringParsingException, TypeHintParsingException

    schemas = []
    for name, fn in tools_of(env).items():
        try:
            schemas.append(get_json_schema(fn))
        except (TypeHintParsingException, DocstringParsingException, NameError) as e:
            text = " ".join(str(e).split())
            raise UsageError(f"the tool {type(env).__name__}.{name} cannot be shown to the model ({text[:160]}); a "
                             f"tool needs a type hint on every argument and a docstring with an Args: line for "
                             f"each (TRL's rule)") from None
    return schemas


def parse_tool_calls(turn: str) -> list[dict | str]:
    """The calls in one model turn, in order: ``{"name": str, "arguments": dict}`` for each well-formed one,
    an error message (str) for each malformed one; ``[]`` when the turn calls no tool (it is an answer)."""
    calls: list[dict | str] = []
    for body in _CALL.findall(turn):
        try:
            call = json.loads(body.strip())
        except json.JSONDecodeError as e:
            calls.append(f"malformed tool call: {e.msg} at character {e.pos}")
            continue
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or \
                not isinstance(call.get("arguments", {}), dict):
            calls.append('malformed tool call: expected {"name": ..., "arguments": {...}}')
            continue
        calls.append({"name": call["name"], "arguments": call.get("arguments", {})})
    return calls


@contextlib.contextmanager
def tool_time_limit(seconds: float | None):
    """Within: each ``call_tool`` gives its tool ``seconds`` (None: no limit, the default outside)."""
    token = _TOOL_LIMIT_S.set(seconds)
    try:
        yield
    finally:
        _TOOL_LIMIT_S.reset(token)


def call_tool(tools: dict[str, Callable], call: dict | str) -> tuple[dict, bool]:
    """Run one parsed call: (the tool message ``{"role": "tool", "name", "content"}``, whether it failed).
    A failure is the message ``{'error': '…'}``, TRL's, never an exception: a malformed call, an unknown tool, one
    that raises, exits, runs past ``tool_time_limit`` or returns what ``str()`` cannot make text."""
    if isinstance(call, str):
        return _failed("unknown", call)
    name, seconds = call["name"], _TOOL_LIMIT_S.get()
    if name not in tools:
        return _failed(name, f"Tool {name} not found.")
    what, printed = f"the tool {name!r}", []
    try:
        with held_output(printed), time_limit(seconds, what):
            result = tools[name](**call["arguments"])
            try:
                return {"role": "tool", "name": name, "content": str(result)}, False
            except Exception as e:  # noqa: BLE001 - the result's own __str__
                return _failed(name, f"{what} returned {type(result).__name__}, which str() cannot make text "
                                     f"({type(e).__name__}: {e})")
    except TimedOut as e:
        if e.what != what:
            raise
        return _failed(name, f"{e}{said(printed)}")
    except SystemExit as e:  # argparse in a tool, say: the model reads it, the run goes on
        return _failed(name, f"{what} called {exited(e)}{said(printed)}")
    except Exception as e:  # noqa: BLE001 - the tool's failure is the model's to read, as in TRL
        return _failed(name, str(e))


def _failed(name: str, error: str) -> tuple[dict, bool]:
    """A failed call's reply, TRL's ``{'error': …}``, and True."""
    return {"role": "tool", "name": name, "content": str({"error": error})}, True


def over_budget(call: dict | str, limit: int) -> dict:
    """The reply to a call in a turn past ``--max-tool-calls`` calling turns: an error the model reads, then it must
    answer (TRL ends the trajectory there, the call unanswered)."""
    name = call["name"] if isinstance(call, dict) else "unknown"
    return {"role": "tool", "name": name, "content": str({"error": f"no tool calls left (at most {limit} turns)"})}


def suffix_ids(tokenizer, tool_messages: list[dict]) -> list[int]:
    """The environment's tokens after the model's end of turn: the tool messages and the next assistant header,
    as the chat template renders them (TRL's ``_get_tool_suffix_ids``: a dummy conversation rendered with and
    without the messages; what the EOS-trimmed first is missing of the second)."""
    dummy = [{"role": "user", "content": "dummy"},
             {"role": "assistant", "content": "",
              "tool_calls": [{"type": "function", "function": {"name": tool_messages[0]["name"], "arguments": {}}}]}]
    prefix = tokenizer.apply_chat_template(dummy, tokenize=True, add_generation_prompt=False, return_dict=False)
    full = tokenizer.apply_chat_template(dummy + tool_messages, tokenize=True, add_generation_prompt=True,
                                         return_dict=False)
    eos = [i for i, t in enumerate(prefix) if t == tokenizer.eos_token_id]
    if eos:
        prefix = prefix[:eos[-1] + 1]
    if full[:len(prefix)] != prefix:
        raise ValueError("the chat template renders the conversation before a tool's reply differently with and "
                         "without it; it cannot be used for tool calls")
    return full[len(prefix):]
