"""``python -m ladder.run`` many times over, without paying for its imports each time.

A tiny preset's run spends about half its seconds importing torch, transformers, peft, bitsandbytes and matplotlib.
Where one program starts many runs (the doctor's gallery, the test suite), a fork server imports them once and
forks a fresh process for each run:

    run_command(["grpo", "--preset", "tiny", "--out", "run"], cwd=".")
        ≡  python -m ladder.run grpo --preset tiny --out run      (its exit code, stdout and stderr)

Each run is a process of its own, as the command line starts one: its own exit code, working directory, environment,
standard input (empty), output and error (returned as ``subprocess.run(..., capture_output=True, text=True)``
returns them), signals and files; ``ladder.run`` runs fresh in it as ``__main__`` (``runpy``), as ``python -m``
runs it. Only the imported libraries are shared, so a variable they read when imported (``HF_HUB_OFFLINE``,
``HF_HOME``) is the fork server's: the environment of the first run's caller. Where ``os.fork`` does not exist,
``run_command`` is ``subprocess.run``.

The server is a child of the calling process, reading one request per line (JSON) on its standard input and
answering on its standard output: ``{"id", "pid"}`` when a run starts, ``{"id", "exit"}`` when it ends. It ends
when its caller does (end of file on its input).
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import queue
import runpy
import signal
import subprocess
import sys
import tempfile
import threading

# What a rung's run imports before its first step, and what the rungs import as they load a model and plot.
PRELOAD = ("torch", "transformers", "transformers.models.qwen2.modeling_qwen2",
           "transformers.models.gpt2.modeling_gpt2", "peft", "matplotlib.pyplot", "ladder.rungs", "ladder.cli",
           "ladder.options")


def _exit_status(error: BaseException | None) -> int:
    """The exit status ``python`` gives for what ended the module: SystemExit's code, else a traceback and 1."""
    if error is None:
        return 0
    if isinstance(error, SystemExit):
        if error.code is None or isinstance(error.code, int):
            return error.code or 0
        print(error.code, file=sys.stderr)
        return 1
    sys.excepthook(type(error), error, error.__traceback__)
    return 1


def _as_command_line(request: dict) -> None:
    """In the forked process: ``python -m ladder.run ARGS`` in the request's directory and environment, stdin
    empty, stdout and stderr into the request's files. Never returns."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    sys.stdin = open(0, closefd=False)  # not the server's reader, which may hold other requests
    os.dup2(os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
    os.dup2(os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    sys.path[0] = request["cwd"]  # as python -m puts it
    sys.modules.pop("ladder.run", None)  # run fresh, as python -m runs it
    error = None
    try:
        runpy.run_module("ladder.run", run_name="__main__", alter_sys=True)
    except BaseException as raised:  # noqa: BLE001 -- reported as the interpreter reports it
        error = raised
    status = _exit_status(error)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _reply(message: dict) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def _start(request: dict, ended: tuple[int, int]) -> int:
    """Fork the request's run; the child first drops the server's own signal plumbing."""
    pid = os.fork()
    if pid == 0:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh interpreter has it
        for fd in ended:
            os.close(fd)
        sys.argv = ["-m", *request["args"]]
        _as_command_line(request)
    return pid


def serve() -> None:
    """The fork server's loop: import PRELOAD, then fork a run per request and report each run's end."""
    import selectors

    from ladder.patches import quiet_the_stack

    quiet_the_stack()
    for name in PRELOAD:
        importlib.import_module(name)
    ended = os.pipe()  # SIGCHLD writes here (set_wakeup_fd), so the loop wakes when a run ends
    for fd in ended:
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(ended[1])
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C on a terminal reaches the runs, not the server
    running, pending = {}, b""
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    selector.register(ended[0], selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj != 0:
                _reap(ended[0], running)
                continue
            chunk = os.read(0, 1 << 16)
            if not chunk:  # the caller has ended
                return
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                request = json.loads(line)
                pid = _start(request, ended)
                running[pid] = request["id"]
                _reply({"id": request["id"], "pid": pid})


def _reap(wakeup_fd: int, running: dict[int, int]) -> None:
    try:
        os.read(wakeup_fd, 4096)
    except BlockingIOError:
        pass
    while running:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        _reply({"id": running.pop(pid), "exit": os.waitstatus_to_exitcode(status)})


class ServerEnded(RuntimeError):
    """The fork server ended (or never started) before the run did."""


class _Server:
    """The calling side: the server process, and one queue of replies per run asked for."""

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, "-c", "from ladder.runtime.warm_start import serve; serve()"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True)
        self.ids = itertools.count()
        self.waiting: dict[int, queue.Queue] = {}
        self.lock = threading.Lock()
        self.ended = False
        self.started_runs = 0
        threading.Thread(target=self._read_replies, daemon=True).start()

    def _read_replies(self) -> None:
        for line in self.process.stdout:
            message = json.loads(line)
            with self.lock:
                replies = self.waiting.pop(message["id"]) if "exit" in message else self.waiting[message["id"]]
            replies.put(message)
        with self.lock:
            self.ended = True
            for replies in self.waiting.values():
                replies.put(None)

    def ask(self, request: dict) -> queue.Queue:
        """Send one run's request; its queue receives {"pid"}, then {"exit"} (None for each if the server ends)."""
        with self.lock:
            if self.ended:
                raise ServerEnded
            rid = next(self.ids)
            replies = self.waiting[rid] = queue.Queue()
            try:
                self.process.stdin.write(json.dumps({**request, "id": rid}) + "\n")
                self.process.stdin.flush()
            except OSError:  # it ended before its reader saw it
                self.ended = True
                raise ServerEnded from None
        return replies


_servers: list[_Server] = []
_servers_lock = threading.Lock()
_fallback = threading.Event()  # set once a server has ended before its first run: plain subprocesses from then on


def _server() -> _Server:
    """This process's fork server, started at the first run (again if it has ended)."""
    with _servers_lock:
        if not _servers or _servers[-1].ended or _servers[-1].process.poll() is not None:
            _servers.append(_Server())
        return _servers[-1]


def _wait(server: _Server, replies: queue.Queue, args: list[str], timeout: float | None) -> int:
    """The run's exit code; past ``timeout`` seconds it is killed and TimeoutExpired raised."""
    started = replies.get()
    if started is None:
        raise ServerEnded
    server.started_runs += 1
    try:
        ended = replies.get(timeout=timeout)
    except queue.Empty:
        os.kill(started["pid"], signal.SIGKILL)
        replies.get()
        raise subprocess.TimeoutExpired(["python", "-m", "ladder.run", *args], timeout) from None
    if ended is None:
        raise RuntimeError("the fork server ended during the run")
    return ended["exit"]


def run_command(args: list, cwd: str | os.PathLike | None = None, env: dict[str, str] | None = None,
                timeout: float | None = None) -> subprocess.CompletedProcess:
    """``python -m ladder.run ARGS`` in ``cwd`` with ``env`` (default: this process's), forked from the fork
    server: its exit code (−N for a signal N, as ``subprocess``), stdout and stderr. Past ``timeout`` seconds it
    is killed and ``subprocess.TimeoutExpired`` raised. Without ``os.fork``, or where the server cannot start,
    it is ``subprocess.run``."""
    args = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    if not hasattr(os, "fork") or _fallback.is_set():
        return subprocess.run([sys.executable, "-m", "ladder.run", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)
    with tempfile.TemporaryDirectory(prefix="ladder-run-") as scratch:
        out, err = os.path.join(scratch, "stdout"), os.path.join(scratch, "stderr")
        request = {"args": args, "cwd": os.path.abspath(cwd or os.getcwd()), "env": env, "out": out, "err": err}
        server = _server()
        try:
            code = _wait(server, server.ask(request), args, timeout)
        except ServerEnded:  # one that ran before was stopped: start another; one that never ran: not again
            if not server.started_runs:
                _fallback.set()
            return run_command(args, cwd, env, timeout)
        with open(out, errors="replace") as o, open(err, errors="replace") as e:
            return subprocess.CompletedProcess(["python", "-m", "ladder.run", *args], code, o.read(), e.read())
