"""The import builds each result once (the validation pass spools it) and still writes the ids it always did.

A result superseded by a later one becomes a skipped line, which takes one id instead of its events'; the
results after it are renumbered, so the n-th event of the run keeps the id ``EventIds(run).id(n, kind)``.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from evalstore.replay.agentv.import_check import KIND_OF_TYPE
from evalstore.replay.agentv.import_events import EventIds
from evalstore.replay.agentv.importing import import_results
from evalstore.replay.errors import ImportFormatError
from evalstore.store.records import derived_id


def _row(i: int, score: float = 1.0) -> str:
    return json.dumps(
        {
            "test_id": f"t{i}",
            "suite": "spool",
            "score": score,
            "target": "default",
            "output": [{"role": "assistant", "content": f"answer {i}"}],
            "scores": [{"name": "g", "type": "contains", "score": score, "verdict": "pass", "assertions": []}],
        }
    )


def _results(folder: Path, lines: list[str]) -> Path:
    path = folder / "results.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_superseded_results_and_bad_lines_keep_positional_ids(store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lines = [_row(i) for i in range(6)]
    lines.insert(2, '{"test_id": broken')  # a bad line, skipped
    lines.append(_row(1, 0.5))  # t1 again: the earlier row is superseded
    lines.append(_row(4, 0.25))
    path = _results(tmp_path, lines)

    outcome = import_results(store, path, skip_bad=True)
    assert (outcome.tests, outcome.skipped) == (6, 3)
    events = list(store.read_stream(outcome.run_id))
    ids = EventIds(outcome.run_id)
    kinds = {"run_started": "started", "run_completed": "completed", **KIND_OF_TYPE}
    assert [e.event_id for e in events] == [ids.id(e.stream_version, kinds[e.type]) for e in events]

    transcripts = {e.event_id: e.payload["test_id"] for e in events if e.type == "transcript_recorded"}
    verdicts = [e.payload for e in events if e.type == "verdict_recorded"]
    assert len(verdicts) == 6
    assert all(transcripts[v["transcript_event_id"]] == v["test_id"] for v in verdicts)
    reasons = [e.payload["reason"] for e in events if e.type == "line_skipped"]
    assert sum("superseded" in r for r in reasons) == 2
    scores = {r["test_id"]: r["score"] for r in store.query("results", run_id=outcome.run_id)}
    assert scores == {"t0": 1.0, "t1": 0.5, "t2": 1.0, "t3": 1.0, "t4": 0.25, "t5": 1.0}

    again = import_results(store, path, skip_bad=True)
    assert again.already_imported and again.run_id == outcome.run_id


def test_event_ids_are_the_stores_derived_ids_of_the_run_and_position(store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Imported ids are the ids the store derives from a stream and version (store/records.py), whatever
    the kind: the store keeps none of them (no ``event_ids`` row) and finds each event from its id alone."""
    for run_id in ("imp-5159723ac5725084", "check", "imp-é"):
        ids = EventIds(run_id)
        for n in (1, 9, 10, 12345, 10**9):
            for kind in ("started", "case", "artifact", "transcript", "verdict", "scored", "skip", "completed"):
                assert ids.id(n, kind) == derived_id(run_id, n)
                assert uuid.UUID(ids.id(n, kind)).version == 8
    outcome = import_results(store, _results(tmp_path, [_row(0), _row(1)]))
    events = list(store.read_stream(outcome.run_id))
    assert [e.event_id for e in events] == [derived_id(outcome.run_id, e.stream_version) for e in events]
    assert store.query("event_ids") == []
    assert store.get_events([events[3].event_id]) == {events[3].event_id: events[3]}


def _events(store, run_id: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(e.event_id, e.type, e.payload_json) for e in store.read_stream(run_id)]


def _built_in_parts(monkeypatch, lines: int) -> list[int]:  # type: ignore[no-untyped-def]
    """Parts of ``lines`` lines, built by three forked workers whatever the machine's cores; the list
    gets the number of parts of each import that was built so."""
    from evalstore.replay.agentv import import_check

    monkeypatch.setattr(import_check, "PART_LINES", lines)
    monkeypatch.setattr("evalstore.replay.processes.forked.os.cpu_count", lambda: 3)
    in_order = import_check.in_order
    parts: list[int] = []

    def counted(work, spans, workers, job):  # type: ignore[no-untyped-def]
        parts.append(len(spans))
        return in_order(work, spans, workers, job)

    monkeypatch.setattr(import_check, "in_order", counted)
    return parts


def test_parts_built_by_workers_give_the_events_one_pass_gives(store, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Built a few lines at a time by forked workers, with repeats and bad lines across the parts'
    edges, and written a few results a batch with forked processes compressing, an import writes the
    same events, ids, payloads and projections as when built in one pass and written in one batch."""
    from evalstore.store import EventStore, make_engine

    lines = [_row(i) for i in range(9)]
    lines.insert(3, '{"test_id": broken')  # a bad line at the end of the first part
    lines.append(_row(2, 0.5))  # supersedes a result two parts back
    lines.append(_row(8, 0.25))  # and one in the part just before
    path = _results(tmp_path, lines)
    one_pass = import_results(store, path, skip_bad=True)

    other = EventStore(make_engine(f"sqlite:///{tmp_path / 'parts.db'}"))
    parts = _built_in_parts(monkeypatch, 4)
    # ... and written two results a batch, each batch's records and blobs compressed by forked processes
    from evalstore.replay.agentv import import_write

    monkeypatch.setattr(import_write, "BATCH_TESTS", 2)
    pools: list[int] = []
    real_pool = import_write.forked.pool

    def counted_pool(workers: int):  # type: ignore[no-untyped-def]
        pools.append(workers)
        return real_pool(workers)

    monkeypatch.setattr(import_write.forked, "pool", counted_pool)
    in_parts = import_results(other, path, skip_bad=True)
    assert parts == [3]
    assert pools == [3]
    assert (in_parts.run_id, in_parts.tests, in_parts.skipped) == (one_pass.run_id, 9, 3)
    # Every event alike but run_started (its time) and run_completed (its counts and its time are alike too)
    assert _events(other, in_parts.run_id)[1:] == _events(store, one_pass.run_id)[1:]
    assert other.query("results", run_id=in_parts.run_id) == store.query("results", run_id=one_pass.run_id)
    assert other.query("verdicts", run_id=in_parts.run_id) == store.query("verdicts", run_id=one_pass.run_id)
    assert other.verify().ok
    other.close()


def test_a_bad_line_in_a_later_part_stops_the_import_before_anything_is_written(
    store, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    lines = [_row(i) for i in range(12)]
    lines[9] = '{"test_id": broken'
    path = _results(tmp_path, lines)
    parts = _built_in_parts(monkeypatch, 3)
    with pytest.raises(ImportFormatError, match=r"results\.jsonl:10: "):
        import_results(store, path)
    assert parts == [4]
    assert store.query("runs") == [] and list(store.read_all()) == []


def test_results_of_another_suite_sharing_a_key_across_parts_are_refused(store, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    other_suite = json.loads(_row(1))
    other_suite["suite"] = "another"
    lines = [_row(i) for i in range(6)] + [json.dumps(other_suite)]
    path = _results(tmp_path, lines)
    parts = _built_in_parts(monkeypatch, 2)
    with pytest.raises(ImportFormatError, match=r"results\.jsonl:7: .*also the result at .*results\.jsonl:2"):
        import_results(store, path)
    assert parts == [4]
    skipped = import_results(store, path, skip_bad=True)
    assert (skipped.tests, skipped.skipped) == (6, 1)


def test_results_after_one_refused_in_a_part_keep_positional_ids(store, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A result refused in the pass (another suite's under the same key) takes one id, a skipped line's,
    instead of its events': the run's ids then stand where the part's ids for the next result did (two
    events each here: no graders), and that result must still get the run's ids."""
    bare = [{"test_id": f"t{i}", "suite": "spool", "score": 1.0, "target": "default", "output": "x"} for i in range(6)]
    lines = [json.dumps(bare[0]), json.dumps({**bare[0], "suite": "another"}), *map(json.dumps, bare[1:])]
    path = _results(tmp_path, lines)
    parts = _built_in_parts(monkeypatch, 4)
    outcome = import_results(store, path, skip_bad=True)
    assert parts == [2]
    assert (outcome.tests, outcome.skipped) == (6, 1)
    events = list(store.read_stream(outcome.run_id))
    ids = EventIds(outcome.run_id)
    kinds = {"run_started": "started", "run_completed": "completed", **KIND_OF_TYPE}
    assert [e.event_id for e in events] == [ids.id(e.stream_version, kinds[e.type]) for e in events]


def test_files_refused_in_every_part_are_counted_once_each(store, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each result names a file outside the folders the import may read: built by workers a few lines at a
    time, every refusal is counted, and the import says so in one warning with what reads them."""
    outside = tmp_path / "outside"
    outside.mkdir()
    rows = []
    for i in range(7):
        (outside / f"f{i}.txt").write_text(f"file {i}\n")
        row = json.loads(_row(i))
        row["output"] = [
            {
                "role": "assistant",
                "content": [{"type": "file", "media_type": "text/plain", "path": str(outside / f"f{i}.txt")}],
            }
        ]
        rows.append(json.dumps(row))
    (tmp_path / "run").mkdir()
    path = _results(tmp_path / "run", rows)
    parts = _built_in_parts(monkeypatch, 3)
    outcome = import_results(store, path)
    assert parts == [3]
    assert outcome.refused == 7
    assert [w for w in outcome.warnings if "refused" in w] == [
        "7 files the results name were refused (outside the folders this import may read), and a replay grades "
        "without them: pass --files-root DIR (importing the results again so writes a new run that stores them; "
        f"`evalstore audit {outcome.run_id} TEST` says why for each)"
    ]
    again = import_results(store, path, files_roots=[outside])
    assert (again.already_imported, again.reimport_of, again.refused_now_stored, again.refused) == (
        False,
        outcome.run_id,
        7,
        0,
    )


def test_pieces_cross_from_workers_with_every_field_as_built(tmp_path: Path) -> None:
    """A worker sends a part's pieces as plain values (``_packed``): each comes back with the fields it was
    built with, the earliest time as the same instant in UTC, a skipped line's and a refused result's too."""
    from datetime import UTC, datetime, timedelta, timezone

    from evalstore.replay.agentv.import_check import _packed, _Piece, _unpacked

    pieces = [
        _Piece(
            b"\x00record one",
            [("a" * 36, "transcript"), ("b" * 36, "verdict")],
            0,
            ("/tmp/r.jsonl", 1),
            key=("/tmp/r.jsonl", 1, "t1", None, 1),
            repeat=(-(2**63), 2**63 - 1),
            warnings=["one", "two"],
            earliest=datetime(2026, 2, 20, 21, 40, 12, 345678, tzinfo=timezone(timedelta(hours=2))).astimezone(UTC),
            refused=["--eval /tmp/e.eval.yaml", "--files-root"],
        ),
        _Piece(b"skipped", [("c" * 36, "skip")], 7, (None, 2)),
        _Piece(
            b"refused",
            [("d" * 36, "skip")],
            0,
            ("r.jsonl", None),
            key=("r.jsonl", 3, "t3", "x", 2),
            failed="why",
        ),
    ]
    back = list(_unpacked(_packed(pieces)))
    assert back == pieces
    assert back[0].earliest is not None and back[0].earliest.utcoffset() == timedelta(0)
    assert [(p.source.file, p.source.line) for p in back] == [("/tmp/r.jsonl", 1), (None, 2), ("r.jsonl", None)]


def test_the_run_starts_when_its_earliest_result_did_whichever_part_holds_it(
    store, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """The earliest time of the results, found in the workers' parts, is the run's start as one pass finds it."""
    from evalstore.store import EventStore, make_engine

    rows = [json.loads(_row(i)) for i in range(7)]
    for i, row in enumerate(rows):
        row["timestamp"] = f"2026-02-2{i}T10:00:00.{i:06d}Z"
    rows[5]["timestamp"] = "2026-02-19T23:30:00.123456-01:00"  # the earliest instant, in the third part
    path = _results(tmp_path, [json.dumps(r) for r in rows])
    one_pass = import_results(store, path)

    other = EventStore(make_engine(f"sqlite:///{tmp_path / 'parts.db'}"))
    parts = _built_in_parts(monkeypatch, 2)
    in_parts = import_results(other, path)
    assert parts == [4]
    started = [
        next(iter(s.read_stream(o.run_id))).payload["source_started_at"]
        for s, o in ((store, one_pass), (other, in_parts))
    ]
    assert started == ["2026-02-20T00:30:00.123456+00:00"] * 2
    other.close()
