"""Agents do not outlive the evalstore that started them, and a workspace is not reused while in use.

Three mechanisms, for ``kill -9`` of evalstore (which no handler sees):

- the direct child asks the kernel for ``SIGKILL`` when its parent dies (Linux ``PR_SET_PDEATHSIG``
  through ``prctl``, set between fork and exec: :func:`die_with_parent`);
- every child runs in its own process group, registered with one *guardian* per evalstore process: a
  small process reading group ids on a pipe, which kills every group still registered when the pipe
  closes, i.e. when evalstore exits or dies (:func:`guard_group`); a shell's children die too;
- the folder a run's workspaces live in is locked (``flock``) by the run and, through an inherited
  descriptor, by every agent it starts, so a process that escaped both (``setsid`` and a double fork)
  still holds the lock, and ``run --resume`` refuses the folder (:class:`WorkspaceLock`).

And one for an agent's call that ends while a process it started runs on in a session of its own, out of
reach of its group's kill: every process of the call carries a tag in its environment, and those still
alive when the call ends are killed (:func:`kill_tagged`).

The same libc handle serves a forked worker's heap (:func:`keep_freed_memory`).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from evalstore.replay.errors import ReplayError

_PR_SET_PDEATHSIG = 1
_libc: ctypes.CDLL | None = None
if sys.platform.startswith("linux"):
    # The interpreter's own symbols, libc's among them: ``ctypes.util.find_library`` runs ``ldconfig -p``
    # in a subprocess, which each export worker paid before its first chunk.
    with contextlib.suppress(OSError):
        _libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """A ``preexec_fn``: the child gets SIGKILL when the thread that started it ends (Linux; a no-op
    elsewhere). Called in the child between fork and exec."""
    if _libc is None:
        return
    parent = os.getppid()
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(137)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_KEPT_BYTES = 32 * 1024 * 1024
"""glibc's largest dynamic mmap threshold (64-bit): allocations below it come from the heap, as they
would once glibc had raised its threshold to their size."""


def keep_freed_memory() -> None:
    """This process's C heap keeps what it frees for its next allocations instead of handing it back to
    the kernel (glibc ``mallopt``; a no-op elsewhere). For a forked worker that builds and frees the same
    few megabytes part after part: glibc trimmed the top of its heap after each, and faulting the pages in
    again was a sixth of an export worker's CPU once it completed a whole window at once
    (``agentv/stored._CHUNK``; bench/read.py's 20,000 results: 78,000 page faults, 32,000 kept). Setting the
    trim threshold fixes the mmap threshold too, so that is set to the largest glibc would have raised it to."""
    if _libc is None or not hasattr(_libc, "mallopt"):
        return
    _libc.mallopt(_M_MMAP_THRESHOLD, _KEPT_BYTES)
    _libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)


_GUARDIAN = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
live = set()
for line in sys.stdin:
    group = int(line)
    if group > 0:
        live.add(group)
    else:
        live.discard(-group)
for group in live:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""

_guardian: subprocess.Popen[bytes] | None = None
_guardian_lock = threading.Lock()


def _send(line: str) -> None:
    global _guardian
    with _guardian_lock:
        if _guardian is None or _guardian.poll() is not None:
            _guardian = subprocess.Popen(
                [sys.executable, "-S", "-c", _GUARDIAN],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to the terminal's group must not take it down first
            )
        assert _guardian.stdin is not None
        with contextlib.suppress(OSError):
            _guardian.stdin.write(f"{line}\n".encode())
            _guardian.stdin.flush()


@contextlib.contextmanager
def guard_group(pgid: int):  # type: ignore[no-untyped-def]
    """While inside, the process group ``pgid`` is killed if this process dies."""
    _send(str(pgid))
    try:
        yield
    finally:
        _send(str(-pgid))


LOCK_NAME = ".evalstore-workspaces.lock"
_held: set[int] = set()


def held_fds() -> tuple[int, ...]:
    """The descriptors of the workspace locks this process holds: agents inherit them."""
    return tuple(sorted(_held))


class WorkspaceLock:
    """An exclusive ``flock`` on ``folder/.evalstore-workspaces.lock`` for as long as a run (and any
    agent holding :attr:`fd`) works there."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.fd: int | None = None

    def __enter__(self) -> WorkspaceLock:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise ReplayError(
                f"workspace folder {self.folder} is still in use"
                + (f" (locked by evalstore process {holder} or an agent it started)" if holder else "")
                + "; wait for those processes to end or stop them, then resume"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd
        _held.add(fd)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            _held.discard(self.fd)
            os.close(self.fd)
            self.fd = None


TAG_VARIABLE = "EVALSTORE_CALL_TAG"
"""The environment variable an agent's processes inherit (:func:`call_tag`), which :func:`kill_tagged`
looks for."""


def call_tag() -> dict[str, str]:
    """The variable that marks one call's processes: a fresh value per call."""
    return {TAG_VARIABLE: os.urandom(12).hex()}


def kill_tagged(tag: Mapping[str, str]) -> int:
    """Kill every process whose environment holds ``tag`` (:func:`call_tag`): what an agent's call left
    running after its process group was killed, having left the group (``setsid`` and a double fork).
    Reads ``/proc/PID/environ`` (Linux; elsewhere nothing), which holds a process's environment as it was
    given; a process's own processes inherit it. Two passes: one that forked while the first ran is found
    by the second. Returns how many were killed."""
    if not os.path.isdir("/proc"):
        return 0
    ((name, value),) = tag.items()
    needle = f"{name}={value}".encode()
    killed = 0
    for _ in range(2):
        for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
            if pid == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    environ = fh.read()
            except OSError:  # gone, or another user's
                continue
            if needle in environ.split(b"\0"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
    return killed
