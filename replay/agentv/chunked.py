"""A stored run's results encoded chunk by chunk, on every core the machine has.

Writing a large run out is bound by the CPU, in Python: each result's events are parsed, its recorded
requests decompressed, its row built and encoded. So the run's stream is cut into chunks of
:data:`CHUNK_RESULTS` results (at their ``test_scored`` events) and, where the platform can fork
(Linux) and the machine has more than one core, worker processes forked from this one encode them
(``processes.forked``): they open connections of their own and leave each chunk's bytes in a slot of
a buffer shared with this process (an anonymous shared mapping, made before the fork), which this process
writes out in the run's order. A slot is reused once its chunk is written, so its pages are touched once;
files in a private folder, the first way, cost the kernel a tenth of the export in page allocations and
copies. A chunk too large for its slot still goes through a file.

A chunk can be encoded apart only if every result scored in it has all its events in it. An import
and a replay append each result whole, so theirs always do; a recorded run graded several tests at
once, and its results interleave. Each worker checks its chunk (``stored_results(contiguous=True)``);
from the first chunk that fails the check, the rest of the run is read here, in one pass, as before.
Since every chunk before it passed, none of their results reaches into it, so nothing is lost or
written twice.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from collections.abc import Callable, Generator, Iterator
from contextlib import closing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from evalstore.replay.agentv.stored import (
    Interleaved,
    ResultBundle,
    Window,
    origin_event_ids,
    stored_results,
)
from evalstore.replay.processes.forked import held_parts, in_order, worker_count

if TYPE_CHECKING:
    from evalstore.store import EventStore

CHUNK_RESULTS = 1000
"""Results per chunk: enough that a chunk's queries and its trip between processes cost little next to
encoding it, few enough that the first chunk is written out soon."""

TAIL_PARTS = 4
"""The run's last chunks, a worker's share each, are cut this many times finer: a worker done with its
chunks first takes those, so the workers end together (a whole chunk's time with one worker left at the
end was a twentieth of an export on two idle cores)."""

SLOT_BYTES = 16 * 1024 * 1024
"""Room for one chunk's encoding in the shared buffer (1,000 results of bench/read.py take 5 MB). Only
the pages chunks fill are used, and they stay in use until the export ends: this bounds that memory."""

Encode = Callable[[ResultBundle], tuple[bytes, int]]
"""A result's encoding, and how many items it counts for (a CSV line per grader)."""


@dataclass(frozen=True)
class Chunk:
    data: bytes | memoryview
    """The chunk's encoded results, joined: valid until the next chunk is taken (it may be a view of the
    buffer the workers write into)."""
    results: int
    items: int
    """What the encodings counted for, together."""


@dataclass(frozen=True)
class _Job:
    """What a worker needs (``processes.forked``: inherited, not sent)."""

    store: EventStore
    """This process's store: a worker uses it as it was at the fork (its statements compiled, its
    dictionaries read), with a pool of its own."""
    run_id: str
    encode: Encode
    inputs: bool
    origin_ids: dict[Any, dict[str, Any]]
    folder: str
    """A private temporary folder for chunks larger than a slot."""
    slots: mmap.mmap | None = None
    """The buffer shared with the workers: :func:`held_parts` slots of :data:`SLOT_BYTES` (sending
    megabytes back through the pool's pipe kept each worker waiting a fifth of its time)."""


_WORKER_STORE: EventStore | None = None


def encoded_results(
    store: EventStore,
    run_id: str,
    encode: Encode,
    *,
    inputs: bool = True,
    workers: int | None = None,
    upto_seq: int | None = None,
) -> Iterator[Chunk]:
    """The run's results in the order they were scored, each through ``encode``, a chunk at a time.
    ``workers``: how many processes encode at once (default: one per core; 1 encodes everything in this
    process). ``upto_seq``: only the results scored at or before that seq (``RunSummary.last_seq``), however
    many an import still writing into the run adds meanwhile; None: to the run's end."""
    origin_ids = origin_event_ids(store, run_id) if inputs else {}
    # Each chunk runs from after one result's score to the score of the result CHUNK_RESULTS later (at the
    # end, CHUNK_RESULTS // TAIL_PARTS later).
    every = max(CHUNK_RESULTS // TAIL_PARTS, 1)
    fine = store.result_ends(run_id, every=every, upto_seq=upto_seq)
    ends = chunk_ends(fine, CHUNK_RESULTS // every, worker_count(len(fine), workers))
    windows: list[Window] = list(zip([0, *ends], ends))
    count = worker_count(len(windows), workers)
    after: int | None = 0
    if count and store.reopenable:
        after = yield from _forked(_Job(store, run_id, encode, inputs, origin_ids, ""), store, windows, count)
    if after is not None:  # from the start, or from a chunk whose results interleave: read here, in one pass
        end = None if upto_seq is None else ends[-1] if ends else 0  # the last result's score, as the chunks end
        yield from _here(store, run_id, encode, inputs, (after, end), origin_ids)


def chunk_ends(fine: list[int], per: int, workers: int) -> list[int]:
    """Where the chunks end, from the ends of finer ones (``fine``, ``per`` of them to a chunk): whole
    chunks, then the last ``workers`` chunks' worth of fine ones as they are."""
    head = fine[: max(len(fine) - per * workers, 0)]
    ends = head[per - 1 :: per]
    if len(head) % per:
        ends.append(head[-1])
    return ends + fine[len(head) :]


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
    return Chunk(b"".join(data for data, _ in encoded), *_counts(encoded))


def _counts(encoded: list[tuple[bytes, int]]) -> tuple[int, int]:
    """The results encoded, and the items they count for."""
    return len(encoded), sum(items for _, items in encoded)


def _forked(job: _Job, store: EventStore, windows: list[Window], workers: int) -> Generator[Chunk, None, int | None]:
    """The chunks encoded by forked workers, in order; returns None when all were, else the stream
    version after which the rest must be read in one pass."""
    # No connection of this process may be open in a child (SQLite's locks are per process): close the
    # pooled ones; the next query opens a new one.
    store.drop_connections()
    # The n-th window goes to slot n modulo the parts a worker pool holds at once: a slot is written
    # again only after its chunk was taken and written out (processes.forked.held_parts).
    slots = held_parts(workers)
    try:
        shared: mmap.mmap | None = mmap.mmap(-1, slots * SLOT_BYTES)
    except OSError:  # a machine that commits no memory it may not have: every chunk through a file
        shared = None
    parts = [(window, n % slots) for n, window in enumerate(windows)]
    with (
        tempfile.TemporaryDirectory(prefix="evalstore-export-") as folder,
        closing(
            in_order(_encode_window, parts, workers, replace(job, folder=folder, slots=shared), start=_open_worker)
        ) as done,
    ):
        view = memoryview(shared) if shared is not None else None
        for window, written in zip(windows, done):
            if written is None:
                return window[0]
            slot, path, size, results, items = written
            if path is None:  # in its slot
                assert view is not None
                yield Chunk(view[slot * SLOT_BYTES : slot * SLOT_BYTES + size], results, items)
                continue
            with open(path, "rb") as fh:
                data = fh.read()
            os.unlink(path)
            yield Chunk(data, results, items)
    return None


def _open_worker(job: _Job) -> None:
    global _WORKER_STORE
    # The store as this process had it, on connections of the worker's own: a new engine compiled every
    # statement again and read the dictionaries again, in every worker. The pool held no connection at the
    # fork (``_forked``); dropping it without closing keeps a worker off whatever the parent opens later.
    job.store.drop_connections(close=False)
    _WORKER_STORE = job.store


def _encode_window(job: _Job, part: tuple[Window, int]) -> tuple[int, str | None, int, int, int] | None:
    """In a worker: the chunk's results encoded into its slot of the shared buffer, or a file of the job's
    folder when they do not fit (the slot, the file's path or None, the size, the results and the items
    they count for), or None if they interleave with others."""
    assert _WORKER_STORE is not None
    window, slot = part
    start = at = slot * SLOT_BYTES
    end = start + SLOT_BYTES if job.slots is not None else start
    results = items = 0
    spilled: list[bytes] | None = None  # the chunk's encodings, once they outgrow the slot
    try:
        for result in stored_results(
            _WORKER_STORE, job.run_id, inputs=job.inputs, window=window, contiguous=True, origin_ids=job.origin_ids
        ):
            data, counted = job.encode(result)
            results += 1
            items += counted
            # Each result straight into the slot: the chunk's encodings are never held together.
            if spilled is None and at + len(data) <= end:
                job.slots[at : at + len(data)] = data  # type: ignore[index]
                at += len(data)
                continue
            if spilled is None:
                spilled = [bytes(job.slots[start:at])] if job.slots is not None else []
            spilled.append(data)
    except Interleaved:
        return None
    if spilled is None:
        return slot, None, at - start, results, items
    path = os.path.join(job.folder, f"chunk-{window[0]}")
    with open(path, "wb") as fh:
        fh.writelines(spilled)
    return slot, path, sum(map(len, spilled)), results, items
