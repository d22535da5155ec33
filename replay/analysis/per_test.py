"""The unit a two-run comparison counts: a test (per target), its paired attempts averaged.

Attempts of one test (``execution.trials``, an Inspect log's epochs, AgentV's samples) share the test's
input and, in a regrade, its transcript: they are not independent observations, and counting each as a
pair makes every interval too narrow and every p-value too small (15 trials of 5 tests are 5 pairs, not
15). So a test's paired attempts (those present and regradable in both runs) become one pair: its score
on each side the mean of those attempts' scores, as ``compare BASE V1 V2 ...`` averages them and as
AgentV's one row per test aggregates its trials (``mean``, its default for a score); it passes on a side
when any of them passed there, AgentV's status of a test with trials (``runEvalCaseWithTrials``'s
``hasOk``). A test of one attempt is that attempt's result, unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from evalstore.replay.analysis.compare import Key, TestRow

Flip = Literal["pass->fail", "fail->pass"]


def key_label(key: Key) -> str:
    """How a result is named to people, everywhere (tables, comparisons, the viewer, labels): ``test_id``,
    plus ``@target`` when given and ``#attempt`` after the first (an Inspect epoch, a trial: ``add#2``)."""
    test_id, target, attempt = key
    label = test_id if target is None else f"{test_id}@{target}"
    return label if attempt == 1 else f"{label}#{attempt}"


def flip_of(passed_a: bool, passed_b: bool) -> Flip | None:
    if passed_a == passed_b:
        return None
    return "pass->fail" if passed_a else "fail->pass"


class Paired:
    """What a paired result (``compare.TestRow``) and a paired test (:class:`TestUnit`) share: their two
    sides' difference and flip, and the sides as their rows write them."""

    __slots__ = ()
    score_a: float
    score_b: float
    passed_a: bool
    passed_b: bool
    status_a: str
    status_b: str

    @property
    def delta(self) -> float:
        return self.score_b - self.score_a

    @property
    def flip(self) -> Flip | None:
        return flip_of(self.passed_a, self.passed_b)

    @property
    def changed(self) -> bool:
        """Whether its score moved or its pass/fail flipped: a changed test, as ``compare`` counts them."""
        return self.delta != 0 or self.flip is not None

    def sides(self) -> dict[str, object]:
        return {
            "score_a": self.score_a,
            "score_b": self.score_b,
            "delta": self.delta,
            "passed_a": self.passed_a,
            "passed_b": self.passed_b,
            "flip": self.flip,
            "status_a": self.status_a,
            "status_b": self.status_b,
        }


TestKey = tuple[str, str | None]
"""(test id, target): a test, its attempts averaged."""

MIXED = "mixed"
"""The status of a test whose paired attempts ended differently on one side."""


@dataclass(frozen=True, slots=True)
class TestUnit(Paired):
    """One paired test: the mean of its paired attempts' scores in each run, and whether any passed."""

    keys: tuple[Key, ...]
    """The paired results averaged, in attempt order."""
    score_a: float
    score_b: float
    passed_a: bool
    passed_b: bool
    status_a: str
    status_b: str

    @property
    def key(self) -> Key:
        """Its first paired attempt's key: a test of one attempt is known by its result's, as before
        attempts were averaged."""
        return self.keys[0]

    @property
    def test(self) -> TestKey:
        return test_of(self.keys[0])

    @property
    def attempts(self) -> int:
        return len(self.keys)

    @property
    def label(self) -> str:
        """A test of one attempt is named as its result is (``#attempt`` after the first); of several,
        with how many were averaged."""
        if len(self.keys) == 1:
            return key_label(self.keys[0])
        test_id, target = self.test
        return f"{key_label((test_id, target, 1))} ({len(self.keys)} attempts)"

    def to_dict(self) -> dict[str, object]:
        """A test of one attempt as its result's row has always been written; of several, ``attempt`` null
        and ``attempts`` the attempts averaged."""
        test_id, target = self.test
        attempt: dict[str, object] = (
            {"attempt": self.keys[0][2]}
            if len(self.keys) == 1
            else {"attempt": None, "attempts": [k[2] for k in self.keys]}
        )
        return {"test_id": test_id, "target": target, **attempt, **self.sides()}


def _mean(values: Sequence[float]) -> float:
    # One value is returned as it is: a test of one attempt must score exactly what its result did.
    return values[0] if len(values) == 1 else math.fsum(values) / len(values)


def _status(statuses: Sequence[str]) -> str:
    return statuses[0] if len(set(statuses)) == 1 else MIXED


def test_of(key: Key) -> TestKey:
    """The test a result is an attempt of: its test id and target."""
    return key[0], key[1]


def test_passed(attempts_passed: Iterable[bool]) -> bool:
    """Whether a test passed, from whether each of its attempts did: when any did, AgentV's status of a
    test with trials (``hasOk``). Every pass/fail a test is counted by comes from here: a comparison's
    sides, a grader's verdicts, and agreement's human and judge verdicts."""
    return any(attempts_passed)


def failed_tests(attempts: Iterable[tuple[Key, bool]]) -> set[TestKey]:
    """The tests none of whose attempts passed (:func:`test_passed`), from each attempt's key and pass."""
    passed: dict[TestKey, list[bool]] = {}
    for key, ok in attempts:
        passed.setdefault(test_of(key), []).append(ok)
    return {test for test, oks in passed.items() if not test_passed(oks)}


def by_test(keys: Iterable[Key]) -> dict[TestKey, list[Key]]:
    """Results grouped by the test they are attempts of (in any order; each test's attempts ascending)."""
    out: dict[TestKey, list[Key]] = {}
    for key in sorted(keys, key=lambda k: k[2]):
        out.setdefault(test_of(key), []).append(key)
    return out


def _runs_of_a_test(keys: Sequence[Key]) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each stretch of ``keys`` holding one test: the comparison pairs results in key
    order, so a test's attempts are next to each other."""
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or test_of(keys[i]) != test_of(keys[start]):
            yield start, i
            start = i


class CountedTests:
    """How many tests some results are attempts of, the results given in key order (a test's attempts one
    after another, as the comparison pairs them): a test of several attempts counts once, as every
    statistic counts it; a test of one attempt is its result."""

    __slots__ = ("_last", "count")

    def __init__(self) -> None:
        self.count = 0
        self._last: TestKey | None = None

    def add(self, key: Key) -> None:
        test = test_of(key)
        if test != self._last:
            self._last = test
            self.count += 1


def test_units(rows: Sequence[TestRow]) -> list[TestUnit]:
    """The paired tests of paired results given in key order (``compare._sort_key``)."""
    units = []
    for start, end in _runs_of_a_test([r.key for r in rows]):
        part = rows[start:end]
        units.append(
            TestUnit(
                tuple(r.key for r in part),
                _mean([r.score_a for r in part]),
                _mean([r.score_b for r in part]),
                test_passed(r.passed_a for r in part),
                test_passed(r.passed_b for r in part),
                _status([r.status_a for r in part]),
                _status([r.status_b for r in part]),
            )
        )
    return units


def per_test_columns(
    keys: Sequence[Key],
    scores_a: Sequence[float],
    scores_b: Sequence[float],
    passed_a: Sequence[bool],
    passed_b: Sequence[bool],
) -> tuple[list[float], list[float], list[bool], list[bool]]:
    """Paired columns (one entry a result, in key order) made one entry a test, by the rule of
    :func:`test_units`: a grader's verdicts on a test's attempts are one pair too."""
    out: tuple[list[float], list[float], list[bool], list[bool]] = ([], [], [], [])
    for start, end in _runs_of_a_test(keys):
        out[0].append(_mean(scores_a[start:end]))
        out[1].append(_mean(scores_b[start:end]))
        out[2].append(test_passed(passed_a[start:end]))
        out[3].append(test_passed(passed_b[start:end]))
    return out


def in_order(units: Iterable[TestUnit], positions: dict[Key, int] | None) -> list[TestUnit]:
    """The tests in the order run A holds them (a test where its first attempt stands): ``agentv compare``
    adds the differences in its baseline file's order, one row a test."""
    units = list(units)
    if positions is None:
        return units
    return sorted(units, key=lambda u: min(positions.get(k, 0) for k in u.keys))
