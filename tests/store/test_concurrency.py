"""Separate processes appending to one store at once lose nothing and leave one valid chain."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from log_rows import events_rows
from sample_runs import scalar

from evalstore.store import EventStore

WORKERS = 4
BATCHES = 20
WORKER = Path(__file__).with_name("append_worker.py")


def test_concurrent_appends_from_separate_processes(store: EventStore, store_url: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), store_url, f"w{n}", str(go), str(BATCHES)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WORKERS)
    ]
    go.touch()  # all workers start appending together
    summaries = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            summaries.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()

    written = [i for s in summaries for i in s["ids"]]
    per_worker = BATCHES * 3 + (BATCHES + 1) // 2
    assert len(written) == len(set(written)) == WORKERS * per_worker

    events = list(store.read_all())
    assert sorted(e.event_id for e in events) == sorted(written)
    assert [e.seq for e in events] == list(range(1, len(written) + 1))
    for n in range(WORKERS):
        versions = [e.stream_version for e in store.read_stream(f"worker-w{n}")]
        assert versions == list(range(1, BATCHES * 3 + 1))
    shared = [e.stream_version for e in store.read_stream("shared")]
    assert shared == list(range(1, WORKERS * ((BATCHES + 1) // 2) + 1))
    report = store.verify()  # decodes every blob, through whatever dictionary each names
    assert report.ok, report.problem
    assert report.events == len(written)
    assert report.blobs == BATCHES + WORKERS * BATCHES
    assert scalar(store.engine, "SELECT count(*) FROM blobs WHERE dictionary IS NOT NULL") > 0
    # One chain, no fork: every event follows a different one (read from the records, not through the store).
    assert len({e.prev_hash for e in events_rows(store.engine)}) == len(written)


def test_a_new_sqlite_store_waits_for_another_creator_and_finds_it_made(sqlite_url: str) -> None:
    """Two commands creating one new SQLite store (two imports racing): the second waits for the first's
    write lock, then finds the store made. Before, its migration began with a plain BEGIN and read the
    empty file, and when the first committed its write failed at once with "database is locked" (SQLite
    refuses a write to a transaction whose snapshot another writer has since changed)."""
    from alembic import command

    from evalstore.store.engine import IMMEDIATE, alembic_config, make_engine

    first = make_engine(sqlite_url)
    conn = first.connect().execution_options(**{IMMEDIATE: True})
    creating = conn.begin()  # the first creator holds the write lock while it creates the tables
    outcome: dict[str, object] = {}

    def second_creator() -> None:
        try:
            outcome["store"] = EventStore(make_engine(sqlite_url))
        except Exception as exc:  # reported by the assertion below
            outcome["error"] = exc

    thread = threading.Thread(target=second_creator)
    thread.start()
    time.sleep(1.0)  # the second has found an empty file and is waiting (before the fix: inside its read)
    config = alembic_config(sqlite_url)
    config.attributes["connection"] = conn
    command.upgrade(config, "head")
    creating.commit()
    conn.close()
    first.dispose()
    thread.join(timeout=60)
    assert "error" not in outcome, outcome.get("error")
    store = outcome["store"]
    assert isinstance(store, EventStore)
    try:
        assert store.verify().ok
    finally:
        store.close()
