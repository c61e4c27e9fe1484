"""``python -m ladder.run RUNG [options]`` — train one rung of the ladder.

    reinforce      REINFORCE on CartPole (returns-to-go, optional baseline)
    cartpole       PPO on CartPole (actor-critic, vector envs, GAE)
    ppo-sentiment  RLHF-PPO: a causal LM continues movie reviews positively (KL-shaped rewards, value head)
    grpo           GRPO on math problems (group-relative advantages, rule rewards; --qlora)
    agent          GRPO on multi-turn tool use: the environment's replies are context, not actions
    eval           greedy accuracy of a model (and adapter) on the fixed held-out problems
    doctor         read a run's logs (ladder's or TRL's) and name the known failures: python -m ladder.doctor

Every training run writes OUT/config.json, OUT/metrics.jsonl, OUT/summary.json and OUT/curves.png
(``eval``: OUT/config.json, OUT/summary.json and OUT/completions.jsonl); ``--resume OUT`` continues an
interrupted run from its last checkpoint. ``RUNG --help`` lists a rung's options;
``RUNG --print-config`` prints the values a run would use, without training.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shlex
import signal
import sys
import threading
import time
from dataclasses import asdict, fields
from pathlib import Path

from ladder.cli import HelpFormatter, OneLineParser, add_config_args, config_from_args, die
from ladder.distributed import is_main_process
from ladder.rungs.protocol import Rung
from ladder.runlog import RunLog, RunStopped, UsageError

RUNGS = {
    "reinforce": "ladder.rungs.reinforce",
    "cartpole": "ladder.rungs.cartpole",
    "grpo": "ladder.rungs.grpo",
    "eval": "ladder.rungs.lm_eval",
    "ppo-sentiment": "ladder.rungs.ppo_sentiment",
    "agent": "ladder.rungs.agent",
}


def load_rung(name: str) -> Rung:
    """The rung's module: it declares every member of ``ladder.rungs.protocol.Rung``."""
    if name not in RUNGS:
        die(f"unknown rung {name!r}; choose one of: {', '.join(RUNGS)}")
    return importlib.import_module(RUNGS[name])


def build_parser(name: str, rung: Rung, suppress_defaults: bool = False) -> argparse.ArgumentParser:
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


def make_config(name: str, rung: Rung, argv: list[str]):
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
        algo = getattr(args, "algo", None)
        tags = [args.preset, algo if algo != name else None,  # --algo grpo: the rung's own defaults
                "qlora" if getattr(cfg, "qlora", False) else "lora" if "lora" in given and cfg.lora else None,
                "exercises" if getattr(cfg, "use_exercises", False) else None]  # (a preset's LoRA: its name says)
        cfg.out = str(Path("runs") / "-".join([name, *filter(None, tags), f"seed{cfg.seed}"]))
    return cfg


RESUME_KEEPS = {"resume", "progress", "device", "out", "export_trl"}  # out: the directory resumed, even if moved


def resumed_options(name: str, rung: Rung, args: argparse.Namespace, given: set[str]) -> dict:
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
    return {f.name: saved[f.name] for f in fields(rung.Config) if f.name in saved and f.name not in RESUME_KEEPS}


def applied(name: str, rung: Rung, argv: list[str]) -> dict:
    """The ``--preset`` and ``--algo`` that ``make_config`` applied (none for a resumed run: it keeps the
    options it started with)."""
    args = build_parser(name, rung).parse_args(argv)
    if getattr(args, "resume", None) is not None:
        return {}
    return {"preset": args.preset, **({"algo": args.algo} if rung.ALGOS else {})}


def effective_config(name: str, rung: Rung, cfg, argv: list[str]) -> dict:
    """What ``--print-config`` prints: the rung, the preset and ``--algo`` applied, and every option with
    the value the run will use (the rung's ``RESOLVED`` rules; a None left means "off" or "none")."""
    options = asdict(cfg)
    for option, value_for in rung.RESOLVED.items():
        options[option] = value_for(cfg)
    return {"rung": name, **applied(name, rung, argv), **options}


def _close_progress_bars() -> None:
    """Erase any open progress bar, so an error message starts on a clean line and stays one line."""
    from ladder.patches import open_progress_bars

    for bar in open_progress_bars():
        bar.leave = False
        bar.close()


class _PipeSafe:
    """stdout or stderr whose reader may go away (``| head -1``): what is written after that is dropped, and
    the run goes on. As the Python docs' note on SIGPIPE advises, the descriptor is then pointed at
    os.devnull, so the exit-time flush finds nothing to complain about."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def _to_devnull(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stream.fileno())
        os.close(devnull)

    def __getattr__(self, name):
        return getattr(self.stream, name)


class CtrlC:
    """The SIGINT handler around a command. A Ctrl-C stops the run (``KeyboardInterrupt``); another within
    ``burst_s`` of it, or any once the command reports the interruption (``reporting``), is ignored, so the
    shutdown it started runs to its end. A later one stops the run again: a library that swallowed the first
    (an exception raised in a ``__del__`` is only printed) cannot leave a run that no Ctrl-C stops."""

    burst_s = 1.0

    def __init__(self):
        self.last, self.reporting = None, False

    def __call__(self, signum, frame):
        now = time.monotonic()
        if self.reporting or (self.last is not None and now - self.last < self.burst_s):
            return
        self.last = now
        raise KeyboardInterrupt


@contextlib.contextmanager
def terminal_guards(whole_process: bool):
    """Around a command: a closed pipe on stdout or stderr costs the run nothing, a second Ctrl-C no traceback.
    ``whole_process`` (the command line itself): after a Ctrl-C, Ctrl-C stays ignored until the process ends."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _PipeSafe(sys.stdout), _PipeSafe(sys.stderr)
    previous, ctrl_c = None, CtrlC()
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        previous = signal.signal(signal.SIGINT, ctrl_c)
    try:
        yield ctrl_c
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = streams
        if previous is not None and not (ctrl_c.reporting and whole_process):
            signal.signal(signal.SIGINT, previous)


def main(argv: list[str] | None = None) -> int:
    whole_process = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name == "doctor":  # not a rung: reads a run's logs (ladder.doctor)
        from ladder.doctor.__main__ import main as doctor

        return doctor(rest, prog="python -m ladder.run doctor")
    rung = load_rung(name)
    with terminal_guards(whole_process) as ctrl_c:
        return run_command(name, rung, rest, ctrl_c)


def learners_functions(cfg, name: str):
    """``--use-exercises``: the learner's graded functions for the run (the grader is imported only then)."""
    if not getattr(cfg, "use_exercises", False):
        return contextlib.nullcontext()
    from ladder.exercises.swap import use_exercises

    return use_exercises(rung=name)


def run_command(name: str, rung: Rung, rest: list[str], ctrl_c: CtrlC | None = None) -> int:
    """One command line after its rung: bad input is exit 2, a fault during the run exit 1, Ctrl-C 130."""
    cfg = None
    try:
        cfg = make_config(name, rung, rest)
        if "--print-config" in rest:
            rung.validate(cfg)  # the rules that relate several options
            print(json.dumps(effective_config(name, rung, cfg, rest), indent=2))
            return 0
        summary = rung.export(cfg)  # grpo --export-trl FILE: the run as a TRL script; no run directory
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
    except KeyboardInterrupt:
        if ctrl_c is not None:
            ctrl_c.reporting = True  # from here on a Ctrl-C changes nothing
        _close_progress_bars()
        resumable = cfg is not None and hasattr(cfg, "resume") and (Path(cfg.out) / "config.json").exists()
        print("\ninterrupted" + (f"; continue with: python -m ladder.run {name} --resume {shlex.quote(cfg.out)}"
                                 if resumable else ""), file=sys.stderr)
        return 130
    if is_main_process():  # under accelerate launch, one report
        print(json.dumps({k: v for k, v in summary.items() if not isinstance(v, (list, dict))}, indent=2))
        if "export_trl" in summary:
            print(f"wrote {summary['export_trl']}")
        elif cfg.out is not None:
            print(f"wrote {cfg.out}/{rung.WRITES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
