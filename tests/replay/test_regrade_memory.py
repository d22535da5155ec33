"""What one replay process holds grows with its run only by what it returns: a regrade of 4N tests retains,
per test, what one of N does (``tracemalloc``, in this process: sizes, not times). The benchmark's peak grew
~16 KB a test (docs/scale.md, Memory); this pins the parts of it that were the regrade's own."""

from __future__ import annotations

import functools
import gc
import tracemalloc
from pathlib import Path

import pytest
from scale_runs import build

from evalstore.replay import material
from evalstore.replay.regrade import ReplayOptions, replay_run, reuse_counts
from evalstore.store import EventStore, make_engine, recorder
from evalstore.store.blobs import Dictionaries

N = 100
"""Tests in the small run, 4N in the large: the peak of either also holds a part that does not grow with the
run (measured 1-1.5 MB, varying with when threads and the collector run), which at N = 40 alone moved the
per-test peak between 16 and 20 KB (the test failed on main and before it); at 100 it is 6-7 KB."""
WINDOW = 10  # windows far smaller than the runs, so the parent's material is the same few windows for both
RETAINED_PER_TEST = 5_000
"""Bytes a test may add to what a finished replay holds: its ``TestScored`` in ``ReplayOutcome.results``
(~1.5 KB; measured 1.8 KB on SQLite, 3.1 KB on PostgreSQL, where psycopg's cache of converted queries, 128
at most, gains one per server-side cursor: bounded, but not full at these sizes). A code grader's stdin
kept per test (~8 KB), or its futures, recorders or events, would exceed it."""
PEAK_PER_TEST = 16_000
"""Bytes a test may add to the peak while grading: the eval's test (~4.3 KB), its score and its keys
(measured 6-7 KB on SQLite and PostgreSQL at N = 100)."""
COUNTS_PER_TEST = 200
"""Bytes a test may add to the peak of counting a replay's reused executions (an aggregate, not its rows)."""


def measure(store: EventStore, root: Path, n: int) -> tuple[int, int, int]:
    """(retained, peak) of a regrade of ``n`` tests, then the peak of ``reuse_counts`` on it, in bytes."""
    run = build(root, store, n)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        outcome = replay_run(store, run.run_id, ReplayOptions(eval_path=str(run.v2), no_cache=True))
        gc.collect()
        retained, peak = tracemalloc.get_traced_memory()
        assert outcome.complete and len(outcome.results) == n
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        assert reuse_counts(store, outcome.run_id)["code_ran"] == n
        counting = tracemalloc.get_traced_memory()[1] - held
    finally:
        tracemalloc.stop()
    return retained - before, peak - before, counting


def test_a_regrade_of_4n_tests_holds_per_test_what_one_of_n_does(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(material, "WINDOW_RESULTS", WINDOW)
    # The store's blob dictionaries are an LRU of at most 256 blobs (each code grader's stdin is one, ~8 KB):
    # bounded, but filling it would look like growth at these sizes. A few keep it full for both runs.
    monkeypatch.setattr(recorder, "Dictionaries", functools.partial(Dictionaries, 4))
    store = EventStore(make_engine(store_url))
    try:
        measure(store, tmp_path / "warm", 4)  # what a first regrade imports and caches once, left out
        small = measure(store, tmp_path / "small", N)
        large = measure(store, tmp_path / "large", 4 * N)
    finally:
        store.close()
    retained, peak, counting = ((b - a) / (3 * N) for a, b in zip(small, large, strict=True))
    print(f"per test: retained {retained:.0f} B, peak {peak:.0f} B, reuse_counts {counting:.0f} B")
    assert retained < RETAINED_PER_TEST
    assert peak < PEAK_PER_TEST
    assert counting < COUNTS_PER_TEST
