"""A share of a local replay's tests graded in a process forked from it, while this one grades the rest.

Tests whose every execution and judge reply is reused (an unchanged replay; the tests a replay does not
change) never wait: on threads they take turns holding the interpreter lock, one core's worth however many
the machine has. So :class:`~evalstore.replay.executors.local.LocalExecutor`, once a window's first tests
were graded without one waiting, hands two thirds of the rest to a worker forked from this process and
grades the first third itself. The worker inherits the job, the window's material and what was read ahead
(nothing is sent), reads the store through a connection of its own, and writes back each part's tests with
their events encoded; this process appends them, as it appends a Ray task's (``executors/ray.py``), while
the worker grades its next part: appending is the one thing only this process does, hence its smaller
share. A test of the worker's that would wait (a process to run, a judge to ask) is handed back ungraded
and graded here, where the threads, the warm interpreters and the judges' limits are; so is every test of
a part the worker did not deliver (it failed, or was killed): the worker only ever saves time.

Only on Linux with more than one core, for a SQLite store (on a database server each read is a wait,
which the threads overlap already) and ``--concurrency`` 2 or more.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import queue
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from evalstore.replay.executors import Done, Work

if TYPE_CHECKING:
    from evalstore.replay.material import ResultKey
    from evalstore.replay.recording import BatchedAppends, ReadAhead
    from evalstore.replay.regrade import ReplayJob
    from evalstore.store import EventStore
    from evalstore.store.events import TestScored

FIRST = 16
"""Tests of a window graded here before any is shared: enough to see whether they wait."""
PART = 32
"""Tests the worker grades and writes back at a time; it is given at least two parts' worth."""

Graded = tuple["ResultKey", "TestScored", list[Any], dict[str, bytes]]
"""A test as the worker writes it back: key, score, its events encoded for ``append_units``, its blobs."""


def worth_sharing(store: EventStore, window: Sequence[Work], concurrency: int) -> bool:
    """Whether ``window`` is large enough for a worker's share, and the replay may use one."""
    return (
        len(window) >= FIRST + 3 * PART
        and concurrency >= 2
        and sys.platform == "linux"
        and (os.cpu_count() or 1) >= 2
        and not store.on_server
        and store.reopenable
    )


def share(
    job: ReplayJob,
    store: EventStore,
    work: Sequence[Work],
    ahead: ReadAhead | None,
    batches: BatchedAppends,
    grade_here: Callable[[Sequence[Work]], None],
    done: Done,
) -> int:
    """Grade ``work``: the first third with ``grade_here``, the rest in a forked worker, part by part,
    appending each part the worker delivers; what it hands back or does not deliver is graded here too.
    Returns how many tests the worker graded."""
    cut = len(work) // 3
    mine, theirs = work[:cut], list(work[cut:])
    parts = [theirs[i : i + PART] for i in range(0, len(theirs), PART)]
    batches.flush()  # no append in flight in the worker's copy of this process
    url = store.engine.url.render_as_string(hide_password=False)
    read_end, write_end = os.pipe()
    # Ctrl-C held back across the fork: the worker must never run this process's handling of it (and its
    # appends); it ignores Ctrl-C from its first instruction, and this process gets it once forked.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        with warnings.catch_warnings():
            # Python 3.12 warns of forking a process with threads (a lock one of them holds stays held in
            # the child): the worker takes no lock another thread of this one uses, and opens its own
            # connection.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            os.close(read_end)
            _worker(job, url, parts, ahead, write_end)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    os.close(write_end)
    shared = 0
    delivered: set[ResultKey] = set()
    frames: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    # Read as the worker writes, or it would wait on the full pipe while this process grades its third.
    reader = threading.Thread(target=_read_frames, args=(read_end, frames), daemon=True)
    reader.start()
    try:
        grade_here(mine)
        batches.flush()
        while (frame := frames.get()) is not None:
            graded, _handed_back = pickle.loads(frame)
            blobs = {d: b for _, _, _, bs in graded for d, b in bs.items()}
            store.append_units(job.run_id, [(key, events) for key, _, events, _ in graded], blobs=blobs)
            for key, scored, _, _ in graded:
                delivered.add(key)
                done(key, scored)
            shared += len(graded)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # done already, or this was interrupted: nothing of it is wanted
        os.waitpid(pid, 0)
        reader.join()
    grade_here([w for w in theirs if w.key not in delivered])
    return shared


_LENGTH = 8
"""Bytes of the length before each part the worker writes."""


def _read_frames(fd: int, frames: queue.SimpleQueue[bytes | None]) -> None:
    """Each part the worker wrote, whole, then None when it stopped (done, or failed: a worker that fails
    exits without a word, and what it did not write is graded by the replay)."""
    try:
        with os.fdopen(fd, "rb") as pipe:
            while len(head := pipe.read(_LENGTH)) == _LENGTH:
                frame = pipe.read(int.from_bytes(head, "little"))
                if len(frame) != int.from_bytes(head, "little"):
                    break
                frames.put(frame)
    finally:
        frames.put(None)


# --- in the worker --------------------------------------------------------------------------------


class _WouldWait(BaseException):
    """A test of the worker's is about to wait: it is handed back. A BaseException, so that no grader
    records it as its own execution error."""


def _would_wait() -> None:
    raise _WouldWait


def _worker(job: ReplayJob, url: str, parts: list[list[Work]], ahead: ReadAhead | None, out_fd: int) -> None:
    """The forked worker's whole life: grade the parts, write each back, end without Python's exit (which
    would flush what this process's buffers held when it was forked, and run its exit handlers)."""
    code = 1
    try:
        # Ctrl-C is the replay's to handle (it kills this worker): ignored, then let through (one that came
        # during the fork is dropped). The objects inherited are never freed here, so the collector leaves
        # them alone, and their pages stay shared with the replay's.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        gc.freeze()
        from evalstore.replay.executors.local import TranscriptBlobs
        from evalstore.replay.regrade import Collected
        from evalstore.store import EventStore
        from evalstore.store.engine import make_engine

        # Its own connection: the replay's, copied by the fork, is left untouched (and open) until this ends.
        store = EventStore(make_engine(url, create=False), check_schema=False)
        with os.fdopen(out_fd, "wb") as out:
            for part in parts:
                transcripts = TranscriptBlobs(store, job.transcript_digests(part))
                recorders = Collected()
                scores: dict[ResultKey, TestScored] = {}
                handed_back: list[ResultKey] = []
                for item in part:
                    try:
                        scores[item.key] = job.grade(store, item, recorders, ahead, transcripts.get, _would_wait)
                    except _WouldWait:
                        handed_back.append(item.key)
                graded = [
                    (r.key, scores[r.key], store.encode_with_payloads(r.events), r.blobs)
                    for r in recorders
                    if r.key is not None and r.key in scores
                ]
                frame = pickle.dumps((graded, handed_back), protocol=pickle.HIGHEST_PROTOCOL)
                out.write(len(frame).to_bytes(_LENGTH, "little") + frame)
                out.flush()
        code = 0
    finally:
        os._exit(code)
