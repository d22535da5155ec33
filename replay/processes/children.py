"""Running a child process the way converters and code graders need it.

One place for the rules: argv only (never a shell), stdin bytes written by a thread so a child that
does not read cannot block us, a wall-clock timeout, an output cap, and the whole process group
killed when either limit is hit -- a converter that forks ``sleep 1000`` must not outlive the grade.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from evalstore.replay.processes import lifetime

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


_live: dict[int, subprocess.Popen[bytes]] = {}
_cancelled: set[int] = set()
_live_lock = threading.Lock()


def cancel_children() -> None:
    """Kill the process group of every child :func:`run_child` is waiting on; each of those calls then
    raises :class:`Cancelled`. Agents and graders run in their own process groups, so the terminal's
    Ctrl-C never reaches them: without this, an interrupted run would wait for them to finish."""
    with _live_lock:
        procs = list(_live.values())
        _cancelled.update(_live)
    for proc in procs:
        _kill_group(proc)


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


def run_child(
    argv: list[str],
    stdin: bytes,
    *,
    timeout: float,
    max_output_bytes: int | None = None,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    die_with_parent: bool = False,
) -> ChildResult:
    """Run ``argv`` with ``stdin``; never raises for anything the child does (only :class:`Cancelled`).

    ``die_with_parent`` (agents: long-lived, and working in a folder a resume reuses): the child and
    its process group are killed if this process dies, even by SIGKILL, and the child inherits the
    descriptor of every held workspace lock (``processes.lifetime``). It costs a few milliseconds per
    start, which short-lived graders and converters, bounded by their timeouts, are spared."""
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
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
    try:
        with lifetime.guard_group(proc.pid) if die_with_parent else contextlib.nullcontext():
            result = _supervise(proc, argv, stdin, started, timeout, max_output_bytes)
    finally:
        with _live_lock:
            del _live[proc.pid]
            cancelled = proc.pid in _cancelled
            _cancelled.discard(proc.pid)
    if cancelled:
        raise Cancelled(f"{argv[0]} was stopped: the run was interrupted")
    return result


def _supervise(
    proc: subprocess.Popen[bytes],
    argv: list[str],
    stdin: bytes,
    started: float,
    timeout: float,
    max_output_bytes: int | None,
) -> ChildResult:
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    over_limit = threading.Event()
    # Set when the child exits or stdout goes over the cap. The exit is seen by a blocking waitpid in
    # the feeding thread: polling with Popen.wait(timeout) sleeps in growing steps and added ~8 ms to
    # every short-lived grader (bench/replay.py).
    wake = threading.Event()

    def on_overflow() -> None:
        over_limit.set()
        wake.set()

    out = _Collector(limit=max_output_bytes, keep_tail=False, on_overflow=on_overflow)
    err = _Collector(limit=STDERR_TAIL_BYTES, keep_tail=True)
    threads = [
        threading.Thread(target=_feed_and_wait, args=(proc, stdin, wake), daemon=True),
        threading.Thread(target=out.drain, args=(proc.stdout,), daemon=True),
        threading.Thread(target=err.drain, args=(proc.stderr,), daemon=True),
    ]
    for thread in threads:
        thread.start()

    timed_out = not wake.wait(max(0.0, started + timeout - time.monotonic()))
    if timed_out or over_limit.is_set():
        _kill_group(proc)
    proc.wait()

    # A grandchild may still hold the pipes open after the child exited; give it a moment, then kill
    # whatever is left of the group so the readers see EOF.
    join_until = time.monotonic() + _REAP_GRACE
    for thread in threads[1:]:
        thread.join(max(0.0, join_until - time.monotonic()))
    if any(t.is_alive() for t in threads[1:]):
        _kill_group(proc)
        for thread in threads[1:]:
            thread.join(_REAP_GRACE)

    exceeded = over_limit.is_set()
    return ChildResult(
        argv=list(argv),
        exit_code=None if (timed_out or exceeded) else proc.returncode,
        stdout=out.data(),
        stderr=err.data(),
        duration_ms=_elapsed_ms(started),
        timed_out=timed_out,
        output_exceeded=exceeded,
    )


class _Collector:
    """Reads a pipe to EOF, keeping the head (stdout, with a cap) or the tail (stderr)."""

    def __init__(self, *, limit: int | None, keep_tail: bool, on_overflow: Callable[[], None] | None = None) -> None:
        self._limit = limit
        self._keep_tail = keep_tail
        self._on_overflow = on_overflow
        self._buf = bytearray()

    def drain(self, pipe: IO[bytes]) -> None:
        try:
            while chunk := pipe.read1(_CHUNK):  # type: ignore[attr-defined]
                self._buf.extend(chunk)
                if self._limit is None or len(self._buf) <= self._limit:
                    continue
                if self._keep_tail:
                    del self._buf[: len(self._buf) - self._limit]
                elif self._on_overflow is not None:
                    del self._buf[self._limit :]
                    self._on_overflow()
                    return
        except (OSError, ValueError):
            return  # the pipe was closed under us by the kill
        finally:
            with contextlib.suppress(OSError):
                pipe.close()

    def data(self) -> bytes:
        return bytes(self._buf)


def _feed_and_wait(proc: subprocess.Popen[bytes], data: bytes, exited: threading.Event) -> None:
    """Write stdin, then block until the child exits. A child that never reads its stdin blocks the
    write until the caller kills it for the timeout; the write then fails and the wait returns."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass  # the child does not read its stdin; that is its business
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    proc.wait()
    exited.set()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _elapsed_ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000.0, 3)
