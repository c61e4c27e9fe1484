"""The ``eval`` command: greedy accuracy of a model (and adapter) on a math task's held-out problems.

``python -m ladder.run eval --task gsm8k --model PATH_OR_ID [--adapter DIR]`` runs the task's fixed
protocol (``ladder.tasks.math_eval``) on the problems a grpo run with the same ``--task``, ``--dataset``
and ``--eval-size`` holds out (``ladder.tasks.math_problems.split``; a local file: its last rows), so
numbers before and after training are measured the same way, on problems the run never trained on.

With ``--out DIR`` it writes DIR/config.json, DIR/summary.json and DIR/completions.jsonl, into a new or empty
directory or, with ``--overwrite``, over an earlier eval's; never into another rung's run directory.
"""

# The package: the command itself, ``train`` (the held-out problems, the files in --out) and ``evaluate`` (the model
# and adapter loaded, greedy accuracy), with the declaration ``RUNG`` (``evaluation``); and the options (``options``).

from ladder.rungs.lm_eval.evaluation import NAME, RUNG, evaluate, train
from ladder.rungs.lm_eval.options import ALGOS, PRESETS, RESOLVED, Config, validate

__all__ = ["ALGOS", "NAME", "PRESETS", "RESOLVED", "RUNG", "Config", "evaluate", "train", "validate"]
