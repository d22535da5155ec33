"""Warm interpreters: a Python code grader or converter run in a child forked from a server already started.

Starting an interpreter is most of what a short grader costs (about 45 ms against 4 ms for the grading
itself); a regrade runs hundreds. So for a command that is a Python interpreter and a script
(:func:`python_command`: ``python3 x.py ARGS``, ``/venv/bin/python x.py``, ``uv run x.py``, ``uv run python
x.py``), a :class:`WarmPool` keeps one server per distinct interpreter, started *by that command's own
interpreter* (``python3 -c SERVER``, ``uv run python -c SERVER``), so ``sys.executable``, ``sys.path``, the
site-packages and the venv are the grader's. Each call is a child forked from it (``warm_server.py``) that
gets what a spawned process gets: argv, cwd, environment, stdin/stdout/stderr as descriptors, a process
group of its own (the timeout and Ctrl-C kill it as :mod:`children` kills a spawned one), the exit status,
and a fresh ``__main__``. :func:`children.run_child` supervises it exactly as a spawned child, so the
output cap, the stderr tail and the caller's secret masking are the same code.

What keys a server: the launcher argv, the variables an interpreter reads when it starts
(:data:`STARTUP_VARIABLES`: ``PATH``, ``HOME``, ``PYTHON*``, ``UV_*``, ``VIRTUAL_ENV``, locale, ``TZ``) and,
for ``uv``, which finds its project from there, the cwd. Everything else of a call's environment is set
in its child. What its launcher or interpreter changed in the server's environment (a pyenv shim's
``PATH``, ``uv run``'s ``VIRTUAL_ENV``, a coerced locale) is changed the same way in every call's.

Not warm, spawned as before: anything else (``bun``, ``sh -c``, interpreter flags such as ``python -u``,
``-m``, a script that is not a file, a ``uv run`` script with inline ``# /// script`` metadata, which uv
gives an environment of its own), a grader with ``warm: false``, ``--no-warm``, a platform without
``fork`` and ``pidfd_open`` (Linux only), and an interpreter whose server does not start (too old, broken):
those calls spawn, and the pool does not try that server again.

Differences a script could see, none of which a grader relies on: its parent process is the server; the
modules the server imported (``json``, ``socket``, ``select``, ``struct``, and ``evalstore.grader`` when
the interpreter has it) are already in ``sys.modules`` (one its own folder shadows is dropped first); and
every child of one server shares the server's hash seed (``random`` reseeds after a fork by itself).
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

SERVER_SOURCE = (Path(__file__).parent / "warm_server.py").read_text(encoding="utf-8")

STARTUP_VARIABLES = re.compile(
    r"^(PATH|HOME|VIRTUAL_ENV|LANG|LANGUAGE|TZ|PYTHON.*|UV_.*|PYENV.*|CONDA.*|LC_.*|XDG_.*)$"
)
"""The environment variables an interpreter (or ``uv``, or a pyenv shim) reads when it starts: calls that
differ in one of them get servers of their own."""

_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_INLINE_METADATA = re.compile(rb"^# /// script\s*$", re.MULTILINE)
_ZIP_MAGIC = b"PK\x03\x04"


def available() -> bool:
    """Whether this platform can run warm children (``fork`` and ``pidfd_open``: Linux)."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and hasattr(socket, "SCM_RIGHTS")


@dataclass(frozen=True)
class PythonCommand:
    """A command that is a Python interpreter running a script."""

    launcher: tuple[str, ...]
    """What starts the interpreter: ``("python3",)``, ``("uv", "run", "python")``."""
    script: str
    """The script as the command names it (relative to the cwd, or absolute)."""
    args: tuple[str, ...]
    uv: bool
    """Started through ``uv run``, which finds its project (and so the interpreter) from the cwd."""


def python_command(argv: list[str], cwd: str) -> PythonCommand | None:
    """``argv`` as an interpreter and a script, or None when it is anything else (then it is spawned)."""
    if len(argv) < 2:
        return None
    name = os.path.basename(argv[0])
    launcher: tuple[str, ...]
    if _PYTHON.match(name):
        launcher, rest, uv = (argv[0],), argv[1:], False
    elif name == "uv" and len(argv) >= 3 and argv[1] == "run":
        if _PYTHON.match(argv[2]):
            launcher, rest = (argv[0], "run", argv[2]), argv[3:]
        else:
            launcher, rest = (argv[0], "run", "python"), argv[2:]
            if not rest[0].endswith(".py"):
                return None  # uv runs other things too (a tool, a console script)
        uv = True
    else:
        return None
    if not rest or rest[0].startswith("-"):
        return None  # interpreter flags (-u, -m, -c, -I) change how it starts: spawned
    script = rest[0]
    try:
        path = Path(cwd, script)
        if not path.is_file():
            return None  # let the spawned interpreter say why it cannot open it
        with path.open("rb") as f:
            head = f.read(65_536)
    except OSError:
        return None
    if head.startswith(_ZIP_MAGIC):
        return None  # a zipapp: the interpreter runs its __main__.py
    if uv and _INLINE_METADATA.search(head):
        return None  # uv gives a script with inline metadata an environment of its own
    return PythonCommand(launcher=launcher, script=script, args=tuple(rest[1:]), uv=uv)


class WarmProcess:
    """A call's child, as :func:`children._supervise` sees a ``Popen``: its pid (and process group), the
    parent's ends of its three pipes, and its exit status, which the server sends when it has reaped it."""

    def __init__(self, pid: int, call: socket.socket, pending: bytes, stdin: int, stdout: int, stderr: int) -> None:
        self.pid = pid
        self._call = call
        self._pending = pending
        self.returncode: int | None = None
        self.lost = False
        """The server ended before it sent the exit status (the status is then unknown)."""
        self.stdin: IO[bytes] = os.fdopen(stdin, "wb", buffering=0)
        self.stdout: IO[bytes] = os.fdopen(stdout, "rb", buffering=0)
        self.stderr: IO[bytes] = os.fdopen(stderr, "rb", buffering=0)
        self._take_lines()  # the status may have come with the pid

    def exit_fd(self) -> int | None:
        """A descriptor that becomes readable when the exit status arrives (the caller closes it); None
        when it has arrived already (with the pid: the child was that quick)."""
        if self.returncode is not None or self._call.fileno() < 0:
            return None
        return os.dup(self._call.fileno())

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._call], [], [], 0)[0]:
            self._receive()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._call], [], [], wait)[0]:
                raise subprocess.TimeoutExpired("warm child", timeout or 0.0)
            self._receive()
        return self.returncode

    def _receive(self) -> None:
        try:
            chunk = self._call.recv(4096)
        except OSError:
            chunk = b""
        if not chunk:
            self.lost = True
            self.returncode = -signal.SIGKILL
            self._close_call()
            return
        self._pending += chunk
        self._take_lines()

    def _take_lines(self) -> None:
        while b"\n" in self._pending:
            line, _, self._pending = self._pending.partition(b"\n")
            message = json.loads(line)
            if "status" in message:
                self.returncode = os.waitstatus_to_exitcode(message["status"])
                self._close_call()

    def _close_call(self) -> None:
        with contextlib.suppress(OSError):
            self._call.close()


class _Server:
    """One interpreter's server: started from the command's own launcher, forking a child per call."""

    def __init__(self, command: PythonCommand, cwd: str, env: dict[str, str], timeout: float) -> None:
        self.launcher = command.launcher
        ours, theirs = socket.socketpair()
        self._ctrl = ours
        self._lock = threading.Lock()
        try:
            # Its stdio are pipes, as a grader's are: the streams sys.stdin/stdout/stderr it builds (and
            # every child inherits) are made for pipes (not seekable, block-buffered).
            self._proc = subprocess.Popen(
                [*command.launcher, "-c", SERVER_SOURCE, str(theirs.fileno())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # the terminal's Ctrl-C is evalstore's to handle
            )
        finally:
            theirs.close()
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        hello, _ = _read_line(ours, time.monotonic() + timeout)
        if hello is None:
            self.close()
            raise OSError(f"the warm interpreter {' '.join(command.launcher)} did not start")
        environ: dict[str, str] = json.loads(hello)["environ"]
        self.orig_argv0: str = json.loads(hello).get("orig_argv0") or command.launcher[-1]
        # What the launcher (uv run, a pyenv shim) or the interpreter changed: changed in every call's too.
        self._changed = {k: v for k, v in environ.items() if env.get(k) != v}
        self._removed = [k for k in env if k not in environ]
        self.said = (b"", b"")
        if command.uv:
            try:
                self.said = _launcher_says(command, cwd, env, timeout)
            except OSError:
                self.close()
                raise

    def start(
        self, command: PythonCommand, argv: list[str], cwd: str, env: dict[str, str], timeout: float
    ) -> WarmProcess:
        """Fork a child for one call; OSError when the server cannot (it is then dropped by the pool)."""
        child_env = dict(env)
        child_env.update(self._changed)
        for name in self._removed:
            child_env.pop(name, None)
        request = json.dumps(
            {
                "script": command.script,
                "argv": [command.script, *command.args],
                "orig_argv": [self.orig_argv0, command.script, *command.args],
                "cwd": cwd,
                "env": child_env,
            }
        ).encode("utf-8")
        call, call_theirs = socket.socketpair()
        pipes = [os.pipe() for _ in range(3)]
        for (_, write_end), said in zip(pipes[1:], self.said):
            if said:  # what the launcher says at every start comes first, as it would
                os.write(write_end, said)
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1], call_theirs.fileno()]
        ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
        try:
            with self._lock:
                self._ctrl.sendmsg(
                    [struct.pack(">I", len(request))],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", theirs))],
                )
                self._ctrl.sendall(request)
        except OSError:
            for fd in ours:
                os.close(fd)
            call.close()
            raise
        finally:
            for fd in theirs[:3]:
                os.close(fd)
            call_theirs.close()
        line, rest = _read_line(call, time.monotonic() + max(timeout, 5.0))
        reply = json.loads(line) if line else {"error": "the warm interpreter ended"}
        if "pid" not in reply:
            for fd in ours:
                os.close(fd)
            call.close()
            raise OSError(reply.get("error", "no reply from the warm interpreter"))
        return WarmProcess(int(reply["pid"]), call, rest, *ours)

    def alive(self) -> bool:
        return self._proc.poll() is None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._ctrl.close()  # the server ends when its socket closes
        try:
            self._proc.wait(5.0)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        for pipe in (self._proc.stdout, self._proc.stderr):
            if pipe is not None:
                pipe.close()


class WarmPool:
    """The warm servers of one run, replay or assert: started on first use, closed with the pool."""

    def __init__(self) -> None:
        self._servers: dict[tuple[Any, ...], _Server | None] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.forked = 0
        """Calls run in a forked child (the others were spawned)."""

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, argv: list[str], cwd: str | None, env: dict[str, str], timeout: float) -> WarmProcess | None:
        """A warm child running ``argv`` (already checked by :func:`python_command`), or None: spawn it."""
        if self._closed or not available():
            return None
        folder = os.path.abspath(cwd or os.getcwd())  # the server and its children have cwds of their own
        if not os.path.isdir(folder):
            return None  # the spawn names the error
        command = python_command(argv, folder)
        if command is None:
            return None
        startup = tuple(sorted((k, v) for k, v in env.items() if STARTUP_VARIABLES.match(k)))
        key = (command.launcher, folder if command.uv else None, startup)
        server = self._server(key, command, folder, env, timeout)
        if server is None:
            return None
        try:
            child = server.start(command, argv, folder, env, timeout)
        except (OSError, ValueError):
            with self._lock:  # it died (or was killed): the next call starts another
                if self._servers.get(key) is server:
                    del self._servers[key]
            server.close()
            return None
        with self._lock:
            self.forked += 1
        return child

    def _server(
        self, key: tuple[Any, ...], command: PythonCommand, cwd: str, env: dict[str, str], timeout: float
    ) -> _Server | None:
        with self._lock:
            if key in self._servers:
                server = self._servers[key]
                if server is None or server.alive():
                    return server
            try:
                server = _Server(command, cwd, env, timeout)
            except (OSError, ValueError):
                server = None  # this interpreter cannot serve (too old, broken, not found): its calls spawn
            self._servers[key] = server
            return server

    def close(self) -> None:
        with self._lock:
            self._closed = True
            servers = [s for s in self._servers.values() if s is not None]
            self._servers.clear()
        for server in servers:
            server.close()


_MAX_SAID = 16_384
"""At most this much of what a launcher prints at each start is replayed (a pipe holds 64 KiB unread)."""


def _launcher_says(command: PythonCommand, cwd: str, env: dict[str, str], timeout: float) -> tuple[bytes, bytes]:
    """What the launcher prints on stdout and stderr at every start, before the script runs: ``uv run``
    warns at each start that an active venv is not the project's, for instance. Learned by starting it
    once more with nothing to run, after the server's own start did whatever syncing uv does once;
    every warm child then prints it first, as a spawned ``uv run`` would. OSError when that start fails
    or says too much: the calls are spawned."""
    try:
        probe = subprocess.run(
            [*command.launcher, "-c", ""],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            cwd=cwd,
            env=env,
            timeout=timeout,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as exc:
        raise OSError(f"{' '.join(command.launcher)} did not start within {timeout:g} s") from exc
    if probe.returncode != 0 or len(probe.stdout) + len(probe.stderr) > _MAX_SAID:
        raise OSError(f"{' '.join(command.launcher)} cannot be kept warm")
    return probe.stdout, probe.stderr


def _read_line(sock: socket.socket, deadline: float) -> tuple[bytes | None, bytes]:
    """(one line from ``sock`` by ``deadline``, what came after it); (None, b"") when it closed first or
    was too late."""
    data = b""
    while b"\n" not in data:
        wait = deadline - time.monotonic()
        if wait <= 0 or not select.select([sock], [], [], wait)[0]:
            return None, b""
        try:
            chunk = sock.recv(65_536)
        except OSError:
            return None, b""
        if not chunk:
            return None, b""
        data += chunk
    line, _, rest = data.partition(b"\n")
    return line, rest
