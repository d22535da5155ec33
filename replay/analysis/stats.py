"""Statistics for paired runs: the same tests graded twice (run A, run B).

Pure functions on plain numbers, standard library only, so the numbers can be checked against an
independent implementation (scipy in the tests) and reproduced from a seed.

Three questions, three tools that respect the pairing:

* *Did scores move?*  Mean of the per-pair differences (B - A) with a paired bootstrap percentile
  confidence interval (:func:`bootstrap_mean_ci`).
* *Did pass/fail move?*  Exact McNemar test: a two-sided exact binomial test on the discordant pairs
  (:func:`mcnemar_exact`).
* *Do the runs agree on pass/fail beyond chance?*  Cohen's kappa (:func:`cohen_kappa`).

A statistic that would be meaningless is ``None`` with a ``note`` saying why, never a made-up number.
"""

from __future__ import annotations

import functools
import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

MIN_PAIRS_CI = 5
"""Fewer pairs than this give no CI: with n < 5 the bootstrap distribution of the mean has so few
distinct values that its 2.5%/97.5% percentiles are mostly the sample extremes, not an interval."""

DEFAULT_CONFIDENCE = 0.95

BOOTSTRAP_BUDGET = 4_000_000
"""Largest bootstrap cost we accept, in elementary draws (about 0.5 s of pure Python). Beyond it the
interval is the normal approximation, which for the mean at that size agrees with the bootstrap to
within its own Monte Carlo noise."""

_BINOMIAL_DRAW_COST = 20
"""One conditional binomial draw costs about as much as this many ``random.choices`` elements."""

_GROUPING_DECIMALS = 12
"""Differences are grouped after rounding to this many decimals so that 0.8-0.6 and 0.6-0.4 count
as one distinct value (they differ only by float noise)."""

NOTE_NO_PAIRS = "no pairs"


@dataclass(frozen=True, slots=True)
class PairCounts:
    """The 2x2 table of pass/fail pairs every pass/fail statistic rests on."""

    n: int
    both_pass: int
    both_fail: int
    a_only_pass: int
    """Passed in A, failed in B: the regressions (McNemar's b)."""
    b_only_pass: int
    """Failed in A, passed in B: the improvements (McNemar's c)."""

    def to_dict(self) -> dict[str, int]:
        return {
            "n": self.n,
            "both_pass": self.both_pass,
            "both_fail": self.both_fail,
            "a_only_pass": self.a_only_pass,
            "b_only_pass": self.b_only_pass,
        }


@dataclass(frozen=True, slots=True)
class MeanDifference:
    """Mean of B - A over the pairs, and its confidence interval when one is meaningful."""

    n: int
    mean_a: float | None
    mean_b: float | None
    mean_diff: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    method: str | None
    """How the interval was computed: "bootstrap percentile (R resamples, seed S)", "normal
    approximation (...)", "exact: all differences equal", or None when there is no interval."""
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "n": self.n,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "mean_diff": self.mean_diff,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence": self.confidence,
            "method": self.method,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class McNemarResult:
    p_value: float | None
    discordant: int
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"p_value": self.p_value, "discordant": self.discordant, "note": self.note}


@dataclass(frozen=True, slots=True)
class KappaResult:
    kappa: float | None
    observed_agreement: float | None
    expected_agreement: float | None
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "kappa": self.kappa,
            "observed_agreement": self.observed_agreement,
            "expected_agreement": self.expected_agreement,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class PairedStats:
    """Everything said about one set of pairs (one grader, or the test-level scores)."""

    score: MeanDifference
    counts: PairCounts
    mcnemar: McNemarResult
    kappa: KappaResult

    def to_dict(self) -> dict[str, object]:
        return {
            "score": self.score.to_dict(),
            "counts": self.counts.to_dict(),
            "mcnemar": self.mcnemar.to_dict(),
            "kappa": self.kappa.to_dict(),
        }


# --- pass/fail -------------------------------------------------------------------------------


def pass_counts(pairs: Iterable[tuple[bool, bool]]) -> PairCounts:
    """Tally (passed in A, passed in B) pairs into the 2x2 table."""
    table: Counter[tuple[bool, bool]] = Counter(pairs)
    both_pass = table[(True, True)]
    both_fail = table[(False, False)]
    a_only = table[(True, False)]
    b_only = table[(False, True)]
    return PairCounts(both_pass + both_fail + a_only + b_only, both_pass, both_fail, a_only, b_only)


def binomial_two_sided_p(k: int, n: int) -> float:
    """Exact two-sided p-value of k successes in n trials with p = 1/2.

    The distribution is symmetric, so "as or more extreme" is twice the smaller tail (capped at 1),
    which equals the minimum-likelihood definition scipy's ``binomtest`` uses. The tail is summed in
    floating point from its largest term down (each term is the previous one times i/(n-i+1)), so a
    million trials cost no more than their tail's significant terms.
    """
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 1.0
    m = min(k, n - k)
    if 2 * m >= n:
        return 1.0
    log_top = math.lgamma(n + 1) - math.lgamma(m + 1) - math.lgamma(n - m + 1) - n * math.log(2.0)
    term = 1.0
    total = 1.0
    i = m
    while i > 0:
        term *= i / (n - i + 1)
        total += term
        if term < total * 1e-17:
            break
        i -= 1
    return min(1.0, 2.0 * math.exp(log_top) * total)


def mcnemar_exact(a_only_pass: int, b_only_pass: int) -> McNemarResult:
    """Exact McNemar test: are A->B regressions and improvements equally likely?"""
    discordant = a_only_pass + b_only_pass
    if discordant == 0:
        return McNemarResult(1.0, 0, "no discordant pairs: p = 1.0 is meaningful (no evidence the pass rates differ)")
    return McNemarResult(binomial_two_sided_p(min(a_only_pass, b_only_pass), discordant), discordant)


def cohen_kappa(counts: PairCounts) -> KappaResult:
    """Cohen's kappa of the pass/fail agreement between A and B."""
    n = counts.n
    if n == 0:
        return KappaResult(None, None, None, NOTE_NO_PAIRS)
    observed = (counts.both_pass + counts.both_fail) / n
    pass_a = (counts.both_pass + counts.a_only_pass) / n
    pass_b = (counts.both_pass + counts.b_only_pass) / n
    expected = pass_a * pass_b + (1 - pass_a) * (1 - pass_b)
    # Expected agreement is 1 only when both runs put every pair in the same single class; kappa
    # is then 0/0, whatever the (perfect) observed agreement.
    if math.isclose(expected, 1.0, rel_tol=0, abs_tol=1e-12):
        return KappaResult(None, observed, expected, "undefined (all one class)")
    return KappaResult(past_float_noise((observed - expected) / (1 - expected)), observed, expected)


def past_float_noise(value: float) -> float:
    """A statistic rounded past floating-point noise: a kappa of 0 computed as ``-3.3e-16`` must print as
    0 (not -0.000) and read as 0 in JSON; ``+ 0.0`` turns -0.0 into 0.0."""
    return round(value, 12) + 0.0


# --- scores ----------------------------------------------------------------------------------


def binomial_variate(rng: random.Random, n: int, p: float) -> int:
    """One exact Binomial(n, p) draw from ``rng`` (Python 3.11 has no ``binomialvariate``).

    Small means use geometric waiting times (cost O(np)); larger ones Hörmann's BTRS rejection
    sampler (W. Hörmann, "The generation of binomial random variates", 1993), O(1) per draw.
    """
    if n < 0 or not 0.0 <= p <= 1.0:
        raise ValueError(f"need n >= 0 and 0 <= p <= 1, got n={n}, p={p}")
    if n == 0 or p == 0.0:
        return 0
    if p == 1.0:
        return n
    if p > 0.5:
        return n - binomial_variate(rng, n, 1.0 - p)
    uniform = rng.random
    if n * p < 10.0:
        # Count the successes: each gap between successes is Geometric(p).
        log_q = _log1p(-p)
        successes = 0
        position = 0
        while True:
            position += _floor(_log(1.0 - uniform()) / log_q) + 1
            if position > n:
                return successes
            successes += 1
    a, b, c, v_r, alpha, lpq, mode, h = _btrs_constants(n, p)
    while True:
        u = uniform() - 0.5
        v = uniform()
        us = 0.5 - abs(u)
        if us == 0.0:
            continue
        k = _floor((2.0 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        v = _log(v * alpha / (a / (us * us) + b))
        if v <= h - _lgamma(k + 1) - _lgamma(n - k + 1) + (k - mode) * lpq:
            return k


_floor, _log, _log1p, _lgamma = math.floor, math.log, math.log1p, math.lgamma


@functools.lru_cache(maxsize=4096)
def _btrs_constants(n: int, p: float) -> tuple[float, float, float, float, float, float, int, float]:
    """BTRS's setup for one (n, p). Cached: a bootstrap's multinomial chain asks for the same few
    thousand (n, p) hundreds of thousands of times, and the setup (a square root, a log and two
    log-gammas) costs as much as a draw."""
    q = 1.0 - p
    spq = math.sqrt(n * p * q)
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    v_r = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    lpq = math.log(p / q)
    mode = math.floor((n + 1) * p)
    h = math.lgamma(mode + 1) + math.lgamma(n - mode + 1)
    return a, b, c, v_r, alpha, lpq, mode, h


def multinomial_counts(rng: random.Random, n: int, weights: Sequence[int]) -> list[int]:
    """Multinomial(n, weights/sum(weights)) as a chain of conditional binomials."""
    left = n
    mass = sum(weights)
    out: list[int] = []
    for w in weights[:-1]:
        if left == 0:
            out.append(0)
            continue
        drawn = binomial_variate(rng, left, w / mass)
        out.append(drawn)
        left -= drawn
        mass -= w
    out.append(left)
    return out


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default "linear" method)."""
    h = (len(sorted_values) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (h - lo) * (sorted_values[hi] - sorted_values[lo])


def bootstrap_mean_ci(
    diffs: Sequence[float],
    *,
    seed: int = 0,
    resamples: int = 10_000,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float, float, str]:
    """Percentile bootstrap interval of the mean of ``diffs``: (low, high, method).

    Resampling n pairs with replacement only matters through how many times each distinct value is
    drawn, and those counts are Multinomial(n, frequencies). When the differences take few distinct
    values (0/1 scores, rubric levels) each resample costs one binomial draw per distinct value, so
    100,000 pairs cost no more than 10. When n is small, ``random.choices`` is cheaper. When both
    would exceed :data:`BOOTSTRAP_BUDGET` (many pairs *and* many distinct values), the interval is the
    normal approximation mean +- z * SE with the plug-in SE the bootstrap estimates, and the method
    says so. Every path is deterministic for a given seed.
    """
    n = len(diffs)
    if n == 0:
        raise ValueError("bootstrap of an empty sample")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    tally = Counter(round(d, _GROUPING_DECIMALS) for d in diffs)
    if len(tally) == 1:
        only = next(iter(tally))
        return only, only, "exact: all differences equal"
    alpha = (1.0 - confidence) / 2.0
    values = sorted(tally)
    weights = [tally[v] for v in values]
    cost_choices = resamples * n
    cost_multinomial = resamples * (len(values) - 1) * _BINOMIAL_DRAW_COST
    if min(cost_choices, cost_multinomial) > BOOTSTRAP_BUDGET:
        mean = math.fsum(diffs) / n
        se = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / n) / math.sqrt(n)
        z = NormalDist().inv_cdf(1.0 - alpha)
        return (
            mean - z * se,
            mean + z * se,
            f"normal approximation (n={n}, {len(values)} distinct differences: bootstrap too costly)",
        )
    rng = random.Random(seed)
    means: list[float] = []
    if cost_choices <= cost_multinomial:
        population = [float(d) for d in diffs]
        for _ in range(resamples):
            means.append(math.fsum(rng.choices(population, k=n)) / n)
    else:
        for _ in range(resamples):
            counts = multinomial_counts(rng, n, weights)
            means.append(math.fsum(c * v for c, v in zip(counts, values) if c) / n)
    means.sort()
    return (
        _quantile(means, alpha),
        _quantile(means, 1.0 - alpha),
        f"bootstrap percentile ({resamples} resamples, seed {seed})",
    )


def mean_difference(
    scores_a: Sequence[float],
    scores_b: Sequence[float],
    *,
    seed: int = 0,
    resamples: int = 10_000,
    confidence: float = DEFAULT_CONFIDENCE,
) -> MeanDifference:
    """Mean B - A over paired scores, with a bootstrap CI when there are enough pairs."""
    if len(scores_a) != len(scores_b):
        raise ValueError(f"paired scores differ in length: {len(scores_a)} vs {len(scores_b)}")
    n = len(scores_a)
    if n == 0:
        return MeanDifference(0, None, None, None, None, None, confidence, None, NOTE_NO_PAIRS)
    diffs = [b - a for a, b in zip(scores_a, scores_b)]
    mean_a = math.fsum(scores_a) / n
    mean_b = math.fsum(scores_b) / n
    mean_diff = math.fsum(diffs) / n
    if n < MIN_PAIRS_CI:
        note = f"not enough pairs for a CI (n={n}; need at least {MIN_PAIRS_CI})"
        return MeanDifference(n, mean_a, mean_b, mean_diff, None, None, confidence, None, note)
    low, high, method = bootstrap_mean_ci(diffs, seed=seed, resamples=resamples, confidence=confidence)
    return MeanDifference(n, mean_a, mean_b, mean_diff, low, high, confidence, method)


def paired_stats(
    scores_a: Sequence[float],
    scores_b: Sequence[float],
    passed_a: Sequence[bool],
    passed_b: Sequence[bool],
    *,
    seed: int = 0,
    resamples: int = 10_000,
) -> PairedStats:
    """Score difference, McNemar and kappa for one set of pairs, with the counts they rest on."""
    if len(passed_a) != len(passed_b):
        raise ValueError(f"paired verdicts differ in length: {len(passed_a)} vs {len(passed_b)}")
    counts = pass_counts(zip(passed_a, passed_b))
    if counts.n == 0:
        mcnemar = McNemarResult(None, 0, NOTE_NO_PAIRS)
    else:
        mcnemar = mcnemar_exact(counts.a_only_pass, counts.b_only_pass)
    return PairedStats(
        score=mean_difference(scores_a, scores_b, seed=seed, resamples=resamples),
        counts=counts,
        mcnemar=mcnemar,
        kappa=cohen_kappa(counts),
    )
