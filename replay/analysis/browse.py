"""Read models for the web viewer (``evalstore view``): the run lineage, one page of a run's results with
its aggregates, everything about one test, and a comparison with what changed per test.

Everything here reads through the store's library API (projections, streams, blobs); nothing renders
HTML. The viewer treats every string these return as untrusted.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from evalstore.replay.analysis.audit import audit_test, known_tests_hint
from evalstore.replay.analysis.cases import CaseOrigin, RunCases
from evalstore.replay.analysis.compare import (
    GraderAssertionDiff,
    GraderRow,
    Key,
    TestRow,
    _GraderTally,
    diff_assertions,
    paired_summary,
)
from evalstore.replay.analysis.per_test import test_units
from evalstore.replay.analysis.prompts import DiffLine, PromptMessage, prompt_diff, prompt_messages
from evalstore.replay.analysis.stats import PairedStats
from evalstore.replay.analysis.views import (
    ResultRow,
    RunSummary,
    list_runs,
    run_started,
    run_summary,
    transcript_run_id,
)
from evalstore.replay.errors import NotFoundError
from evalstore.replay.grading.errored import UNSCORED, left_out_of_score
from evalstore.replay.material import ResultKey, RunMaterial, TestMaterial, result_key
from evalstore.store import EventStore
from evalstore.store.errors import BlobNotFound, StoreError
from evalstore.store.events import (
    ArtifactStored,
    GraderCalled,
    RunStarted,
    TestCaseRecorded,
    TestScored,
    TranscriptRecorded,
    VerdictRecorded,
)

PREVIEW_BYTES = 256 * 1024
"""Artifacts up to this size are read for a preview on the test page; larger ones are only downloadable."""
PREVIEW_CHARS = 64 * 1024
"""At most this much of a text artifact, a transcript message or a prompt is shown inline."""

CHANGED_PER_PAGE = 50
"""Changed tests per compare page, each with its verdicts side by side."""

RASTER_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
SPREADSHEET_SUFFIXES = (".xlsx", ".xls", ".ods", ".csv")


# --- runs -------------------------------------------------------------------------------------


@dataclass
class RunNode:
    """A run in the lineage tree: replays sit under the run they regrade, ``depth`` deep."""

    summary: RunSummary
    depth: int
    overrides: dict[str, Any]
    """What a replay swapped (its ``run_started.overrides``), or a run's options."""


def run_tree(
    store: EventStore, *, suite: str | None = None, kind: str | None = None, text: str | None = None
) -> list[RunNode]:
    """Every run matching the filters, in lineage order: each run followed by the replays of it (depth
    first, oldest first). A run whose parent is filtered out starts a tree of its own."""
    needle = (text or "").lower()

    def matches(s: RunSummary) -> bool:
        if suite and s.suite != suite:
            return False
        if kind and s.kind != kind:
            return False
        fields = (s.run_id, s.suite or "", s.target or "", s.parent_run_id or "", s.source or "")
        return not needle or any(needle in f.lower() for f in fields)

    runs = [s for s in list_runs(store) if matches(s)]
    ids = {s.run_id for s in runs}
    children: dict[str | None, list[RunSummary]] = {}
    for s in runs:
        parent = s.parent_run_id if s.parent_run_id in ids else None
        children.setdefault(parent, []).append(s)
    out: list[RunNode] = []
    stack = [(s, 0) for s in reversed(children.get(None, []))]
    while stack:
        s, depth = stack.pop()
        out.append(RunNode(s, depth, swapped(run_started(store, s.run_id).overrides)))
        stack.extend((c, depth + 1) for c in reversed(children.get(s.run_id, [])))
    return out


def swapped(overrides: dict[str, Any]) -> dict[str, Any]:
    """The overrides that were given (a replay records every option, most of them unset)."""
    return {k: v for k, v in overrides.items() if v not in (None, [], {}, "", False)}


def suites(store: EventStore) -> list[str]:
    return sorted({s.suite for s in list_runs(store) if s.suite})


# --- one run ----------------------------------------------------------------------------------


@dataclass
class ResultFilter:
    status: str | None = None
    min_score: float | None = None
    max_score: float | None = None
    grader: str | None = None
    grader_verdict: str | None = None
    text: str | None = None
    order: str = "test_id"
    descending: bool = False


ORDERS = ("test_id", "score", "status", "target", "attempt")


@dataclass
class GraderMean:
    grader: str
    grader_type: str
    verdicts: int
    passed: int
    failed: int
    skipped: int
    errors: int
    cache_hits: int
    mean: float | None


def grader_means(tallies: list[dict[str, Any]]) -> list[GraderMean]:
    """Per grader, from :meth:`EventStore.grader_counts`' tallies: its verdicts counted by outcome, and its
    mean score over the verdicts that count toward a test's score: an execution error or a skip is left
    out (``grading.errored``), as the test's own score leaves it out; None when none counts."""
    means: dict[str, GraderMean] = {}
    sums: dict[str, tuple[float, int]] = {}
    for row in tallies:
        name, n = row["grader"], int(row["verdicts"])
        g = means.setdefault(name, GraderMean(name, row["grader_type"], 0, 0, 0, 0, 0, 0, None))
        g.verdicts += n
        g.cache_hits += int(row["cache_hits"] or 0)
        g.passed += n if row["verdict"] == "pass" else 0
        g.failed += n if row["verdict"] == "fail" else 0
        g.skipped += n if row["verdict"] == "skip" else 0
        g.errors += n if row["status"] == "execution_error" else 0
        if not left_out_of_score(row["status"]):
            total, count = sums.get(name, (0.0, 0))
            sums[name] = (total + (row["score_sum"] or 0.0), count + n)
    for name, (total, n) in sums.items():
        means[name].mean = round(total / n, 6) if n else None
    return list(means.values())


@dataclass
class RunPage:
    summary: RunSummary
    started: RunStarted
    children: list[str]
    rows: list[ResultRow]
    total: int
    """Results matching the filter (all pages)."""
    offset: int
    limit: int
    graders: list[GraderMean]
    histogram: list[int]


def run_page(store: EventStore, run_id: str, filt: ResultFilter, *, offset: int = 0, limit: int = 100) -> RunPage:
    """A run's summary, aggregates and one page of its results: reads ``limit`` results whatever the run's size."""
    summary = run_summary(store, run_id)
    started = run_started(store, run_id)
    rows, total = store.results_page(
        run_id,
        status=filt.status,
        min_score=filt.min_score,
        max_score=filt.max_score,
        grader=filt.grader,
        grader_verdict=filt.grader_verdict,
        text=filt.text,
        order=filt.order if filt.order in ORDERS else "test_id",
        descending=filt.descending,
        limit=limit,
        offset=offset,
    )
    graders: dict[tuple, dict[str, float]] = {}
    verdicts: dict[tuple, dict[str, str]] = {}
    left_out: dict[tuple, set[str]] = {}
    unscored: dict[tuple, set[str]] = {}
    for v in store.verdicts_of(run_id, [r["test_id"] for r in rows]):
        key = (v["test_id"], v["target"], v["attempt"])
        graders.setdefault(key, {})[v["grader"]] = v["score"]
        verdicts.setdefault(key, {})[v["grader"]] = v["verdict"]
        if left_out_of_score(v["status"]):
            left_out.setdefault(key, set()).add(v["grader"])
        if v["status"] == UNSCORED:
            unscored.setdefault(key, set()).add(v["grader"])
    results = []
    for r in rows:
        key = (r["test_id"], r["target"], r["attempt"])
        results.append(
            ResultRow(
                test_id=r["test_id"],
                target=r["target"],
                attempt=r["attempt"],
                score=r["score"],
                passed=bool(r["passed"]),
                status=r["status"],
                error=r["error"],
                origin=r["origin"],
                graders=graders.get(key, {}),
                verdicts=verdicts.get(key, {}),
                left_out=frozenset(left_out.get(key, ())),
                unscored=frozenset(unscored.get(key, ())),
            )
        )
    means = grader_means(store.grader_counts(run_id))
    children = [r["run_id"] for r in store.query("runs", parent_run_id=run_id)]
    return RunPage(
        summary=summary,
        started=started,
        children=children,
        rows=results,
        total=total,
        offset=offset,
        limit=limit,
        graders=means,
        histogram=store.score_histogram(run_id),
    )


def snapshot_file(store: EventStore, run_id: str, sha256: str) -> tuple[str, bytes]:
    """The path and bytes of one file a run's eval snapshot holds."""
    for f in run_started(store, run_id).eval_snapshot:
        if f.sha256 == sha256:
            return f.path, store.get_blob(sha256)
    raise NotFoundError(f"run {run_id} snapshotted no file with digest {sha256}")


# --- one test ---------------------------------------------------------------------------------


@dataclass
class ArtifactView:
    event_id: str
    artifact: ArtifactStored
    kind: str
    """``image`` (a raster image), ``svg``, ``html``, ``text``, ``spreadsheet`` or ``binary``."""
    text: str | None = None
    """Text artifacts (HTML and SVG as source) up to ``PREVIEW_CHARS``, when small enough to preview."""
    truncated: bool = False
    conversions: list[dict[str, Any]] = field(default_factory=list)
    """What converters made of it for the graders (from the verdicts' preprocessing links), with the text."""


@dataclass
class TestView:
    key: tuple[str, str, int]
    case: dict[str, Any] | None
    transcript: dict[str, Any] | None
    messages: list[dict[str, Any]]
    messages_error: str | None
    artifacts: list[ArtifactView]
    audit: dict[str, Any]
    """The audit of this test (``evalstore audit --show-prompt``): verdicts, calls, conversions, digests."""
    transcript_run_id: str
    case_origin: CaseOrigin | None = None
    """Where ``case`` came from (``RunCases``): recorded with the result, or the run's eval snapshot."""
    case_missing: str | None = None
    """Why there is no ``case``, shown in its place."""


@dataclass
class TestPage:
    run: dict[str, Any]
    tests: list[TestView]
    blobs_checked: int
    blob_problems: dict[str, str]
    checks: list[tuple[str, str, str]] = field(default_factory=list)
    """(what, digest, ok/MISMATCH/MISSING/UNREADABLE) for every digest on the page, re-hashed."""


def _checks(node: Any, where: str, out: dict[str, tuple[str, str, str]]) -> None:
    """Every (digest, its re-hash result) an audit holds: ``X_sha256`` beside ``X_blob``, ``sha256`` beside ``blob``."""
    if isinstance(node, dict):
        label = node.get("path") or node.get("grader") or node.get("role") or where
        for k, v in node.items():
            if k.endswith("sha256") and isinstance(v, str):
                status = node.get(k[: -len("sha256")] + "blob") if k != "sha256" else node.get("blob")
                if isinstance(status, str) and v not in out:
                    out[v] = (f"{label}: {k.removesuffix('_sha256').removesuffix('sha256') or 'bytes'}", v, status)
            elif isinstance(v, (dict, list)):
                _checks(v, f"{where} {k}".strip(), out)
    elif isinstance(node, list):
        for item in node:
            _checks(item, where, out)


def _kind(a: ArtifactStored) -> str:
    media = (a.media_type or "").split(";")[0].strip().lower()
    path = a.path.lower()
    if media in RASTER_TYPES:
        return "image"
    if media == "image/svg+xml" or path.endswith(".svg"):
        return "svg"
    if media in ("text/html", "application/xhtml+xml") or path.endswith((".html", ".htm")):
        return "html"
    if path.endswith(SPREADSHEET_SUFFIXES) or "spreadsheet" in media or "excel" in media:
        return "spreadsheet"
    if media.startswith("text/") or media in ("application/json", "application/xml", "application/yaml"):
        return "text"
    return "binary"


def _preview(store: EventStore, a: ArtifactStored, kind: str) -> tuple[str | None, bool]:
    if a.status != "stored" or not a.sha256 or kind in ("image", "spreadsheet"):
        return None, False
    if (a.size or 0) > PREVIEW_BYTES:
        return None, True
    try:
        data = store.get_blob(a.sha256)
    except StoreError:
        return None, False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, False
    return (text[:PREVIEW_CHARS], len(text) > PREVIEW_CHARS)


def _text_blob(store: EventStore, digest: str | None) -> str | None:
    if not digest:
        return None
    try:
        text = store.get_blob(digest).decode("utf-8", errors="replace")
    except StoreError:
        return None
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + f"\n… [{len(text) - PREVIEW_CHARS} more]"


TEST_TYPES = ("test_case_recorded", "transcript_recorded", "artifact_stored", "verdict_recorded", "test_scored")


def load_test(store: EventStore, run_id: str, test_id: str) -> RunMaterial:
    """A run as :func:`evalstore.replay.material.load_run` reads it, holding only ``test_id`` (every
    target and attempt): the database picks that test's events out of the stream, so a test of a run of
    100,000 results costs what a test of a small run does."""
    started = run_started(store, run_id)
    tests: dict[ResultKey, TestMaterial] = {}
    for stored in store.test_events(run_id, test_id, types=TEST_TYPES):
        ev = stored.event
        if getattr(ev, "test_id", None) != test_id:
            continue  # the test id quoted inside another test's payload
        key = result_key(test_id, ev.target, ev.attempt)  # type: ignore[attr-defined]
        test = tests.setdefault(key, TestMaterial(key))
        if isinstance(ev, TestCaseRecorded):
            test.case = (stored.event_id, ev)
        elif isinstance(ev, TranscriptRecorded):
            test.transcript = (stored.event_id, ev)
        elif isinstance(ev, ArtifactStored):
            test.artifacts.append((stored.event_id, ev))
        elif isinstance(ev, VerdictRecorded):
            test.verdicts[ev.grader] = (stored.event_id, ev)
        elif isinstance(ev, TestScored):
            test.scored = (stored.event_id, ev)
    status = store.query("runs", run_id=run_id)
    completed = bool(status) and status[0]["status"] == "completed"
    return RunMaterial(run_id, started, tests, completed, order=list(tests))


def test_page(store: EventStore, run_id: str, test_id: str, cases: RunCases | None = None) -> TestPage:
    """Every result of ``test_id`` in a run (each target and attempt): input, transcript, artifacts with
    previews and conversions, and the audit of each verdict (prompts, replies, processes), with every
    digest on the way re-hashed. Reads that test's events only, in the run and in the run holding its
    transcripts. ``cases``: the run's (``RunCases.of``), kept by the caller so that a run whose results
    recorded no case has its eval snapshot parsed once, not on every page."""
    run = load_test(store, run_id, test_id)
    if not run.tests:
        # load_test read this test's events only: the run's tests are listed from its results.
        keys = [(r["test_id"], r["target"], r["attempt"]) for r in store.query("results", run_id=run_id)]
        raise NotFoundError(f"run {run_id} has no test {test_id!r}; {known_tests_hint(test_id, keys)}")
    origin_id = transcript_run_id(store, run.started)
    origin = run if origin_id == run_id else load_test(store, origin_id, test_id)
    audit = audit_test(store, run_id, test_id, show_prompt=True, loaded=(run, origin))
    cases = cases or RunCases([run.started, origin.started], store.get_blob)
    views = []
    for audited in audit["tests"]:
        key = (audited["test_id"], audited["target"] or "", audited["attempt"])
        views.append(_test_view(store, run.tests.get(key), origin.tests.get(key), audited, origin.run_id, cases))
    found: dict[str, tuple[str, str, str]] = {}
    _checks(audit, "", found)
    return TestPage(audit["run"], views, audit["blobs_checked"], audit["blob_problems"], list(found.values()))


def _test_view(
    store: EventStore,
    test: TestMaterial | None,
    source: TestMaterial | None,
    audited: dict[str, Any],
    origin: str,
    cases: RunCases,
) -> TestView:
    source = source or test
    case_holder = test if test and test.case else source
    key = (audited["test_id"], audited["target"] or "", audited["attempt"])
    found = cases.find(key, case_holder.case[1] if case_holder and case_holder.case else None)
    case = found.case.model_dump(mode="json") if found.case is not None else None
    transcript = None
    messages: list[dict[str, Any]] = []
    messages_error = None
    if source and source.transcript:
        t = source.transcript[1]
        transcript = t.model_dump(mode="json")
        if t.messages_sha256:
            try:
                messages = json.loads(store.get_blob(t.messages_sha256))
            except (StoreError, json.JSONDecodeError) as exc:
                messages_error = f"the transcript blob cannot be read: {exc}"
    conversions: dict[str, list[dict[str, Any]]] = {}
    for verdict in audited["verdicts"]:
        for p in verdict["preprocessing"]:
            if p.get("missing") or not p.get("artifact_sha256"):
                continue
            # One entry per text the graders saw (a conversion reused by three graders is one text, listed
            # with the three), not one per conversion event.
            seen = conversions.setdefault(p["artifact_sha256"], [])
            same = (p["status"], p["output_sha256"], p.get("reason"), tuple(p.get("argv") or ()))
            match = next((c for c in seen if c["same"] == same), None)
            if match is None:
                text = _text_blob(store, p["output_sha256"])
                seen.append({**p, "same": same, "graders": [verdict["grader"]], "text": text})
            elif verdict["grader"] not in match["graders"]:
                match["graders"].append(verdict["grader"])
                match["reused_from"] = match.get("reused_from") or p.get("reused_from")
    artifacts = []
    for eid, a in source.artifacts if source else []:
        kind = _kind(a)
        text, truncated = _preview(store, a, kind)
        artifacts.append(ArtifactView(eid, a, kind, text, truncated, conversions.get(a.sha256 or "", [])))
    return TestView(
        key, case, transcript, messages, messages_error, artifacts, audited, origin, found.origin, found.missing
    )


def artifact(store: EventStore, run_id: str, sha256: str) -> tuple[ArtifactStored, str, Iterator[bytes]]:
    """An artifact of a run (or of the run holding its transcripts) by digest: its event, kind and bytes, a
    chunk at a time (a large artifact is served without being held whole)."""
    started = run_started(store, run_id)
    for stream in dict.fromkeys((run_id, transcript_run_id(store, started))):
        for stored in store.read_stream(stream, types=["artifact_stored"]):
            a = stored.event
            if isinstance(a, ArtifactStored) and a.sha256 == sha256 and a.status == "stored":
                pieces = store.blob_pieces(sha256)
                try:
                    first = next(pieces, b"")  # a missing blob is known before anything is sent
                except BlobNotFound:
                    raise NotFoundError(f"the bytes of artifact {a.path} ({sha256}) are not in the store") from None
                return a, _kind(a), itertools.chain([first], pieces)
    raise NotFoundError(f"run {run_id} has no stored artifact {sha256}")


# --- compare ----------------------------------------------------------------------------------


@dataclass
class SideBySide:
    """One grader of a changed test in both runs, with its assertions matched and the judge prompts."""

    grader: str
    a: VerdictRecorded | None
    b: VerdictRecorded | None
    assertions: GraderAssertionDiff
    prompt_a: str | None = None
    prompt_b: str | None = None

    @property
    def messages_a(self) -> list[PromptMessage] | None:
        return prompt_messages(self.prompt_a) if self.prompt_a is not None else None

    @property
    def messages_b(self) -> list[PromptMessage] | None:
        return prompt_messages(self.prompt_b) if self.prompt_b is not None else None

    @property
    def prompt_diff(self) -> list[DiffLine]:
        """Prompt A against prompt B, line by line (empty when they read the same, or one is missing)."""
        if self.prompt_a is None or self.prompt_b is None:
            return []
        return prompt_diff(self.prompt_a, self.prompt_b)


@dataclass
class ChangedTest:
    key: Key
    score_a: float
    score_b: float
    delta: float
    flip: str | None
    graders: list[SideBySide]


@dataclass
class CompareStats:
    """What ``evalstore compare A B`` says of two runs (the same statistics, from the same function),
    computed from the projections: the whole-run part of the compare page, kept between its pages."""

    run_a: str
    run_b: str
    seed: int
    resamples: int
    overall: PairedStats
    graders: list[GraderRow]
    paired: int
    """Paired results."""
    tests: int
    """Paired tests, a test's paired attempts one (``per_test``), as every statistic counts them."""
    changed_tests: int
    """Paired tests whose score moved or whose pass/fail flipped, as ``evalstore compare`` counts them."""
    changed: list[TestRow]
    """Paired results whose score moved or whose pass/fail flipped (for the result or any grader), most
    changed first: flips, then grader-only flips, then by the size of the score change."""
    only_in_a: list[Key]
    """The first ``ONLY_SHOWN`` of them, in key order."""
    only_in_a_total: int
    only_in_b: list[Key]
    only_in_b_total: int

    @property
    def averaged(self) -> bool:
        """Whether some paired test has several paired attempts, averaged into one pair."""
        return self.tests != self.paired


@dataclass
class ComparePage:
    stats: CompareStats
    summary_a: RunSummary
    summary_b: RunSummary
    changed: list[ChangedTest]
    """One page of ``stats.changed``, with both verdicts of every grader side by side."""
    page: int
    pages: int
    per: int

    @property
    def changed_total(self) -> int:
        return len(self.stats.changed)

    @property
    def first(self) -> int:
        """The rank (0-based) of this page's first changed test among all of them."""
        return (self.page - 1) * self.per


ONLY_SHOWN = 200
"""Tests only in one run: this many are named on the compare page, with the count of all."""


def _key(test_id: str, target: str, attempt: int) -> Key:
    """A projection row's key as compare pairs results (a projection's "" target is no target)."""
    return (test_id, target or None, attempt)


def compare_stats(store: EventStore, run_a: str, run_b: str, *, seed: int = 0, resamples: int = 10_000) -> CompareStats:
    """The statistics of :func:`evalstore.replay.analysis.compare.compare` for two stored runs, read from
    the results and verdicts projections (no event is decoded): results pair by key, verdicts by
    grader, in the same order, so every number (bootstrap intervals included) is the one ``evalstore
    compare`` prints."""
    for run_id in (run_a, run_b):
        run_summary(store, run_id)  # NotFoundError for a run that is not there
    results = sorted(store.paired_results(run_a, run_b))
    verdicts: dict[tuple[str, str, int], list[tuple]] = {}
    for v in store.paired_verdicts(run_a, run_b):
        verdicts.setdefault(v[:3], []).append(v[3:])
    tallies: dict[str, _GraderTally] = {}
    rows: list[TestRow] = []
    flipped: set[Key] = set()
    for test_id, target, attempt, score_a, score_b, passed_a, passed_b, status_a, status_b in results:
        key = _key(test_id, target, attempt)
        row = TestRow(key, score_a, score_b, bool(passed_a), bool(passed_b), status_a, status_b)
        rows.append(row)
        grader_flipped = False
        for grader, s_a, v_a, s_b, v_b in verdicts.get((test_id, target, attempt), ()):
            tally = tallies.get(grader)
            if tally is None:
                tally = tallies[grader] = _GraderTally()
            if v_a is None:
                tally.only_in_b.add(key)
            elif v_b is None:
                tally.only_in_a.add(key)
            elif v_a == "skip" or v_b == "skip":
                tally.skipped.add(key)
            else:
                tally.add(key, s_a, s_b, v_a == "pass", v_b == "pass")
                grader_flipped = grader_flipped or (v_a == "pass") != (v_b == "pass")
        if grader_flipped or row.passed_a != row.passed_b:
            flipped.add(key)
    units = test_units(rows)
    graders, overall = paired_summary(units, tallies, seed=seed, resamples=resamples)
    changed = [r for r in rows if r.delta != 0 or r.key in flipped]
    changed.sort(key=lambda t: (t.flip is None, t.key not in flipped, -abs(t.delta), t.key[0]))
    only_a, total_a = store.unpaired_results(run_a, run_b, limit=ONLY_SHOWN)
    only_b, total_b = store.unpaired_results(run_b, run_a, limit=ONLY_SHOWN)
    return CompareStats(
        run_a,
        run_b,
        seed,
        resamples,
        overall,
        graders,
        len(rows),
        len(units),
        sum(u.changed for u in units),
        changed,
        [_key(*k) for k in only_a],
        total_a,
        [_key(*k) for k in only_b],
        total_b,
    )


def default_baseline(store: EventStore, run_id: str) -> str:
    """What a run is compared with by default: the run it regrades."""
    parent = run_started(store, run_id).parent_run_id
    if not parent:
        raise NotFoundError(f"run {run_id} is not a replay; pick the run to compare it with")
    return parent


def _prompts(store: EventStore, verdicts: list[VerdictRecorded | None]) -> dict[int, str | None]:
    """The judge request each verdict's first judge call sent, or AgentV's recorded prompt for imports."""
    ids = [eid for v in verdicts if v for eid in v.grader_call_event_ids]
    events = store.get_events(ids)
    out: dict[int, str | None] = {}
    for i, v in enumerate(verdicts):
        if v is None:
            continue
        digest = v.rendered_prompt_sha256
        for eid in v.grader_call_event_ids:
            ev = events.get(eid)
            if ev is not None and isinstance(ev.event, GraderCalled) and ev.event.call == "judge":
                digest = ev.event.request_sha256
                break
        out[i] = _text_blob(store, digest)
    return out


def _verdict_events(store: EventStore, run_id: str, keys: list[Key]) -> dict[tuple[Key, str], VerdictRecorded]:
    """The verdict events of some results of a run, by (key, grader): one joined query through the
    verdicts projection (``EventStore.verdict_events``, as compare's report reads them)."""
    wanted = set(keys)
    out: dict[tuple[Key, str], VerdictRecorded] = {}
    for (test_id, target, attempt), grader, stored in store.verdict_events(run_id, [k[0] for k in keys]):
        key = _key(test_id, target, attempt)
        if key in wanted and isinstance(stored.event, VerdictRecorded):
            out[(key, grader)] = stored.event
    return out


def compare_page(store: EventStore, stats: CompareStats, *, page: int = 1, per: int = CHANGED_PER_PAGE) -> ComparePage:
    """One page of a comparison's changed tests (most changed first), each with both verdicts of every
    grader side by side (assertions matched by text, judge prompts); reads only that page's verdicts."""
    pages = max(1, math.ceil(len(stats.changed) / per))
    if page > pages:
        raise NotFoundError(f"there is no page {page}: {len(stats.changed)} changed tests make {pages} page(s)")
    rows = stats.changed[(page - 1) * per : page * per]
    keys = [r.key for r in rows]
    va, vb = _verdict_events(store, stats.run_a, keys), _verdict_events(store, stats.run_b, keys)
    changed = []
    for row in rows:
        names = sorted({g for k, g in (*va, *vb) if k == row.key})
        pairs = [(va.get((row.key, n)), vb.get((row.key, n))) for n in names]
        prompts = _prompts(store, [v for pair in pairs for v in pair])
        graders = [
            SideBySide(n, a, b, diff_assertions(n, a, b), prompts.get(2 * i), prompts.get(2 * i + 1))
            for i, (n, (a, b)) in enumerate(zip(names, pairs))
        ]
        changed.append(ChangedTest(row.key, row.score_a, row.score_b, row.delta, row.flip, graders))
    return ComparePage(
        stats, run_summary(store, stats.run_a), run_summary(store, stats.run_b), changed, page, pages, per
    )
