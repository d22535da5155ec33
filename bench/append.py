"""Time ``EventStore.append`` against raw ``sqlite3`` ``executemany`` of the very same rows.

Run: ``.venv/bin/python bench/append.py [--events N] [--batch B] [--runs R] [--repeat K] [--dir DIR]``.

The workload is a run import: R runs, each a stream of ``VerdictRecorded`` events (a few hundred bytes
of payload each: assertions with evidence, links to the transcript and grader calls), appended in
batches of B with ``expected_version`` and explicit event ids, as a resumable importer would. Building
the pydantic events is setup and is not timed (and is frozen out of the GC's view); the store's encode,
hash chain, idempotency check, version check, insert and projection upserts are.

The raw baseline writes the same events the simplest way: the events the store holds (read back after its
pass, with their ids and chain hashes) as one row each, every field a column, unique by seq, id and stream
version, under append-only triggers (the layout of the log before migration 0005), into a second file with the same connection pragmas (WAL,
synchronous=NORMAL), the same batch sizes and one ``BEGIN IMMEDIATE ... COMMIT`` per batch. Nothing of the
raw path is computed inside its timing; the store's pass also compresses each record.

Each round uses fresh files and runs both paths; the best time of each over the rounds is reported,
because a shared machine's other load only ever adds time. Exits 1 when the ratio misses the target.
"""

from __future__ import annotations

import argparse
import gc
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path

from evalstore.store import EventStore, NewEvent, make_engine
from evalstore.store.events import Assertion, VerdictRecorded

TARGET_RATIO = 0.33
COLUMNS = (
    "seq", "event_id", "stream_id", "stream_version", "type",
    "schema_version", "payload", "recorded_at", "prev_hash", "hash",
)  # fmt: skip
GRADERS = (("exact", "code-grader"), ("rubric", "rubrics"), ("judge", "llm-grader"))


def _verdict(i: int) -> VerdictRecorded:
    name, kind = GRADERS[i % len(GRADERS)]
    test = i // len(GRADERS)
    passed = i % 5 != 0
    return VerdictRecorded(
        test_id=f"suite-{test // 1000:03d}/case-{test:06d}",
        target="default",
        grader=name,
        grader_type=kind,
        score=1.0 if passed else 0.25,
        verdict="pass" if passed else "fail",
        assertions=[
            Assertion(text="The answer names the capital city", passed=True, evidence="Output says 'Paris'."),
            Assertion(text="The answer cites a source", passed=passed, evidence=None if passed else "No source given."),
        ],
        transcript_event_id=str(uuid.UUID(int=i * 7 + 1)),
        grader_call_event_ids=[str(uuid.UUID(int=i * 7 + 2))] if kind == "llm-grader" else [],
    )


def workload(n_events: int, n_runs: int) -> list[tuple[str, list[NewEvent]]]:
    """``[(stream id, events)]``: n_events verdicts spread evenly over n_runs streams."""
    per_run = -(-n_events // n_runs)
    streams = []
    for r in range(n_runs):
        start, stop = r * per_run, min((r + 1) * per_run, n_events)
        if start >= stop:
            break
        streams.append((f"run-{r:04d}", [NewEvent(_verdict(i), str(uuid.uuid4())) for i in range(start, stop)]))
    return streams


def bench_store(path: Path, streams: list[tuple[str, list[NewEvent]]], batch: int) -> float:
    store = EventStore(make_engine(f"sqlite:///{path}"))
    try:
        started = time.perf_counter()
        for stream_id, events in streams:
            version = 0
            for i in range(0, len(events), batch):
                chunk = events[i : i + batch]
                store.append(stream_id, chunk, expected_version=version)
                version += len(chunk)
        return time.perf_counter() - started
    finally:
        store.close()


def stored_rows(path: Path) -> list[tuple]:
    store = EventStore(make_engine(f"sqlite:///{path}"))
    try:
        return [tuple(getattr(e, "payload_json" if c == "payload" else c) for c in COLUMNS) for e in store.read_all()]
    finally:
        store.close()


def bench_raw(path: Path, rows: list[tuple], batch_sizes: list[int]) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        f"CREATE TABLE events ({', '.join(COLUMNS)}, PRIMARY KEY (seq), UNIQUE (event_id), "
        "UNIQUE (stream_id, stream_version))"
    )
    # And its append-only guards (a statement journal per INSERT under them): what the floor held before.
    for operation in ("UPDATE", "DELETE"):
        conn.execute(
            f"CREATE TRIGGER events_no_{operation} BEFORE {operation} ON events BEGIN SELECT RAISE(ABORT, 'no'); END"
        )
    for key in (
        "seq = NEW.seq",
        "event_id = NEW.event_id",
        "stream_id = NEW.stream_id AND stream_version = NEW.stream_version",
    ):
        name = key.split()[0]
        conn.execute(
            f"CREATE TRIGGER events_no_replace_{name} BEFORE INSERT ON events "
            f"WHEN EXISTS (SELECT 1 FROM events WHERE {key}) BEGIN SELECT RAISE(ABORT, 'no'); END"
        )
    sql = f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
    batches, i = [], 0
    for size in batch_sizes:
        batches.append(rows[i : i + size])
        i += size
    try:
        started = time.perf_counter()
        for chunk in batches:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(sql, chunk)
            conn.execute("COMMIT")
        return time.perf_counter() - started
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500, help="events per append (one transaction)")
    parser.add_argument("--runs", type=int, default=10, help="streams the events are spread over")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the best time of each path is reported")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to put the two SQLite files (default: a temp dir)"
    )
    args = parser.parse_args(argv)

    streams = workload(args.events, args.runs)
    # The prebuilt events are setup: keep the cyclic GC from rescanning them throughout the timing
    # (an importer streams its input; it does not hold 100,000 events while appending).
    gc.collect()
    gc.freeze()
    payload_sizes = [len(events[0].payload.model_dump_json()) for _, events in streams[:1]]
    batch_sizes = [len(events[i : i + args.batch]) for _, events in streams for i in range(0, len(events), args.batch)]

    store_times, raw_times = [], []
    for rep in range(args.repeat):
        # Fresh files each round; the two paths alternate so a busy machine slows both alike.
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            store_path, raw_path = Path(tmp) / "store.db", Path(tmp) / "raw.db"
            store_times.append(bench_store(store_path, streams, args.batch))
            rows = stored_rows(store_path)
            assert len(rows) == args.events, f"store holds {len(rows)} events, expected {args.events}"
            raw_times.append(bench_raw(raw_path, rows, batch_sizes))
        print(f"round {rep + 1}: EventStore.append {store_times[-1]:.2f} s, raw {raw_times[-1]:.2f} s", file=sys.stderr)

    avg_payload = sum(len(r[6]) for r in rows) / len(rows)
    # Best of the rounds, as timeit does: the least disturbed run of each path.
    store_s, raw_s = min(store_times), min(raw_times)
    store_rate, raw_rate = args.events / store_s, args.events / raw_s
    ratio = store_rate / raw_rate
    print(f"events: {args.events} in {len(batch_sizes)} batches of <= {args.batch}, {len(streams)} streams")
    print(f"payload: {avg_payload:.0f} bytes on average (first event's JSON: {payload_sizes[0]} bytes)")
    print(f"best of {args.repeat} rounds:")
    print(f"EventStore.append: {store_s:8.2f} s  {store_rate:10,.0f} events/s")
    print(f"raw executemany:   {raw_s:8.2f} s  {raw_rate:10,.0f} events/s")
    print(f"ratio: {ratio:.2f} (target >= {TARGET_RATIO})")
    return 0 if ratio >= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
