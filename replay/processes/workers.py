"""Running tests on a thread pool so that Ctrl-C stops promptly.

``with ThreadPoolExecutor(...)`` waits, on the way out, for every queued test to run, and agents,
graders and converters run in their own process groups, out of reach of the terminal's Ctrl-C. Here
an interrupt (or any failure) drops the tests not started and kills the children still running
(:func:`cancel_children`); whatever was not recorded is done again by ``--resume``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

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
