"""What every notebook shares: ``SETUP``, each notebook's first code cell, and ``SELF_CHECK``, the heading of each
closing self-check.

Cells starting with ``md:`` are Markdown; everything else is code. ``notebooks/build.py`` writes them.
"""

SETUP = """\
import json, tempfile
from pathlib import Path

import torch
from IPython.display import Image, Markdown, display

from ladder import core, viz

RUNS = Path(tempfile.mkdtemp(prefix="ladder-nb-"))   # every run of this notebook writes here
metrics = lambda out: [json.loads(line) for line in open(Path(out) / "metrics.jsonl")]"""

SELF_CHECK = r"""md:## Self-check

Predictions and reasons, checked against what the code then computes. The first cell asks: write each answer into
its `.answer = None` line (one of the printed choices, a letter, or a number) and run it; then run the cell after it,
which computes each answer anew, marks yours and says why. Answer before you run the second cell: run unanswered, as
CI runs it, it marks nothing and prints what it computed."""
