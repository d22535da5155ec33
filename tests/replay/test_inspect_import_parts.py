"""An ``.eval`` log's samples read and built a chunk at a time by forked workers give the events, ids,
payloads and projections that one process reading them in turn gives (replay/inspect/importing.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_paths import FIXTURES_DIR

from evalstore.replay.inspect import importing
from evalstore.store import EventStore, make_engine

pytest.importorskip("inspect_ai.log")

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

    monkeypatch.setattr(importing, "CHUNK_SAMPLES", 3)  # several chunks, each epoch's samples split
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
