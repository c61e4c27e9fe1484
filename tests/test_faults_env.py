"""Faults in a user's environment (``agent --env FILE.py:Class``), produced for real through the command line: every
call into it has a time limit (``--env-timeout``) and what it returns is checked where it is crossed.

    a tool that fails (raises, exits, hangs, returns what str() cannot make text)   an error the model reads; the
                                                                                    run goes on (exit 0)
    anything else (making it, reset, get_reward, turn_rewards, a reward function)   one line naming the call and
                                                                                    what it returned: exit 2 and
                                                                                    nothing written before the
                                                                                    run's first checkpoint, exit 1
                                                                                    and the run kept after it

The runs are one update of 2 problems × 4 trajectories on the tiny preset's model (``@tiny-agent``), with products
as the problems and the calculator's prompt, so that sampling calls ``multiply``. A reset that spins forever, a tool
that sleeps forever and a tool that runs argparse run in a subprocess (the process must end, and not by the user's
exit); the other faults run ``ladder.run.main`` in this process, the function ``python -m ladder.run`` calls (a
``sys.exit`` escaping from the user's code would show there as its exit code).
"""

from __future__ import annotations

import json
import time

import pytest
from cli_helpers import run_cli

from ladder import run as ladder_run

ENVS = '''
import argparse
import math
import time

LIMIT = 9  # resets before HangsLater hangs: the held-out evaluation (1) and the first update (2 problems x 4)


class Calc:
    def reset(self, **problem):
        return None

    def multiply(self, a: int, b: int) -> str:
        """Multiply two whole numbers.

        Args:
            a: the first factor
            b: the second factor
        """
        return str(int(a) * int(b))


class NeedsArgument(Calc):
    def __init__(self, sandbox_url):
        self.sandbox_url = sandbox_url


calc = Calc()


class NoHints(Calc):
    def multiply(self, a, b) -> str:
        """Multiply two whole numbers.

        Args:
            a: the first factor
            b: the second factor
        """
        return str(int(a) * int(b))


class SlowToMake(Calc):
    def __init__(self):
        time.sleep(3600)


class ResetNumber(Calc):
    def reset(self, **problem):
        return 5


class ResetLong(Calc):
    def reset(self, **problem):
        return " 1 2 3 4 5 6 7 8 9" * 160


class SpinsOnReset(Calc):
    def reset(self, **problem):
        while True:
            pass


class ParsesOnReset(Calc):
    def reset(self, **problem):
        parser = argparse.ArgumentParser(prog="sandbox")
        parser.add_argument("--image", required=True)
        parser.parse_args([])


class HangsLater(Calc):
    resets = 0

    def reset(self, **problem):
        HangsLater.resets += 1
        while HangsLater.resets > LIMIT:
            time.sleep(1)


class RewardNone(Calc):
    def get_reward(self):
        return None


class RewardText(Calc):
    def get_reward(self):
        return "high"


class RewardNaN(Calc):
    def get_reward(self):
        return math.nan


class SleepsOnReward(Calc):
    def get_reward(self):
        time.sleep(3600)


class LabelledTurns(Calc):
    def reset(self, **problem):
        self.turn_rewards = ["good"]


class SleepyTool(Calc):
    def multiply(self, a: int, b: int) -> str:
        """Multiply two whole numbers.

        Args:
            a: the first factor
            b: the second factor
        """
        time.sleep(3600)


class ParsingTool(Calc):
    def multiply(self, a: int, b: int) -> str:
        """Multiply two whole numbers.

        Args:
            a: the first factor
            b: the second factor
        """
        argparse.ArgumentParser(prog="multiply").parse_args(["--fast"])


class Unprintable:
    def __str__(self):
        raise ValueError("no text")


class UnprintableTool(Calc):
    def multiply(self, a: int, b: int) -> str:
        """Multiply two whole numbers.

        Args:
            a: the first factor
            b: the second factor
        """
        return Unprintable()


def no_rewards(completions, answers):
    return None
'''
PRODUCTS = [(37, 48), (12, 34), (56, 78), (91, 23), (45, 67), (88, 19), (73, 26), (64, 51)]
PROMPT = "Use the tool. End with #### and the number."
TIMEOUT = 0.5


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("env-faults")
    (root / "envs.py").write_text(ENVS)
    (root / "products.jsonl").write_text("".join(json.dumps({"question": f"What is {a} * {b}?",
                                                             "answer": f"#### {a * b}"}) + "\n"
                                                 for a, b in PRODUCTS))
    return root


def _args(files, env: str, *more) -> list[str]:
    """One update of 2 problems × 4 trajectories against ``envs.py:ENV``, a held-out problem before it."""
    return ["agent", "--preset", "tiny", "--env", f"{files / 'envs.py'}:{env}", "--task", "gsm8k", "--dataset",
            str(files / "products.jsonl"), "--system-prompt", PROMPT, "--steps", "1", "--prompts-per-step", "2",
            "--group-size", "4", "--eval-size", "1", "--max-new-tokens", "64", "--max-tool-calls", "1",
            "--env-timeout", str(TIMEOUT), "--print-samples", "1", "--no-progress", *more]


def _in_process(args: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = ladder_run.main(args)
    except SystemExit as e:  # the user's sys.exit escaping ladder would show here, as its own code
        code = e.code
    return code, capsys.readouterr().err


def _subprocess(args: list[str], cwd) -> tuple[int, str, float]:
    start = time.monotonic()
    result = run_cli(*args, cwd=cwd, timeout=240)
    return result.returncode, result.stderr, time.monotonic() - start


def _one_line(code: int, stderr: str, expected_code: int) -> str:
    assert code == expected_code, stderr[-3000:]
    lines = stderr.strip().splitlines()
    assert "Traceback" not in stderr and len(lines) == 1 and lines[0].startswith("ladder: "), stderr
    return lines[0]


@pytest.mark.parametrize("env, more, needle", [
    pytest.param("NeedsArgument", (), "--env '{envs}:NeedsArgument': the environment class NeedsArgument cannot be "
                 "made with NeedsArgument(): it needs argument 'sandbox_url'", id="init-needs-an-argument"),
    pytest.param("calc", (), "--env '{envs}:calc': calc is not a class with a reset method (TRL's environment "
                 "protocol, its environment_factory), it is an instance of Calc: give the class itself",
                 id="an-instance"),
    pytest.param("NoHints", (), "the tool NoHints.multiply cannot be shown to the model (Argument a is missing a "
                 "type hint in function multiply)", id="tool-without-type-hints"),
    pytest.param("SlowToMake", (), f"environment SlowToMake() did not return within {TIMEOUT:g} s (--env-timeout)",
                 id="init-hangs"),
    pytest.param("ResetNumber", (), "environment ResetNumber.reset returned int 5; it must return text (str) to "
                 "append to the question, or None", id="reset-returns-an-int"),
    pytest.param("ResetLong", (), "environment ResetLong.reset returned text of 2,880 tokens: with it the prompt is "
                 "2,924 tokens, which with --max-new-tokens 64 exceeds the model's context of 512 tokens",
                 id="reset-text-longer-than-the-context"),
    pytest.param("ParsesOnReset", (), "environment ParsesOnReset.reset called sys.exit(2); it printed 'sandbox: "
                 "error: the following arguments are required: --image'", id="reset-runs-argparse"),
    pytest.param("RewardNone", (), "environment RewardNone.get_reward returned None; it must return a finite number",
                 id="get-reward-none"),
    pytest.param("RewardText", (), "environment RewardText.get_reward returned str 'high'; it must return a finite "
                 "number", id="get-reward-text"),
    pytest.param("RewardNaN", (), "environment RewardNaN.get_reward returned nan; it must return a finite number",
                 id="get-reward-nan"),
    pytest.param("SleepsOnReward", (), f"environment SleepsOnReward.get_reward did not return within {TIMEOUT:g} s",
                 id="get-reward-hangs"),
    pytest.param("LabelledTurns", ("--credit", "turn"), "environment LabelledTurns.turn_rewards[0] is str 'good'; "
                 "each entry must be a finite number", id="turn-rewards-labels"),
    pytest.param("Calc", ("--reward-funcs", "{envs}:no_rewards"), "reward function 'no_rewards' must return a list "
                 "of numbers, one per completion, got None", id="reward-function-none"),
])
def test_a_fault_before_the_first_checkpoint_is_one_line_exit_2_and_leaves_nothing(files, tmp_path, capsys, env,
                                                                                    more, needle):
    out = tmp_path / "run"
    more = [m.format(envs=files / "envs.py") for m in more]
    line = _one_line(*_in_process(_args(files, env, "--out", str(out), *more), capsys), 2)
    assert line.startswith("ladder: error: ") and needle.format(envs=files / "envs.py") in line, line
    assert not out.exists()


def test_a_fault_after_a_checkpoint_stops_the_run_with_exit_1_and_keeps_it(files, tmp_path, capsys):
    """reset hangs in the second update: one line naming it, exit 1, the first update and its checkpoint kept."""
    out = tmp_path / "run"
    line = _one_line(*_in_process(_args(files, "HangsLater", "--steps", "2", "--checkpoint-every", "1",
                                        "--out", str(out)), capsys), 1)
    assert line.startswith(f"ladder: stopped: environment HangsLater.reset did not return within {TIMEOUT:g} s "
                           f"(--env-timeout); the run so far is kept, continue with: python -m ladder.run agent "
                           f"--resume"), line
    assert [json.loads(r)["step"] for r in (out / "metrics.jsonl").read_text().splitlines()] == [1]
    assert (out / "checkpoint.pt").exists()


def test_a_reset_that_spins_forever_ends_the_process_within_the_limit(files, tmp_path):
    code, stderr, seconds = _subprocess(_args(files, "SpinsOnReset", "--out", "run"), tmp_path)
    line = _one_line(code, stderr, 2)
    assert line == f"ladder: error: environment SpinsOnReset.reset did not return within {TIMEOUT:g} s (--env-timeout)"
    assert not (tmp_path / "run").exists() and seconds < 120


@pytest.mark.parametrize("env, error, process", [
    ("SleepyTool", f"the tool 'multiply' did not return within {TIMEOUT:g} s", "subprocess"),
    ("ParsingTool", "the tool 'multiply' called sys.exit(2); it printed 'multiply: error: unrecognized arguments: "
                    "--fast'", "subprocess"),
    ("UnprintableTool", "the tool 'multiply' returned Unprintable, which str() cannot make text (ValueError: no "
                        "text)", "in-process"),
])
def test_a_tool_that_hangs_exits_or_returns_no_text_is_a_failed_call_the_model_reads(files, tmp_path, capsys, env,
                                                                                     error, process):
    """The run goes on and finishes (exit 0, no word on stderr): every call failed, and the trajectories hold the
    error as the environment's reply."""
    out, start = tmp_path / "run", time.monotonic()
    args = _args(files, env, "--max-new-tokens", "200", "--out", str(out))
    code, stderr = _subprocess(args, tmp_path)[:2] if process == "subprocess" else _in_process(args, capsys)
    assert code == 0 and stderr.strip() == "", stderr[-3000:]
    record = json.loads((out / "metrics.jsonl").read_text())
    assert record["agent/tool_calls"] > 0 and record["agent/tool_failures"] == record["agent/tool_calls"]
    completions = [json.loads(r)["completion"] for r in (out / "completions.jsonl").open()]
    assert any(repr({"error": error}) in c for c in completions), completions
    assert json.loads((out / "summary.json").read_text())["steps"] == 1 and time.monotonic() - start < 120
