"""Where a run's numbers go besides ``metrics.jsonl``: ``--report-to none|tensorboard|trackio|wandb``.

Each update's record (every number in it, at its ``step``) goes to the tracker chosen, as TRL's
``report_to`` sends its logs:

    tensorboard  event files in OUT/tb                          (tensorboard --logdir OUT/tb)
    trackio      the local trackio database, project "ladder"   (trackio show --project ladder)
    wandb        a Weights & Biases run in OUT/wandb            (WANDB_MODE=offline: no account, no network)

A run's name in trackio and wandb is its output directory's name; a resumed run continues the
same tracked run (wandb's run id is kept in OUT/wandb/run_id). trackio and wandb are optional:
``pip install trackio wandb`` (or ``pip install -e ".[trackers]"`` in ladder's checkout).
"""

from __future__ import annotations

import importlib.util
import math
import secrets
from functools import partial
from pathlib import Path

from ladder.runtime.errors import UsageError

REPORT_TO = ("none", "tensorboard", "trackio", "wandb")
PACKAGES = {"tensorboard": "tensorboard", "trackio": "trackio", "wandb": "wandb"}
PROJECT = "ladder"


def check_installed(report_to: str) -> None:
    """A tracker whose package is missing: one line, before anything is written."""
    package = PACKAGES.get(report_to)
    if package and importlib.util.find_spec(package) is None:
        raise UsageError(f"--report-to {report_to} needs the {package} package: "
                         f'pip install {package} (or pip install -e ".[trackers]" in ladder\'s checkout)')


def numbers(record: dict) -> dict[str, float]:
    """The record's finite numbers, without ``step`` (the x axis)."""
    return {k: v for k, v in record.items() if k != "step" and isinstance(v, (int, float))
            and not isinstance(v, bool) and math.isfinite(v)}


class TensorBoard:
    def __init__(self, run_dir: Path, config: dict, resume: bool):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(run_dir / "tb"))

    def log(self, record: dict, step: int) -> None:
        for key, value in numbers(record).items():
            self.writer.add_scalar(key, value, step)

    def close(self) -> None:
        self.writer.close()


class Trackio:
    def __init__(self, run_dir: Path, config: dict, resume: bool):
        import trackio

        self.trackio = trackio
        self.run = trackio.init(project=PROJECT, name=run_dir.resolve().name, config=config,
                                resume="allow" if resume else "never")

    def log(self, record: dict, step: int) -> None:
        self.run.log(numbers(record), step=step)

    def close(self) -> None:
        self.run.finish()


class Wandb:
    def __init__(self, run_dir: Path, config: dict, resume: bool):
        import wandb

        (run_dir / "wandb").mkdir(exist_ok=True)
        id_file = run_dir / "wandb" / "run_id"
        run_id = id_file.read_text().strip() if resume and id_file.exists() else secrets.token_hex(4)
        self.run = wandb.init(project=PROJECT, name=run_dir.resolve().name, id=run_id, config=config,
                              dir=str(run_dir), resume="allow")
        id_file.write_text(run_id)

    def log(self, record: dict, step: int) -> None:
        self.run.log(numbers(record), step=step)

    def close(self) -> None:
        self.run.finish()


TRACKERS = {"tensorboard": TensorBoard, "trackio": Trackio, "wandb": Wandb}


def tracker(report_to: str):
    """What ``RunLog`` calls to open the tracker ``--report-to`` names; None for ``none``."""
    return None if report_to == "none" else partial(open_tracker, report_to)


def open_tracker(report_to: str, run_dir: Path, config: dict, resume: bool):
    """The tracker ``--report-to`` names, opened for this run; None for ``none``."""
    if report_to == "none":
        return None
    check_installed(report_to)
    try:
        return TRACKERS[report_to](Path(run_dir), config, resume)
    except Exception as e:  # noqa: BLE001 - a tracker that cannot start (no login, say) is the user's to fix
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0].rstrip(".")
        hint = "; WANDB_MODE=offline logs without an account" if report_to == "wandb" else ""
        raise UsageError(f"--report-to {report_to} could not start: {reason}{hint}") from None
