"""Statistics for judging a judge against human labels, and for comparing several variants at once.

Pure functions on plain numbers, checked in the tests against independent implementations (scipy,
sklearn-style formulas written out, the ``krippendorff`` package's own examples).

* :func:`judge_agreement`: the confusion matrix of judge vs human pass/fail, accuracy, TPR, TNR,
  precision and Cohen's kappa, each with a seeded bootstrap 95% interval over the labelled tests.
* :func:`corrected_pass_rate`: the Rogan–Gladen estimate of the true pass rate given the judge's
  measured TPR/TNR, with a bootstrap interval that resamples the labelled tests (so TPR and TNR vary)
  and the judged tests together.
* :func:`labeller_alpha`: Krippendorff's alpha (nominal) between people who labelled the same tests,
  from the ``krippendorff`` package.
* :func:`holm`, :func:`clustered_mean_difference`, :func:`minimum_detectable_difference`: the pieces of
  ``compare BASE V1 V2 ...``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from evalstore.replay.analysis.stats import (
    MIN_PAIRS_CI,
    _quantile,
    binomial_variate,
    multinomial_counts,
    pass_counts,
    past_float_noise,
)

DEFAULT_RESAMPLES = 2_000
MIN_LABELS = 10
"""Fewer labelled tests than this and agreement says "not enough labels" instead of numbers."""
CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class Estimate:
    """A statistic with its interval; ``value`` None (with a note) when it is undefined."""

    value: float | None
    low: float | None = None
    high: float | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"value": self.value, "low": self.low, "high": self.high, "note": self.note}


@dataclass(frozen=True, slots=True)
class Confusion:
    """Judge vs human, pass as the positive class."""

    tp: int
    """Human pass, judge pass."""
    fn: int
    """Human pass, judge fail."""
    fp: int
    """Human fail, judge pass."""
    tn: int
    """Human fail, judge fail."""

    @property
    def n(self) -> int:
        return self.tp + self.fn + self.fp + self.tn

    def to_dict(self) -> dict[str, int]:
        return {"tp": self.tp, "fn": self.fn, "fp": self.fp, "tn": self.tn, "n": self.n}


def confusion(pairs: Sequence[tuple[bool, bool]]) -> Confusion:
    """Tally (human passed, judge passed) pairs."""
    c = pass_counts(pairs)  # a = human, b = judge
    return Confusion(tp=c.both_pass, fn=c.a_only_pass, fp=c.b_only_pass, tn=c.both_fail)


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def _kappa_cells(tp: int, fn: int, fp: int, tn: int) -> float | None:
    n = tp + fn + fp + tn
    if n == 0:
        return None
    observed = (tp + tn) / n
    human, judge = (tp + fn) / n, (tp + fp) / n
    expected = human * judge + (1 - human) * (1 - judge)
    if math.isclose(expected, 1.0, rel_tol=0, abs_tol=1e-12):
        return None
    return past_float_noise((observed - expected) / (1 - expected))


def _fast_metrics(tp: int, fn: int, fp: int, tn: int) -> dict[str, float | None]:
    n = tp + fn + fp + tn
    return {
        "accuracy": _ratio(tp + tn, n),
        "tpr": _ratio(tp, tp + fn),
        "tnr": _ratio(tn, tn + fp),
        "precision": _ratio(tp, tp + fp),
        "kappa": _kappa_cells(tp, fn, fp, tn),
    }


def _interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    values.sort()
    alpha = (1 - confidence) / 2
    return _quantile(values, alpha), _quantile(values, 1 - alpha)


@dataclass(frozen=True, slots=True)
class JudgeAgreement:
    confusion: Confusion
    accuracy: Estimate
    tpr: Estimate
    tnr: Estimate
    precision: Estimate
    kappa: Estimate
    enough: bool
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "confusion": self.confusion.to_dict(),
            "accuracy": self.accuracy.to_dict(),
            "tpr": self.tpr.to_dict(),
            "tnr": self.tnr.to_dict(),
            "precision": self.precision.to_dict(),
            "kappa": self.kappa.to_dict(),
            "enough": self.enough,
            "note": self.note,
        }


def judge_agreement(
    pairs: Sequence[tuple[bool, bool]],
    *,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    min_labels: int = MIN_LABELS,
) -> JudgeAgreement:
    """How a judge's pass/fail agrees with the humans' on the labelled tests: (human, judge) pairs.

    Intervals are percentile bootstrap over the labelled tests: a resample of n tests only matters
    through how many land in each of the four cells, which is Multinomial(n, observed cell shares), so
    each resample is one draw of four counts. A statistic undefined in a resample (TPR with no human
    pass drawn) leaves that resample out of its interval.
    """
    c = confusion(pairs)
    point = _fast_metrics(c.tp, c.fn, c.fp, c.tn)
    if c.n < min_labels:
        # No figure holds on so few labels: each is blank, and the one note says why.
        note = f"not enough labels (n={c.n}; need at least {min_labels})"
        return JudgeAgreement(c, **{k: Estimate(None) for k in point}, enough=False, note=note)
    rng = random.Random(seed)
    draws: dict[str, list[float]] = {k: [] for k in point}
    cells = [c.tp, c.fn, c.fp, c.tn]
    for _ in range(resamples):
        tp, fn, fp, tn = multinomial_counts(rng, c.n, cells)
        for k, v in _fast_metrics(tp, fn, fp, tn).items():
            if v is not None:
                draws[k].append(v)
    out = {}
    for k, v in point.items():
        if v is None:
            why = {"tpr": "no human pass", "tnr": "no human fail", "precision": "the judge passed none"}
            out[k] = Estimate(None, note=f"undefined ({why.get(k, 'all one class')})")
        else:
            low, high = _interval(draws[k])
            out[k] = Estimate(v, low, high)
    return JudgeAgreement(c, **out, enough=True, note=None)


def rogan_gladen(pass_rate: float, tpr: float, tnr: float) -> float | None:
    """The true pass rate a judge with this TPR/TNR would report as ``pass_rate``: (p + TNR - 1) /
    (TPR + TNR - 1), clipped to [0, 1]; None when the judge is no better than a coin (TPR + TNR <= 1)."""
    youden = tpr + tnr - 1
    if youden <= 0:
        return None
    return min(1.0, max(0.0, (pass_rate + tnr - 1) / youden))


def corrected_pass_rate(
    judged_passes: int,
    judged: int,
    c: Confusion,
    *,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
) -> tuple[Estimate, Estimate]:
    """(raw pass rate, Rogan–Gladen corrected pass rate), each with a bootstrap 95% interval.

    Each resample draws the labelled tests' four cells (so TPR and TNR vary as much as the labels
    allow) and the judged tests' pass count, independently, and corrects; resamples where the drawn
    judge is no better than chance are left out. The labelled tests are usually among the judged
    ones; treating the two draws as independent makes the interval slightly wide, not narrow.
    """
    if judged == 0:
        none = Estimate(None, note="no judged tests")
        return none, none
    p = judged_passes / judged
    rng = random.Random(seed)
    raw_draws = []
    corrected_draws = []
    cells = [c.tp, c.fn, c.fp, c.tn]
    for _ in range(resamples):
        p_star = binomial_variate(rng, judged, p) / judged
        raw_draws.append(p_star)
        if c.n:
            tp, fn, fp, tn = multinomial_counts(rng, c.n, cells)
            if tp + fn and tn + fp:
                value = rogan_gladen(p_star, tp / (tp + fn), tn / (tn + fp))
                if value is not None:
                    corrected_draws.append(value)
    low, high = _interval(raw_draws)
    raw = Estimate(p, low, high)
    if c.tp + c.fn == 0 or c.tn + c.fp == 0:
        return raw, Estimate(None, note="needs labelled passes and fails (TPR and TNR)")
    point = rogan_gladen(p, c.tp / (c.tp + c.fn), c.tn / (c.tn + c.fp))
    if point is None:
        return raw, Estimate(None, note="judge no better than chance")
    low, high = _interval(corrected_draws)
    return raw, Estimate(point, low, high)


def labeller_alpha(units: Sequence[Sequence[bool | None]]) -> Estimate:
    """Krippendorff's alpha (nominal) between labellers: ``units[i][j]`` is labeller j's pass/fail of
    test i, None when j did not label it. Computed by the ``krippendorff`` package."""
    pairable = [u for u in units if sum(v is not None for v in u) >= 2]
    if not pairable:
        return Estimate(None, note="no test labelled by two people")
    values = {v for u in pairable for v in u if v is not None}
    if len(values) < 2:
        return Estimate(None, note="undefined (every label the same)")
    import krippendorff
    import numpy as np

    data = np.array([[np.nan if v is None else float(v) for v in u] for u in pairable], dtype=float).T
    return Estimate(past_float_noise(float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))))


# --- several variants against one base -------------------------------------------------------


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values (family-wise error), in the input order; None stays None.

    Our own rather than statsmodels' ``multipletests(method="holm")``, for a measured reason:
    ``bench/holm.py`` finds the two equal (0 difference over 2,000 random families) while importing
    statsmodels (which brings pandas and patsy, about 150 MB installed) made the import of the multi-run
    compare 3.2x as slow (3.2 s more on the shared machine). The tests check this against Holm's
    step-down definition written out independently."""
    given = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(given)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(given):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True, slots=True)
class ClusteredDifference:
    n: int
    clusters: int
    mean_diff: float | None
    se: float | None
    low: float | None
    high: float | None
    p_value: float | None
    mde: float | None
    """Smallest true difference this many pairs detect with 80% power at the 5% level (two-sided)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "n": self.n,
            "clusters": self.clusters,
            "mean_diff": self.mean_diff,
            "se": self.se,
            "ci_low": self.low,
            "ci_high": self.high,
            "p_value": self.p_value,
            "mde": self.mde,
        }


def clustered_mean_difference(
    diffs: Sequence[float], clusters: Sequence[Hashable] | None = None, *, confidence: float = CONFIDENCE
) -> ClusteredDifference:
    """Mean paired difference with a cluster-robust standard error (Miller 2024, "Adding Error Bars to
    Evals", eq. for clustered SE): SE² = Σ_c (Σ_{i∈c} (d_i − d̄))² / n². Without clusters every test is
    its own cluster, which is the usual SE of a mean (population variance / n). The interval and p-value
    are normal (z), as in that paper; the minimum detectable difference is (z_{1−α/2} + z_{0.8}) · SE.

    Below ``MIN_PAIRS_CI`` clusters there is no interval or p-value, the rule the two-run compare has. When
    every difference is the same the SE is 0 and the normal test says nothing: the p-value is then the
    exact two-sided sign test's (every cluster moved the same way)."""
    n = len(diffs)
    if clusters is None:
        clusters = list(range(n))
    n_clusters = len(set(clusters))
    mean = math.fsum(diffs) / n if n else None
    if n_clusters < MIN_PAIRS_CI:
        return ClusteredDifference(n, n_clusters, mean, None, None, None, None, None)
    assert mean is not None
    sums: dict[Hashable, float] = {}
    for d, c in zip(diffs, clusters):
        sums[c] = sums.get(c, 0.0) + (d - mean)
    se = math.sqrt(math.fsum(s * s for s in sums.values())) / n
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    mde = minimum_detectable_difference(se, confidence=confidence)
    if se == 0:
        p_sign = 1.0 if mean == 0 else min(1.0, 2 * 0.5**n_clusters)
        return ClusteredDifference(n, n_clusters, mean, 0.0, mean, mean, p_sign, 0.0)
    p = 2 * (1 - NormalDist().cdf(abs(mean) / se))
    return ClusteredDifference(n, n_clusters, mean, se, mean - z * se, mean + z * se, p, mde)


def minimum_detectable_difference(
    se: float | None, *, power: float = 0.8, confidence: float = CONFIDENCE
) -> float | None:
    if se is None:
        return None
    return (NormalDist().inv_cdf(1 - (1 - confidence) / 2) + NormalDist().inv_cdf(power)) * se


def mean_by(
    keys: Sequence[Hashable], values: Sequence[float], key: Callable[[Hashable], Hashable]
) -> dict[Hashable, float]:
    """Values averaged within groups (repeated samples of one test averaged before pairing)."""
    sums: dict[Hashable, list[float]] = {}
    for k, v in zip(keys, values):
        sums.setdefault(key(k), []).append(v)
    return {g: math.fsum(vs) / len(vs) for g, vs in sums.items()}
