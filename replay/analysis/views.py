"""Read models over the store for people: run lists, one run's results, finding a run by a short id."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from evalstore.replay.errors import NotFoundError
from evalstore.replay.grading.errored import UNSCORED, left_out_of_score
from evalstore.store import StoredEvent

if TYPE_CHECKING:
    from evalstore.store import (
        EventStore,  # listing runs reads projections only; the pydantic catalogue loads when an event is decoded
    )
    from evalstore.store.events import LineSkipped, RunStarted


ResultKey = tuple[str, str, int]
"""(test id, target or "", attempt): how results are paired across runs."""


def result_key(test_id: str, target: str | None, attempt: int) -> ResultKey:
    return (test_id, target or "", attempt)


@dataclass
class RunSummary:
    run_id: str
    kind: str
    parent_run_id: str | None
    suite: str | None
    target: str | None
    status: str
    tests: int
    passed: int
    errors: int
    mean_score: float | None
    started_at: str
    mean_score_without_errors: float | None = None
    """The mean over the results that are not execution errors, when some are: the figure AgentV's
    summary gives ("N execution errors excluded"). ``mean_score`` counts each error as its score, 0."""
    """When the run started; for an import, when its AgentV run did (when known)."""
    source: str | None = None
    imported_at: str | None = None
    """For an import: when it was imported into this store."""
    changes: list[str] = field(default_factory=list)
    """For a replay: what it swapped (``describe_swaps`` of its recorded overrides)."""
    not_regradable: int = 0
    """Results a replay found nothing to grade in: not in ``tests`` nor the mean."""
    source_status: str | None = None
    """For an import: how its source run ended, when it did not succeed (``RunStarted.source_status``)."""
    last_seq: int | None = None
    """The seq of the last result these counts count (None: none): what bounds the results written with
    them (an export's, while an import may still add to the run). A position in the log, not shown."""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["last_seq"]
        return d

    @property
    def shown_status(self) -> str:
        """The status as tables show it: an import of a cancelled or failed eval says so beside its own
        (Inspect's ``started``, a log whose process died, as ``unfinished``)."""
        if not self.source_status:
            return self.status
        return f"{self.status} ({_SOURCE_WORDS.get(self.source_status, self.source_status)} at source)"


_SOURCE_WORDS = {"started": "unfinished"}


@dataclass
class ResultRow:
    test_id: str
    target: str
    attempt: int
    score: float
    passed: bool
    status: str
    error: str | None
    origin: str
    graders: dict[str, float] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    left_out: frozenset[str] = frozenset()
    """The graders that failed to run or gave no score, whose score is left out of the test's (a table shows
    them as an error, or ``unscored``, not their recorded 0; --json has their verdict, ``skip``)."""
    unscored: frozenset[str] = frozenset()
    """Those of ``left_out`` that gave no score and are no error (``grading.errored.UNSCORED``)."""

    def to_dict(self) -> dict[str, Any]:
        # Spelled out: asdict() deep-copies, which is most of the cost on a large run.
        return {
            "test_id": self.test_id,
            "target": self.target,
            "attempt": self.attempt,
            "score": self.score,
            "passed": self.passed,
            "status": self.status,
            "error": self.error,
            "origin": self.origin,
            "graders": dict(self.graders),
            "verdicts": dict(self.verdicts),
        }


def _summaries(store: EventStore, run_rows: list[dict]) -> list[RunSummary]:
    counts = store.result_counts(run_rows[0]["run_id"] if len(run_rows) == 1 else None)
    out = []
    for run in run_rows:
        c = counts.get(run["run_id"], {"tests": 0, "passed": 0, "errors": 0, "score_sum": None})
        out.append(
            RunSummary(
                run_id=run["run_id"],
                kind=run["kind"],
                parent_run_id=run["parent_run_id"],
                suite=run["suite"],
                target=run["target_name"] or _one_target(c),
                status=run["status"],
                tests=c["tests"],
                passed=int(c["passed"] or 0),
                errors=int(c["errors"] or 0),
                mean_score=round(c["score_sum"] / c["tests"], 6) if c["tests"] else None,
                started_at=run["started_at"],
                mean_score_without_errors=_mean_without_errors(c),
                source=run["source"],
                not_regradable=int(c.get("not_regradable") or 0),
                last_seq=c.get("last_seq"),
            )
        )
    for summary in out:
        if summary.kind == "replay":
            summary.changes = describe_swaps(run_started(store, summary.run_id).overrides)
        elif summary.kind == "imported":
            first = _first_event(store, summary.run_id)
            summary.imported_at = first.recorded_at
            summary.source_status = first.event.source_status  # type: ignore[attr-defined]
    return out


def _one_target(counts: dict[str, Any]) -> str | None:
    """The target every result of a run names, when the run itself names none: an import (AgentV rows
    carry theirs) or a replay of one. None for a run of several targets."""
    least = counts.get("target_min")
    return least if least and least == counts.get("target_max") else None


def _mean_without_errors(counts: dict[str, Any]) -> float | None:
    errors, answered = int(counts["errors"] or 0), counts["tests"] - int(counts["errors"] or 0)
    if not errors or answered <= 0:
        return None
    return round((counts["score_sum"] - (counts.get("error_score_sum") or 0)) / answered, 6)


def _first_event(store: EventStore, run_id: str) -> StoredEvent:
    for stored in store.read_stream(run_id, types=["run_started"], limit=1):
        return stored
    raise NotFoundError(f"no run {run_id!r}")


def describe_swaps(overrides: dict[str, Any]) -> list[str]:
    """What a replay changed, one short phrase per swap: eval, preprocessors, prompts, judge, graders,
    tests (and threshold, no-cache). A replay that swapped nothing gives ``[]``."""
    o = overrides or {}
    out: list[str] = []
    if o.get("eval_path"):
        out.append(f"eval {o['eval_path'].replace(chr(92), '/').rsplit('/', 1)[-1]}")
    for spec in o.get("preprocessors") or []:
        out.append(f"preprocessor {str(spec).split('=', 1)[0]}")
    for spec in o.get("prompts") or []:
        out.append(f"prompt {str(spec).split('=', 1)[0]}")
    judge = [f"{k} {o[key]}" for k, key in (("target", "judge_target"), ("model", "judge_model")) if o.get(key)]
    if judge:
        out.append("judge " + ", ".join(judge))
    if o.get("graders"):
        out.append("graders " + ",".join(o["graders"]))
    if o.get("tests"):
        out.append(f"tests {o['tests']}")
    if o.get("threshold") is not None:
        out.append(f"threshold {o['threshold']}")
    if o.get("no_cache"):
        out.append("no cache")
    return out


def list_runs(
    store: EventStore, *, suite: str | None = None, kind: str | None = None, limit: int | None = None
) -> list[RunSummary]:
    """Runs in the order they started; ``suite``/``kind`` filter, ``limit`` keeps the newest."""
    rows = sorted(store.query("runs"), key=lambda r: r["started_seq"])
    rows = [r for r in rows if (suite is None or r["suite"] == suite) and (kind is None or r["kind"] == kind)]
    if limit is not None:
        rows = rows[-limit:] if limit else []
    return _summaries(store, rows) if rows else []


def resolve_run(store: EventStore, ref: str) -> str:
    """A run id from a full id, a unique prefix, or ``last`` (the most recently started run)."""
    ids = store.run_ids()
    if ref == "last":
        if not ids:
            raise NotFoundError("the store has no runs yet")
        return ids[-1]
    if ref in ids:
        return ref
    if not ref.strip():
        raise NotFoundError("the run id is empty: give an id, a unique prefix of one, or last")
    matches = [i for i in ids if i.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise NotFoundError(f"no run {ref!r} in this store; `evalstore runs` lists them")
    shown = ", ".join(matches[:5]) + (f" and {len(matches) - 5} more" if len(matches) > 5 else "")
    raise NotFoundError(f"run id {ref!r} is ambiguous ({shown}); give more characters")


def run_summary(store: EventStore, run_id: str) -> RunSummary:
    rows = store.query("runs", run_id=run_id)
    if not rows:
        raise NotFoundError(f"no run {run_id!r}")
    return _summaries(store, rows)[0]


def run_started(store: EventStore, run_id: str) -> RunStarted:
    return _first_event(store, run_id).event  # type: ignore[return-value]


def skipped_lines(store: EventStore, run_id: str) -> list[LineSkipped]:
    """The source lines an import left out (``--skip-bad``, or a result superseded by a later one), with
    why; each source with its file made absolute again."""
    from evalstore.store.events import LineSkipped, RunStarted

    root: str | None = None
    lines = []
    for stored in store.read_stream(run_id, types=["run_started", "line_skipped"]):
        ev = stored.event
        if isinstance(ev, RunStarted):
            root = ev.source.file if ev.source else None
        elif isinstance(ev, LineSkipped):
            lines.append(ev.model_copy(update={"source": ev.source.resolved(root)}))
    return lines


def replay_chain(store: EventStore, started: RunStarted) -> list[RunStarted]:
    """A run and every run it replays, newest first, down to the one holding the transcripts. Walks
    ``run_started`` events only, never whole streams; a cycle (a damaged store) ends the walk."""
    chain, seen = [started], {started.run_id}
    while started.kind == "replay" and started.parent_run_id and started.parent_run_id not in seen:
        seen.add(started.parent_run_id)
        started = run_started(store, started.parent_run_id)
        chain.append(started)
    return chain


def transcript_run_id(store: EventStore, started: RunStarted) -> str:
    """The run holding a run's transcripts: itself, or for a replay the run it (ultimately) replayed."""
    return replay_chain(store, started)[-1].run_id


def iter_results(store: EventStore, run_id: str) -> Iterator[ResultRow]:
    """A run's results with each grader's score and verdict, streamed from the projections in key order
    (no event is decoded)."""
    for r, verdicts in store.results_with_verdicts(run_id):
        yield _result_row(r, verdicts)


def _result_row(r: tuple, verdicts: list[tuple]) -> ResultRow:
    return ResultRow(
        test_id=r[0],
        target=r[1],
        attempt=r[2],
        score=r[3],
        passed=bool(r[4]),
        status=r[5],
        error=r[6],
        origin=r[7],
        graders={v[0]: v[2] for v in verdicts},
        verdicts={v[0]: v[3] for v in verdicts},
        left_out=frozenset(v[0] for v in verdicts if left_out_of_score(v[4])),
        unscored=frozenset(v[0] for v in verdicts if v[4] == UNSCORED),
    )


def run_results(store: EventStore, run_id: str) -> list[ResultRow]:
    return list(iter_results(store, run_id))


_NOTE_CHUNK = 500
"""Results read before the events of those a note can apply to are fetched, in one query."""


def noted_results(store: EventStore, run_id: str) -> Iterator[tuple[ResultRow, str]]:
    """:func:`iter_results`, each with why it scored what it did where its graders' scores do not say it
    (``scoring.explain_score``, else an execution error's own message; '' for most). One pass over the
    projections, streamed; the events are decoded only for the results a note can apply to
    (:func:`_may_have_note`), a chunk at a time, so reading the first rows reads only the first chunk. A
    note naming the required grader of an import (whose verdicts do not say which is required) reads the
    test's graders from the run's eval snapshot, once per run and only then (:class:`_EvalGraders`)."""
    chunk: list[tuple[tuple, list[tuple]]] = []
    specs = _EvalGraders(store, run_id)
    for result in store.results_with_verdicts(run_id):
        chunk.append(result)
        if len(chunk) >= _NOTE_CHUNK:
            yield from _noted(store, chunk, specs)
            chunk = []
    yield from _noted(store, chunk, specs)


def score_notes(store: EventStore, run_id: str) -> dict[tuple, str]:
    """Per result ``(test_id, target or "", attempt)`` that has one, its note (:func:`noted_results`)."""
    return {(r.test_id, r.target or "", r.attempt): note for r, note in noted_results(store, run_id) if note}


def _may_have_note(score: float, verdicts: list[tuple]) -> bool:
    """A note can apply to a result with a grader that failed to run or was skipped, or a score of 0
    with graders (a required gate: a failed grader's, or one whose verdict is pass but whose score is
    below its ``min_score``). Read from the verdict projection rows (``EventStore.VERDICT_COLUMNS``)."""
    return any(left_out_of_score(v[4]) for v in verdicts) or (score == 0 and bool(verdicts))


class _EvalGraders:
    """The graders of a run's tests as its eval snapshot has them (``RunCases.graders``): for the note of an
    import's test zeroed by a required grader's gate, which the verdicts do not mark. The snapshot is
    parsed on the first call, if ever."""

    def __init__(self, store: EventStore, run_id: str) -> None:
        self._store, self._run_id = store, run_id
        self._cases: Any = None

    def of(self, test_id: str) -> Callable[[], Sequence[Any] | None]:
        def graders() -> Sequence[Any] | None:
            if self._cases is None:
                from evalstore.replay.analysis.cases import RunCases

                self._cases = RunCases.of(self._store, self._run_id)
            return self._cases.graders(test_id)

        return graders


def _noted(
    store: EventStore, chunk: list[tuple[tuple, list[tuple]]], specs: _EvalGraders
) -> Iterator[tuple[ResultRow, str]]:
    candidates = [(r, verdicts) for r, verdicts in chunk if _may_have_note(r[3], verdicts)]
    notes: dict[tuple, str] = {}
    if candidates:
        from evalstore.replay.grading.scoring import explain_score

        # The results' and verdicts' events are named by their seq: the last column of each row.
        events = store.events_at([r[-1] for r, _ in candidates] + [v[-1] for _, vs in candidates for v in vs])
        for r, verdicts in candidates:
            threshold = events[r[-1]].event.threshold  # type: ignore[attr-defined]
            notes[r[:3]] = explain_score((events[v[-1]].event for v in verdicts), threshold, r[3], specs.of(r[0]))
    for r, verdicts in chunk:
        # An execution error with nothing of its graders' to say is its own: why the answer is missing.
        yield _result_row(r, verdicts), notes.get(r[:3]) or (r[6] if r[5] == "execution_error" and r[6] else "")
