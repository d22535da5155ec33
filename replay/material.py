"""A stored run read back as what grading needs: per test, its case, transcript, artifacts and verdicts.

Resume, replay and audit all read runs through :func:`load_run`, so "what a stored run holds" has one
definition.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from evalstore.replay.analysis.views import ResultKey as ResultKey
from evalstore.replay.analysis.views import result_key as result_key
from evalstore.replay.content import Message, dump_messages
from evalstore.replay.errors import NotFoundError
from evalstore.replay.grading.graders.base import TranscriptInfo
from evalstore.store.events import (
    ArtifactStored,
    RunCompleted,
    RunStarted,
    ScoreEdited,
    TargetCallFailed,
    TestCaseRecorded,
    TestScored,
    TranscriptRecorded,
    VerdictRecorded,
    WorkspaceSnapshotted,
)

if TYPE_CHECKING:  # a type name only: `compare` reads scores without loading the eval file's models
    from evalstore.replay.evalfile.specs import EvalTest
    from evalstore.replay.targetsfile.redaction import SecretMask
    from evalstore.store import EventStore


def new_run_id(prefix: str) -> str:
    """Sortable and short: ``rec-20261122T163000-3fa9c1``."""
    return f"{prefix}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"


def completion_event_id(run_id: str) -> str:
    """The one id of a run's ``run_completed``: a second completion (a resume, shards finishing together)
    is then an idempotent no-op, not a duplicate."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"evalstore:{run_id}:completed"))


@dataclass
class TestMaterial:
    key: ResultKey
    case: tuple[str, TestCaseRecorded] | None = None
    transcript: tuple[str, TranscriptRecorded] | None = None
    artifacts: list[tuple[str, ArtifactStored]] = field(default_factory=list)
    snapshot: tuple[str, WorkspaceSnapshotted] | None = None
    verdicts: dict[str, tuple[str, VerdictRecorded]] = field(default_factory=dict)
    scored: tuple[str, TestScored] | None = None
    edits: list[tuple[str, ScoreEdited]] = field(default_factory=list)
    """An imported score's edits, in the order they were made (Inspect AI's score history)."""
    failed_calls: list[tuple[str, TargetCallFailed]] = field(default_factory=list)
    """The target's calls that failed and were tried again before the transcript's, in order."""


@dataclass
class RunMaterial:
    run_id: str
    started: RunStarted
    tests: dict[ResultKey, TestMaterial]
    completed: bool
    order: list[ResultKey] = field(default_factory=list)

    def results_of(self, test_id: str) -> list[TestMaterial]:
        """Every result of ``test_id``: its targets in the order the run first holds them, each target's
        attempts ascending. The events hold a replay's attempts in the order they finished (``add#2``
        before ``add``), which is no order to list them in."""
        targets: dict[str, int] = {}
        keys = [k for k in self.tests if k[0] == test_id]
        for k in keys:
            targets.setdefault(k[1], len(targets))
        return [self.tests[k] for k in sorted(keys, key=lambda k: (targets[k[1]], k[2]))]


_MATERIAL = [
    "run_started",
    "test_case_recorded",
    "transcript_recorded",
    "target_call_failed",
    "artifact_stored",
    "workspace_snapshotted",
    "verdict_recorded",
    "score_edited",
    "test_scored",
    "run_completed",
    "run_failed",
]
"""The events :func:`load_run` reads (a replay's grader calls and conversions are not decoded)."""


def load_run(store: EventStore, run_id: str) -> RunMaterial:
    started, tests, completed = _read(store, run_id)
    if started is None:
        raise NotFoundError(f"no run {run_id!r} in this store; `evalstore runs` lists them")
    return RunMaterial(run_id, started, tests, completed, order=list(tests))


def _read(
    store: EventStore, run_id: str, after: int = 0, upto: int | None = None
) -> tuple[RunStarted | None, dict[ResultKey, TestMaterial], bool]:
    """The material of a run's events between stream versions ``after`` (excluded) and ``upto``."""
    started: RunStarted | None = None
    tests: dict[ResultKey, TestMaterial] = {}
    completed = False

    def material(p) -> TestMaterial:  # type: ignore[no-untyped-def]
        key = result_key(p.test_id, p.target, p.attempt)
        if key not in tests:
            tests[key] = TestMaterial(key)
        return tests[key]

    for stored in store.read_stream(run_id, types=_MATERIAL, after=after, upto=upto):
        ev = stored.event
        if isinstance(ev, RunStarted):
            started = ev
        elif isinstance(ev, TestCaseRecorded):
            material(ev).case = (stored.event_id, ev)
        elif isinstance(ev, TranscriptRecorded):
            material(ev).transcript = (stored.event_id, ev)
        elif isinstance(ev, TargetCallFailed):
            material(ev).failed_calls.append((stored.event_id, ev))
        elif isinstance(ev, ArtifactStored):
            material(ev).artifacts.append((stored.event_id, ev))
        elif isinstance(ev, WorkspaceSnapshotted):
            material(ev).snapshot = (stored.event_id, ev)
        elif isinstance(ev, VerdictRecorded):
            material(ev).verdicts[ev.grader] = (stored.event_id, ev)
        elif isinstance(ev, TestScored):
            material(ev).scored = (stored.event_id, ev)
        elif isinstance(ev, ScoreEdited):
            material(ev).edits.append((stored.event_id, ev))
        elif stored.type in ("run_completed", "run_failed"):
            completed = completed or stored.type == "run_completed"
    return started, tests, completed


WINDOW_RESULTS = 2_000
"""Results a replay reads from its parent run at once (:class:`RunWindows`)."""


class RunWindows:
    """A stored run read a window of results at a time, so a replay of 10^5-10^7 results holds a window's
    material, not the run's: the keys of every result, in order, are read first (each event's key only,
    not the event), then a window's material when a test of it is asked for. Windows end at a result's
    ``test_scored`` (``EventStore.result_ends``): a test's events are appended together, before its score."""

    def __init__(self, store: EventStore, run_id: str, every: int | None = None) -> None:
        self.store = store
        self.run_id = run_id
        first = next(iter(store.read_stream(run_id, types=["run_started"], limit=1)), None)
        if first is None:
            raise NotFoundError(f"no run {run_id!r} in this store; `evalstore runs` lists them")
        self.started: RunStarted = first.event  # type: ignore[assignment]
        self.completed = next(iter(store.read_stream(run_id, types=["run_completed"], limit=1)), None) is not None
        ends = store.result_ends(run_id, every=every or WINDOW_RESULTS)
        # The ends name every window's last result and the run's last result, so a run of at most one
        # window of results (most runs) is one window, its last result to the end of the stream.
        self._bounds = list(zip([0, *ends[:-1]], [*ends[:-1], None], strict=True)) if ends else [(0, None)]
        self.order: list[ResultKey] = []
        self._window: dict[ResultKey, int] = {}
        self._loaded: dict[int, dict[ResultKey, TestMaterial]] = {}
        if len(self._bounds) == 1:
            # One window: its material, read now, gives the keys in the same order (each key where its first
            # event is), in one pass over the events instead of two (an unchanged replay of 300 tests read
            # them twice: 10% of its time).
            self._loaded[0] = _read(store, run_id)[1]
            self.order = list(self._loaded[0])
            self._window = dict.fromkeys(self.order, 0)
            return
        for i, (after, upto) in enumerate(self._bounds):
            for _, _, payload, _ in store.stream_payloads(run_id, types=_KEYED, after=after, upto=upto):
                p = json.loads(payload)
                key = result_key(p["test_id"], p.get("target"), p.get("attempt", 1))
                if key not in self._window:
                    self._window[key] = i
                    self.order.append(key)

    def __len__(self) -> int:
        return len(self.order)

    def windows(self) -> list[list[ResultKey]]:
        """The keys of each window, in order."""
        out: list[list[ResultKey]] = [[] for _ in self._bounds]
        for key in self.order:
            out[self._window[key]].append(key)
        return [keys for keys in out if keys]

    def transcripts(self) -> Iterator[tuple[str, TranscriptRecorded]]:
        """Each transcript event of the run with its id: from the material held when the run is one window
        (read once, not twice), else from the store one event at a time."""
        if len(self._bounds) == 1:
            yield from (test.transcript for test in self._loaded[0].values() if test.transcript is not None)
            return
        for stored in self.store.read_stream(self.run_id, types=["transcript_recorded"]):
            yield stored.event_id, stored.event  # type: ignore[misc]

    def tests(self, keys: list[ResultKey]) -> dict[ResultKey, TestMaterial]:
        """The material of these tests: their windows read (the two read last are kept), the rest let go."""
        out: dict[ResultKey, TestMaterial] = {}
        for i in sorted({self._window[k] for k in keys if k in self._window}):
            if i not in self._loaded:
                while len(self._loaded) >= 2:
                    del self._loaded[next(iter(self._loaded))]
                self._loaded[i] = _read(self.store, self.run_id, *self._bounds[i])[1]
            window = self._loaded[i]
            out.update((k, window[k]) for k in keys if k in window)
        return out


_KEYED = [t for t in _MATERIAL if t not in ("run_started", "run_completed", "run_failed")]
"""The events of :func:`load_run` that belong to one result (they name its test, target and attempt)."""


def transcript_info(get_blob: Callable[[str], bytes], test: TestMaterial) -> TranscriptInfo:
    """What graders see of a stored test: its messages (from the blob) and the target's metrics."""
    if test.transcript is None:
        return TranscriptInfo(messages=[], missing="the run holds no transcript for this test")
    event_id, t = test.transcript
    messages = [Message.model_validate(m) for m in json.loads(get_blob(t.messages_sha256))] if t.messages_sha256 else []
    info = info_from_transcript(t, event_id, messages)
    info.snapshot = test.snapshot
    if t.status != "ok":  # a failed result a replay grades all the same (regrade.agent_failure)
        info.error = t.error or t.status
    if not t.messages_sha256 and t.output_text is None:
        info.missing = "the imported result has neither a transcript nor an output"
    info.traced = recorded_trace(t)
    return info


def recorded_trace(t: TranscriptRecorded) -> bool:
    """Whether a stored result has a trace: its messages (an AgentV row imported alone keeps only its answer
    text, so what the agent called is unknown)."""
    return bool(t.messages_sha256)


def info_from_transcript(
    t: TranscriptRecorded,
    event_id: str,
    messages: list[Message],
    workspace_path: str | None = None,
    workspace_mask: SecretMask | None = None,
) -> TranscriptInfo:
    """A transcript event as graders see it. ``workspace_path`` only while the workspace still
    exists (a live run), with the mask its files were stored through (``workspace_mask``); a stored run
    is graded from captured bytes alone."""
    return TranscriptInfo(
        messages=messages,
        output_text=t.output_text,
        token_usage=t.token_usage,
        cost_usd=t.cost_usd,
        duration_ms=t.duration_ms,
        start_time=t.start_time,
        end_time=t.end_time,
        file_changes=t.file_changes,
        workspace_path=workspace_path,
        workspace_mask=workspace_mask,
        event_id=event_id,
    )


def case_event(test: EvalTest, target: str | None, attempt: int = 1) -> TestCaseRecorded:
    """The resolved test case a result is graded against, as recorded with the result."""
    return TestCaseRecorded(
        test_id=test.id,
        target=target,
        attempt=attempt,
        input=dump_messages(test.input),
        expected_output=test.expected_output,
        criteria=test.criteria,
        metadata=test.metadata,
        graders=[g.model_dump(mode="json") for g in test.graders],
        input_files=test.input_files,
        conversation_id=test.conversation_id,
        category=test.category,
    )


class Tally:
    """Running counts for the completion event, without keeping every result in memory."""

    def __init__(self) -> None:
        self.tests = self.passed = self.failed = self.errors = self.not_regradable = 0
        self.total = 0.0

    @classmethod
    def from_counts(
        cls,
        *,
        run_id: str,
        tests: int,
        passed: int,
        errors: int,
        score_sum: float | None,
        not_regradable: int = 0,
        error_score_sum: float
        | None = None,  # in the aggregate, as the targets and the last seq; a tally has no use for them
        target_min: str | None = None,
        target_max: str | None = None,
        last_seq: int | None = None,
    ) -> Tally:
        """A tally from the store's aggregate (``EventStore.result_counts``) instead of every result."""
        tally = cls()
        tally.tests, tally.passed, tally.errors = tests, int(passed or 0), int(errors or 0)
        tally.not_regradable = not_regradable
        tally.failed = max(tests - tally.passed - tally.errors, 0)
        tally.total = score_sum or 0.0
        return tally

    def add(self, scored: TestScored) -> None:
        self.count(scored.score, scored.passed, scored.status)

    def count(self, score: float, passed: bool, status: str) -> None:
        if status == "not_regradable":  # left out of the counts and the mean
            self.not_regradable += 1
            return
        self.tests += 1
        self.total += score
        if passed:
            self.passed += 1
        elif status == "execution_error":
            self.errors += 1
        else:
            self.failed += 1

    def completed(self) -> RunCompleted:
        mean = round(self.total / self.tests, 6) if self.tests else None
        return RunCompleted(
            tests=self.tests,
            passed=self.passed,
            failed=self.failed,
            errors=self.errors,
            mean_score=mean,
            not_regradable=self.not_regradable,
        )


def load_results(store: EventStore, run_id: str):  # type: ignore[no-untyped-def]
    """A run's scores and verdicts as whole events (every field), as
    :func:`evalstore.replay.analysis.compare.compare` pairs them; :func:`load_scores` reads only what
    pairing needs, from the projections."""
    from evalstore.replay.analysis.compare import RunResults, TestResult

    results: dict[tuple, TestResult] = {}
    verdicts: dict[tuple, dict] = {}
    positions: dict[tuple, int] = {}
    for stored in store.read_stream(run_id, types=["verdict_recorded", "test_scored"]):
        ev = stored.event
        key = (ev.test_id, ev.target, ev.attempt)  # type: ignore[attr-defined]
        if isinstance(ev, VerdictRecorded):
            verdicts.setdefault(key, {})[ev.grader] = ev
        elif isinstance(ev, TestScored):
            results[key] = TestResult(scored=ev, verdicts=verdicts.setdefault(key, {}))
            positions[key] = stored.seq
    if not results and not store.query("runs", run_id=run_id):
        raise NotFoundError(f"no run {run_id!r} in this store; `evalstore runs` lists them")
    return RunResults(run_id=run_id, results=results, positions=positions)


def load_scores(store: EventStore, run_id: str):  # type: ignore[no-untyped-def]
    """A run's scores and verdicts read from the projections (no event decoded), as
    :func:`evalstore.replay.analysis.compare.compare` pairs them. Each verdict is a
    :class:`~evalstore.replay.analysis.compare.VerdictScore`; the comparison reads the full events
    only of the results it shows assertions for. Equal scores, verdicts, verdict maps and results are
    one shared object each, so a run of 100,000 results takes a few tens of MB."""
    import sys

    from evalstore.replay.analysis.compare import RunResults, Score, TestResult, VerdictScore

    intern = sys.intern  # test ids repeat across runs; names and verdicts on every result
    shared: dict[tuple, object] = {}

    def one(value):  # type: ignore[no-untyped-def]
        return shared.setdefault(value, value)

    results: dict[tuple, TestResult] = {}
    positions: dict[tuple, int] = {}
    by_values: dict[tuple, TestResult] = {}
    for r, verdicts in store.results_with_verdicts(run_id):
        # Looked up by the values as read (score, passed, status; each verdict but its event id): most
        # results repeat one already built, and a tuple of plain values hashes far faster than new objects.
        values = (r[3:6], *[v[:5] for v in verdicts])
        result = by_values.get(values)
        if result is None:
            score = one(Score(r[3], bool(r[4]), intern(r[5])))
            graders = {
                intern(g): one(VerdictScore(intern(t), s, intern(v), intern(st))) for g, t, s, v, st, _ in verdicts
            }
            result = by_values[values] = TestResult(score, graders)
        key = (intern(r[0]), intern(r[1]) or None, r[2])
        results[key] = result
        positions[key] = r[8]  # the seq of its score (RESULT_COLUMNS)
    if not results and not store.query("runs", run_id=run_id):
        raise NotFoundError(f"no run {run_id!r} in this store; `evalstore runs` lists them")

    def details(keys: list[tuple]) -> dict[tuple, dict[str, VerdictRecorded]]:
        wanted = set(keys)
        found: dict[tuple, dict[str, VerdictRecorded]] = {}
        for (test_id, target, attempt), grader, stored in store.verdict_events(run_id, [k[0] for k in keys]):
            key = (test_id, target or None, attempt)
            if key in wanted:
                found.setdefault(key, {})[grader] = stored.event  # type: ignore[assignment]
        return found

    return RunResults(run_id=run_id, results=results, details=details, positions=positions)
