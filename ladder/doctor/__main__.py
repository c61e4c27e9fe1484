"""``python -m ladder.doctor RUN_DIR [--plot] [--json] [--trl-config FILE]`` — is this run healthy?

Reads a ladder run directory (config.json, metrics.jsonl) or a TRL output directory (trainer_state.json),
checks every known failure signature, and prints what it saw, what it means and what to change.
Exit code 0: healthy (harmless findings only); 1: problems found; 2: bad input (one line on stderr).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ladder.cli import OneLineParser
from ladder.doctor.report import is_healthy, json_report, plot_findings, printable, text_report
from ladder.doctor.runs import read_run
from ladder.doctor.signatures import diagnose
from ladder.errors import UsageError


def build_parser(prog: str = "python -m ladder.doctor") -> OneLineParser:
    parser = OneLineParser(prog=prog, description=" ".join(__doc__.strip().splitlines()[2:4]))
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a ladder run directory or a TRL output directory")
    parser.add_argument("--plot", action="store_true", help="write RUN_DIR/doctor.png: each finding's curve, "
                                                             "its evidence marked")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.add_argument("--trl-config", default=None, metavar="FILE",
                        help="a TRL run's GRPOConfig fields as JSON (num_iterations, loss_type, …); "
                             "trainer_state.json does not hold them")
    return parser


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
    """Exit code 0 healthy, 1 problems found, 2 bad input (one line on stderr, nothing written): a run that is not
    there or cannot be read, a --trl-config that does not hold GRPOConfig fields, a doctor.png that cannot be
    written (the plot comes before the report, so nothing is said of a run whose plot was asked for and failed)."""
    args = build_parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
    path = Path(args.run_dir) / "doctor.png"
    try:
        run = read_run(args.run_dir, args.trl_config)
        findings = diagnose(run)
        if args.plot:
            plot_findings(run, findings, path)
    except UsageError as e:
        print(f"ladder: error: {printable(str(e))}".replace("\n", "\\n"), file=sys.stderr)
        return 2
    if args.json:
        say(json.dumps(json_report(run, findings), indent=2))
    else:
        say(printable(text_report(run, findings)))
    if args.plot and not args.json:
        say(f"wrote {printable(str(path))}")
    return 0 if is_healthy(findings) else 1


if __name__ == "__main__":
    sys.exit(main())
