"""``run_handing_off``: items that never wait are done in order on one thread; a thread more starts only
when an item is about to wait, up to the worker count; a failure stops the items not yet taken."""

from __future__ import annotations

import threading

import pytest

from evalstore.replay.processes.workers import Waiting, run_handing_off


def test_items_that_never_wait_are_done_in_order_on_one_thread() -> None:
    seen: list[tuple[int, int]] = []

    def work(item: int, waiting: Waiting) -> None:
        seen.append((item, threading.get_ident()))

    run_handing_off(work, range(50), 3)
    assert [item for item, _ in seen] == list(range(50))
    assert len({thread for _, thread in seen}) == 1
    assert seen[0][1] != threading.get_ident()  # the caller only waits: Ctrl-C reaches it there


def test_items_that_wait_run_at_once_up_to_the_worker_count() -> None:
    """Each item waits until three are in flight: done only if three threads run them together."""
    together = threading.Barrier(3, timeout=10)
    in_flight = 0
    most = 0
    lock = threading.Lock()

    def work(item: int, waiting: Waiting) -> None:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        waiting()
        waiting()  # a second call starts nothing more
        together.wait()
        with lock:
            in_flight -= 1

    run_handing_off(work, range(9), 3)
    assert most == 3


def test_a_failure_is_raised_and_no_item_is_taken_after_it() -> None:
    taken: list[int] = []

    def work(item: int, waiting: Waiting) -> None:
        taken.append(item)
        if item == 2:
            raise ValueError("item 2")

    with pytest.raises(ValueError, match="item 2"):
        run_handing_off(work, range(10), 3)
    assert taken == [0, 1, 2]
