"""The two ways a command of ladder ends short, each reported as one line (``ladder.run``, ``ladder.doctor``)."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit code 2, nothing half-written."""


class OptionError(UsageError, ValueError):
    """A value outside its option's domain: one line at the command line, a ValueError in Python."""


class RunStopped(Exception):
    """Training cannot usefully go on: reported as one line, exit code 1; the run directory is kept."""
