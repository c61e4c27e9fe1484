"""``python -m ladder.run RUNG [options]`` — train one rung of the ladder.

{rungs}
    doctor         read a run's logs (ladder's or TRL's) and name the known failures: python -m ladder.doctor

Every training run writes OUT/config.json, OUT/metrics.jsonl, OUT/summary.json and OUT/curves.png
(``eval``: OUT/config.json, OUT/summary.json and OUT/completions.jsonl); ``--resume OUT`` continues an
interrupted run from its last checkpoint; Ctrl-C, SIGTERM and SIGHUP interrupt a run so that it can be
continued (exit code 128 + the signal's number: 130, 143, 129). ``RUNG --help`` lists a rung's options;
``RUNG --print-config`` prints the values a run would use, without training. The rungs are the modules of
``ladder.rungs`` that declare themselves (``ladder.rungs.registry``).
"""

from __future__ import annotations

if __name__ == "__main__":  # first, before the heavy imports below: a signal during them ends the command in one line
    from ladder.runtime.early_signals import end_quietly_until_handled

    end_quietly_until_handled()

import argparse
import contextlib
import errno
import importlib
import json
import os
import shlex
import signal
import sys
from pathlib import Path

from ladder.cli import HelpFormatter, OneLineParser, add_config_args, config_from_args, die
from ladder.patches import quiet_the_stack
from ladder.rungs import registry
from ladder.rungs.protocol import RungCode
from ladder.runtime import early_signals, signals
from ladder.runtime.distributed import is_main_process
from ladder.runtime.runlog import RunLog, RunStopped, UsageError
from ladder.specs import option_names, options_dict


def load_rung(name: str) -> RungCode:
    """The rung's module (``ladder.rungs.protocol.RungCode``); an unknown name is one line (exit 2)."""
    try:
        return registry.find(name)
    except UsageError as e:
        die(str(e))


def usage() -> str:
    """This module's doc with the rungs' list, each rung's name and summary (``Rung.summary``)."""
    rungs = "\n".join(f"    {name:14s} {module.RUNG.summary}" for name, module in registry.rungs().items())
    return __doc__.strip().format(rungs=rungs)


def build_parser(name: str, rung: RungCode, suppress_defaults: bool = False) -> argparse.ArgumentParser:
    parser = OneLineParser(prog=f"python -m ladder.run {name}", description=(rung.__doc__ or "").strip(),
                           formatter_class=HelpFormatter)
    presets = ", ".join(rung.PRESETS) or "none"
    parser.add_argument("--preset", default=None, help=f"named configuration ({presets})")
    algos = rung.ALGOS
    parser.add_argument("--print-config", action="store_true", help="check the options, print the values this run "
                        f"would use (after --preset{', --algo' if algos else ''} and your flags, with every default "
                        "that depends on other options resolved) as JSON, and exit without training")
    if algos:
        parser.add_argument("--algo", default=None, choices=tuple(algos), metavar="ALGO",
                            help=f"a method's flags as its paper sets them ({', '.join(algos)}); applied over "
                                 "--preset, and any flag you give wins")
    add_config_args(parser, rung.Config, suppress_defaults)
    return parser


def make_config(name: str, rung: RungCode, argv: list[str]):
    args = build_parser(name, rung).parse_args(argv)
    given = set(vars(build_parser(name, rung, suppress_defaults=True).parse_args(argv)))
    presets = rung.PRESETS
    if args.preset is not None and args.preset not in presets:
        raise UsageError(f"unknown preset {args.preset!r} for {name}; choose one of: {', '.join(presets) or 'none'}")
    overrides = dict(presets.get(args.preset, {}))
    overrides.update(rung.ALGOS.get(getattr(args, "algo", None), {}))
    if getattr(args, "resume", None) is not None:
        overrides = resumed_options(name, rung, args, given)
        args.out = args.resume
        given = set()  # a resumed run keeps the options it started with
    cfg = config_from_args(rung.Config, args, overrides, given)
    if cfg.out is None:  # runs/RUNG[-PRESET][-ALGO][-lora|-qlora][-exercises]-seedN: such runs do not clash
        algo, options = getattr(args, "algo", None), options_dict(cfg)
        tags = [args.preset, algo if algo != name else None,  # --algo grpo: the rung's own defaults
                "qlora" if options.get("qlora") else "lora" if "lora" in given and options.get("lora") else None,
                "exercises" if getattr(cfg, "use_exercises", False) else None]  # (a preset's LoRA: its name says)
        cfg.out = str(Path("runs") / "-".join([name, *filter(None, tags), f"seed{cfg.seed}"]))
    return cfg


RESUME_KEEPS = {"resume", "progress", "device", "out", "export_trl"}  # out: the directory resumed, even if moved


def resumed_options(name: str, rung: RungCode, args: argparse.Namespace, given: set[str]) -> dict:
    """``--resume DIR``: the options the run started with (config.json); only the bookkeeping flags may
    change. Any other flag given with a value of its own is ignored, and one line on stderr says so."""
    saved = RunLog.read_config(args.resume)
    if saved.get("rung") != name:
        raise UsageError(f"--resume {args.resume} is a '{saved.get('rung')}' run, not '{name}'; resume it with "
                         f"`python -m ladder.run {saved.get('rung')} --resume {shlex.quote(args.resume)}`")
    ignored = [option for option in sorted(given - RESUME_KEEPS) if option in saved
               and json.loads(json.dumps(getattr(args, option))) != saved[option]]
    ignored += [option for option in ("preset", "algo") if getattr(args, option, None) is not None]
    if "out" in given and args.out is not None and Path(args.out) != Path(args.resume):
        ignored.append("out")
    if ignored:
        flags = ", ".join("--" + option.replace("_", "-") for option in ignored)
        print(f"ladder: note: --resume continues with the options {args.resume} started with; ignoring {flags}",
              file=sys.stderr)
    return {name: saved[name] for name in option_names(rung.Config) if name in saved and name not in RESUME_KEEPS}


def applied(name: str, rung: RungCode, argv: list[str]) -> dict:
    """The ``--preset`` and ``--algo`` that ``make_config`` applied (none for a resumed run: it keeps the
    options it started with)."""
    args = build_parser(name, rung).parse_args(argv)
    if getattr(args, "resume", None) is not None:
        return {}
    return {"preset": args.preset, **({"algo": args.algo} if rung.ALGOS else {})}


def effective_config(name: str, rung: RungCode, cfg, argv: list[str]) -> dict:
    """What ``--print-config`` prints: the rung, the preset and ``--algo`` applied, and every option with
    the value the run will use (the rung's ``RESOLVED`` rules; a None left means "off" or "none")."""
    options = options_dict(cfg)
    for option, value_for in rung.RESOLVED.items():
        options[option] = value_for(cfg)
    return {"rung": name, **applied(name, rung, argv), **options}


def _close_progress_bars() -> None:
    """Erase any open progress bar, so an error message starts on a clean line and stays one line."""
    from ladder.patches import open_progress_bars

    for bar in open_progress_bars():
        bar.leave = False
        bar.close()


READER_GONE = (errno.EPIPE, errno.EIO)  # the reader of a pipe went away; the terminal hung up (SIGHUP)


class _PipeSafe:
    """stdout or stderr whose reader may go away (``| head -1``, a closed terminal): what is written after that is
    dropped, and the run goes on. As the Python docs' note on SIGPIPE advises, the descriptor is then pointed at
    os.devnull, so the exit-time flush finds nothing to complain about. A path whose bytes are not text (``--out
    runs/caf\\xe9``, which Python decodes with surrogateescape) is written as those bytes, as the shell gave them."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self._write(text)
        except OSError as e:
            if e.errno not in READER_GONE:
                raise
            self._to_devnull()
            return len(text)

    def _write(self, text: str) -> int:
        encoding = getattr(self.stream, "encoding", None) or "utf-8"
        try:
            text.encode(encoding)
        except UnicodeEncodeError:
            if not hasattr(self.stream, "buffer"):
                return self.stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
            self.stream.flush()  # what was written before goes first
            self.stream.buffer.write(_as_bytes(text, encoding))
            return len(text)
        return self.stream.write(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as e:
            if e.errno not in READER_GONE:
                raise
            self._to_devnull()

    def _to_devnull(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stream.fileno())
        os.close(devnull)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _as_bytes(text: str, encoding: str) -> bytes:
    """``text`` in ``encoding``: bytes decoded with surrogateescape as they were, any other character the encoding
    cannot hold as a backslash escape."""
    try:
        return text.encode(encoding, "surrogateescape")
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace")


@contextlib.contextmanager
def terminal_guards(whole_process: bool):
    """Around a command: a closed pipe on stdout or stderr costs the run nothing; SIGINT, SIGTERM and SIGHUP stop it
    as Ctrl-C does, a second one no traceback (``ladder.runtime.signals.stopping``, ``whole_process``)."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _PipeSafe(sys.stdout), _PipeSafe(sys.stderr)
    try:
        with signals.stopping(whole_process) as interrupts:
            yield interrupts
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = streams


def printable(summary: dict) -> dict:
    """What a finished run prints: the summary's numbers and strings, and those of a dict one level down under the
    dict's name (``eval_after.eval_accuracy``: the preference rungs' held-out results); lists stay in summary.json."""
    shown = {}
    for key, value in summary.items():
        if isinstance(value, dict):
            shown.update({f"{key}.{k}": v for k, v in value.items() if not isinstance(v, (list, dict))})
        elif not isinstance(value, list):
            shown[key] = value
    return shown


def main(argv: list[str] | None = None) -> int:
    whole_process = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        with terminal_guards(whole_process):
            print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    quiet_the_stack()  # a library's notes about its next release are not the learner's problem (patches)
    if name == "doctor":  # not a rung: reads a run's logs (ladder.doctor)
        from ladder.doctor.__main__ import main as doctor

        return early_signals.interruptible(lambda: doctor(rest, prog="python -m ladder.run doctor"))
    rung = load_rung(name)
    with terminal_guards(whole_process) as interrupts:
        return run_command(name, rung, rest, interrupts)


def _report_interruption(name: str, cfg, signum: int) -> int:
    """The one line an interrupted command ends with (with the command that continues the run, if there is an
    unfinished run to continue), and its exit code: 128 + the signal's number."""
    out = getattr(cfg, "out", None) if hasattr(cfg, "resume") else None
    resumable = out is not None and (Path(out) / "config.json").exists() and not (Path(out) / "summary.json").exists()
    line = early_signals.line(signum)
    if resumable:
        line += f"; continue with: python -m ladder.run {name} --resume {shlex.quote(out)}"
    print(line, file=sys.stderr)
    return 128 + signum


def learners_functions(cfg, name: str):
    """``--use-exercises``: the learner's graded functions for the run (the grader is imported only then)."""
    if not getattr(cfg, "use_exercises", False):
        return contextlib.nullcontext()
    from ladder.graders.swap import use_exercises

    return use_exercises(rung=name)


def exported(rung: RungCode, cfg) -> dict | None:
    """``--export-trl FILE`` (the rungs that declare an export): the run written as a TRL script by the rung's
    exporter (``Rung.export``, "module:function") after its cross-option rules, nothing trained; its summary.
    None: the run trains."""
    if rung.RUNG.export is None or getattr(cfg, "export_trl", None) is None:
        return None
    rung.validate(cfg)
    module, function = rung.RUNG.export.split(":")
    return getattr(importlib.import_module(module), function)(cfg, cfg.export_trl)


def run_command(name: str, rung: RungCode, rest: list[str], interrupts: signals.Interrupts | None = None) -> int:
    """One command line after its rung: bad input is exit 2, a fault during the run exit 1, an interruption
    128 + its signal (Ctrl-C 130, SIGTERM 143, SIGHUP 129)."""
    cfg = None
    try:
        cfg = make_config(name, rung, rest)
        if "--print-config" in rest:
            rung.validate(cfg)  # the rules that relate several options
            print(json.dumps(effective_config(name, rung, cfg, rest), indent=2))
            return 0
        summary = exported(rung, cfg)  # --export-trl FILE: the run as a TRL script; no run directory
        if summary is None:
            with learners_functions(cfg, name):
                summary = rung.train(cfg)  # a directory it created and must not keep, it removes itself
    except UsageError as e:
        _close_progress_bars()
        die(str(e))
    except RunStopped as e:
        _close_progress_bars()
        print(f"ladder: stopped: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        if interrupts is not None:
            interrupts.reporting = True  # from here on a Ctrl-C, SIGTERM or SIGHUP changes nothing
        _close_progress_bars()
        return _report_interruption(name, cfg, getattr(e, "signum", signal.SIGINT))
    if is_main_process():  # under accelerate launch, one report
        print(json.dumps(printable(summary), indent=2))
        if "export_trl" in summary:
            print(f"wrote {summary['export_trl']}")
        elif cfg.out is not None:
            print(f"wrote {cfg.out}/{rung.RUNG.writes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
