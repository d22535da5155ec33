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
prompts) must be at the same paths, which holds for a local cluster or a shared file system. Judge keys,
and a PostgreSQL store's password, are read from each worker's own environment (a pool never carries a key,
and the URL sent carries no password): a local cluster started here inherits this process's; on an existing
cluster set them on its nodes.

The cluster is reached (``session``) before the replay writes its run: an address nobody answers at is an
error in seconds, not Ray's quarter of an hour of retries, and leaves no empty run behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import URL

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

CONNECT_TIMEOUT = 5.0
"""Seconds a cluster's head has to accept a connection before the replay gives up, as Ray's own first wait."""

GCS_TRIES = "RAY_gcs_server_port_wait_time_s"
"""Ray's variable for the tries (about 40 s each) a process joining a cluster makes to reach its head."""

Graded = tuple["ResultKey", "TestScored", list[tuple[str, str, int, str]], dict[str, bytes]]
"""One test as a task returns it: key, score, its events encoded for ``append_units``, their blobs."""


def _check_reachable(address: str, source: str, timeout: float) -> None:
    """A TCP connection to the head's address the user gave (Ray's own ``ray://`` client port included), or a
    one-line error naming it: ``host:port``; anything else is left for Ray to judge."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", "local": Ray finds or starts the cluster itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        reason = f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise ReplayError(
            f"no Ray cluster at {address} ({source}): {reason.lower()}; start one there "
            f"(`ray start --head --port {port}`) or give the address `ray status` prints on its head node"
        ) from None


@contextlib.contextmanager
def _quiet_ray() -> Iterator[None]:
    """Ray's ``logging.getLogger("ray")`` at ERROR while it starts or joins a cluster: its warnings then (that
    token authentication is on, say) are about Ray's setup, not the replay, and an error is still shown."""
    logger = logging.getLogger("ray")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _own_sigterm() -> Iterator[None]:
    """This process's SIGTERM handler kept through ``ray.init``, which installs its own (``sys.exit(15)``):
    the CLI's stops a replay as Ctrl-C does (exit 130, the resume hint, its graders killed). A SIGTERM
    while Ray connects is handed to it too, once Ray's C++ wait returns."""
    if threading.current_thread() is not threading.main_thread():
        yield  # Ray sets no handler there either
        return
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    except SystemExit as exc:
        if exc.code != signal.SIGTERM or not callable(previous):
            raise
        previous(signal.SIGTERM, None)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """``values`` in this process's environment while Ray starts or joins a cluster (what it reads then, and
    what a local cluster's processes, started meanwhile, copy), as they were afterwards."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _init_environ(store: EventStore, joining: bool) -> dict[str, str]:
    """Joining a cluster: one try to reach its head (``RAY_gcs_server_port_wait_time_s``, about 40 s; Ray's own
    20 take 14 minutes), unless set here. Starting one: the store's password as ``PGPASSWORD``, for its
    workers (``sent_url`` sends none)."""
    if joining:
        return {GCS_TRIES: os.environ.get(GCS_TRIES, "1")}
    password = store.engine.url.password
    return {"PGPASSWORD": str(password)} if password is not None else {}


def sent_url(url: URL) -> str:
    """The store's URL as the workers get it: without its password, which would otherwise sit in Ray's object
    store (and its spill files) for anyone on the cluster to read. libpq, under psycopg, reads the password
    from each worker's ``PGPASSWORD`` or ``~/.pgpass`` instead."""
    # ``url.set(password=None)`` would keep it: None there means "unchanged".
    bare = URL.create(url.drivername, url.username, None, url.host, url.port, url.database, url.query)
    return bare.render_as_string(hide_password=False)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ReplayError("--executor ray needs Ray: pip install 'evalstore[ray]'") from None
    return ray


class RayExecutor:
    remote = True

    def __init__(
        self, address: str | None = None, *, chunk: int = CHUNK, connect_timeout: float = CONNECT_TIMEOUT
    ) -> None:
        self.address = address
        self.chunk = chunk
        self.connect_timeout = connect_timeout
        self._owns_session = False

    @contextlib.contextmanager
    def session(self, store: EventStore) -> Iterator[None]:
        ray = _ray()
        if not store.reopenable:
            raise ReplayError("--executor ray needs a store its workers can open: a SQLite file or PostgreSQL")
        started_here = not ray.is_initialized()
        if started_here:
            given = self.address or os.environ.get("RAY_ADDRESS")
            if given:
                # Ray itself retries an address nobody answers at for about 14 minutes (20 tries of 40 s),
                # deaf to Ctrl-C inside each: a closed port is told in a moment, a silent one in seconds.
                _check_reachable(given, "--ray-address" if self.address else "RAY_ADDRESS", self.connect_timeout)
            try:
                with _quiet_ray(), _environ(_init_environ(store, given not in (None, "local"))), _own_sigterm():
                    # No address: a local cluster of this machine's cores, inheriting this process's environment.
                    ray.init(
                        address=self.address, include_dashboard=False, log_to_driver=False, configure_logging=False
                    )
            except ConnectionError:
                raise ReplayError(
                    f"cannot join the Ray cluster at {given}: something answers there, but not as a Ray head "
                    "(GCS); give the address `ray status` prints on the head node"
                ) from None
        self._owns_session = started_here
        try:
            yield
        finally:
            self._owns_session = False
            if started_here:
                ray.shutdown()

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
        ray = _ray()  # connected by session()
        # What every task shares, sent once: never a semaphore of this process, its warm interpreters or its
        # environment (a code grader in a worker is spawned from the worker's, as the judge reads its keys there).
        options = dataclasses.replace(job.grade_options, process_slots=None, environment=None, warm=None)
        shared = ray.put(
            (
                sent_url(store.engine.url),
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
            # An interrupt or a failure: what was not appended is graded by --resume. A driver that started
            # Ray here ends its job with ``ray.shutdown``, and the cluster kills the job's workers (their
            # graders with them, by their guardian): cancelling each task first raced Ray's own reply
            # handling, a C++ check that ended the driver with exit 1 before its own 130 (Ray's
            # "Tried to complete task that was not pending", ray-project/ray#54798; CI, 2026-11-30).
            if not self._owns_session:
                for ref in pending:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)


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
