"""The viewer's read models for human labels: whose labels a test has, the next test a person has not
labelled (``evalstore view --label-as NAME``), and the agreement of a page's runs with the labels.

Labels are written by :func:`evalstore.replay.labels.record_labels`, as ``evalstore label`` writes them;
the queue is the one ``evalstore label RUN --next`` walks (the transcripts of the run the labels belong
to, by test id, target and attempt), without loading the run's verdicts or conversions, so finding the
next test reads the run's transcript events and its label stream only.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalstore.replay.analysis.agreement import (
    AgreementDifference,
    AgreementReport,
    agreement,
    agreement_difference,
)
from evalstore.replay.labels import Label, current_labels, label_run, label_stream, labelled_keys
from evalstore.replay.material import ResultKey, load_scores, result_key
from evalstore.store import EventStore
from evalstore.store.events import TranscriptRecorded


def labels_of_test(store: EventStore, run_id: str, test_id: str) -> dict[ResultKey, list[Label]]:
    """The current labels of every result of ``test_id`` (each target and attempt), by result."""
    out: dict[ResultKey, list[Label]] = {}
    for lab in current_labels(store, label_run(store, run_id)):
        if lab.label.test_id == test_id:
            out.setdefault(result_key(test_id, lab.label.target, lab.label.attempt), []).append(lab)
    return out


@dataclass(frozen=True)
class NextTest:
    test_id: str | None
    """The test to label next; None when every result is labelled."""
    left: int
    """Results still to label by this person (for this grader), the next one included."""
    total: int
    """Results with a transcript, which can be labelled."""


def next_unlabelled(
    store: EventStore, run_id: str, *, by: str, grader: str | None = None, after: str | None = None
) -> NextTest:
    """The first test (by id) with a result that ``by`` has not labelled for ``grader`` (None: the whole
    answer), after the test ``after`` when given (a skipped test), wrapping round to the start."""
    base = label_run(store, run_id)
    keys = sorted(
        result_key(ev.test_id, ev.target, ev.attempt)
        for ev in (s.event for s in store.read_stream(base, types=[TranscriptRecorded.type]))
        if isinstance(ev, TranscriptRecorded)
    )
    done = labelled_keys(store, base, by=by, grader=grader)
    todo = [k for k in keys if k not in done]
    later = [k for k in todo if after is not None and k[0] > after]
    chosen = (later or todo)[:1]
    return NextTest(chosen[0][0] if chosen else None, len(todo), len(keys))


@dataclass(frozen=True)
class PageAgreement:
    """What a run or compare page shows about the labels: each run's graders against them and, for two
    runs, which agrees more."""

    label_run: str
    report: AgreementReport
    differences: list[AgreementDifference]


def page_agreement(store: EventStore, run_ids: list[str]) -> PageAgreement | None:
    """The agreement of ``run_ids`` (one run, or A and B of a comparison) with the labels of their
    transcripts, as ``evalstore agreement`` and ``evalstore compare`` compute it (same seed and
    resamples); None when the runs do not share one labelled transcript run."""
    bases = {label_run(store, r) for r in run_ids}
    if len(bases) != 1:
        return None
    [base] = bases
    labels = current_labels(store, base)
    if not labels:
        return None
    # Agreement needs verdicts and scores only: the projections, as `evalstore agreement` reads them.
    results = [load_scores(store, r) for r in dict.fromkeys(run_ids)]
    report = agreement(base, labels, results)
    differences = agreement_difference(labels, results[0], results[1]) if len(results) == 2 else []
    return PageAgreement(base, report, differences)


def labels_version(store: EventStore, run_ids: list[str]) -> tuple[int, ...]:
    """How far the runs' streams and their label streams have grown: a page's agreement stays valid
    while this does not change."""
    streams = [*run_ids, *(label_stream(label_run(store, r)) for r in run_ids)]
    return tuple(store.stream_version(s) for s in streams)


def graders_of_test(store: EventStore, run_id: str, test_id: str) -> list[str]:
    """The graders that judged ``test_id`` in ``run_id``: the ones a label from its page may be about."""
    return sorted({row["grader"] for row in store.query("verdicts", run_id=run_id, test_id=test_id)})
