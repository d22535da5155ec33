"""The judge-vs-human statistics, checked against independent formulas and implementations."""

from __future__ import annotations

import math
import random
from itertools import combinations

import pytest

from evalstore.replay.analysis.calibration import (
    clustered_mean_difference,
    corrected_pass_rate,
    holm,
    judge_agreement,
    labeller_alpha,
    rogan_gladen,
)


def _pairs(tp: int, fn: int, fp: int, tn: int) -> list[tuple[bool, bool]]:
    return [(True, True)] * tp + [(True, False)] * fn + [(False, True)] * fp + [(False, False)] * tn


def test_point_estimates_match_the_textbook_formulas_and_sklearn_style_kappa() -> None:
    a = judge_agreement(_pairs(18, 4, 3, 15), seed=1)
    assert (a.confusion.tp, a.confusion.fn, a.confusion.fp, a.confusion.tn) == (18, 4, 3, 15)
    assert a.accuracy.value == pytest.approx(33 / 40)
    assert a.tpr.value == pytest.approx(18 / 22)
    assert a.tnr.value == pytest.approx(15 / 18)
    assert a.precision.value == pytest.approx(18 / 21)
    # Cohen's kappa from the marginals, written out independently.
    po = 33 / 40
    pe = (22 / 40) * (21 / 40) + (18 / 40) * (19 / 40)
    assert a.kappa.value == pytest.approx((po - pe) / (1 - pe))
    for est in (a.accuracy, a.tpr, a.tnr, a.precision, a.kappa):
        assert est.low <= est.value <= est.high
        assert est.high - est.low > 0.05  # 40 labels cannot pin a rate down to a point


def test_bootstrap_intervals_are_seeded_and_close_to_a_plain_resampling_bootstrap() -> None:
    pairs = _pairs(30, 6, 5, 19)
    a1, a2 = judge_agreement(pairs, seed=7), judge_agreement(pairs, seed=7)
    assert a1 == a2
    # An independent bootstrap that resamples the tests themselves.
    rng = random.Random(3)
    accs = sorted(sum(h == j for h, j in rng.choices(pairs, k=len(pairs))) / len(pairs) for _ in range(4000))
    assert a1.accuracy.low == pytest.approx(accs[100], abs=0.03)
    assert a1.accuracy.high == pytest.approx(accs[3899], abs=0.03)


def test_too_few_labels_give_no_interval_and_say_so() -> None:
    a = judge_agreement(_pairs(3, 1, 1, 2), min_labels=10)
    assert not a.enough and "not enough labels (n=7" in (a.note or "")
    assert a.accuracy.low is None and a.accuracy.high is None


def test_rogan_gladen_inverts_what_an_imperfect_judge_reports() -> None:
    true_rate, tpr, tnr = 0.3, 0.9, 0.8
    reported = true_rate * tpr + (1 - true_rate) * (1 - tnr)
    assert rogan_gladen(reported, tpr, tnr) == pytest.approx(true_rate)
    assert rogan_gladen(0.5, 0.5, 0.5) is None  # a coin
    assert rogan_gladen(0.01, 0.9, 0.8) == 0.0  # clipped


def test_corrected_pass_rate_interval_is_wider_than_the_raw_one() -> None:
    c = judge_agreement(_pairs(40, 10, 8, 42)).confusion
    raw, corrected = corrected_pass_rate(120, 200, c, seed=2)
    assert raw.value == pytest.approx(0.6)
    expected = rogan_gladen(0.6, 40 / 50, 42 / 50)
    assert corrected.value == pytest.approx(expected)
    assert corrected.low <= corrected.value <= corrected.high
    assert (corrected.high - corrected.low) > (raw.high - raw.low)  # TPR/TNR uncertainty is included
    # A perfect judge needs no correction.
    perfect = judge_agreement(_pairs(20, 0, 0, 20)).confusion
    raw, corrected = corrected_pass_rate(50, 100, perfect)
    assert corrected.value == pytest.approx(raw.value)


def _alpha_nominal(units: list[list[bool | None]]) -> float:
    """Krippendorff's alpha for nominal data from the coincidence matrix, written out."""
    o: dict[tuple, float] = {}
    for u in units:
        vals = [v for v in u if v is not None]
        m = len(vals)
        if m < 2:
            continue
        for i, j in ((i, j) for i in range(m) for j in range(m) if i != j):
            o[(vals[i], vals[j])] = o.get((vals[i], vals[j]), 0) + 1 / (m - 1)
    n_c: dict = {}
    for (c, _), w in o.items():
        n_c[c] = n_c.get(c, 0) + w
    n = sum(n_c.values())
    d_o = sum(w for (c, k), w in o.items() if c != k)
    d_e = sum(n_c[c] * n_c[k] for c in n_c for k in n_c if c != k) / (n - 1)
    return 1 - d_o / d_e


def test_labeller_alpha_matches_the_coincidence_matrix_definition() -> None:
    units = [[True, True, None], [True, False, True], [False, False, False], [True, True, True], [False, None, True]]
    units += [[True, True, None]] * 5 + [[False, False, None]] * 3
    got = labeller_alpha(units)
    assert got.value == pytest.approx(_alpha_nominal(units))
    assert labeller_alpha([[True, None], [False, None]]).value is None  # nobody labelled the same test


def test_holm_matches_its_definition() -> None:
    ps = [0.01, 0.04, 0.03, None, 0.20]
    got = holm(ps)
    given = [p for p in ps if p is not None]
    m = len(given)
    for i, p in enumerate(ps):
        if p is None:
            assert got[i] is None
            continue
        # Holm: max over the p-values ranked at or below this one of (m - rank) * p, capped at 1.
        ranked = sorted(given)
        rank = ranked.index(p)
        assert got[i] == pytest.approx(min(1.0, max((m - r) * ranked[r] for r in range(rank + 1))))


def test_clustered_standard_error_and_the_power_line() -> None:
    diffs = [0.2, 0.1, 0.0, 0.4, -0.1, 0.3, 0.2, 0.0, 0.5, 0.1]
    n = len(diffs)
    mean = sum(diffs) / n
    plain = clustered_mean_difference(diffs)
    assert plain.se == pytest.approx(math.sqrt(sum((d - mean) ** 2 for d in diffs) / n) / math.sqrt(n))
    assert plain.mde == pytest.approx(2.8016 * plain.se, rel=1e-3)
    clusters = ["a", "a", "b", "b", "c", "c", "d", "d", "e", "e"]
    clustered = clustered_mean_difference(diffs, clusters)
    # Miller (2024): the clustered variance adds the within-cluster cross products.
    cross = sum(
        (diffs[i] - mean) * (diffs[j] - mean) for i, j in combinations(range(n), 2) if clusters[i] == clusters[j]
    )
    assert clustered.se**2 == pytest.approx(plain.se**2 + 2 * cross / n**2)
    assert clustered.clusters == 5 and plain.clusters == n


def test_too_few_pairs_or_no_variance_claim_no_certainty() -> None:
    """The two-run compare's rule (at least 5 pairs for a CI) holds for the multi-run one; and identical
    differences (SE 0) give the exact sign test's p-value, not a normal test's 0."""
    few = clustered_mean_difference([1 / 3, 1 / 3, 1 / 3])
    assert few.mean_diff == pytest.approx(1 / 3) and (few.se, few.low, few.p_value, few.mde) == (None, None, None, None)
    assert clustered_mean_difference([0.2] * 8, ["a", "a", "b", "b", "c", "c", "d", "d"]).p_value is None
    same = clustered_mean_difference([0.5] * 6)
    assert (same.low, same.high, same.p_value) == (0.5, 0.5, pytest.approx(2 * 0.5**6))
    assert clustered_mean_difference([0.0] * 6).p_value == 1.0
