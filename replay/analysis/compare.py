"""Compare two runs of the same suite, test by test and grader by grader.

Results are paired by (test id, target, attempt) and, inside a pair, verdicts by grader name; the
statistics, win/loss/tie and the regression gates count tests, a test's paired attempts averaged
(:mod:`evalstore.replay.analysis.per_test`: trials of one test are not independent). The
comparison is plain data (:class:`Comparison`): rows for tables, the statistics of
:mod:`evalstore.replay.analysis.stats`, and ``to_dict()`` for JSON. Building :class:`RunResults` from the store is the
caller's job; this module never reads the store.

Pairing rules the spec left open:

* The test-level ("overall") statistics use each result's ``TestScored`` as the run reported it,
  execution errors included (they count as failures with their recorded score).
* Per-grader statistics leave out pairs where either verdict is ``skip``: a skip means the grader
  produced no verdict (AgentV: an LLM-grader parse failure), so it is neither a pass nor a score.
  The number of tests with such a pair is reported as ``skipped``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from evalstore.replay.analysis.outcomes import Outcomes, normalized_gain, outcome, outcomes
from evalstore.replay.analysis.per_test import (
    CountedTests,
    Flip,
    Paired,
    TestUnit,
    flip_of,
    in_order,
    per_test_columns,
    test_units,
)
from evalstore.replay.analysis.stats import MIN_PAIRS_CI, PairedStats, paired_stats
from evalstore.replay.choices import OUTCOME_THRESHOLD, REGRESSION_MODES
from evalstore.replay.errors import CompareError
from evalstore.store.events import Assertion, TestScored, VerdictRecorded

Key = tuple[str, str | None, int]
"""(test id, target, attempt): what pairs a result of run A with one of run B."""


if TYPE_CHECKING:
    from evalstore.replay.analysis.calibration import ClusteredDifference


def plural_clusters(n: int) -> str:
    return f"{n} cluster{'' if n == 1 else 's'}"


@dataclass(frozen=True, slots=True)
class Score:
    """A result's aggregate as the ``results`` projection holds it: what pairing needs of a ``TestScored``."""

    score: float
    passed: bool
    status: str


@dataclass(frozen=True, slots=True)
class VerdictScore:
    """A verdict as the ``verdicts`` projection holds it: what pairing needs of a ``VerdictRecorded``.
    Equal values are one shared object (a run holds a handful of distinct ones); the full event is read,
    by its result's key, only where assertions are shown (flipped tests, ``--test``)."""

    grader_type: str
    score: float
    verdict: str
    status: str

    @property
    def assertions(self) -> list[Assertion]:
        """None read: :meth:`RunResults.full_verdicts` replaces this with the event where they are shown."""
        return []


Verdict = VerdictRecorded | VerdictScore


@dataclass(slots=True)
class TestResult:
    """One result of a run: its aggregate and its verdicts keyed by grader name (not to be changed: a
    run read from the projections shares equal results between keys)."""

    scored: TestScored | Score
    verdicts: dict[str, Verdict] = field(default_factory=dict)


@dataclass(slots=True)
class RunResults:
    run_id: str
    results: dict[Key, TestResult]
    details: Callable[[list[Key]], dict[Key, dict[str, VerdictRecorded]]] | None = None
    """Reads the full verdict events of some results (by key), for runs holding :class:`VerdictScore` s;
    None when the verdicts are full events already."""
    positions: dict[Key, int] | None = None
    """Where each result stands in its run (the seq of its score: an import's, its source's order), which
    ``agentv compare`` adds the differences in; None: in key order."""

    def full_verdicts(self, keys: list[Key]) -> list[dict[str, Verdict]]:
        """The verdicts of these results, every :class:`VerdictScore` replaced by its full event (one
        read for all)."""
        maps = [self.results[k].verdicts if k in self.results else {} for k in keys]
        wanted = [k for k, m in zip(keys, maps) if any(isinstance(v, VerdictScore) for v in m.values())]
        if not wanted or self.details is None:
            return maps
        found = self.details(wanted)
        return [
            {g: found.get(k, {}).get(g, v) if isinstance(v, VerdictScore) else v for g, v in m.items()}
            for k, m in zip(keys, maps)
        ]


def one_target(run: RunResults, target: str) -> RunResults:
    """The results ``run`` holds for ``target`` ("": those without one), keyed without it, so that two targets
    pair test by test (``compare RUN@A RUN@B``: the two sides of a run of several targets, or runs of
    different targets)."""
    results: dict[Key, TestResult] = {(t, None, n): r for (t, g, n), r in run.results.items() if (g or "") == target}
    if not results:
        held = sorted({g or "(none: RUN@)" for _, g, _ in run.results})
        which = f"for target {target!r}" if target else "without a target"
        raise CompareError(f"run {run.run_id} has no results {which}; its targets: {', '.join(held)}")
    details = run.details

    def target_details(keys: list[Key]) -> dict[Key, dict[str, VerdictRecorded]]:
        assert details is not None
        found = details([(t, target, n) for t, _, n in keys])
        return {(t, None, n): v for (t, _, n), v in found.items()}

    positions: dict[Key, int] | None = None
    if run.positions is not None:
        positions = {(t, None, n): p for (t, g, n), p in run.positions.items() if (g or "") == target}
    return RunResults(f"{run.run_id}@{target}", results, target_details if details is not None else None, positions)


def targets_apart(a: RunResults, b: RunResults) -> tuple[str, str] | None:
    """The two targets ("": none), when the runs pair no result only because each holds one target and they
    differ while their tests overlap (two models' logs of one Inspect task, one agent's AgentV run against
    another's, results without a target against a target's): results pair by test, target and attempt, so
    ``compare A@TARGET B@TARGET`` (``A@`` for no target) is what pairs them."""
    targets_a = {g or "" for _, g, _ in a.results}
    targets_b = {g or "" for _, g, _ in b.results}
    if len(targets_a) != 1 or len(targets_b) != 1 or targets_a == targets_b:
        return None
    if not {t for t, _, _ in a.results} & {t for t, _, _ in b.results}:
        return None
    return targets_a.pop(), targets_b.pop()


NOT_REGRADABLE = "not_regradable"


def key_dict(key: Key) -> dict[str, object]:
    test_id, target, attempt = key
    return {"test_id": test_id, "target": target, "attempt": attempt}


def _sort_key(key: Key) -> tuple[str, bool, str, int]:
    test_id, target, attempt = key
    return (test_id, target is not None, target or "", attempt)


@dataclass(frozen=True, slots=True)
class TestRow(Paired):
    """One paired result: both scores, the difference and whether pass/fail flipped."""

    key: Key
    score_a: float
    score_b: float
    passed_a: bool
    passed_b: bool
    status_a: str
    status_b: str

    def to_dict(self) -> dict[str, object]:
        return {**key_dict(self.key), **self.sides()}


@dataclass(frozen=True, slots=True)
class GraderRow:
    """One grader across all paired results."""

    grader: str
    stats: PairedStats
    """Over the pairs where both runs have a pass/fail verdict from this grader."""
    skipped: int
    """Paired tests with a result left out because a verdict was ``skip`` in A or B (a test of several
    attempts counted once, as in ``stats``; of one attempt, its result)."""
    only_in_a: int
    """Paired tests with a result where only run A has a verdict from this grader (counted alike)."""
    only_in_b: int

    @property
    def regressions(self) -> int:
        return self.stats.counts.a_only_pass

    @property
    def improvements(self) -> int:
        return self.stats.counts.b_only_pass

    def to_dict(self) -> dict[str, object]:
        score = self.stats.score
        return {
            "grader": self.grader,
            "n": score.n,
            "mean_a": score.mean_a,
            "mean_b": score.mean_b,
            "mean_diff": score.mean_diff,
            "regressions": self.regressions,
            "improvements": self.improvements,
            "skipped": self.skipped,
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "stats": self.stats.to_dict(),
        }


def _assertion_dict(a: Assertion) -> dict[str, object]:
    return {"text": a.text, "passed": a.passed, "evidence": a.evidence}


def _verdict_dict(v: Verdict | None) -> dict[str, object] | None:
    if v is None:
        return None
    return {
        "grader_type": v.grader_type,
        "score": v.score,
        "verdict": v.verdict,
        "status": v.status,
        "assertions": [_assertion_dict(a) for a in v.assertions],
    }


@dataclass(frozen=True, slots=True)
class GraderPair:
    """One grader's verdicts on one paired result, side by side."""

    grader: str
    a: Verdict | None
    b: Verdict | None

    @property
    def flip(self) -> Flip | None:
        if self.a is None or self.b is None or "skip" in (self.a.verdict, self.b.verdict):
            return None
        return flip_of(self.a.verdict == "pass", self.b.verdict == "pass")

    def to_dict(self) -> dict[str, object]:
        return {"grader": self.grader, "flip": self.flip, "a": _verdict_dict(self.a), "b": _verdict_dict(self.b)}


@dataclass(frozen=True, slots=True)
class FlippedTest:
    """A paired result with every grader's verdicts side by side: in ``Comparison.flipped`` one whose pass/fail
    flipped (for the test or a grader); from :func:`changed_tests` one where anything changed."""

    row: TestRow
    graders: list[GraderPair]

    def to_dict(self) -> dict[str, object]:
        return {**self.row.to_dict(), "graders": [g.to_dict() for g in self.graders]}


@dataclass(frozen=True, slots=True)
class AssertionChange:
    """An assertion present in both runs (same text) whose ``passed`` changed."""

    text: str
    passed_a: bool
    passed_b: bool
    evidence_a: str | None
    evidence_b: str | None

    def to_dict(self) -> dict[str, object]:
        return {
            "text": self.text,
            "passed_a": self.passed_a,
            "passed_b": self.passed_b,
            "evidence_a": self.evidence_a,
            "evidence_b": self.evidence_b,
        }


@dataclass(frozen=True, slots=True)
class GraderAssertionDiff:
    grader: str
    in_a: bool
    """Whether run A has a verdict from this grader for the result at all."""
    in_b: bool
    only_in_a: list[Assertion]
    only_in_b: list[Assertion]
    changed: list[AssertionChange]
    unchanged: int

    def to_dict(self) -> dict[str, object]:
        return {
            "grader": self.grader,
            "in_a": self.in_a,
            "in_b": self.in_b,
            "only_in_a": [_assertion_dict(a) for a in self.only_in_a],
            "only_in_b": [_assertion_dict(a) for a in self.only_in_b],
            "changed": [c.to_dict() for c in self.changed],
            "unchanged": self.unchanged,
        }


@dataclass(frozen=True, slots=True)
class AssertionDiff:
    """Assertion-level differences of one result (one target/attempt of the chosen test)."""

    key: Key
    in_a: bool
    in_b: bool
    graders: list[GraderAssertionDiff]

    def to_dict(self) -> dict[str, object]:
        return {
            **key_dict(self.key),
            "in_a": self.in_a,
            "in_b": self.in_b,
            "graders": [g.to_dict() for g in self.graders],
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    run_a: str
    run_b: str
    seed: int
    resamples: int
    tests: list[TestRow]
    """Paired results, sorted by key."""
    graders: list[GraderRow]
    """Sorted by grader name; each over the paired tests."""
    overall: PairedStats
    """Test-level scores and pass/fail (``TestScored``) over the paired tests (``units``)."""
    outcomes: Outcomes
    """``agentv compare``'s wins, losses and ties over the paired tests (``outcomes.py``)."""
    only_in_a: list[Key]
    only_in_b: list[Key]
    flipped: list[FlippedTest]
    test_id: str | None = None
    assertion_diffs: list[AssertionDiff] = field(default_factory=list)
    """For ``test_id``: one entry per target/attempt of that test found in either run."""
    not_regradable: list[Key] = field(default_factory=list)
    """Results in both runs that one of them could not regrade (status ``not_regradable``): left out
    of every row and statistic, named here."""
    units: list[TestUnit] = field(default_factory=list)
    """The paired tests every statistic counts, sorted by key: one per result unless a test has several
    paired attempts (:mod:`per_test`)."""
    hydrate: Callable[[Iterable[FlippedTest], int], Iterator[FlippedTest]] | None = field(
        default=None, repr=False, compare=False
    )
    """Flipped tests with their verdicts read whole (assertions), so many at a time: see :meth:`full_flipped`."""

    def full_flipped(self, items: Iterable[FlippedTest] | None = None, chunk: int = 500) -> Iterator[FlippedTest]:
        """``items`` (default: every flipped test) with full verdicts, read a chunk at a time."""
        items = self.flipped if items is None else items
        return self.hydrate(items, chunk) if self.hydrate else iter(items)

    @property
    def averaged(self) -> bool:
        """Whether some paired test has several paired attempts, averaged into one pair."""
        return len(self.units) != len(self.tests)

    @property
    def regressions(self) -> list[TestUnit]:
        return [u for u in self.units if u.flip == "pass->fail"]

    @property
    def improvements(self) -> list[TestUnit]:
        return [u for u in self.units if u.flip == "fail->pass"]

    def to_dict(self) -> dict[str, object]:
        return {key: list(value) if isinstance(value, Iterator) else value for key, value in self.json_fields()}

    def json_fields(self) -> Iterator[tuple[str, object]]:
        """The JSON document's fields in order, each long list (one item per result) as an iterator,
        so that ``compare --json`` can write it an item at a time (:meth:`to_dict` collects them)."""
        yield "run_a", self.run_a
        yield "run_b", self.run_b
        yield "seed", self.seed
        yield "resamples", self.resamples
        yield "overall", self.overall.to_dict()
        yield "graders", [g.to_dict() for g in self.graders]
        yield "tests", (self._test_dict(u) for u in self.units)
        if self.averaged:  # the attempts the tests average, each a pair of results
            yield "results", (t.to_dict() for t in self.tests)
        yield "only_in_a", (key_dict(k) for k in self.only_in_a)
        yield "only_in_b", (key_dict(k) for k in self.only_in_b)
        yield "not_regradable", (key_dict(k) for k in self.not_regradable)
        yield "flipped", (f.to_dict() for f in self.full_flipped())
        yield "test_id", self.test_id
        yield "assertion_diffs", [d.to_dict() for d in self.assertion_diffs]
        yield "outcomes", self.outcomes.to_dict()

    def outcome(self, unit: TestUnit) -> str:
        """``agentv compare``'s result of one paired test: win, loss or tie."""
        return outcome(unit.delta, self.outcomes.threshold)

    def _test_dict(self, unit: TestUnit) -> dict[str, object]:
        return {
            **unit.to_dict(),
            "outcome": self.outcome(unit),
            "normalized_gain": normalized_gain(unit.score_a, unit.score_b),
        }


@dataclass(slots=True)
class _GraderTally:
    """Per-grader paired columns, filled in one pass over the results in key order (``add``)."""

    keys: list[Key] = field(default_factory=list)
    scores_a: list[float] = field(default_factory=list)
    scores_b: list[float] = field(default_factory=list)
    passed_a: list[bool] = field(default_factory=list)
    passed_b: list[bool] = field(default_factory=list)
    # The tests (not attempts: per_test) with a result left out of the pairs: for a `skip` verdict, or
    # a verdict in one run only.
    skipped: CountedTests = field(default_factory=CountedTests)
    only_in_a: CountedTests = field(default_factory=CountedTests)
    only_in_b: CountedTests = field(default_factory=CountedTests)

    def add(self, key: Key, score_a: float, score_b: float, pass_a: bool, pass_b: bool) -> None:
        self.keys.append(key)
        self.scores_a.append(score_a)
        self.scores_b.append(score_b)
        self.passed_a.append(pass_a)
        self.passed_b.append(pass_b)


def paired_summary(
    units: list[TestUnit], tallies: dict[str, _GraderTally], *, seed: int, resamples: int
) -> tuple[list[GraderRow], PairedStats]:
    """The paired statistics of a comparison: one row per grader (from its tally), and overall, each over
    the paired tests (``per_test``). Shared by :func:`compare` and the viewer's comparison, so both print
    the same numbers."""
    graders = []
    for name, t in sorted(tallies.items()):
        columns = per_test_columns(t.keys, t.scores_a, t.scores_b, t.passed_a, t.passed_b)
        graders.append(
            GraderRow(
                grader=name,
                stats=paired_stats(*columns, seed=seed, resamples=resamples),
                skipped=t.skipped.count,
                only_in_a=t.only_in_a.count,
                only_in_b=t.only_in_b.count,
            )
        )
    overall = paired_stats(
        [u.score_a for u in units],
        [u.score_b for u in units],
        [u.passed_a for u in units],
        [u.passed_b for u in units],
        seed=seed,
        resamples=resamples,
    )
    return graders, overall


def compare(
    a: RunResults,
    b: RunResults,
    *,
    seed: int = 0,
    resamples: int = 10_000,
    test_id: str | None = None,
    threshold: float = OUTCOME_THRESHOLD,
) -> Comparison:
    """Pair the results of runs A and B and say what changed from A to B (deltas are B - A).

    ``seed`` makes every bootstrap interval reproducible; each interval gets its own
    ``random.Random(seed)``, so a grader's interval does not depend on which other graders exist.
    ``test_id`` asks for assertion-level differences of that test (every target and attempt).
    ``threshold``: the score difference that makes a test a win or a loss (``outcomes.py``).
    """
    if resamples < 1:
        raise CompareError(f"resamples: must be at least 1, got {resamples}")
    if not threshold >= 0:  # NaN too
        raise CompareError(f"threshold: must be a number of 0 or more, got {threshold}")
    results_a, results_b = a.results, b.results
    if test_id is not None and not any(k[0] == test_id for k in (*results_a, *results_b)):
        raise CompareError(f"test id {test_id!r} is in neither run {a.run_id} nor run {b.run_id}; check the id")
    paired, not_regradable = _pairing(a, b)
    only_in_a = sorted((k for k in results_a if k not in results_b), key=_sort_key)
    only_in_b = sorted((k for k in results_b if k not in results_a), key=_sort_key)

    rows: list[TestRow] = []
    pending: list[tuple[TestRow, dict[str, Verdict], dict[str, Verdict]]] = []
    tallies: dict[str, _GraderTally] = {}
    for key in paired:
        ra, rb = results_a[key], results_b[key]
        sa, sb = ra.scored, rb.scored
        row = TestRow(key, sa.score, sb.score, sa.passed, sb.passed, sa.status, sb.status)
        rows.append(row)
        va, vb = ra.verdicts, rb.verdicts
        grader_flipped = False
        for name, verdict_a in va.items():
            tally = tallies.get(name)
            if tally is None:
                tally = tallies[name] = _GraderTally()
            verdict_b = vb.get(name)
            if verdict_b is None:
                tally.only_in_a.add(key)
            elif verdict_a.verdict == "skip" or verdict_b.verdict == "skip":
                tally.skipped.add(key)
            else:
                pass_a = verdict_a.verdict == "pass"
                pass_b = verdict_b.verdict == "pass"
                tally.add(key, verdict_a.score, verdict_b.score, pass_a, pass_b)
                if pass_a != pass_b:
                    grader_flipped = True
        for name in vb.keys() - va.keys():
            tally = tallies.get(name)
            if tally is None:
                tally = tallies[name] = _GraderTally()
            tally.only_in_b.add(key)
        if grader_flipped or sa.passed != sb.passed:
            pending.append((row, va, vb))

    units = test_units(rows)
    graders, overall = paired_summary(units, tallies, seed=seed, resamples=resamples)
    # Assertions are shown only for flipped results (and --test): their verdicts are read whole only
    # when shown (Comparison.full_flipped), a chunk at a time.
    flipped = [FlippedTest(row, _grader_pairs(va, vb)) for row, va, vb in pending]
    del pending
    diffs: list[AssertionDiff] = []
    if test_id is not None:
        keys = sorted({k for k in (*results_a, *results_b) if k[0] == test_id}, key=_sort_key)
        full_a, full_b = a.full_verdicts(keys), b.full_verdicts(keys)
        diffs = [
            assertion_diff(
                key,
                TestResult(results_a[key].scored, fa) if key in results_a else None,
                TestResult(results_b[key].scored, fb) if key in results_b else None,
            )
            for key, fa, fb in zip(keys, full_a, full_b)
        ]

    return Comparison(
        run_a=a.run_id,
        run_b=b.run_id,
        seed=seed,
        resamples=resamples,
        tests=rows,
        graders=graders,
        overall=overall,
        # agentv compare adds the differences in its baseline file's order, and a mean at a rounding
        # boundary depends on it (a float sum is not associative).
        outcomes=outcomes(((u.score_a, u.score_b) for u in in_order(units, a.positions)), threshold),
        only_in_a=only_in_a,
        only_in_b=only_in_b,
        flipped=flipped,
        test_id=test_id,
        assertion_diffs=diffs,
        not_regradable=not_regradable,
        units=units,
        hydrate=lambda items, chunk: with_full_verdicts(items, a, b, chunk),
    )


def _pairing(a: RunResults, b: RunResults) -> tuple[list[Key], list[Key]]:
    """The keys of the results both runs hold, in key order: those paired, and those left out because a
    run could not regrade them."""
    both = sorted((k for k in a.results if k in b.results), key=_sort_key)
    left_out = [k for k in both if NOT_REGRADABLE in (a.results[k].scored.status, b.results[k].scored.status)]
    skip = set(left_out)
    return [k for k in both if k not in skip], left_out


def paired_units(a: RunResults, b: RunResults) -> list[TestUnit]:
    """The paired tests of two runs, as :func:`compare` counts them (without its per-grader tallies)."""
    rows = []
    for key in _pairing(a, b)[0]:
        sa, sb = a.results[key].scored, b.results[key].scored
        rows.append(TestRow(key, sa.score, sb.score, sa.passed, sb.passed, sa.status, sb.status))
    return test_units(rows)


def _grader_pairs(va: dict[str, Verdict], vb: dict[str, Verdict]) -> list[GraderPair]:
    return [GraderPair(name, va.get(name), vb.get(name)) for name in sorted(va.keys() | vb.keys())]


def with_full_verdicts(
    items: Iterable[FlippedTest], a: RunResults, b: RunResults, chunk: int = 500
) -> Iterator[FlippedTest]:
    """``items`` with every grader's verdicts read whole from ``a`` and ``b`` (assertions), ``chunk``
    results per read: what shows assertions holds at most one chunk of full events at a time."""
    part: list[FlippedTest] = []
    for item in items:
        part.append(item)
        if len(part) == chunk:
            yield from _full_pairs(part, a, b)
            part = []
    yield from _full_pairs(part, a, b)


def _full_pairs(items: list[FlippedTest], a: RunResults, b: RunResults) -> list[FlippedTest]:
    if not items:
        return []
    keys = [f.row.key for f in items]
    full_a, full_b = a.full_verdicts(keys), b.full_verdicts(keys)
    return [FlippedTest(f.row, _grader_pairs(fa, fb)) for f, fa, fb in zip(items, full_a, full_b)]


def grader_pairs(row: TestRow, a: RunResults, b: RunResults) -> list[GraderPair]:
    """Every grader's verdicts on one paired result, side by side, by grader name."""
    return _grader_pairs(a.results[row.key].verdicts, b.results[row.key].verdicts)


_EPSILON = 1e-9
_FLIP_ORDER = {"pass->fail": 0, "fail->pass": 1, None: 2}


def _pair_changed(p: GraderPair) -> bool:
    if p.a is None or p.b is None:
        return True
    return p.a.verdict != p.b.verdict or abs(p.a.score - p.b.score) > _EPSILON


def changed_tests(comparison: Comparison, a: RunResults, b: RunResults) -> list[FlippedTest]:
    """The paired results where anything changed from A to B: the score, pass/fail, or a grader's score,
    verdict or presence; the largest score change first (then regressions, then by key)."""
    out = []
    for row in comparison.tests:
        pairs = grader_pairs(row, a, b)
        if abs(row.delta) > _EPSILON or row.flip or any(_pair_changed(p) for p in pairs):
            out.append(FlippedTest(row, pairs))
    out.sort(key=lambda t: (-abs(t.row.delta), _FLIP_ORDER[t.row.flip], _sort_key(t.row.key)))
    return out


def _by_text(assertions: Iterable[Assertion]) -> dict[str, list[Assertion]]:
    grouped: dict[str, list[Assertion]] = {}
    for assertion in assertions:
        grouped.setdefault(assertion.text, []).append(assertion)
    return grouped


def diff_assertions(grader: str, a: Verdict | None, b: Verdict | None) -> GraderAssertionDiff:
    """Match one grader's assertions by text.

    Repeated texts are matched in order: the i-th "X" in A with the i-th "X" in B; the extras are
    only in one run.
    """
    in_a = _by_text(a.assertions if a else ())
    in_b = _by_text(b.assertions if b else ())
    only_a: list[Assertion] = []
    only_b: list[Assertion] = []
    changed: list[AssertionChange] = []
    unchanged = 0
    for text, group_a in in_a.items():
        group_b = in_b.get(text, [])
        for x, y in zip(group_a, group_b):
            if x.passed == y.passed:
                unchanged += 1
            else:
                changed.append(AssertionChange(text, x.passed, y.passed, x.evidence, y.evidence))
        only_a.extend(group_a[len(group_b) :])
        only_b.extend(group_b[len(group_a) :])
    for text, group_b in in_b.items():
        if text not in in_a:
            only_b.extend(group_b)
    return GraderAssertionDiff(grader, a is not None, b is not None, only_a, only_b, changed, unchanged)


def assertion_diff(key: Key, a: TestResult | None, b: TestResult | None) -> AssertionDiff:
    """Assertion-level differences of one result, grader by grader (either side may be absent)."""
    va = a.verdicts if a else {}
    vb = b.verdicts if b else {}
    graders = [diff_assertions(p.grader, p.a, p.b) for p in _grader_pairs(va, vb)]
    return AssertionDiff(key, a is not None, b is not None, graders)


def _fmt(x: float) -> str:
    return f"{x:+.4f}"


def regression(
    comparison: Comparison, mode: str, clustered: tuple[str, ClusteredDifference] | None = None
) -> tuple[bool, str]:
    """Whether B regressed from A, and a one-line reason.

    ``ci``: the test-level mean score difference has a CI entirely below 0 (B significantly worse);
    per-grader intervals are shown but not gated on, to avoid multiple-comparison false alarms.
    With ``clustered`` (the ``--cluster-by`` key and the difference clustered by it), that interval is
    the one gated on: tests sharing the key are not independent, and the bootstrap over tests would be
    too narrow. ``flip``: at least one test flipped pass -> fail. ``any``: either. Both count paired
    tests, a test's attempts averaged (``Comparison.units``). Runs that both hold results and pair none fail every
    gate.
    """
    if mode not in REGRESSION_MODES:
        raise CompareError(f"regression mode: expected one of {', '.join(REGRESSION_MODES)}, got {mode!r}")
    if not comparison.tests and comparison.only_in_a and comparison.only_in_b:
        # Both runs hold results and none pairs (other suites, other targets): a gate with nothing to judge
        # does not pass, where it passed them. A side with no result (a shard that got no test) is not this.
        return True, "no result of the two runs pairs with the other's: the gate has nothing to judge"
    found: list[str] = []
    clear: list[str] = []
    if mode in ("ci", "any"):
        score = comparison.overall.score
        low, high, mean, note, how = score.ci_low, score.ci_high, score.mean_diff, score.note, ""
        if clustered is not None:
            key, d = clustered
            low, high, mean, how = d.low, d.high, d.mean_diff, f" clustered by {key}"
            note = f"{plural_clusters(d.clusters)} of {key}; need at least {MIN_PAIRS_CI}"
        if low is None or high is None or mean is None:
            clear.append(f"no confidence interval ({note})")
        else:
            ci = f"mean score difference {_fmt(mean)}, {score.confidence:.0%} CI{how} [{_fmt(low)}, {_fmt(high)}]"
            if high < 0:
                found.append(f"{ci} is entirely below 0")
            else:
                clear.append(f"{ci} does not lie entirely below 0")
    if mode in ("flip", "any"):
        flips = comparison.regressions
        if flips:
            shown = ", ".join(u.label for u in flips[:5])
            more = f" and {len(flips) - 5} more" if len(flips) > 5 else ""
            found.append(f"{len(flips)} test(s) flipped pass->fail: {shown}{more}")
        else:
            clear.append("no test flipped pass->fail")
    if found:
        return True, "; ".join(found)
    return False, "; ".join(clear)
