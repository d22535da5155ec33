"""Work cut into parts and done by worker processes forked from this one, the results in the parts' order.

For work that is bound by the CPU in Python (an export encoding a run, an import building a file's
results) on a machine with more than one core. The workers are forked, so they inherit what this process
has imported and read instead of starting over, and the job's context is set for them before they are
forked, never sent; only the parts and the results cross between processes. That needs ``fork`` (Linux);
elsewhere, or with one core, the caller does the work itself (:func:`worker_count` says 0).

At most two parts per worker are in flight, so memory stays flat however many parts there are
(:func:`held_parts`: how many parts are running, waiting or in the caller's hands at once). A
part's exception is raised when its turn comes, after the results of the parts before it; leaving the
loop early (a result that says the rest must be done otherwise) cancels the parts not started. A
worker dies with this process, even when it is killed, and ignores Ctrl-C, which this process handles.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

P = TypeVar("P")
R = TypeVar("R")

MAX_WORKERS = 8
IN_FLIGHT = 2
"""Parts per worker submitted ahead of the one whose result is taken next."""

_WORK: Callable[[Any, Any], Any] | None = None
_START: Callable[[Any], None] | None = None
_CONTEXT: Any = None


def worker_count(parts: int, workers: int | None = None) -> int:
    """How many workers to fork for ``parts`` parts: ``workers`` (default one per core, at most
    :data:`MAX_WORKERS`), no more than the parts; 0 where forking is not worth it (one part, one core)
    or not available (not Linux)."""
    count = min(workers or os.cpu_count() or 1, MAX_WORKERS, parts)
    return count if count >= 2 and sys.platform == "linux" else 0


def held_parts(workers: int) -> int:
    """How many parts are in flight or in the caller's hands at once: those running or waiting, and the
    one just yielded (the next part is submitted before it is), so part ``n`` may reuse what part
    ``n - held_parts(workers)`` used, e.g. a slot of a shared buffer."""
    return IN_FLIGHT * workers + 1


def in_order(
    work: Callable[[Any, P], R],
    parts: Sequence[P],
    workers: int,
    context: Any,
    *,
    start: Callable[[Any], None] | None = None,
) -> Generator[R, None, None]:
    """``work(context, part)`` for each part, on ``workers`` forked processes, yielded in the parts' order.
    ``start(context)`` runs once in each worker before its first part (e.g. to open its own connection)."""
    global _WORK, _START, _CONTEXT
    _WORK, _START, _CONTEXT = work, start, context
    pool = _forked_pool(workers)
    try:
        todo = iter(parts)
        running: deque[Future[R]] = deque()
        for part in todo:
            running.append(pool.submit(_done, part))
            if len(running) >= IN_FLIGHT * workers:
                break
        while running:
            result = running.popleft().result()
            for part in todo:
                running.append(pool.submit(_done, part))
                break
            yield result
    finally:
        _WORK = _START = _CONTEXT = None
        pool.shutdown(wait=True, cancel_futures=True)


@contextmanager
def pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``workers`` processes forked from this one, for functions given by reference and plain
    arguments (bytes, say): each worker as :func:`in_order`'s are (it dies with this process, leaves
    Ctrl-C to it). Fork it before starting threads: a child has only the thread that forked it."""
    executor = _forked_pool(workers)
    try:
        yield executor
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def _forked_pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=_started)


def _started() -> None:
    # ctypes: loaded by the workers only
    from evalstore.replay.processes.lifetime import die_with_parent, keep_freed_memory

    # A worker ends with this process, even on kill -9 (it would wait for parts forever), and leaves
    # Ctrl-C to it: this process stops the pool, after the parts running now.
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keep_freed_memory()
    if _START is not None:
        _START(_CONTEXT)


def _done(part: Any) -> Any:
    assert _WORK is not None
    return _WORK(_CONTEXT, part)
