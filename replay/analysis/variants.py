"""``compare BASE V1 V2 ...``: several regrades of one run (prompt variants) against the base at once.

One row per variant: the mean test-score difference (variant − base) with a normal 95% interval whose
standard error is cluster-robust when the tests are not independent (``--cluster-by``), its p-value, the
same p-value Holm-adjusted over the variants (the family-wise error rate stays at 5%), and the smallest
difference this many paired tests could detect at 80% power. Repeated samples of one test (attempts)
are averaged within the test, so a test with five samples counts once: the paired tests of the two-run
compare (``compare.paired_units``).

With human labels, each variant's agreement with them (test-level pass, and per grader) next to the
base's, the McNemar p-values Holm-adjusted over the variants too.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from evalstore.replay.agentv.wire import TRIALS_ROW_FIELDS
from evalstore.replay.analysis.agreement import AgreementDifference, agreement_difference
from evalstore.replay.analysis.calibration import ClusteredDifference, clustered_mean_difference, holm
from evalstore.replay.analysis.compare import RunResults, paired_units
from evalstore.replay.analysis.per_test import TestKey
from evalstore.replay.labels import Label
from evalstore.store import EventStore
from evalstore.store.events import TestCaseRecorded, TestScored

BUILTIN_CLUSTERS = ("conversation_id", "category")


def cluster_labels(store: EventStore, run_ids: list[str], key: str) -> dict[TestKey, str]:
    """Each test's value of ``key``: the test's metadata (as recorded with its case), else its AgentV label
    (``conversation_id``, ``category``: recorded with a run's case, or carried by an imported row). Tests
    without it are their own cluster."""
    found: dict[TestKey, str] = {}
    for test, values in _clusterings(store, run_ids):
        if key in values:
            found.setdefault(test, values[key])
    return found


def cluster_keys(store: EventStore, run_ids: list[str]) -> list[str]:
    """The keys :func:`cluster_labels` could cluster these runs' tests by (what a mistyped key is told)."""
    return sorted({k for _, values in _clusterings(store, run_ids) for k in values})


def _clusterings(store: EventStore, run_ids: list[str]) -> Iterator[tuple[TestKey, dict[str, Any]]]:
    """Each recorded case's and score's values a test can be clustered by, in the runs' order: a case's
    AgentV labels, then its metadata (which wins); a score's row fields (an imported row's labels)."""
    for run_id in run_ids:
        for stored in store.read_stream(run_id, types=["test_case_recorded", "test_scored"]):
            ev = stored.event
            test = (ev.test_id, ev.target)  # type: ignore[attr-defined]
            if isinstance(ev, TestCaseRecorded):
                builtin = {k: getattr(ev, k) for k in BUILTIN_CLUSTERS if getattr(ev, k) is not None}
                yield test, {**builtin, **{k: str(v) for k, v in ev.metadata.items() if v is not None}}
            elif isinstance(ev, TestScored):  # its labels (not an imported row's trials: TRIALS_ROW_FIELDS)
                yield test, {k: v for k, v in ev.row_fields.items() if k not in TRIALS_ROW_FIELDS}


@dataclass(frozen=True)
class VariantRow:
    run_id: str
    mean_base: float | None
    mean_variant: float | None
    difference: ClusteredDifference
    p_holm: float | None
    agreement: list[AgreementDifference]
    agreement_p_holm: dict[str, float | None]

    def to_dict(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "mean_base": self.mean_base,
            "mean_variant": self.mean_variant,
            **self.difference.to_dict(),
            "p_holm": self.p_holm,
            "agreement": [{**a.to_dict(), "p_holm": self.agreement_p_holm.get(a.grader)} for a in self.agreement],
        }


@dataclass(frozen=True)
class VariantsReport:
    base: str
    cluster_by: str | None
    rows: list[VariantRow]

    def to_dict(self) -> dict[str, object]:
        return {
            "base": self.base,
            "cluster_by": self.cluster_by,
            "correction": "holm",
            "rows": [r.to_dict() for r in self.rows],
        }


def compare_variants(
    base: RunResults,
    variants: list[RunResults],
    *,
    clusters: dict[TestKey, str] | None = None,
    cluster_by: str | None = None,
    labels: list[Label] | None = None,
) -> VariantsReport:
    partial = []
    for variant in variants:
        units = paired_units(base, variant)
        diffs = [u.delta for u in units]
        groups = [clusters.get(u.test, f"\0{u.test}") for u in units] if clusters is not None else None
        diff = clustered_mean_difference(diffs, groups)
        mean_b = math.fsum(u.score_a for u in units) / len(units) if units else None
        mean_v = math.fsum(u.score_b for u in units) / len(units) if units else None
        agree = agreement_difference(labels, base, variant) if labels else []
        partial.append((variant.run_id, mean_b, mean_v, diff, agree))
    adjusted = holm([p[3].p_value for p in partial])
    graders = sorted({a.grader for p in partial for a in p[4]})
    agree_adjusted: dict[str, list[float | None]] = {}
    for g in graders:
        ps = [next((a.mcnemar.p_value for a in p[4] if a.grader == g), None) for p in partial]
        agree_adjusted[g] = holm(ps)
    rows = [
        VariantRow(run_id, mb, mv, diff, adjusted[i], agree, {g: agree_adjusted[g][i] for g in graders})
        for i, (run_id, mb, mv, diff, agree) in enumerate(partial)
    ]
    return VariantsReport(base.run_id, cluster_by, rows)
