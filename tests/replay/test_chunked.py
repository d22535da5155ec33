"""Exports encoded chunk by chunk in forked workers write what one pass writes, also for a run whose
results interleave (a recorded run that graded several tests at once)."""

from __future__ import annotations

import io
import json

import pytest

from evalstore.replay.agentv import chunked, export
from evalstore.store import EventStore, NewEvent
from evalstore.store import events as ev
from evalstore.store.events import Assertion, RunStarted, TranscriptRecorded, VerdictRecorded

RESULTS = 9


def _result(i: int) -> tuple[list, list]:
    """A result's events before grading (case, transcript) and after (verdict, score)."""
    key = {"test_id": f"t{i}", "target": "agent"}
    before = [
        ev.TestCaseRecorded(**key, input=[{"role": "user", "content": f"question {i}"}]),
        TranscriptRecorded(**key, messages_sha256=None, output_text=f"answer {i}"),
    ]
    after = [
        VerdictRecorded(
            **key,
            grader="has-answer",
            grader_type="contains",
            score=float(i % 2),
            verdict="pass" if i % 2 else "fail",
            assertions=[Assertion(text=f"says answer {i}", passed=bool(i % 2))],
        ),
        ev.TestScored(**key, score=float(i % 2), passed=bool(i % 2), status="ok", threshold=0.5),
    ]
    return before, after


def _run(store: EventStore, run_id: str, interleave_from: int | None) -> None:
    """A run of RESULTS results, appended whole one after another, or from result ``interleave_from``
    on each graded after the next one's answer was recorded (as concurrent grading appends them)."""
    store.append(
        run_id, [RunStarted(run_id=run_id, kind="recorded", suite="s", target_name="agent", tool_version="test")]
    )
    events: list = []
    held: list = []
    for i in range(RESULTS):
        before, after = _result(i)
        if interleave_from is None or i < interleave_from:
            events += before + after
        else:
            events += before + held
            held = after
    events += held
    store.append(run_id, [NewEvent(e) for e in events])


@pytest.mark.parametrize("interleave_from", [None, 0, 5], ids=["whole", "interleaved", "interleaved-later"])
@pytest.mark.parametrize("fmt", export.EXPORT_FORMATS)
def test_workers_write_what_one_pass_writes(store, monkeypatch, interleave_from, fmt) -> None:  # type: ignore[no-untyped-def]
    _run(store, "rec-1", interleave_from)
    one_pass = io.StringIO()
    written = export.export_run(store, "rec-1", fmt, one_pass, workers=1)
    # Nine chunks for two workers: more chunks than the slots of the buffer they share (processes.forked.held_parts).
    monkeypatch.setattr(chunked, "CHUNK_RESULTS", 1)
    forked = io.StringIO()
    progress: list[int] = []
    assert export.export_run(store, "rec-1", fmt, forked, progress=progress.append, workers=2) == written
    assert forked.getvalue() == one_pass.getvalue()
    assert progress[-1] == RESULTS and progress == sorted(progress)
    if fmt == "agentv-jsonl":
        rows = [json.loads(line) for line in forked.getvalue().splitlines()]
        assert [r["test_id"] for r in rows] == [f"t{i}" for i in range(RESULTS)]  # each once, in scored order
        assert all(r["output"] == f"answer {i}" for i, r in enumerate(rows))


def _no_shared_memory(*args, **kwargs):  # type: ignore[no-untyped-def]
    raise OSError("Cannot allocate memory")


@pytest.mark.parametrize("room", ["slots", "some-in-files", "no-shared-memory"])
def test_chunks_too_large_for_their_slot_or_without_shared_memory_go_through_files(
    sqlite_store, monkeypatch, room
) -> None:  # type: ignore[no-untyped-def]
    _run(sqlite_store, "rec-1", None)
    one_pass = io.StringIO()
    export.export_run(sqlite_store, "rec-1", "agentv-jsonl", one_pass, workers=1)
    sizes = [len(line) + 1 for line in one_pass.getvalue().splitlines()]
    monkeypatch.setattr(chunked, "CHUNK_RESULTS", 2)
    monkeypatch.setattr(chunked, "TAIL_PARTS", 1)  # every chunk of two results but the last
    if room == "some-in-files":  # room for the last chunk (one result), not for the others (two)
        monkeypatch.setattr(chunked, "SLOT_BYTES", max(sizes))
    elif room == "no-shared-memory":
        monkeypatch.setattr(chunked.mmap, "mmap", _no_shared_memory)
    files: list[str] = []
    real_open = open

    def watched_open(path, mode="r", *args, **kwargs):  # type: ignore[no-untyped-def]
        if "evalstore-export-" in str(path) and "r" in mode:
            files.append(str(path))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", watched_open)
    forked = io.StringIO()
    export.export_run(sqlite_store, "rec-1", "agentv-jsonl", forked, workers=2)
    assert forked.getvalue() == one_pass.getvalue()
    chunks = (RESULTS + 1) // 2
    assert len(files) == {"slots": 0, "some-in-files": chunks - 1, "no-shared-memory": chunks}[room]


def test_the_last_chunks_are_cut_finer() -> None:
    """Whole chunks, then the last chunks (a worker's share each) in their finer parts, so that no worker
    is left alone with a whole chunk at the end."""
    assert chunked.chunk_ends(list(range(1, 81)), 4, 2) == [*range(4, 73, 4), *range(73, 81)]
    assert chunked.chunk_ends(list(range(1, 10)), 2, 2) == [2, 4, 5, 6, 7, 8, 9]  # a part chunk before the tail
    assert chunked.chunk_ends(list(range(1, 6)), 4, 2) == [1, 2, 3, 4, 5]  # a small run: all fine
    assert chunked.chunk_ends([], 4, 2) == []


@pytest.mark.parametrize("fmt", export.EXPORT_FORMATS)
def test_finer_last_chunks_write_what_one_pass_writes(store, monkeypatch, fmt) -> None:  # type: ignore[no-untyped-def]
    _run(store, "rec-1", None)
    one_pass = io.StringIO()
    written = export.export_run(store, "rec-1", fmt, one_pass, workers=1)
    monkeypatch.setattr(chunked, "CHUNK_RESULTS", 4)
    monkeypatch.setattr(chunked, "TAIL_PARTS", 2)  # chunks of 4 results, the last ones of 2
    forked = io.StringIO()
    assert export.export_run(store, "rec-1", fmt, forked, workers=2) == written
    assert forked.getvalue() == one_pass.getvalue()


def test_a_window_that_cuts_a_result_is_refused(sqlite_store) -> None:  # type: ignore[no-untyped-def]
    """The check the workers rely on: reading a window contiguously fails when a result scored in it
    began before it, or when one begun in it is scored after it."""
    from evalstore.replay.agentv.stored import Interleaved, stored_results

    _run(sqlite_store, "rec-1", interleave_from=0)
    ends = sqlite_store.result_ends("rec-1", every=1)
    with pytest.raises(Interleaved):
        list(stored_results(sqlite_store, "rec-1", window=(0, ends[0]), contiguous=True))
    with pytest.raises(Interleaved):
        list(stored_results(sqlite_store, "rec-1", window=(ends[0], ends[2]), contiguous=True))
    whole = list(stored_results(sqlite_store, "rec-1", window=(0, ends[-1])))
    assert [r.scored["test_id"] for r in whole] == [f"t{i}" for i in range(RESULTS)]


def test_an_in_memory_store_is_exported_in_one_process() -> None:
    from evalstore.store import make_engine

    store = EventStore(make_engine("sqlite://"))
    _run(store, "rec-1", None)
    out = io.StringIO()
    assert export.export_run(store, "rec-1", "csv", out, workers=4) == RESULTS
    assert len(out.getvalue().splitlines()) == RESULTS + 1


@pytest.mark.parametrize("workers", [1, 2])
def test_a_json_summary_counts_the_results_written_while_an_import_adds_more(
    store, monkeypatch, tmp_path, workers
) -> None:  # type: ignore[no-untyped-def]
    """The summary at the head of a JSON export was counted apart from the results it streams: results
    appended to the run in between (an import still writing into it) were in one and not the other. Here
    the first read of the run's events, in this process or a worker's, appends three more results as
    soon as it has begun; the document holds the results its summary counts."""
    _run(store, "rec-1", None)
    monkeypatch.setattr(chunked, "CHUNK_RESULTS", 2)  # several chunks: two workers fork
    real = EventStore.stream_payloads
    once = tmp_path / "appended"

    def read_while_an_import_appends(self, stream_id, **kwargs):  # type: ignore[no-untyped-def]
        rows = real(self, stream_id, **kwargs)
        first = next(rows, None)
        try:
            once.touch(exist_ok=False)  # the first read of all, whichever process makes it
        except FileExistsError:
            pass
        else:
            more = [e for i in range(RESULTS, RESULTS + 3) for part in _result(i) for e in part]
            self.append(stream_id, [NewEvent(e) for e in more])
        if first is not None:
            yield first
            yield from rows

    monkeypatch.setattr(EventStore, "stream_payloads", read_while_an_import_appends)
    out = io.StringIO()
    written = export.export_run(store, "rec-1", "json", out, workers=workers)
    assert once.exists() and len(store.query("results", run_id="rec-1")) == RESULTS + 3  # the race was run
    doc = json.loads(out.getvalue())
    results, summary = doc["results"], doc["summary"]
    assert written == summary["tests"] == len(results)
    assert summary["passed"] == sum(r["passed"] for r in results)
    assert summary["mean_score"] == round(sum(r["score"] for r in results) / len(results), 6)
    assert [r["test_id"] for r in results] == [f"t{i}" for i in range(len(results))]
