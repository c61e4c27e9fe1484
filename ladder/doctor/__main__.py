"""``python -m ladder.doctor RUN [RUN ...] [--plot] [--plot-to PATH] [--json] [--trl-config FILE]`` — is this run
healthy, and what changed between this run and that one?

Reads a ladder run directory (config.json, metrics.jsonl) or a TRL output directory (trainer_state.json),
checks every known failure signature, and prints what it saw, what it means and what to change; --plot draws the
run's vital signs, or several runs' overlaid. Exit code 0: healthy; 1: problems found; 2: bad input.
"""

from __future__ import annotations

if __name__ == "__main__":  # first, before the heavy imports below: a signal during them ends the command in one line
    from ladder.runtime.early_signals import end_quietly_until_handled

    end_quietly_until_handled()

import json
import os
import sys
from pathlib import Path

from ladder.cli import OneLineParser
from ladder.doctor.chart_parts import write_figure
from ladder.doctor.report import is_healthy, json_report, plot_findings, printable, text_report
from ladder.doctor.runs import read_run
from ladder.doctor.signatures import diagnose
from ladder.patches import quiet_the_stack
from ladder.runtime.early_signals import interruptible
from ladder.runtime.errors import UsageError


def build_parser(prog: str = "python -m ladder.doctor") -> OneLineParser:
    parser = OneLineParser(prog=prog, description=" ".join(__doc__.strip().splitlines()[3:6]))
    parser.add_argument("run_dirs", nargs="+", metavar="RUN",
                        help="a ladder run directory or a TRL output directory; several: compared on one figure")
    parser.add_argument("--plot", action="store_true",
                        help="write the vital signs of the run(s), thresholds drawn and findings marked: one run "
                             "to RUN/doctor.png, several overlaid to FIRST_RUN/doctor-compare.png")
    parser.add_argument("--plot-to", default=None, metavar="PATH",
                        help="write that figure to PATH instead (implies --plot)")
    parser.add_argument("--json", action="store_true",
                        help="print the verdict as JSON (several runs: a list of verdicts)")
    parser.add_argument("--trl-config", default=None, metavar="FILE",
                        help="a TRL run's GRPOConfig fields as JSON (num_iterations, loss_type, …); "
                             "trainer_state.json does not hold them (several runs: read for each TRL run)")
    return parser


def figure_path(args) -> Path:
    """--plot-to PATH, else RUN/doctor.png for one run, FIRST_RUN/doctor-compare.png for several."""
    if args.plot_to is not None:
        return Path(args.plot_to)
    return Path(args.run_dirs[0]) / ("doctor.png" if len(args.run_dirs) == 1 else "doctor-compare.png")


def plot(runs: list, findings: list, path: Path) -> None:
    """One run's doctor.png, or several runs compared on one figure."""
    if len(runs) == 1:
        plot_findings(runs[0], findings[0], path)
        return
    from ladder.doctor.compare import compare_figure

    write_figure(compare_figure(runs, findings), path)


def say(text: str) -> None:
    """Print; a reader that went away (``| head -1``) costs nothing: as the Python docs' note on SIGPIPE
    advises, stdout is then pointed at os.devnull, so the exit-time flush finds nothing to complain about."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: list[str] | None = None, prog: str = "python -m ladder.doctor") -> int:
    """Exit code 0 every run healthy, 1 problems found in any, 2 bad input (one line on stderr, nothing written): a
    run that is not there or cannot be read, a --trl-config that does not hold GRPOConfig fields, a figure that
    cannot be written (the plot comes before the report, so nothing is said of runs whose plot failed)."""
    quiet_the_stack()
    args = build_parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
    plotting = args.plot or args.plot_to is not None
    path = figure_path(args)
    try:
        runs = [read_run(run_dir, args.trl_config) for run_dir in args.run_dirs]
        findings = [diagnose(run) for run in runs]
        if plotting:
            plot(runs, findings, path)
    except UsageError as e:
        print(f"ladder: error: {printable(str(e))}".replace("\n", "\\n"), file=sys.stderr)
        return 2
    verdicts = [json_report(run, found) for run, found in zip(runs, findings)]
    if args.json:
        say(json.dumps(verdicts[0] if len(runs) == 1 else verdicts, indent=2))
    else:
        say(printable("\n\n".join(text_report(run, found) for run, found in zip(runs, findings))))
    if plotting and not args.json:
        say(f"wrote {printable(str(path))}")
    return 0 if all(is_healthy(found) for found in findings) else 1


if __name__ == "__main__":
    sys.exit(interruptible(main))
