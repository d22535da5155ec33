"""A stored run's results encoded chunk by chunk, on every core the machine has.

Writing a large run out is bound by the CPU, in Python: each result's events are parsed, its recorded
requests decompressed, its row built and encoded. So the run's stream is cut into chunks of
:data:`CHUNK_RESULTS` results (at their ``test_scored`` events) and, where the platform can fork
(Linux) and the machine has more than one core, worker processes forked from this one encode them:
they inherit what it imported and read, open connections of their own, and send back encoded bytes,
which this process writes out in the run's order. At most two chunks per worker are in flight, so
memory stays flat however large the run.

A chunk can be encoded apart only if every result scored in it has all its events in it. An import
and a replay append each result whole, so theirs always do; a recorded run graded several tests at
once, and its results interleave. Each worker checks its chunk (``stored_results(contiguous=True)``);
from the first chunk that fails the check, the rest of the run is read here, in one pass, as before.
Since every chunk before it passed, none of their results reaches into it, so nothing is lost or
written twice.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from evalstore.replay.agentv.stored import (
    Interleaved,
    ResultBundle,
    Window,
    origin_event_ids,
    stored_results,
)
from evalstore.store import EventStore, make_engine

CHUNK_RESULTS = 1000
"""Results per chunk: enough that a chunk's queries and its trip between processes cost little next to
encoding it, few enough that the first chunk is written out soon."""

MAX_WORKERS = 8

Encode = Callable[[ResultBundle], tuple[bytes, int]]
"""A result's encoding, and how many items it counts for (a CSV line per grader)."""


@dataclass(frozen=True)
class Chunk:
    data: bytes
    """The chunk's encoded results, joined."""
    results: int
    items: int
    """What the encodings counted for, together."""


@dataclass(frozen=True)
class _Job:
    """What a worker needs, set before it is forked (so it is inherited, not sent)."""

    url: str
    run_id: str
    encode: Encode
    inputs: bool
    origin_ids: dict[Any, dict[str, Any]]
    folder: str
    """A private temporary folder the workers write their chunks to (sending megabytes back through the
    pool's pipe kept each worker waiting a fifth of its time)."""


_JOB: _Job | None = None
_WORKER_STORE: EventStore | None = None


def encoded_results(
    store: EventStore, run_id: str, encode: Encode, *, inputs: bool = True, workers: int | None = None
) -> Iterator[Chunk]:
    """The run's results in the order they were scored, each through ``encode``, a chunk at a time.
    ``workers``: how many processes encode at once (default: one per core, at most :data:`MAX_WORKERS`;
    1 encodes everything in this process)."""
    origin_ids = origin_event_ids(store, run_id) if inputs else {}
    # Each chunk runs from after one result's score to the score of the result CHUNK_RESULTS later.
    ends = store.result_ends(run_id, every=CHUNK_RESULTS)
    windows: list[Window] = list(zip([0, *ends], ends))
    count = min(workers or os.cpu_count() or 1, MAX_WORKERS, len(windows))
    url = _reopenable(store)
    if count < 2 or url is None or sys.platform != "linux":
        yield from _here(store, run_id, encode, inputs, (0, None), origin_ids)
        return
    with tempfile.TemporaryDirectory(prefix="evalstore-export-") as folder:
        after = yield from _forked(_Job(url, run_id, encode, inputs, origin_ids, folder), store, windows, count)
    if after is not None:  # a chunk interleaves: the rest is read here, whole
        yield from _here(store, run_id, encode, inputs, (after, None), origin_ids)


def _here(
    store: EventStore, run_id: str, encode: Encode, inputs: bool, window: Window, origin_ids: dict
) -> Iterator[Chunk]:
    encoded: list[tuple[bytes, int]] = []
    for result in stored_results(store, run_id, inputs=inputs, window=window, origin_ids=origin_ids):
        encoded.append(encode(result))
        if len(encoded) >= CHUNK_RESULTS:
            yield _chunk(encoded)
            encoded = []
    if encoded:
        yield _chunk(encoded)


def _chunk(encoded: list[tuple[bytes, int]]) -> Chunk:
    return Chunk(b"".join(data for data, _ in encoded), len(encoded), sum(items for _, items in encoded))


def _forked(job: _Job, store: EventStore, windows: list[Window], workers: int) -> Generator[Chunk, None, int | None]:
    """The chunks encoded by forked workers, in order; returns None when all were, else the stream
    version after which the rest must be read in one pass."""
    global _JOB
    # No connection of this process may be open in a child (SQLite's locks are per process): close the
    # pooled ones; the next query opens a new one.
    store.engine.dispose()
    _JOB = job
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=_open_worker)
    try:
        todo = iter(windows)
        running: deque[tuple[Window, Future[tuple[str, int, int] | None]]] = deque()
        for window in todo:
            running.append((window, pool.submit(_encode_window, window)))
            if len(running) >= 2 * workers:
                break
        while running:
            window, future = running.popleft()
            written = future.result()
            if written is None:
                return window[0]
            path, results, items = written
            with open(path, "rb") as fh:
                data = fh.read()
            os.unlink(path)
            yield Chunk(data, results, items)
            for next_window in todo:
                running.append((next_window, pool.submit(_encode_window, next_window)))
                break
        return None
    finally:
        _JOB = None
        pool.shutdown(wait=True, cancel_futures=True)


def _reopenable(store: EventStore) -> str | None:
    """The store's URL, for a worker to open it again; None for an in-memory SQLite database."""
    url = store.engine.url
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        return None
    return url.render_as_string(hide_password=False)


def _open_worker() -> None:
    global _WORKER_STORE
    assert _JOB is not None
    _WORKER_STORE = EventStore(make_engine(_JOB.url, create=False), check_schema=False)


def _encode_window(window: Window) -> tuple[str, int, int] | None:
    """In a worker: the chunk's results encoded and written to a file of the job's folder (its path, the
    results and the items they count for), or None if they interleave with others."""
    assert _JOB is not None and _WORKER_STORE is not None
    job = _JOB
    try:
        encoded = [
            job.encode(result)
            for result in stored_results(
                _WORKER_STORE,
                job.run_id,
                inputs=job.inputs,
                window=window,
                contiguous=True,
                origin_ids=job.origin_ids,
            )
        ]
    except Interleaved:
        return None
    chunk = _chunk(encoded)
    path = os.path.join(job.folder, f"chunk-{window[0]}")
    with open(path, "wb") as fh:
        fh.write(chunk.data)
    return path, chunk.results, chunk.items
