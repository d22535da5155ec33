"""Human labels as events: stored against the transcript's run, superseded not edited, imported atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from labelled_runs import add_run, add_transcripts

from evalstore.replay.analysis.agreement import agreement, agreement_difference
from evalstore.replay.labels import (
    LabelError,
    LabelInput,
    current_labels,
    export_rows,
    read_label_file,
    read_labels,
    record_labels,
)
from evalstore.replay.material import load_results
from evalstore.store import EventStore

TESTS = {f"t{i:02d}": i % 3 != 0 for i in range(12)}


def test_a_label_given_on_a_replay_belongs_to_the_recorded_transcript(store: EventStore) -> None:
    add_run(store, "rec-1", TESTS)
    add_run(store, "rpl-1", dict.fromkeys(TESTS, True), parent="rec-1")
    [event] = record_labels(store, [LabelInput(test="t01", verdict="fail", by="ann")], run="rpl-1")
    assert event.run_id == "rec-1" and event.transcript_event_id
    [stored] = read_labels(store, "rec-1")
    assert stored.label == event
    assert store.stream_version("lbl-rec-1") == 1


def test_a_newer_label_by_the_same_person_supersedes_and_both_stay(store: EventStore) -> None:
    add_run(store, "rec-1", TESTS)
    record_labels(store, [LabelInput(test="t01", verdict="fail", by="ann")], run="rec-1")
    record_labels(store, [LabelInput(test="t01", verdict="pass", by="ann", note="misread")], run="rec-1")
    record_labels(store, [LabelInput(test="t01", verdict="fail", by="bob")], run="rec-1")
    every = read_labels(store, "rec-1")
    assert [(lab.label.by, lab.label.verdict, lab.superseded) for lab in every] == [
        ("ann", "fail", True),
        ("ann", "pass", False),
        ("bob", "fail", False),
    ]
    assert len(current_labels(store, "rec-1")) == 2


def test_bad_labels_are_refused_before_anything_is_written(store: EventStore, tmp_path: Path) -> None:
    add_run(store, "rec-1", TESTS)
    with pytest.raises(LabelError, match="has no test 'nope'"):
        record_labels(store, [LabelInput(test="nope", verdict="pass")], run="rec-1")
    with pytest.raises(LabelError, match="needs a verdict"):
        record_labels(store, [LabelInput(test="t01")], run="rec-1")
    f = tmp_path / "labels.csv"
    f.write_text("test_id,verdict,by\nt01,pass,ann\nt02,maybe,ann\n", encoding="utf-8")
    items, ids = read_label_file(f)
    with pytest.raises(LabelError, match=rf"{f}:3: verdict: expected pass or fail"):
        record_labels(store, items, run="rec-1", ids=ids)
    assert read_labels(store, "rec-1") == []


def test_import_is_idempotent_and_export_round_trips_to_another_store(store: EventStore, tmp_path: Path) -> None:
    add_run(store, "rec-1", TESTS)
    f = tmp_path / "labels.jsonl"
    f.write_text(
        '{"run": "rec-1", "test_id": "t01", "verdict": "pass", "by": "ann", "grader": "quality"}\n\n'
        '{"run": "rec-1", "test_id": "t02", "score": 0.25, "by": "ann", "note": "thin"}\n',
        encoding="utf-8",
    )
    for _ in range(2):
        items, ids = read_label_file(f)
        record_labels(store, items, ids=ids)
    labels = read_labels(store, "rec-1")
    assert len(labels) == 2 and labels[0].label.source.line == 1 and labels[1].label.source.line == 3
    rows = list(export_rows(labels))
    other = EventStore.open(f"sqlite:///{tmp_path / 'other.db'}")  # a second store (SQLite) receives the export
    add_run(other, "rec-1", TESTS)
    out = tmp_path / "export.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    items, ids = read_label_file(out)
    record_labels(other, items, ids=ids)
    assert [
        lab.label.model_dump(exclude={"source", "labelled_at", "transcript_event_id"})
        for lab in read_labels(other, "rec-1")
    ] == [lab.label.model_dump(exclude={"source", "labelled_at", "transcript_event_id"}) for lab in labels]
    other.close()


def test_agreement_measures_each_run_against_the_labels(store: EventStore) -> None:
    humans = {t: i % 2 == 0 for i, t in enumerate(TESTS)}
    add_run(store, "rec-1", TESTS)  # disagrees with the humans on some tests
    add_run(store, "rpl-good", humans, parent="rec-1")  # grades exactly as the humans did
    record_labels(
        store, [LabelInput(test=t, verdict="pass" if p else "fail", by="ann") for t, p in humans.items()], run="rec-1"
    )
    report = agreement("rec-1", current_labels(store, "rec-1"), [load_results(store, r) for r in ("rec-1", "rpl-good")])
    rows = {(r.run_id, r.grader): r for r in report.rows}
    good = rows[("rpl-good", "quality")]
    assert good.labelled == 12 and good.agreement.accuracy.value == 1.0 and good.agreement.kappa.value == 1.0
    base = rows[("rec-1", "quality")]
    expected = sum(TESTS[t] == humans[t] for t in TESTS) / 12
    assert base.agreement.accuracy.value == pytest.approx(expected)
    assert base.raw_pass_rate.value == pytest.approx(sum(TESTS.values()) / 12)


def test_agreement_counts_a_test_of_several_attempts_once(store: EventStore) -> None:
    # 5 tests of 3 attempts (Inspect epochs), every attempt labelled: 5 labelled tests, not 15 (too few for
    # the default --min-labels 10), as compare pairs these runs as 5 tests.
    tests = dict.fromkeys("abcd", True) | {"e": False}
    add_run(store, "rec-1", tests, attempts=(1, 2, 3))
    add_run(store, "rpl-1", dict.fromkeys(tests, True), parent="rec-1", attempts=(2, 3, 1))  # passes e too
    human = {f"{t}#{a}": p for t, p in tests.items() for a in (1, 2, 3)} | {"d#1": False}
    record_labels(
        store, [LabelInput(test=t, verdict="pass" if p else "fail", by="ann") for t, p in human.items()], run="rec-1"
    )
    labels = current_labels(store, "rec-1")
    runs = [load_results(store, r) for r in ("rec-1", "rpl-1")]
    report = agreement("rec-1", labels, runs)
    assert {(r.labelled, r.judged, r.agreement.enough) for r in report.rows} == {(5, 5, False)}
    rows = {(r.run_id, r.grader): r for r in agreement("rec-1", labels, runs, min_labels=5).rows}
    # A test's human and judge verdicts: passed when any of its labelled attempts passed (d: the people
    # failed d#1 only, so d passed, as the run's grader says), as compare counts a test's pass.
    c = rows[("rec-1", "quality")].agreement.confusion
    assert (c.tp, c.fn, c.fp, c.tn) == (4, 0, 0, 1)
    assert rows[("rec-1", "quality")].raw_pass_rate.value == pytest.approx(0.8)
    c = rows[("rpl-1", "quality")].agreement.confusion
    assert (c.tp, c.fn, c.fp, c.tn) == (4, 0, 1, 0)
    # Which run agrees more: one pair a test too (only e tells them apart).
    quality = next(d for d in agreement_difference(labels, *runs) if d.grader == "quality")
    assert (quality.n, quality.a_only_correct, quality.b_only_correct) == (5, 1, 0)


def test_the_next_queue_skips_what_this_person_labelled_and_shows_the_given_runs_verdicts(store: EventStore) -> None:
    from evalstore.replay.labelling import pending

    add_run(store, "rec-1", TESTS)
    add_run(store, "rpl-1", {t: not p for t, p in TESTS.items()}, parent="rec-1")
    record_labels(
        store,
        [
            LabelInput(test="t00", verdict="pass", by="ann"),
            LabelInput(test="t01", verdict="fail", by="bob"),
            LabelInput(test="t02", verdict="fail", by="ann", grader="quality"),
        ],
        run="rec-1",
    )
    queue = pending(store, "rpl-1", by="ann")
    assert (queue.run_id, queue.base_run_id, queue.total) == ("rpl-1", "rec-1", 12)
    assert [k[0] for k in queue.keys] == [t for t in sorted(TESTS) if t != "t00"]
    assert [k[0] for k in pending(store, "rec-1", by="ann", grader="quality").keys] == [
        t for t in sorted(TESTS) if t != "t02"
    ]
    assert len(pending(store, "rec-1", by="bob").keys) == 11
    review = next(iter(queue))
    assert review.name == "t01" and review.answer == "answer t01"
    # the verdicts are the replay's, not the recorded run's
    assert [(v.grader, v.verdict) for v in review.verdicts] == [("quality", "fail" if TESTS["t01"] else "pass")]
    assert review.passed is (not TESTS["t01"])
    # what the queue names a result by is what record_labels takes
    [event] = record_labels(store, [review.label_input(verdict="pass", by="ann")], run="rec-1")
    assert event.test_id == "t01" and len(pending(store, "rpl-1", by="ann").keys) == 10


def test_test_ids_holding_at_or_hash_are_labelled_whole_or_with_a_target_and_attempt(store: EventStore) -> None:
    """``user@example.com`` and ``issue#12`` are test ids, not a target or an attempt; ``TEST@TARGET#N``
    still names one of several results, the target read from the last ``@``."""
    add_run(store, "rec-1", {"user@example.com": True, "issue#12": False, "plain": True})
    [a] = record_labels(store, [LabelInput(test="user@example.com", verdict="pass", by="ann")], run="rec-1")
    [b] = record_labels(store, [LabelInput(test="issue#12", verdict="fail", by="ann")], run="rec-1")
    [c] = record_labels(store, [LabelInput(test="user@example.com#1", verdict="fail", by="bob")], run="rec-1")
    assert (a.test_id, a.target, a.attempt) == ("user@example.com", None, 1)
    assert (b.test_id, b.attempt) == ("issue#12", 1)
    assert (c.test_id, c.attempt) == ("user@example.com", 1)
    with pytest.raises(
        LabelError, match=r"has no result 'user@example\.com@gpt'; test 'user@example\.com' has user@example\.com#1"
    ):
        record_labels(store, [LabelInput(test="user@example.com@gpt", verdict="fail", by="ann")], run="rec-1")
    with pytest.raises(LabelError, match="has no test 'issue'"):
        record_labels(store, [LabelInput(test="issue", verdict="fail", by="ann")], run="rec-1")


def test_a_target_is_read_from_the_last_at_of_a_test_id_holding_one(store: EventStore) -> None:
    add_transcripts(store, "rec-t", [("user@example.com", t, a) for t in ("gpt", "claude") for a in (1, 2)])
    [label] = record_labels(
        store, [LabelInput(test="user@example.com@claude#2", verdict="pass", by="ann")], run="rec-t"
    )
    assert (label.test_id, label.target, label.attempt) == ("user@example.com", "claude", 2)
    with pytest.raises(LabelError, match="several results"):
        record_labels(store, [LabelInput(test="user@example.com", verdict="pass", by="ann")], run="rec-t")


def test_a_missing_result_lists_a_tests_attempts_in_their_order(store: EventStore) -> None:
    add_transcripts(store, "rec-n", [("t", "a", n) for n in range(1, 13)])
    with pytest.raises(LabelError, match=r"test 't' has t@a#1, t@a#2, t@a#3, t@a#4, t@a#5 and more$"):
        record_labels(store, [LabelInput(test="t@b", verdict="pass", by="ann")], run="rec-n")


def test_a_text_two_results_can_be_read_as_is_refused_naming_both(store: EventStore) -> None:
    """Test ``x@y`` on target gamma, and test ``x`` on target y: ``x@y#1`` reads as either."""
    add_transcripts(store, "rec-a", [("x@y", "gamma", 1), ("x", "y", 1)])
    with pytest.raises(LabelError, match=r"names several results in run rec-a \(x@y#1, x@y@gamma#1\)"):
        record_labels(store, [LabelInput(test="x@y#1", verdict="pass", by="ann")], run="rec-a")
    [a] = record_labels(store, [LabelInput(test="x@y@gamma#1", verdict="pass", by="ann")], run="rec-a")
    [b] = record_labels(store, [LabelInput(test="x", target="y", attempt=1, verdict="fail", by="ann")], run="rec-a")
    assert (a.test_id, a.target, b.test_id, b.target) == ("x@y", "gamma", "x", "y")
