"""What the terminal a run writes to can show."""

from __future__ import annotations

import sys


def show_progress(wanted: bool) -> bool:
    """Progress bars on a terminal or in a notebook; not in pipes and log files, where they are noise."""
    return wanted and (sys.stderr.isatty() or "ipykernel" in sys.modules)
