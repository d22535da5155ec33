"""``--executor local`` (the default): a replay's tests graded on threads of this process, and those that
never wait partly in a process forked from it (``executors/forked_share.py``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from evalstore.replay.executors import Done, Work, forked_share
from evalstore.replay.processes.workers import Waiting, run_handing_off
from evalstore.replay.recording import BatchedAppends
from evalstore.store.errors import BlobNotFound

if TYPE_CHECKING:
    from evalstore.replay.regrade import ReplayJob
    from evalstore.store import EventStore


class LocalExecutor:
    remote = False

    def __init__(self) -> None:
        self.shared = 0
        """Tests a forked worker graded (``executors/forked_share.py``)."""

    def session(self, store: EventStore) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # threads of this process: nothing to find or reach

    def grade(
        self, job: ReplayJob, store: EventStore, work: Iterable[Sequence[Work]], *, concurrency: int, done: Done
    ) -> None:
        # 64 tests per transaction (a test is still durable within max_seconds): an unchanged replay's work
        # per test is a fraction of a millisecond, and each append's own cost was a measurable part of it.
        batches = BatchedAppends(store, job.run_id, max_tests=64)
        ahead = job.read_ahead(store)
        try:
            for window in work:
                transcripts = TranscriptBlobs(store, job.transcript_digests(window))
                waited = threading.Event()

                def one(
                    item: Work,
                    waiting: Waiting,
                    transcripts: TranscriptBlobs = transcripts,
                    waited: threading.Event = waited,
                ) -> None:
                    def told() -> None:
                        waited.set()
                        waiting()

                    done(item.key, job.grade(store, item, batches, ahead, transcripts.get, told))

                def here(items: Sequence[Work], one: Any = one) -> None:
                    # Tests whose graders never wait (every execution and judge reply reused) are graded
                    # one after another here; more threads start only when one waits.
                    run_handing_off(one, items, concurrency)

                if not forked_share.worth_sharing(store, window, concurrency):
                    here(window)
                    continue
                here(window[: forked_share.FIRST])
                rest = window[forked_share.FIRST :]
                if waited.is_set():
                    here(rest)
                else:
                    self.shared += forked_share.share(job, store, rest, ahead, batches, here, done)
        finally:
            # Tests finished before an interrupt are kept: a resume will not grade them again.
            batches.flush()


class TranscriptBlobs:
    """The message blobs of the transcripts a replay grades, read ``WINDOW`` at a time in the order the
    tests are graded (one query, not one per test), each kept until its test takes it."""

    WINDOW = 64

    def __init__(self, store: EventStore, digests: list[str]) -> None:
        self._store = store
        self._order = digests
        self._position: dict[str, int] = {}
        for i, digest in enumerate(digests):
            self._position.setdefault(digest, i)
        self._kept: dict[str, bytes] = {}
        self._taken: set[str] = set()
        self._lock = threading.Lock()

    def get(self, sha256: str) -> bytes:
        with self._lock:
            data = self._kept.pop(sha256, None)
            if data is None and sha256 in self._position and sha256 not in self._taken:
                start = self._position[sha256]
                wanted = [
                    d for d in self._order[start : start + self.WINDOW] if d not in self._taken and d not in self._kept
                ]
                with contextlib.suppress(BlobNotFound):  # one missing blob fails its own test only, read alone
                    self._kept.update(self._store.get_blobs(wanted))
                data = self._kept.pop(sha256, None)
            self._taken.add(sha256)
        # A blob two tests share, asked for again, is read on its own.
        return data if data is not None else self._store.get_blob(sha256)
