"""``--executor ray``: a replay's tests graded as tasks on a Ray cluster (``pip install 'evalstore[ray]'``).

Who writes: the driver (this process) alone. A task grades a chunk of tests in a worker process with the
same ``ReplayJob.grade`` a local replay runs, reading the store (transcripts, the judge cache, recorded
conversions and executions) through its own read-only use of the store's URL, and returns each test's
events, already encoded, with their blobs; the driver appends every returned test whole, exactly once
(``EventStore.append_units``: a test the run already holds is dropped, whatever its event ids). So a SQLite
store works (its workers only read the file, on the driver's machine), a worker that dies loses nothing
that was appended, and Ray's retry of its task (``max_retries``) grades the chunk again without doubling
anything; a killed driver leaves the tests it appended, and ``replay --resume`` grades the rest.

What a worker needs from the driver's machine: the store's URL must reach the store from every node
(PostgreSQL for a cluster of several machines), and the eval's files (grader scripts, converters,
prompts) must be at the same paths, which holds for a local cluster or a shared file system. Judge keys
are read from each worker's own environment (a pool never carries one): a local cluster started here
inherits this process's; on an existing cluster set them on its nodes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from evalstore.replay.errors import ReplayError
from evalstore.replay.executors import Done, Work
from evalstore.replay.processes.workers import run_concurrently
from evalstore.store.errors import BlobNotFound

if TYPE_CHECKING:
    from evalstore.replay.material import ResultKey
    from evalstore.replay.recording import ReadAhead
    from evalstore.replay.regrade import ReplayJob
    from evalstore.store import EventStore
    from evalstore.store.events import TestScored

CHUNK = 16
"""Tests per task: each task pays a scheduling round trip and a transaction on the driver, so a test alone
is too small; a chunk must still be small enough for a retried task to redo little."""

MAX_RETRIES = 3
"""Times Ray runs a task again after its worker died (not after a grading error, which is a bug to see)."""

Graded = tuple["ResultKey", "TestScored", list[tuple[str, str, int, str]], dict[str, bytes]]
"""One test as a task returns it: key, score, its events encoded for ``append_units``, their blobs."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ReplayError("--executor ray needs Ray: pip install 'evalstore[ray]'") from None
    return ray


class RayExecutor:
    remote = True

    def __init__(self, address: str | None = None, *, chunk: int = CHUNK) -> None:
        self.address = address
        self.chunk = chunk

    def grade(
        self, job: ReplayJob, store: EventStore, work: Iterable[Sequence[Work]], *, concurrency: int, done: Done
    ) -> None:
        # Chunks cut from the windows as they come: the next window is read while the last one's tasks run.
        chunks: Iterator[list[Work]] = (
            list(window[i : i + self.chunk]) for window in work for i in range(0, len(window), self.chunk)
        )
        first = next(chunks, None)
        if first is None:
            return
        ray = _ray()
        if not store.reopenable:
            raise ReplayError("--executor ray needs a store its workers can open: a SQLite file or PostgreSQL")
        started_here = not ray.is_initialized()
        if started_here:
            # No address: a local cluster of this machine's cores, inheriting this process's environment.
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        # What every task shares, sent once: never a semaphore of this process, its warm interpreters or its
        # environment (a code grader in a worker is spawned from the worker's, as the judge reads its keys there).
        options = dataclasses.replace(job.grade_options, process_slots=None, environment=None, warm=None)
        shared = ray.put(
            (
                store.engine.url.render_as_string(hide_password=False),
                dataclasses.replace(job, grade_options=options, concurrency=concurrency),
            )
        )
        task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(grade_chunk)
        upcoming: list[Work] | None = first
        # Enough chunks queued to keep every worker busy while finished ones are appended, no more (the
        # driver holds what they return until it is appended).
        in_flight = max(4, 4 * int(ray.cluster_resources().get("CPU", 1)))
        job_key = f"{job.run_id}:{uuid.uuid4().hex}"
        pending: list[Any] = []
        try:
            while upcoming is not None or pending:
                while upcoming is not None and len(pending) < in_flight:
                    pending.append(task.remote([shared], job_key, upcoming))
                    upcoming = next(chunks, None)
                ready, pending = ray.wait(pending, num_returns=1)
                # And every other task done meanwhile (while the last transaction ran): one transaction for
                # all of them, since on PostgreSQL a transaction's own cost is most of a small one's.
                more, pending = ray.wait(pending, num_returns=len(pending), timeout=0) if pending else ([], [])
                graded: list[Graded] = [g for ref in ready + more for g in ray.get(ref)]
                blobs = {d: b for _, _, _, bs in graded for d, b in bs.items()}
                store.append_units(job.run_id, [(key, events) for key, _, events, _ in graded], blobs=blobs)
                for key, scored, _, _ in graded:
                    done(key, scored)
        finally:
            for ref in pending:  # an interrupt or a failure: what was not appended is graded by --resume
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if started_here:
                ray.shutdown()


# --- in the worker ------------------------------------------------------------------------------

_JOBS: dict[str, tuple[ReplayJob, EventStore, ReadAhead | None]] = {}
_JOBS_LOCK = threading.Lock()


def _job(shared: list[Any], job_key: str) -> tuple[ReplayJob, EventStore, ReadAhead | None]:
    """The job, its store and what it reads ahead: made once per worker process for each replay (a worker
    runs many tasks; the suite and the read-ahead are the costly part to make)."""
    with _JOBS_LOCK:
        if job_key not in _JOBS:
            from evalstore.replay.grading.graders.base import process_slots
            from evalstore.store import EventStore
            from evalstore.store.engine import make_engine

            ray = _ray()
            url, job = ray.get(shared[0])
            job = dataclasses.replace(
                job, grade_options=dataclasses.replace(job.grade_options, process_slots=process_slots(job.concurrency))
            )
            for old_job, old, _ in _JOBS.values():  # one replay at a time per worker: free the last one's
                old_job.judges.close()
                old.close()
            _JOBS.clear()
            store = EventStore(make_engine(url, create=False), check_schema=False)
            _JOBS[job_key] = (job, store, job.read_ahead(store))
        return _JOBS[job_key]


def grade_chunk(shared: list[Any], job_key: str, work: list[Work]) -> list[Graded]:
    """A Ray task: grade ``work`` (``job.concurrency`` tests at a time) and return each test's events,
    encoded, with its blobs; nothing is written here. ``shared`` is a list so Ray hands over the reference,
    not the object: the job is fetched once per worker, not once per task."""
    from evalstore.replay.regrade import Collected

    job, store, ahead = _job(shared, job_key)
    digests = job.transcript_digests(work)
    transcripts: dict[str, bytes] = {}
    with contextlib.suppress(BlobNotFound):  # a missing one fails its own test only, read alone
        transcripts = store.get_blobs(digests)

    def transcript(sha256: str) -> bytes:
        data = transcripts.get(sha256)
        return data if data is not None else store.get_blob(sha256)

    recorders = Collected()
    scores: dict[ResultKey, TestScored] = {}
    lock = threading.Lock()

    def one(item: Work) -> None:
        scored = job.grade(store, item, recorders, ahead, transcript)
        with lock:
            scores[item.key] = scored

    run_concurrently(one, work, job.concurrency)
    out: list[Graded] = []
    for recorder in recorders:
        key = recorder.key
        assert key is not None  # a replay's recorders hold one test each
        out.append((key, scores[key], store.encode_events(recorder.events), recorder.blobs))
    order = {w.key: i for i, w in enumerate(work)}
    out.sort(key=lambda g: order[g[0]])
    return out
