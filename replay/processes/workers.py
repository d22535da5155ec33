"""Running tests on threads so that Ctrl-C stops promptly.

``with ThreadPoolExecutor(...)`` waits, on the way out, for every queued test to run, and agents,
graders and converters run in their own process groups, out of reach of the terminal's Ctrl-C. Here
an interrupt (or any failure) drops the tests not started and kills the children still running
(:func:`cancel_children`); whatever was not recorded is done again by ``--resume``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from evalstore.replay.processes.children import allow_children, cancel_children

T = TypeVar("T")


def run_concurrently(work: Callable[[T], object], items: Iterable[T], workers: int) -> None:
    """Call ``work`` on every item with up to ``workers`` threads; the first exception is re-raised."""
    allow_children()
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        for _ in pool.map(work, items):
            pass
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        cancel_children()
        raise
    pool.shutdown(wait=True)


Waiting = Callable[[], None]
"""Called by ``work`` just before its item waits on the outside world (a process, a judge's reply)."""


def run_handing_off(work: Callable[[T, Waiting], object], items: Iterable[T], workers: int) -> None:
    """Call ``work`` on every item, in order, on one thread, starting another (up to ``workers`` in all,
    each taking the next items in turn) only when an item is about to wait: ``work`` calls the
    ``Waiting`` it is given then. The first exception is re-raised, as :func:`run_concurrently` does, and
    this thread only waits, as there: an interrupt reaches it here, never inside an item's work.

    Items that never wait (a replay's tests whose every execution and judge reply is reused) are then
    done one after another on one thread: on threads of a pool they took the same time at best, each
    holding the interpreter lock in turn, and 8% more (bench/agentv_peer.py's unchanged replay at
    ``--concurrency 3``). Items that wait overlap as on a pool of ``workers`` threads; grading/overlap.py
    does the same for the graders of one test."""
    allow_children()
    _HandOff(work, items, max(1, workers)).run()


def join_growing(threads: list[threading.Thread], lock: threading.Lock) -> None:
    """Join every thread of ``threads``, which the threads themselves may append to (under ``lock``) before
    they end: the list is read again after each join."""
    joined = 0
    while True:
        with lock:
            if joined == len(threads):
                return
            thread = threads[joined]
        thread.join()
        joined += 1


class _HandOff(Generic[T]):
    def __init__(self, work: Callable[[T, Waiting], object], items: Iterable[T], workers: int) -> None:
        self.work = work
        self.items = iter(items)
        self.free = workers
        """Threads that may still start."""
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.stopped = False
        """An item failed, or this was interrupted: no item is taken after it."""
        self.lock = threading.Lock()

    def run(self) -> None:
        self._start()
        try:
            join_growing(self.threads, self.lock)
        except BaseException:  # Ctrl-C: the items running stop, the others are not taken
            with self.lock:
                self.stopped = True
            cancel_children()
            raise
        if self.errors:
            raise self.errors[0]

    def _start(self) -> None:
        with self.lock:
            if self.free == 0 or self.stopped:
                return
            self.free -= 1
            thread = threading.Thread(target=self._take_in_turn, name="evalstore-worker")
            self.threads.append(thread)
        thread.start()

    def _next(self) -> tuple[T] | None:
        """The next item (in a tuple: an item may be None), or None when there is none to take."""
        with self.lock:
            if self.stopped:
                return None
            for item in self.items:
                return (item,)
            return None

    def _take_in_turn(self) -> None:
        try:
            while (taken := self._next()) is not None:
                handed_off = False

                def waiting() -> None:
                    nonlocal handed_off
                    if not handed_off:
                        handed_off = True
                        self._start()

                self.work(taken[0], waiting)
        except BaseException as exc:  # re-raised by run(); the items running meanwhile stop, as on Ctrl-C
            with self.lock:
                self.errors.append(exc)
                self.stopped = True
            cancel_children()
