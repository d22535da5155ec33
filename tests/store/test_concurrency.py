"""Separate processes appending to one store at once lose nothing and leave one valid chain."""

from __future__ import annotations

import json
import subprocess
import sys
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
