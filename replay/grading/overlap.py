"""A test's graders, overlapping where they wait.

Graders run in their order, one at a time, as AgentV runs them; but when one starts to wait on the
outside world (its code-grader process, its judge's reply: it calls ``ctx.waiting()`` first), the next
one starts on another thread instead of waiting too. A test graded by three scripts then takes about as
long as its slowest script, not the three together, at any ``--concurrency``.

What the log holds does not depend on it. Each grader records into a buffer of its own
(:class:`GraderBuffer`), and the engine adds the buffers to the test's recorder in grader order, each
followed by its verdict, as if the graders had run one after another. A grader starts only after every
earlier one has started waiting (or finished), so its own preparation (its answer's conversions, its
payload, its reuse lookups) sees what those recorded up to then, and nothing later: a conversion is
made once and reused by the graders after it, as before. What it cannot see is an earlier grader's
reply still on its way, so two graders of one test asking the same judge the same thing both ask.

A grader that never waits (one whose recorded execution or judge reply is reused: an unchanged replay)
runs on the test's own thread, and so does every grader after it until one waits.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from evalstore.replay.grading.graders.base import GradingContext, Recorder
from evalstore.replay.grading.reuse import reusable_conversion, reusable_judge_call, reusable_process_call
from evalstore.replay.processes.workers import join_growing
from evalstore.store.codec import sha256_hex
from evalstore.store.envelope import new_event_id
from evalstore.store.events import DomainEvent, GraderCalled, PreprocessingRecorded

T = TypeVar("T")


class GraderBuffer:
    """One grader's events and blobs while its test's graders overlap (a ``Recorder``).

    Lookups see its own events, then what each earlier grader of the test had recorded when the next
    one started (:meth:`freeze`), latest first, then the test's recorder (its earlier events, the store)."""

    def __init__(self, parent: Recorder, earlier: list[GraderBuffer]) -> None:
        self._parent = parent
        self._earlier = earlier
        self.events: list[tuple[str, DomainEvent]] = []
        self.blobs: dict[str, bytes] = {}
        self._shown: int | None = None
        """How many of its events later graders see: set when the next grader starts."""

    def freeze(self) -> None:
        """The next grader starts now: it sees this grader's events so far, never later ones."""
        if self._shown is None:
            self._shown = len(self.events)

    def put_blob(self, data: bytes) -> str:
        digest = sha256_hex(data)
        self.blobs.setdefault(digest, bytes(data))
        return digest

    def get_blob(self, sha256: str) -> bytes:
        for buffer in (self, *reversed(self._earlier)):
            if (data := buffer.blobs.get(sha256)) is not None:
                return data
        return self._parent.get_blob(sha256)

    def record(self, event: DomainEvent, event_id: str | None = None) -> str:
        event_id = event_id or new_event_id()
        self.events.append((event_id, event))
        return event_id

    def _find(self, match: Callable[[DomainEvent], bool]) -> tuple[str, Any] | None:
        for buffer in (self, *reversed(self._earlier)):
            shown = buffer.events if buffer is self else buffer.events[: buffer._shown]
            for event_id, event in reversed(shown):
                if match(event):
                    return event_id, event
        return None

    def find_conversion(self, fingerprint: str) -> tuple[str, PreprocessingRecorded] | None:
        found = self._find(lambda e: reusable_conversion(e, fingerprint))
        return found if found is not None else self._parent.find_conversion(fingerprint)

    def find_judge_call(self, cache_key: str) -> tuple[str, GraderCalled] | None:
        found = self._find(lambda e: reusable_judge_call(e, cache_key))
        return found if found is not None else self._parent.find_judge_call(cache_key)

    def find_process_call(self, cache_key: str) -> tuple[str, GraderCalled] | None:
        found = self._find(lambda e: reusable_process_call(e, cache_key))
        return found if found is not None else self._parent.find_process_call(cache_key)

    def add_to(self, recorder: Recorder) -> None:
        """Into the test's recorder, with the ids the grader's verdict links."""
        for data in self.blobs.values():
            recorder.put_blob(data)
        for event_id, event in self.events:
            recorder.record(event, event_id)


def overlapping(ctx: GradingContext, jobs: list[Callable[[GradingContext], T]]) -> list[tuple[T, GraderBuffer]]:
    """Run ``jobs`` (one per grader, in order), each with a context recording into its own buffer, the
    next starting when one calls ``ctx.waiting()``; their results and buffers, in order. An exception
    from any (a database failure, an interrupted run) is raised once all have stopped."""
    return _Overlap(ctx, jobs).run()


class _Overlap:
    def __init__(self, ctx: GradingContext, jobs: list[Callable[[GradingContext], Any]]) -> None:
        self.ctx = ctx
        self.jobs = jobs
        self.buffers: list[GraderBuffer] = []
        self.results: list[Any] = [None] * len(jobs)
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.next = 0
        self.lock = threading.Lock()

    def run(self) -> list[tuple[Any, GraderBuffer]]:
        self._from(self._take())
        join_growing(self.threads, self.lock)
        if self.errors:
            raise self.errors[0]
        return list(zip(self.results, self.buffers))

    def _take(self) -> int | None:
        with self.lock:
            if self.next >= len(self.jobs) or self.errors:
                return None
            self.next += 1
            return self.next - 1

    def _from(self, n: int | None) -> None:
        """Run job ``n``, then the ones after it, until one starts waiting (a new thread goes on)."""
        while n is not None:
            buffer = GraderBuffer(self.ctx.recorder, self.buffers[:n])
            self.buffers.append(buffer)
            handed_off = threading.Event()

            def waiting(buffer: GraderBuffer = buffer, handed_off: threading.Event = handed_off) -> None:
                if handed_off.is_set():
                    return
                buffer.freeze()
                handed_off.set()
                self.ctx.test_waiting()
                following = self._take()
                if following is not None:
                    thread = threading.Thread(target=self._from, args=(following,), daemon=True)
                    with self.lock:
                        self.threads.append(thread)
                    thread.start()

            # dataclasses.replace, less its walk over the fields (GradingContext has no __post_init__)
            ctx = copy.copy(self.ctx)
            ctx.recorder, ctx.waiting = buffer, waiting
            try:
                self.results[n] = self.jobs[n](ctx)
            except BaseException as exc:
                with self.lock:
                    self.errors.append(exc)
                return
            buffer.freeze()
            if handed_off.is_set():
                return
            n = self._take()
