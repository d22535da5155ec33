"""How well each grader of a run agrees with the human labels of its transcripts.

For every run asked about (a run and its replays with different prompts, typically) and every grader,
the labelled tests give (human, judge) pass/fail pairs; :mod:`evalstore.replay.analysis.calibration`
turns them into a confusion matrix, accuracy, TPR, TNR, precision and kappa with intervals, and the
run's pass rate corrected for the judge's errors. The row named ``(test)`` is the test-level pass
(``TestScored``) against labels given for the answer as a whole.

The unit is the test (per target), as for ``compare`` (:mod:`evalstore.replay.analysis.per_test`): the
attempts of a test (Inspect epochs, AgentV trials) share its input and are not independent, so counting
each as a labelled test makes ``n`` (and ``--min-labels``) count one test several times and every
interval too narrow. A test's labelled attempts (those judged and with a human verdict) become one
(human, judge) pair, each side passing when any of those attempts passed on it (``per_test.test_passed``);
the raw pass rate counts tests the same way. A test of one attempt is that attempt, as before.

Which human verdict a grader is measured against, per labelled test: each person's label for that grader,
else that person's label for the whole answer; when several people labelled, the majority, and a tie
leaves the test out (counted as ``ties``). Score-only labels (no pass/fail) are not used here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from evalstore.replay.analysis.calibration import (
    DEFAULT_RESAMPLES,
    MIN_LABELS,
    Estimate,
    JudgeAgreement,
    corrected_pass_rate,
    judge_agreement,
    labeller_alpha,
)
from evalstore.replay.analysis.compare import RunResults
from evalstore.replay.analysis.per_test import TestKey, by_test, test_passed
from evalstore.replay.analysis.stats import McNemarResult, mcnemar_exact
from evalstore.replay.labels import Label

TEST_LEVEL = "(test)"
Key = tuple[str, str | None, int]


class HumanVerdicts:
    """The labels of one transcript run, resolved per (test, grader) to the humans' pass/fail."""

    def __init__(self, labels: list[Label]) -> None:
        self.people = sorted({lab.label.by for lab in labels if lab.label.verdict})
        self._by: dict[tuple[Key, str | None], dict[str, bool]] = {}
        for lab in labels:
            if lab.superseded or lab.label.verdict is None:
                continue
            self._by.setdefault((lab.key, lab.label.grader), {})[lab.label.by] = lab.label.verdict == "pass"
        self.keys = sorted({k for k, _ in self._by}, key=str)

    def per_person(self, key: Key, grader: str | None) -> dict[str, bool]:
        """Each person's verdict on a test for a grader: their label for it, else for the whole answer."""
        overall = self._by.get((key, None), {})
        if grader is None:
            return dict(overall)
        return {**overall, **self._by.get((key, grader), {})}

    def truth(self, key: Key, grader: str | None) -> bool | None:
        """The majority verdict; None when nobody labelled or the people are split evenly."""
        votes = Counter(self.per_person(key, grader).values())
        if not votes or votes[True] == votes[False]:
            return None
        return votes[True] > votes[False]

    def test_truth(self, keys: list[Key], grader: str | None) -> tuple[list[Key], bool | None]:
        """A test's human verdict from its attempts ``keys``: those with a majority verdict, and whether
        the test passed on them (None when there are none: every labelled attempt a tie)."""
        decided = [(k, t) for k in keys if (t := self.truth(k, grader)) is not None]
        if not decided:
            return [], None
        return [k for k, _ in decided], test_passed(t for _, t in decided)

    def alpha(self, grader: str | None) -> Estimate:
        # One unit a test, as everywhere in agreement: a person's verdict on it is whether any attempt
        # they labelled passed.
        units = []
        for keys in by_test(self.keys).values():
            verdicts = [self.per_person(k, grader) for k in keys]
            units.append([_any_of([v.get(p) for v in verdicts]) for p in self.people])
        return labeller_alpha(units)


def _any_of(verdicts: list[bool | None]) -> bool | None:
    given = [v for v in verdicts if v is not None]
    return test_passed(given) if given else None


@dataclass(frozen=True)
class GraderAgreement:
    run_id: str
    grader: str
    agreement: JudgeAgreement
    raw_pass_rate: Estimate
    corrected_pass_rate: Estimate
    judged: int
    """Tests of the run with a pass/fail from this grader on any attempt (the raw pass rate's denominator)."""
    labelled: int
    """Labelled tests the agreement rests on (a test of several labelled attempts counts once)."""
    ties: int
    """Labelled tests left out because the people were split evenly on each of its labelled attempts."""

    def to_dict(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "grader": self.grader,
            "labelled": self.labelled,
            "ties": self.ties,
            "judged": self.judged,
            **self.agreement.to_dict(),
            "raw_pass_rate": self.raw_pass_rate.to_dict(),
            "corrected_pass_rate": self.corrected_pass_rate.to_dict(),
        }


@dataclass(frozen=True)
class AgreementReport:
    label_run: str
    labels: int
    people: list[str]
    rows: list[GraderAgreement]
    alpha: dict[str, Estimate] = field(default_factory=dict)
    """Per grader (and ``(test)``): Krippendorff's alpha between the people, the ceiling to expect."""
    seed: int = 0
    resamples: int = DEFAULT_RESAMPLES
    min_labels: int = MIN_LABELS

    def to_dict(self) -> dict[str, object]:
        return {
            "label_run": self.label_run,
            "labels": self.labels,
            "people": self.people,
            "seed": self.seed,
            "resamples": self.resamples,
            "min_labels": self.min_labels,
            "labeller_alpha": {g: a.to_dict() for g, a in self.alpha.items()},
            "rows": [r.to_dict() for r in self.rows],
        }


def _judge_passes(results: RunResults, grader: str) -> dict[Key, bool]:
    out: dict[Key, bool] = {}
    for key, result in results.results.items():
        if grader == TEST_LEVEL:
            if result.scored.status != "not_regradable":
                out[key] = result.scored.passed
        else:
            v = result.verdicts.get(grader)
            if v is not None and v.verdict != "skip":
                out[key] = v.verdict == "pass"
    return out


def _tests_passed(judged: dict[Key, bool]) -> dict[TestKey, bool]:
    """A grader's pass/fail per test, from its pass/fail per attempt."""
    return {test: test_passed(judged[k] for k in keys) for test, keys in by_test(judged).items()}


def graders_of(results: RunResults) -> list[str]:
    return sorted({g for r in results.results.values() for g in r.verdicts})


def agreement(
    label_run: str,
    labels: list[Label],
    runs: list[RunResults],
    *,
    grader: str | None = None,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    min_labels: int = MIN_LABELS,
) -> AgreementReport:
    """Agreement of every grader (or just ``grader``) of every run with the labels of ``label_run``."""
    humans = HumanVerdicts(labels)
    rows = []
    scopes: set[str] = set()
    for results in runs:
        names = [TEST_LEVEL, *graders_of(results)]
        if grader is not None:
            names = [n for n in names if n == grader]
        for name in names:
            scope = None if name == TEST_LEVEL else name
            judged = _judge_passes(results, name)
            pairs, ties = [], 0
            for keys in by_test(judged).values():
                labelled = [k for k in keys if humans.per_person(k, scope)]
                if not labelled:
                    continue
                decided, truth = humans.test_truth(labelled, scope)
                if truth is None:
                    ties += 1
                else:
                    pairs.append((truth, test_passed(judged[k] for k in decided)))
            tests = _tests_passed(judged)
            if not pairs and not ties and name == TEST_LEVEL and grader is None:
                continue  # nobody labelled whole answers: no test-level row
            scopes.add(name)
            agree = judge_agreement(pairs, seed=seed, resamples=resamples, min_labels=min_labels)
            raw, corrected = corrected_pass_rate(
                sum(tests.values()), len(tests), agree.confusion, seed=seed, resamples=resamples
            )
            if not agree.enough:
                corrected = Estimate(None, note=agree.note)
            rows.append(GraderAgreement(results.run_id, name, agree, raw, corrected, len(tests), len(pairs), ties))
    alpha = {name: humans.alpha(None if name == TEST_LEVEL else name) for name in sorted(scopes)}
    return AgreementReport(
        label_run,
        sum(1 for lab in labels if not lab.superseded),
        humans.people,
        rows,
        alpha,
        seed,
        resamples,
        min_labels,
    )


@dataclass(frozen=True)
class AgreementDifference:
    """Which of two runs agrees with the humans more, per grader, on the labelled tests both judged."""

    grader: str
    n: int
    accuracy_a: float | None
    accuracy_b: float | None
    a_only_correct: int
    b_only_correct: int
    mcnemar: McNemarResult

    @property
    def verdict(self) -> str:
        if self.n == 0:
            return "no labelled pairs"
        if self.accuracy_a == self.accuracy_b or self.mcnemar.p_value is None:
            return "same agreement"
        better = "B" if (self.accuracy_b or 0) > (self.accuracy_a or 0) else "A"
        if self.mcnemar.p_value < 0.05:
            return f"{better} agrees more (p < 0.05)"
        return f"{better} agrees more, within noise (p >= 0.05)"

    def to_dict(self) -> dict[str, object]:
        return {
            "grader": self.grader,
            "n": self.n,
            "accuracy_a": self.accuracy_a,
            "accuracy_b": self.accuracy_b,
            "a_only_correct": self.a_only_correct,
            "b_only_correct": self.b_only_correct,
            "mcnemar": self.mcnemar.to_dict(),
            "verdict": self.verdict,
        }


def agreement_difference(labels: list[Label], a: RunResults, b: RunResults) -> list[AgreementDifference]:
    """Per grader both runs have: on each labelled test both judged, is A right, is B right; the exact
    McNemar test on the tests where exactly one is right says whether the difference is more than noise.
    A test is one pair, as in :func:`agreement`: its attempts both runs judged and the humans decided,
    each side passing when any of them passed on it."""
    humans = HumanVerdicts(labels)
    out = []
    for name in [TEST_LEVEL, *sorted(set(graders_of(a)) & set(graders_of(b)))]:
        scope = None if name == TEST_LEVEL else name
        ja, jb = _judge_passes(a, name), _judge_passes(b, name)
        right_a = right_b = a_only = b_only = n = 0
        for keys in by_test(ja.keys() & jb.keys()).values():
            decided, truth = humans.test_truth(keys, scope)
            if truth is None:
                continue
            n += 1
            ca = test_passed(ja[k] for k in decided) == truth
            cb = test_passed(jb[k] for k in decided) == truth
            right_a += ca
            right_b += cb
            a_only += ca and not cb
            b_only += cb and not ca
        if n == 0:
            continue
        out.append(
            AgreementDifference(name, n, right_a / n, right_b / n, a_only, b_only, mcnemar_exact(a_only, b_only))
        )
    return out
