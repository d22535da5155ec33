"""Paired statistics, checked against scipy and hand-worked values."""

from __future__ import annotations

import math
import random
import time
from collections import Counter

import pytest
from scipy import stats as sps

from evalstore.replay.analysis.stats import (
    BOOTSTRAP_BUDGET,
    MIN_PAIRS_CI,
    PairCounts,
    binomial_two_sided_p,
    binomial_variate,
    bootstrap_mean_ci,
    cohen_kappa,
    mcnemar_exact,
    mean_difference,
    multinomial_counts,
    paired_stats,
    pass_counts,
)

# --- McNemar -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "b, c",
    [(1, 0), (0, 5), (5, 0), (3, 3), (2, 7), (7, 2), (10, 25), (40, 41), (0, 30), (400, 460), (4000, 4300)],
)
def test_mcnemar_matches_scipy_binomtest(b: int, c: int) -> None:
    expected = sps.binomtest(min(b, c), b + c, 0.5, alternative="two-sided").pvalue
    result = mcnemar_exact(b, c)
    assert result.discordant == b + c
    assert result.p_value == pytest.approx(expected, rel=1e-9, abs=1e-300)
    assert result.note is None


@pytest.mark.parametrize("k, n", [(0, 1), (0, 60), (13, 100), (49_000, 100_000), (49_800, 100_000)])
def test_binomial_p_matches_scipy_for_large_n(k: int, n: int) -> None:
    expected = sps.binomtest(k, n, 0.5).pvalue
    assert binomial_two_sided_p(k, n) == pytest.approx(expected, rel=1e-8, abs=1e-300)


def test_mcnemar_without_discordant_pairs_is_p_one_and_says_why() -> None:
    result = mcnemar_exact(0, 0)
    assert result.p_value == 1.0
    assert result.discordant == 0
    assert result.note is not None and "meaningful" in result.note


def test_binomial_p_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        binomial_two_sided_p(5, 3)


# --- kappa -------------------------------------------------------------------------------------


def test_kappa_hand_worked() -> None:
    # po = (20 + 15) / 50 = 0.7; A passes 25/50 = 0.5, B passes 30/50 = 0.6;
    # pe = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    counts = PairCounts(n=50, both_pass=20, both_fail=15, a_only_pass=5, b_only_pass=10)
    result = cohen_kappa(counts)
    assert result.observed_agreement == pytest.approx(0.7)
    assert result.expected_agreement == pytest.approx(0.5)
    assert result.kappa == pytest.approx(0.4)
    assert result.note is None


def test_kappa_perfect_and_opposite_agreement() -> None:
    assert cohen_kappa(PairCounts(10, 4, 6, 0, 0)).kappa == pytest.approx(1.0)
    # Every pair disagrees, half each way: po = 0, pe = 0.5, kappa = -1.
    assert cohen_kappa(PairCounts(10, 0, 0, 5, 5)).kappa == pytest.approx(-1.0)


@pytest.mark.parametrize("counts", [PairCounts(7, 7, 0, 0, 0), PairCounts(3, 0, 3, 0, 0)])
def test_kappa_undefined_when_all_one_class(counts: PairCounts) -> None:
    result = cohen_kappa(counts)
    assert result.kappa is None
    assert result.note == "undefined (all one class)"
    assert result.observed_agreement == 1.0


def test_kappa_without_pairs() -> None:
    result = cohen_kappa(PairCounts(0, 0, 0, 0, 0))
    assert result.kappa is None and result.note == "no pairs"


def test_pass_counts_tallies_the_table() -> None:
    pairs = [(True, True)] * 3 + [(False, False)] * 2 + [(True, False)] * 4 + [(False, True)]
    assert pass_counts(pairs) == PairCounts(n=10, both_pass=3, both_fail=2, a_only_pass=4, b_only_pass=1)


# --- binomial / multinomial sampling -----------------------------------------------------------


@pytest.mark.parametrize("n, p", [(20, 0.1), (30, 0.4), (200, 0.7), (5, 0.5)])
def test_binomial_variate_follows_the_binomial_pmf(n: int, p: float) -> None:
    rng = random.Random(123)
    draws = 20_000
    freq = Counter(binomial_variate(rng, n, p) for _ in range(draws))
    assert all(0 <= k <= n for k in freq)
    for k in range(n + 1):
        expected = sps.binom.pmf(k, n, p)
        # 5 standard errors of a frequency estimate, plus a floor for rare values.
        tolerance = 5 * math.sqrt(expected * (1 - expected) / draws) + 1e-3
        assert abs(freq[k] / draws - expected) <= tolerance, (k, freq[k] / draws, expected)


def test_binomial_variate_edges_and_bad_arguments() -> None:
    rng = random.Random(0)
    assert binomial_variate(rng, 0, 0.3) == 0
    assert binomial_variate(rng, 9, 0.0) == 0
    assert binomial_variate(rng, 9, 1.0) == 9
    with pytest.raises(ValueError):
        binomial_variate(rng, -1, 0.5)
    with pytest.raises(ValueError):
        binomial_variate(rng, 3, 1.5)


def test_multinomial_counts_sum_to_n_and_follow_weights() -> None:
    rng = random.Random(7)
    totals = [0, 0, 0]
    for _ in range(2000):
        counts = multinomial_counts(rng, 100, [1, 2, 7])
        assert sum(counts) == 100 and min(counts) >= 0
        totals = [t + c for t, c in zip(totals, counts)]
    assert [t / 200_000 for t in totals] == pytest.approx([0.1, 0.2, 0.7], abs=0.005)


def test_draws_are_pinned_for_a_seed() -> None:
    """The same seed gives the same draws as before BTRS's setup was cached (values from that code):
    a printed confidence interval must not move when the sampler is made faster."""
    rng = random.Random(2026)
    cases = [(1000, 0.3), (20000, 0.025), (5000, 0.9), (40, 0.1), (300, 0.5), (1000, 0.3)]
    assert [binomial_variate(rng, n, p) for n, p in cases] == [280, 501, 4532, 4, 157, 304]
    diffs = [0.0] * 1500 + [0.5] * 120 + [-0.5] * 160 + [0.25] * 40 + [-1.0] * 30 + [1.0] * 9
    assert bootstrap_mean_ci(diffs, seed=7) == (
        -0.02784090909090906,
        -0.005648197955890263,
        "bootstrap percentile (10000 resamples, seed 7)",
    )
    assert bootstrap_mean_ci(diffs, seed=7, resamples=20_000)[:2] == (-0.027837547068316298, -0.005782678859601937)


# --- bootstrap ---------------------------------------------------------------------------------


def test_bootstrap_hand_worked_small_case() -> None:
    # Five differences, one of them 1: a resample's mean is X/5 with X ~ Binomial(5, 0.2).
    # P(X = 0) = 0.328 > 2.5%, so the lower bound is 0; P(X <= 2) = 0.942 < 97.5% <= P(X <= 3) = 0.993,
    # so the upper bound is 3/5 (both far from the edges at 10,000 resamples).
    low, high, method = bootstrap_mean_ci([0, 0, 0, 0, 1], seed=0)
    assert (low, high) == (0.0, pytest.approx(0.6))
    assert method.startswith("bootstrap percentile")


def test_bootstrap_many_pairs_matches_binomial_quantiles() -> None:
    # 1,000 0/1 differences with 200 ones: resample means are Binomial(1000, 0.2) / 1000, so the
    # interval is that distribution's 2.5% and 97.5% quantiles (scipy), up to resampling noise.
    diffs = [1.0] * 200 + [0.0] * 800
    low, high, method = bootstrap_mean_ci(diffs, seed=3)
    assert low == pytest.approx(sps.binom.ppf(0.025, 1000, 0.2) / 1000, abs=0.003)
    assert high == pytest.approx(sps.binom.ppf(0.975, 1000, 0.2) / 1000, abs=0.003)
    assert "bootstrap percentile" in method


def test_bootstrap_is_reproducible_with_a_seed() -> None:
    rng = random.Random(1)
    diffs = [rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0]) for _ in range(300)]
    assert bootstrap_mean_ci(diffs, seed=42) == bootstrap_mean_ci(diffs, seed=42)
    assert bootstrap_mean_ci(diffs, seed=42) != bootstrap_mean_ci(diffs, seed=43)
    small = diffs[:20]
    assert bootstrap_mean_ci(small, seed=5) == bootstrap_mean_ci(small, seed=5)


@pytest.mark.parametrize("n", [8, 60, 3000])
def test_bootstrap_contains_the_mean(n: int) -> None:
    rng = random.Random(n)
    diffs = [rng.choice([-1.0, 0.0, 0.0, 0.25, 1.0]) for _ in range(n)]
    low, high, _ = bootstrap_mean_ci(diffs, seed=0)
    assert low <= sum(diffs) / n <= high
    assert low < high


def test_bootstrap_width_shrinks_with_n() -> None:
    pattern = [1.0, 0.0, 0.0, -1.0, 0.5]
    widths = []
    for repeats in (4, 40, 400):
        low, high, _ = bootstrap_mean_ci(pattern * repeats, seed=0)
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2] > 0
    # Width goes as 1/sqrt(n): ten times the pairs, about a third of the width.
    assert widths[2] / widths[1] == pytest.approx(1 / math.sqrt(10), rel=0.15)


@pytest.mark.parametrize("value", [0.0, 0.1, -0.35])
def test_all_equal_differences_give_a_zero_width_interval(value: float) -> None:
    low, high, method = bootstrap_mean_ci([value] * 37, seed=0)
    assert low == high == value
    assert method == "exact: all differences equal"


def test_bootstrap_groups_float_noise_as_one_value() -> None:
    diffs = [0.8 - 0.6, 0.6 - 0.4, 0.3 - 0.1] * 3  # all "0.2" up to rounding error
    low, high, method = bootstrap_mean_ci(diffs)
    assert low == high == pytest.approx(0.2)
    assert method.startswith("exact")


def test_bootstrap_falls_back_to_a_documented_normal_approximation() -> None:
    rng = random.Random(9)
    diffs = [rng.uniform(-1, 1) for _ in range(5000)]  # every difference distinct
    assert 10_000 * len(diffs) > BOOTSTRAP_BUDGET
    low, high, method = bootstrap_mean_ci(diffs, seed=0)
    assert method.startswith("normal approximation")
    mean = sum(diffs) / len(diffs)
    se = sps.tstd(diffs) * math.sqrt((len(diffs) - 1) / len(diffs)) / math.sqrt(len(diffs))
    z = sps.norm.ppf(0.975)
    assert low == pytest.approx(mean - z * se, rel=1e-9)
    assert high == pytest.approx(mean + z * se, rel=1e-9)


def test_bootstrap_and_normal_approximation_agree_for_many_pairs() -> None:
    diffs = [1.0] * 1500 + [0.0] * 7000 + [-1.0] * 1500 + [0.5] * 500
    low, high, method = bootstrap_mean_ci(diffs, seed=0)
    assert method.startswith("bootstrap")
    mean = sum(diffs) / len(diffs)
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / len(diffs)) / math.sqrt(len(diffs))
    assert low == pytest.approx(mean - 1.96 * se, abs=se * 0.1)
    assert high == pytest.approx(mean + 1.96 * se, abs=se * 0.1)


def test_bootstrap_of_100k_pairs_is_fast() -> None:
    # 100,000 pairs x 10,000 resamples resampled element by element would take minutes in Python;
    # the multinomial over distinct values takes a fraction of a second.
    rng = random.Random(0)
    diffs = [rng.choice([-1.0, 0.0, 0.0, 0.0, 1.0]) for _ in range(100_000)]
    started = time.perf_counter()
    low, high, method = bootstrap_mean_ci(diffs, seed=0, resamples=10_000)
    assert time.perf_counter() - started < 10
    assert method.startswith("bootstrap percentile")
    assert low < sum(diffs) / len(diffs) < high


def test_bootstrap_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        bootstrap_mean_ci([])
    with pytest.raises(ValueError):
        bootstrap_mean_ci([1.0, 2.0], resamples=0)


# --- mean difference and the bundle ------------------------------------------------------------


def test_mean_difference_without_pairs() -> None:
    result = mean_difference([], [])
    assert result.n == 0 and result.mean_diff is None and result.ci_low is None
    assert result.note == "no pairs"


@pytest.mark.parametrize("n", range(1, MIN_PAIRS_CI))
def test_mean_difference_with_too_few_pairs_has_no_ci(n: int) -> None:
    result = mean_difference([0.0] * n, [1.0] * n)
    assert result.mean_diff == 1.0 and result.mean_a == 0.0 and result.mean_b == 1.0
    assert result.ci_low is None and result.ci_high is None and result.method is None
    assert result.note is not None and "not enough pairs" in result.note


def test_mean_difference_at_the_threshold_has_a_ci() -> None:
    result = mean_difference([0.0, 0.5, 1.0, 0.25, 0.0], [0.5, 0.5, 1.0, 0.0, 1.0])
    assert result.n == MIN_PAIRS_CI
    assert result.mean_diff == pytest.approx(0.25)
    assert result.ci_low is not None and result.ci_high is not None
    assert result.ci_low <= 0.25 <= result.ci_high
    assert result.note is None


def test_mean_difference_rejects_unpaired_input() -> None:
    with pytest.raises(ValueError):
        mean_difference([1.0], [1.0, 0.0])


def test_paired_stats_bundle_rests_on_its_counts() -> None:
    a = [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    result = paired_stats(a, b, [x == 1.0 for x in a], [x == 1.0 for x in b])
    assert result.counts == PairCounts(n=6, both_pass=2, both_fail=1, a_only_pass=1, b_only_pass=2)
    assert result.mcnemar.p_value == pytest.approx(sps.binomtest(1, 3).pvalue)
    assert result.score.mean_diff == pytest.approx(1 / 6)
    d = result.to_dict()
    assert d["counts"] == {"n": 6, "both_pass": 2, "both_fail": 1, "a_only_pass": 1, "b_only_pass": 2}


def test_paired_stats_without_pairs_says_so_everywhere() -> None:
    result = paired_stats([], [], [], [])
    assert result.score.note == result.mcnemar.note == result.kappa.note == "no pairs"
    assert result.mcnemar.p_value is None and result.kappa.kappa is None
