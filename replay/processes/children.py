"""Running a child process the way agents, converters and code graders need it.

One place for the rules: argv only (never a shell), stdin bytes written by a thread so a child that
does not read cannot block us, a wall-clock timeout, an output cap, and the whole process group
killed when either limit is hit -- a converter that forks ``sleep 1000`` must not outlive the grade.

And one place for what a child sees and what is kept of what it says (issue 29 item 5):
:func:`child_environment` is the environment every child gets (AgentV passes its whole environment; so
do we, less evalstore's own settings and the variables only a judge's target references, which are
withheld unless the agent's own target names them, see :func:`withholding`), and every child's stdout
and stderr pass :func:`~evalstore.replay.targetsfile.redaction.environment_mask` before anyone can
store them: the value of every secret-looking variable and every URL password, as written and as JSON
escapes it.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO

from evalstore.replay.processes import lifetime
from evalstore.replay.processes.warm import WarmPool, WarmProcess

STDERR_TAIL_BYTES = 64_000
"""How much of a child's stderr is kept (the end: that is where the error usually is)."""

_CHUNK = 65_536
_REAP_GRACE = 1.0
"""Seconds to wait for pipes to close after the child exits, before leftover group members are killed."""


class Cancelled(BaseException):
    """The child was killed by :func:`cancel_children` (the user pressed Ctrl-C).

    A BaseException, like KeyboardInterrupt: the work it interrupts must not be recorded as a failure of
    the agent or the grader (``except Exception`` in a grader must not turn it into a verdict), so a
    resumed run does it again.
    """


_Process = subprocess.Popen[bytes] | WarmProcess
_live: dict[int, _Process] = {}
_cancelled: set[int] = set()
_live_lock = threading.Lock()
_stopping = False
"""Set by :func:`cancel_children`: no new child starts (a grader waiting for a process slot, the next
grader of a test) until :func:`allow_children`."""


def cancel_children() -> None:
    """Kill the process group of every child :func:`run_child` is waiting on, and start no new one; each
    of those calls then raises :class:`Cancelled`. Agents and graders run in their own process groups, so
    the terminal's Ctrl-C never reaches them: without this, an interrupted run would wait for them to
    finish, and for those that had not started yet."""
    global _stopping
    with _live_lock:
        _stopping = True
        procs = list(_live.values())
        _cancelled.update(_live)
    for proc in procs:
        _kill_group(proc)


def allow_children() -> None:
    """Children may start again: a new run or replay after an interrupted one, in the same process."""
    global _stopping
    with _live_lock:
        _stopping = False


@dataclass
class ChildResult:
    argv: list[str]
    exit_code: int | None
    """None when the child never ran or was killed for a limit."""
    stdout: bytes
    stderr: bytes
    """The tail of stderr (at most ``STDERR_TAIL_BYTES``)."""
    duration_ms: float
    timed_out: bool = False
    output_exceeded: bool = False
    spawn_error: str | None = None
    """Why the child could not be started (command not found, not executable, bad cwd)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.output_exceeded or self.spawn_error)

    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")


OWN_SETTINGS_PREFIX = "EVALSTORE_"

_withheld: frozenset[str] = frozenset()
_withheld_lock = threading.Lock()
_holds: list[frozenset[str]] = []


def withhold(names: Iterable[str]) -> Callable[[], None]:
    """From now until the returned function is called: ``names`` are kept from every child process (the
    variables only a run's or replay's judges' targets reference, less those the agent's own target
    names). Process wide, since graders start on worker threads; several at once add up."""
    held = frozenset(names)
    with _withheld_lock:
        _holds.append(held)
        _refresh()

    def release() -> None:
        with _withheld_lock:
            if held in _holds:
                _holds.remove(held)
                _refresh()

    return release


@contextlib.contextmanager
def withholding(names: Iterable[str]) -> Iterator[None]:
    """:func:`withhold` for the length of a ``with`` block."""
    release = withhold(names)
    try:
        yield
    finally:
        release()


def _refresh() -> None:
    global _withheld
    _withheld = frozenset().union(*_holds)


def child_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a child process gets (the one rule, for agents, graders, converters and hooks):
    ``env`` (else this process's) as AgentV passes it, without evalstore's own settings (``EVALSTORE_*``:
    not the child's business, the store URL may carry a password, and a code grader's reuse key would
    change with where the store is named) and without the variables :func:`withhold` names."""
    source = os.environ if env is None else env
    hidden = _withheld
    return {k: v for k, v in source.items() if not k.startswith(OWN_SETTINGS_PREFIX) and k not in hidden}


def _in_folder(environment: dict[str, str], cwd: str | None) -> dict[str, str]:
    """``environment`` with ``PWD`` naming the folder the child starts in, as a shell's ``cd`` leaves it
    (POSIX: the current working directory): the parent's own would name wherever the user happened to
    be, which a grader could read and a code grader's reuse key would then have to hold (a replay
    started from another folder would run every grader again). Left out when the parent has none."""
    if "PWD" in environment:
        environment["PWD"] = os.path.abspath(cwd) if cwd else os.getcwd()
    return environment


def run_child(
    argv: list[str],
    stdin: bytes,
    *,
    timeout: float,
    max_output_bytes: int | None = None,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    die_with_parent: bool = False,
    warm: WarmPool | None = None,
) -> ChildResult:
    """Run ``argv`` with ``stdin``; never raises for anything the child does (only :class:`Cancelled`).

    ``die_with_parent`` (agents: long-lived, and working in a folder a resume reuses): the child and
    its process group are killed if this process dies, even by SIGKILL, and the child inherits the
    descriptor of every held workspace lock (``processes.lifetime``). It costs a few milliseconds per
    start, which short-lived graders and converters, bounded by their timeouts, are spared.

    ``warm``: a Python interpreter running a script is forked from that interpreter's warm server
    (:mod:`processes.warm`) instead of started, with the same environment, process group and supervision;
    anything else, or a server that cannot serve, is spawned."""
    started = time.monotonic()
    if _stopping:
        raise Cancelled(f"{argv[0]} was not started: the run was interrupted")
    environment = _in_folder(child_environment(env), cwd)
    tag = lifetime.call_tag() if die_with_parent else {}
    environment.update(tag)
    proc: _Process | None = None
    if warm is not None and not die_with_parent:
        proc = warm.start(list(argv), cwd, environment, timeout)
    try:
        if proc is None:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=environment,
                start_new_session=True,  # its own process group, so killpg reaches grandchildren
                preexec_fn=lifetime.die_with_parent if die_with_parent else None,
                pass_fds=lifetime.held_fds() if die_with_parent else (),
            )
    except OSError as exc:
        return ChildResult(
            argv=list(argv),
            exit_code=None,
            stdout=b"",
            stderr=b"",
            duration_ms=_elapsed_ms(started),
            spawn_error=f"cannot start {argv[0]!r}: {exc.strerror or exc}",
        )

    with _live_lock:
        _live[proc.pid] = proc
        if _stopping:  # cancel_children ran while it started: it did not see this one
            _cancelled.add(proc.pid)
            _kill_group(proc)
    try:
        with lifetime.guard_group(proc.pid) if die_with_parent else contextlib.nullcontext():
            result = _supervise(proc, argv, stdin, started, timeout, max_output_bytes)
    finally:
        if tag:  # an agent's process that left its group ends with the call too
            lifetime.kill_tagged(tag)
        with _live_lock:
            del _live[proc.pid]
            cancelled = proc.pid in _cancelled
            _cancelled.discard(proc.pid)
    if cancelled:
        raise Cancelled(f"{argv[0]} was stopped: the run was interrupted")
    return _masked(result, env)


def _masked(result: ChildResult, env: Mapping[str, str] | None) -> ChildResult:
    """What the child printed of a secret of its environment or ours (``redaction.environment_mask``:
    secret-looking variables, URL passwords, as written and JSON-escaped), masked before anyone keeps it."""
    from dataclasses import replace

    from evalstore.replay.targetsfile.redaction import environment_mask

    mask = environment_mask(env)
    if mask and (mask.holds(result.stdout) or mask.holds(result.stderr)):
        result = replace(result, stdout=mask.data(result.stdout), stderr=mask.data(result.stderr))
    return result


@contextlib.contextmanager
def conversing_child(argv: list[str], *, cwd: str | None, env: Mapping[str, str]):  # type: ignore[no-untyped-def]
    """A child this process talks with over its stdin and stdout (an agent speaking a protocol), under the
    same rules as :func:`run_child`'s agents: its own process group, killed with evalstore, killed by
    :func:`cancel_children` (the ``with`` then raises :class:`Cancelled`), and its whole group killed when
    the ``with`` ends. Yields the ``Popen`` (stdin, stdout and stderr pipes), or raises ``OSError`` when it
    cannot start."""
    if _stopping:
        raise Cancelled(f"{argv[0]} was not started: the run was interrupted")
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=_in_folder(child_environment(env), cwd),
        start_new_session=True,
        preexec_fn=lifetime.die_with_parent,
        pass_fds=lifetime.held_fds(),
    )
    with _live_lock:
        _live[proc.pid] = proc
        if _stopping:
            _cancelled.add(proc.pid)
            _kill_group(proc)
    try:
        with lifetime.guard_group(proc.pid):
            yield proc
    finally:
        _kill_group(proc)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        with _live_lock:
            del _live[proc.pid]
            cancelled = proc.pid in _cancelled
            _cancelled.discard(proc.pid)
    if cancelled:
        raise Cancelled(f"{argv[0]} was stopped: the run was interrupted")


def _supervise(
    proc: _Process,
    argv: list[str],
    stdin: bytes,
    started: float,
    timeout: float,
    max_output_bytes: int | None,
) -> ChildResult:
    """Feed stdin, read stdout and stderr, and see the exit, all from this thread with one ``select``
    loop, as ``Popen.communicate`` does. Three helper threads per child (feeding, and draining each
    pipe) cost a thread start and a hand-off of the GIL each, which on a loaded machine added several
    milliseconds to every short-lived grader (bench/agentv_peer.py)."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out = _Collector(limit=max_output_bytes, keep_tail=False)
    err = _Collector(limit=STDERR_TAIL_BYTES, keep_tail=True)
    collectors = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    # The exit wakes the loop where the OS gives a process a descriptor (Linux); elsewhere the loop looks
    # every 50 ms, which matters only when a grandchild keeps the pipes open after the child exited.
    exit_fd = proc.exit_fd() if isinstance(proc, WarmProcess) else _pidfd(proc.pid)
    deadline = started + timeout
    timed_out = exceeded = False
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        if stdin:
            selector.register(proc.stdin, selectors.EVENT_WRITE)
        else:
            _close(proc.stdin)
        selector.register(proc.stdout, selectors.EVENT_READ)
        selector.register(proc.stderr, selectors.EVENT_READ)
        if exit_fd is not None:
            selector.register(exit_fd, selectors.EVENT_READ)
        written = 0
        while _reading(selector, collectors):
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is None and now >= deadline:
                timed_out = True
                break
            if exited_at is not None and now >= exited_at + _REAP_GRACE:
                break  # a grandchild holds the pipes open: its group is killed below
            wait = (exited_at + _REAP_GRACE if exited_at is not None else deadline) - now
            if exit_fd is None and exited_at is None:
                wait = min(wait, 0.05)
            for key, _events in selector.select(max(0.0, wait)):
                if key.fileobj is proc.stdin:
                    try:
                        written += os.write(key.fd, stdin[written : written + _PIPE_BUF])
                    except OSError:  # the child does not read its stdin; that is its business
                        written = len(stdin)
                    if written >= len(stdin):
                        selector.unregister(proc.stdin)
                        _close(proc.stdin)
                elif key.fileobj == exit_fd:
                    selector.unregister(exit_fd)  # the exit is taken at the top of the loop
                else:
                    chunk = _read(key.fd)
                    collector = collectors[key.fd]
                    if not chunk:
                        selector.unregister(key.fileobj)
                        _close(key.fileobj)  # type: ignore[arg-type]
                    elif not collector.add(chunk):
                        exceeded = True
            if exceeded:
                break
        _close(proc.stdin)
    if exit_fd is not None:
        os.close(exit_fd)

    if timed_out or exceeded:
        _kill_group(proc)
    elif exited_at is None:
        # Both pipes closed but the child runs on: wait for its exit within the timeout.
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
    proc.wait()
    # Whatever is left of the group (a grandchild holding a pipe) is killed, so nothing outlives the grade.
    if not (proc.stdout.closed and proc.stderr.closed) and exited_at is not None:
        _kill_group(proc)
    for pipe, collector in ((proc.stdout, out), (proc.stderr, err)):
        _drain_after_kill(pipe, collector, exceeded and collector is out)

    lost = isinstance(proc, WarmProcess) and proc.lost and not (timed_out or exceeded)
    return ChildResult(
        argv=list(argv),
        exit_code=None if (timed_out or exceeded or lost) else proc.returncode,
        stdout=out.data(),
        stderr=err.data(),
        duration_ms=_elapsed_ms(started),
        timed_out=timed_out,
        output_exceeded=exceeded,
        spawn_error=f"the warm interpreter serving {argv[0]!r} ended before the child's exit status was known"
        if lost
        else None,
    )


_PIPE_BUF = getattr(select, "PIPE_BUF", 512)
"""Bytes a write to a pipe that select() reported writable takes without blocking."""


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        return None


def _reading(selector: selectors.BaseSelector, collectors: dict[int, _Collector]) -> bool:
    return any(fd in collectors for fd in selector.get_map())


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, _CHUNK)
    except OSError:  # closed under us by the kill
        return b""


def _close(pipe: IO[bytes]) -> None:
    with contextlib.suppress(OSError):
        pipe.close()


def _drain_after_kill(pipe: IO[bytes], collector: _Collector, stopped: bool) -> None:
    """Read what is left in a pipe once its writers are gone (bounded by the grace), then close it."""
    if pipe.closed:
        return
    until = time.monotonic() + _REAP_GRACE
    with contextlib.suppress(OSError, ValueError), selectors.DefaultSelector() as selector:
        selector.register(pipe, selectors.EVENT_READ)
        while time.monotonic() < until and selector.select(max(0.0, until - time.monotonic())):
            chunk = os.read(pipe.fileno(), _CHUNK)
            if not chunk:
                break
            if not stopped:
                stopped = not collector.add(chunk)
    _close(pipe)


class _Collector:
    """Keeps a pipe's head (stdout, with a cap) or its tail (stderr)."""

    def __init__(self, *, limit: int | None, keep_tail: bool) -> None:
        self._limit = limit
        self._keep_tail = keep_tail
        self._buf = bytearray()

    def add(self, chunk: bytes) -> bool:
        """Keep ``chunk``; False when a head-keeping collector went over its cap (the head is kept)."""
        self._buf.extend(chunk)
        if self._limit is None or len(self._buf) <= self._limit:
            return True
        if self._keep_tail:
            del self._buf[: len(self._buf) - self._limit]
            return True
        del self._buf[self._limit :]
        return False

    def data(self) -> bytes:
        return bytes(self._buf)


def _kill_group(proc: _Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _elapsed_ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000.0, 3)
