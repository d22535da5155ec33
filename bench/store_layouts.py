"""What other layouts of the same store would weigh: the measurement behind issue 31's size target.

Run: ``.venv/bin/python bench/store_layouts.py [--rows 20000] [--shape verdicts|rubric] [--seed S] [--dir DIR]``.

It imports ``--rows`` rows of ``bench/import.py``'s shape into a fresh SQLite store as that bench does (the
same rows, the same child process), then builds each layout below in a scratch SQLite file from that
store's own rows, keeping everything a reader of the store needs (every event's id, stream, version, type,
schema version, payload, time and chain hash; the projections' rows), and prints each file's size
(after ``VACUUM``) against the source JSONL. Nothing here is the store's code: the layouts are what a new
store format could be, measured before anyone writes it.

1. ``as stored``: the store, vacuumed.
2. ``binary envelope``: one row per event as today, but ids and hashes as bytes (16 and 32), the stream and
   the type as integers (tables ``streams``, ``types``), the time as microseconds, no ``prev_hash`` (it is
   the hash of ``seq - 1``), the payload compressed by zstd against a dictionary trained per event type
   on that type's first payloads (`zstandard`); the projections as they are (since migration 0004 the
   ``results``/``verdicts`` rows are keyed by their run's number and no projection repeats an event id:
   what this bench measured as "slim projections" before it was built).
3. ``+ a record per result``: and one row per result instead of per event (the events from a result's
   transcript to its ``test_scored``; others alone), its payloads compressed together, its events' ids and
   hashes side by side in it; an index from event id to ``seq`` for lookups by id.
4. ``+ last hash, derived ids``: and only the record's last chain hash stored (verify recomputes the rest),
   the import's ids not stored (they are ``uuid5`` of the run, a position and a kind, made again on read),
   the lookup index keyed by 8 bytes of the id.

5. ``planned format``: the format a migration would write (issue 31, not built yet): a record per append's
   events up to each ``test_scored`` (at most 64), its body the zstd frame (one
   dictionary trained per import on its first records) of the JSON list ``[[id or null, type, schema
   version, payload], ...]``, an id ``null`` where it is derived from the stream and version (an import's),
   the append's time once per record as text, the record's last chain hash as 32 bytes; the ids not
   derived in a table keyed by the whole 16 bytes; the stream numbers of migration 0004.

Each step keeps the hash chain and every byte ``verify`` and ``export`` need. The figures say what a format
change buys on each shape, and which part of the store is left when it is made.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from bench.store_size import import_bench, store_bytes  # noqa: E402
from evalstore.store import EventStore, records  # noqa: E402

SIZE_TARGET = 1.0
DICT_BYTES = 16 * 1024
TRAIN_SAMPLES = 1000
PROJECTED = ("results", "verdicts")
READS: dict[str, float] = {}
"""Per layout that measures it, microseconds to read one event back (inflate and parse its record)."""


def _micros(recorded_at: str) -> int:
    when = datetime.fromisoformat(recorded_at)
    return int(when.timestamp()) * 1_000_000 + when.microsecond


class Source:
    """The store's rows, read once."""

    def __init__(self, db: Path) -> None:
        store = EventStore.open(f"sqlite:///{db}")  # the log's records decoded into events
        fields = ("seq", "event_id", "stream_id", "stream_version", "type", "schema_version", "payload_json")
        fields += ("recorded_at", "hash")
        self.events = [tuple(getattr(e, f) for f in fields) for e in store.read_all()]
        store.close()
        con = sqlite3.connect(db)
        self.projections = {
            name: (
                [c[1] for c in con.execute(f"PRAGMA table_info({name})")],
                [c[1] for c in sorted(con.execute(f"PRAGMA table_info({name})"), key=lambda c: c[5]) if c[5]],
                con.execute(f"SELECT * FROM {name}").fetchall(),
            )
            for name in PROJECTED
        }
        self.streams = dict(con.execute("SELECT stream_id, stream FROM streams"))  # the projections' keys
        con.close()
        self.types = {t: i for i, t in enumerate(sorted({e[4] for e in self.events}), 1)}


class Codec:
    """zstd with one trained dictionary per key (an event type, or records), ``None`` for a key with too few
    samples to train on; the time each compression and decompression takes, per payload."""

    def __init__(self, samples: dict[object, list[bytes]]) -> None:
        self.compressors: dict[object, zstandard.ZstdCompressor] = {}
        self.dictionaries: dict[object, bytes] = {}
        plain = zstandard.ZstdCompressor(level=3, write_checksum=False, write_content_size=False)
        for key, items in samples.items():
            data = None
            if len(items) >= 100:
                try:
                    data = zstandard.train_dictionary(DICT_BYTES, items[:TRAIN_SAMPLES])
                except zstandard.ZstdError:
                    data = None
            if data is None:
                self.compressors[key] = plain
            else:
                self.dictionaries[key] = data.as_bytes()
                self.compressors[key] = zstandard.ZstdCompressor(
                    level=3, dict_data=data, write_checksum=False, write_content_size=False, write_dict_id=False
                )
        self.seconds = 0.0
        self.count = 0

    def compress(self, key: object, data: bytes) -> bytes:
        started = time.perf_counter()
        out = self.compressors[key].compress(data)
        self.seconds += time.perf_counter() - started
        self.count += 1
        return out


def _new(path: Path) -> sqlite3.Connection:
    path.unlink(missing_ok=True)
    return sqlite3.connect(path)


def _finish(con: sqlite3.Connection, path: Path) -> dict[str, int]:
    con.commit()
    con.execute("VACUUM")
    parts: dict[str, int] = defaultdict(int)
    owner = dict(con.execute("SELECT name, tbl_name FROM sqlite_schema WHERE type IN ('table', 'index')"))
    for name, size in con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
        table = owner.get(name, name)
        parts["projections" if table in PROJECTED else "log"] += size
    con.close()
    parts["total"] = store_bytes(path)
    return dict(parts)


def _envelope_tables(con: sqlite3.Connection, src: Source, codec: Codec) -> None:
    con.execute("CREATE TABLE streams (stream INTEGER PRIMARY KEY, stream_id TEXT NOT NULL UNIQUE)")
    con.executemany("INSERT INTO streams VALUES (?, ?)", [(i, s) for s, i in src.streams.items()])
    con.execute("CREATE TABLE types (type INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
    con.executemany("INSERT INTO types VALUES (?, ?)", [(i, t) for t, i in src.types.items()])
    con.execute("CREATE TABLE dictionaries (key TEXT PRIMARY KEY, data BLOB NOT NULL)")
    con.executemany("INSERT INTO dictionaries VALUES (?, ?)", [(str(k), d) for k, d in codec.dictionaries.items()])


def _projection_tables(con: sqlite3.Connection, src: Source) -> None:
    """The results and verdicts projections as the store holds them."""
    for name, (columns, keys, rows) in src.projections.items():
        con.execute(f"CREATE TABLE {name} ({', '.join(columns)}, PRIMARY KEY ({', '.join(keys)})) WITHOUT ROWID")
        con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(columns))})", rows)


def as_stored(src: Source, db: Path, path: Path) -> dict[str, int]:
    con = sqlite3.connect(db)
    path.unlink(missing_ok=True)
    con.execute("VACUUM INTO ?", (str(path),))
    con.close()
    return _finish(sqlite3.connect(path), path)


def binary_envelope(src: Source, codec: Codec, path: Path) -> dict[str, int]:
    con = _new(path)
    _envelope_tables(con, src, codec)
    con.execute(
        "CREATE TABLE events (seq INTEGER PRIMARY KEY, event_id BLOB NOT NULL UNIQUE, stream INTEGER NOT NULL, "
        "stream_version INTEGER NOT NULL, type INTEGER NOT NULL, schema_version INTEGER NOT NULL, payload BLOB NOT NULL, "
        "recorded_at INTEGER NOT NULL, hash BLOB NOT NULL, UNIQUE (stream, stream_version))"
    )
    con.executemany(
        "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (
                seq,
                uuid.UUID(event_id).bytes,
                src.streams[stream],
                version,
                src.types[type_],
                schema,
                codec.compress(type_, payload.encode()),
                _micros(recorded_at),
                bytes.fromhex(digest),
            )
            for seq, event_id, stream, version, type_, schema, payload, recorded_at, digest in src.events
        ),
    )
    _projection_tables(con, src)
    return _finish(con, path)


def _records(src: Source) -> Iterator[list[tuple]]:
    """The events cut into records: a stream's events up to and including each ``test_scored``; the events of
    no result (a run's start and end) each a record of its own."""
    open_: dict[str, list[tuple]] = {}
    for event in src.events:
        stream, type_ = event[2], event[4]
        if type_ in ("run_started", "run_completed", "run_failed"):
            if stream in open_:
                yield open_.pop(stream)
            yield [event]
            continue
        open_.setdefault(stream, []).append(event)
        if type_ == "test_scored":
            yield open_.pop(stream)
    yield from open_.values()


def _derived(event_id: str) -> bool:
    """Whether an id is one an import makes (derived from its run and position, ``store/records.py``), so a
    reader can make it again."""
    return records.split_derived(event_id) is not None


def per_result(src: Source, path: Path, *, last_hash_only: bool) -> dict[str, int]:
    records = list(_records(src))
    joined = [b"\x1e".join(e[6].encode() for e in record) for record in records]
    codec = Codec({"records": joined})
    con = _new(path)
    _envelope_tables(con, src, codec)
    con.execute(
        "CREATE TABLE records (first_seq INTEGER PRIMARY KEY, stream INTEGER NOT NULL, first_version INTEGER NOT NULL, "
        "types BLOB NOT NULL, ids BLOB NOT NULL, hashes BLOB NOT NULL, recorded_at INTEGER NOT NULL, "
        "payloads BLOB NOT NULL, UNIQUE (stream, first_version))"
    )
    if last_hash_only:
        con.execute(
            "CREATE TABLE event_ids (key INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (key, seq)) WITHOUT ROWID"
        )
    else:
        con.execute("CREATE TABLE event_ids (event_id BLOB PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID")
    rows, ids_rows = [], []
    for record, data in zip(records, joined):
        first = record[0]
        kept_ids = [e for e in record if not (last_hash_only and _derived(e[1]))]
        ids = b"".join(uuid.UUID(e[1]).bytes for e in kept_ids)
        hashes = bytes.fromhex(record[-1][8]) if last_hash_only else b"".join(bytes.fromhex(e[8]) for e in record)
        types = bytes(src.types[e[4]] for e in record) + bytes(e[5] for e in record)
        rows.append(
            (
                first[0],
                src.streams[first[2]],
                first[3],
                types,
                ids,
                hashes,
                _micros(first[7]),
                codec.compress("records", data),
            )
        )
        for e in record:
            raw = uuid.UUID(e[1]).bytes
            ids_rows.append((int.from_bytes(raw[:8], "big", signed=True), e[0]) if last_hash_only else (raw, e[0]))
    con.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    con.executemany("INSERT INTO event_ids VALUES (?, ?)", ids_rows)
    _projection_tables(con, src)
    return _finish(con, path)


def planned_format(src: Source, path: Path) -> dict[str, int]:
    records = []
    for record in _records(src):
        cut: list[tuple] = []
        for event in record:  # an append's time is one per record: cut where it changes, and at 64
            if cut and (event[7] != cut[0][7] or len(cut) == 64):
                records.append(cut)
                cut = []
            cut.append(event)
        records.append(cut)
    bodies = [
        json.dumps(
            [[None if _derived(e[1]) else e[1], e[4], e[5], e[6]] for e in record],
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
        for record in records
    ]
    codec = Codec({"records": bodies})
    con = _new(path)
    con.execute("CREATE TABLE streams (stream INTEGER PRIMARY KEY, stream_id TEXT NOT NULL UNIQUE)")
    con.executemany("INSERT INTO streams VALUES (?, ?)", [(i, s) for s, i in src.streams.items()])
    con.execute("CREATE TABLE dictionaries (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    con.executemany("INSERT INTO dictionaries VALUES (?, ?)", [(1, d) for d in codec.dictionaries.values()])
    con.execute(
        "CREATE TABLE records (seq INTEGER PRIMARY KEY, stream INTEGER NOT NULL, version INTEGER NOT NULL, "
        "count INTEGER NOT NULL, recorded_at TEXT NOT NULL, dictionary INTEGER, body BLOB NOT NULL, "
        "hash BLOB NOT NULL, UNIQUE (stream, version))"
    )
    con.execute("CREATE TABLE event_ids (id BLOB PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID")
    rows = [
        (
            r[0][0],
            src.streams[r[0][2]],
            r[0][3],
            len(r),
            r[0][7],
            1,
            codec.compress("records", body),
            bytes.fromhex(r[-1][8]),
        )
        for r, body in zip(records, bodies)
    ]
    con.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    explicit = [(uuid.UUID(e[1]).bytes, e[0]) for r in records for e in r if not _derived(e[1])]
    con.executemany("INSERT INTO event_ids VALUES (?, ?)", explicit)
    _projection_tables(con, src)
    # What a reader pays per event: a record inflated and its JSON parsed (the last 2,000 records).
    inflate = zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(codec.dictionaries["records"]))
    sample = [row[6] for row in rows[-2000:]]
    started = time.perf_counter()
    events = sum(len(json.loads(inflate.decompress(body, max_output_size=1 << 24))) for body in sample)
    READS["planned format"] = (time.perf_counter() - started) / max(events, 1) * 1e6
    return _finish(con, path)


def _decompress_micros(codec: Codec, key: object, sample: list[bytes]) -> float:
    if key in codec.dictionaries:
        d = zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(codec.dictionaries[key]))
    else:
        d = zstandard.ZstdDecompressor()
    compressed = [codec.compressors[key].compress(s) for s in sample]
    started = time.perf_counter()
    for c in compressed:
        d.decompress(c, max_output_size=1 << 24)
    return (time.perf_counter() - started) / max(len(sample), 1) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--shape", choices=("verdicts", "rubric"), default="verdicts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, help="work directory (default: a fresh temp dir, removed after)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalstore-bench-layouts-") as tmp:
        work = args.dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        return run(args, work)


def run(args: argparse.Namespace, work: Path) -> int:
    rows_module = import_bench()
    source, db = work / "source.jsonl", work / "store.db"
    for p in work.glob("store.db*"):
        p.unlink()
    print(f"[{args.rows} {args.shape} rows] generating and importing", file=sys.stderr, flush=True)
    rows_module.write_rows(source, args.rows, args.seed, args.shape)
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "import.py"), "--child", f"sqlite:///{db}", str(source), str(args.rows)],
        stdout=subprocess.DEVNULL,
        timeout=3600,
        check=True,
        cwd=ROOT,
    )
    source_bytes = source.stat().st_size
    src = Source(db)
    by_type: dict[object, list[bytes]] = defaultdict(list)
    for e in src.events:
        by_type[e[4]].append(e[6].encode())
    codec = Codec(by_type)
    print("[layouts] building", file=sys.stderr, flush=True)
    steps: list[tuple[str, Callable[[], dict[str, int]]]] = [
        ("as stored", lambda: as_stored(src, db, work / "l1.db")),
        ("binary envelope", lambda: binary_envelope(src, codec, work / "l2.db")),
        ("+ a record per result", lambda: per_result(src, work / "l4.db", last_hash_only=False)),
        ("+ last hash, derived ids", lambda: per_result(src, work / "l5.db", last_hash_only=True)),
        ("planned format", lambda: planned_format(src, work / "l6.db")),
    ]
    mb = 1024 * 1024
    events = len(src.events)
    print(
        f"store layouts for {args.rows} rows of the {args.shape} shape: {events} events, source JSONL "
        f"{source_bytes / mb:.1f} MB, store as imported {store_bytes(db) / mb:.1f} MB"
    )
    print(f"{'layout':<26} {'MB':>7} {'x source':>9} {'log MB':>7} {'proj. MB':>9} {'B/event':>8}")
    best = None
    for name, build in steps:
        parts = build()
        ratio = parts["total"] / source_bytes
        best = ratio if best is None else min(best, ratio)
        print(
            f"{name:<26} {parts['total'] / mb:>7.1f} {ratio:>9.3f} {parts.get('log', 0) / mb:>7.1f} "
            f"{parts.get('projections', 0) / mb:>9.1f} {parts['total'] / events:>8.0f}"
        )
    payload_bytes = sum(len(e[6]) for e in src.events)
    typical = max(by_type, key=lambda k: len(by_type[k]))
    sample = by_type[typical][-2000:]
    print(
        f"payloads: {payload_bytes / mb:.1f} MB of JSON; per-type zstd dictionaries compress one in "
        f"{codec.seconds / max(codec.count, 1) * 1e6:.1f} us; a {typical} payload decompresses in "
        f"{_decompress_micros(codec, typical, sample):.1f} us"
    )
    for name, micros in READS.items():
        print(f"{name}: reading an event back (its record inflated, its JSON parsed) takes {micros:.1f} us")
    print(
        f"best layout: {best:.3f}x the source (target <= {SIZE_TARGET}x): {'met' if best <= SIZE_TARGET else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
