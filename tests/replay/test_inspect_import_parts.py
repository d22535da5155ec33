"""An ``.eval`` log's samples read and built a chunk at a time by forked workers give the events, ids,
payloads and projections that one process reading them in turn gives (replay/inspect/importing.py); read
through the zip directly, they are the samples inspect_ai's own reader gives (replay/inspect/reading.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_paths import FIXTURES_DIR

from evalstore.replay.inspect import importing, reading
from evalstore.store import EventStore, make_engine

inspect_log = pytest.importorskip("inspect_ai.log")

LOGS = FIXTURES_DIR / "inspect" / "logs"


def _events(store: EventStore, run_id: str) -> list[tuple]:
    return [(e.event_id, e.type, e.payload_json) for e in store.read_stream(run_id)]


@pytest.mark.parametrize("log", ["arithmetic.eval", "choice.eval"])
def test_chunks_built_by_workers_give_the_events_one_process_gives(
    store: EventStore, tmp_path: Path, monkeypatch, log: str
) -> None:  # type: ignore[no-untyped-def]
    one = importing.import_log(store, LOGS / log)

    built: list[int] = []
    real = importing.in_order

    def counted(work, parts, workers, context, **kw):  # type: ignore[no-untyped-def]
        built.append(workers)
        return real(work, parts, workers, context, **kw)

    monkeypatch.setattr(reading, "CHUNK_SAMPLES", 3)  # several chunks, each epoch's samples split
    monkeypatch.setattr(importing, "worker_count", lambda parts, workers=None: 2)
    monkeypatch.setattr(importing, "in_order", counted)
    other = EventStore(make_engine(f"sqlite:///{tmp_path / 'parts.db'}"))
    parts = importing.import_log(other, LOGS / log)
    assert built == [2]
    assert (parts.run_id, parts.tests) == (one.run_id, one.tests)
    # Every event alike but run_started and run_completed (their times)
    assert _events(other, parts.run_id)[1:-1] == _events(store, one.run_id)[1:-1]
    assert other.query("results", run_id=parts.run_id) == store.query("results", run_id=one.run_id)
    assert other.query("verdicts", run_id=parts.run_id) == store.query("verdicts", run_id=one.run_id)
    assert other.verify().ok
    other.close()


EVAL_LOGS = sorted(FIXTURES_DIR.glob("inspect*/logs/**/*.eval"))


@pytest.mark.parametrize("log", EVAL_LOGS, ids=lambda p: p.name[-24:])
def test_samples_read_through_the_zip_are_the_samples_inspect_reads(log: Path) -> None:
    """Every sample of every .eval fixture (tools, attachments, errors, edits, retries, zstd members)
    made from its zip member as inspect_ai's recorder makes it: the same EvalSample, field for field."""
    api = importing.inspect_log_api()
    header = api.read_eval_log(str(log), header_only=True)
    chunks = reading.sample_chunks(api, log, header)
    reader = reading.EvalSamples(api, log)
    try:
        ours = [s for chunk in chunks for s in reader.chunk(chunk)]
    finally:
        reader.close()
    theirs = list(inspect_log.read_eval_log_samples(str(log), all_samples_required=False))
    assert ours and [s.model_dump_json() for s in ours] == [s.model_dump_json() for s in theirs]


def test_without_inspects_private_reader_the_public_one_gives_the_same_events(
    store: EventStore, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Where inspect_ai's private names have moved, its public reader is used: the same run, event for event."""
    fast = importing.import_log(store, LOGS / "arithmetic.eval")
    monkeypatch.setattr(reading, "_private_reader", lambda: None)
    other = EventStore(make_engine(f"sqlite:///{tmp_path / 'public.db'}"))
    public = importing.import_log(other, LOGS / "arithmetic.eval")
    assert _events(other, public.run_id)[1:-1] == _events(store, fast.run_id)[1:-1]
    other.close()
