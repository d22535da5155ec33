"""``verify`` reports damage, never crashes on it: bytes that are not UTF-8 (in a record's column or in
the body it compresses), a damaged file, a blob an event needs that is gone, projection values that only
read back as right, and single flipped bytes in every column of every table (a seeded, bounded loop)."""

from __future__ import annotations

import json
import random
import sqlite3
import struct
from pathlib import Path
from typing import Any

import pytest
import read_commands
from click.testing import CliRunner
from log_rows import events_rows, record_at, records_reading_otherwise, set_plain
from sample_runs import (
    append_many_results,
    drop_append_only_triggers,
    execute,
    populate,
    restore_append_only_triggers,
    scalar,
)
from sqlalchemy import Boolean, Float, Integer, LargeBinary, text

from evalstore import cli
from evalstore.store import EventStore, NewEvent
from evalstore.store import events as store_events
from evalstore.store.projections import KEYS, TABLES
from evalstore.store.verify import REBUILD_UNLESS_LOST

SEED = 12
TRIALS_PER_COLUMN = 2
PRIMARY = {"records": ["seq"], "dictionaries": ["id"], "blobs": ["sha256"], **KEYS}


@pytest.fixture
def filled(store: EventStore) -> EventStore:
    populate(store)
    drop_append_only_triggers(store.engine)
    return store


@pytest.fixture
def filled_sqlite(sqlite_store: EventStore) -> EventStore:
    populate(sqlite_store)
    drop_append_only_triggers(sqlite_store.engine)
    return sqlite_store


def _verify(url: str):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(cli.main, ["--db", url, "verify", "--json"])
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    return result.exit_code, json.loads(result.stdout)["problem"] if result.stdout else result.stderr


def _sqlite_path(url: str) -> str:
    return url.removeprefix("sqlite:///")


def test_invalid_utf8_in_a_text_column_is_reported_at_its_record(filled_sqlite: EventStore, sqlite_url: str) -> None:
    # Another program flips one byte so that the text column no longer decodes.
    conn = sqlite3.connect(_sqlite_path(sqlite_url))
    recorded_at = conn.execute("SELECT CAST(recorded_at AS BLOB) FROM records WHERE seq = 9").fetchone()[0]
    damaged = recorded_at[:5] + b"\xff" + recorded_at[6:]
    conn.execute("UPDATE records SET recorded_at = CAST(? AS TEXT) WHERE seq = 9", (damaged,))
    conn.commit()
    conn.close()
    assert filled_sqlite.verify().problem == "record seq 9: recorded_at is not valid UTF-8"
    result = CliRunner().invoke(cli.main, ["--db", sqlite_url, "verify"])
    assert result.exit_code == 1
    assert result.stderr == "FAILED: record seq 9: recorded_at is not valid UTF-8\n"


def test_invalid_utf8_in_a_payload_is_reported_at_its_record(filled: EventStore, store_url: str) -> None:
    # The payloads are inside the record's compressed body: one byte of it that is not UTF-8 once inflated.
    plain = record_at(filled.engine, 9).plain()
    start = plain.index(b'{"')
    set_plain(filled.engine, 9, plain[: start + 5] + b"\xff" + plain[start + 6 :])
    problem = filled.verify().problem
    assert problem is not None and problem.startswith("record seq 9: its body cannot be read (UnicodeDecodeError: ")
    code, reported = _verify(store_url)
    assert (code, reported) == (1, problem)
    assert not read_commands.failures(store_url, pages=store_url.startswith("sqlite"))


def test_a_damaged_file_is_one_line_naming_it(filled_sqlite: EventStore, sqlite_url: str) -> None:
    path = _sqlite_path(sqlite_url)
    root = scalar(filled_sqlite.engine, "SELECT rootpage FROM sqlite_master WHERE name = 'records'")
    page_size = scalar(filled_sqlite.engine, "PRAGMA page_size")
    filled_sqlite.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(path, "r+b") as f:  # the records table's root page becomes noise
        f.seek((root - 1) * page_size)
        f.write(random.Random(SEED).randbytes(page_size))
    result = CliRunner().invoke(cli.main, ["--db", sqlite_url, "verify"])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"FAILED: database file {path}: ")
    assert "malformed" in result.stderr
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("content", [b"hello, not a database\n", bytes(range(256)) * 40])
def test_db_that_is_not_a_database_is_a_usage_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    for args in (["verify"], ["runs"]):
        result = CliRunner().invoke(cli.main, ["--db", str(path), *args])
        assert result.exit_code == 2, result.output
        assert result.stderr == f"Error: cannot open the store sqlite:///{path}: file is not a database\n"


def test_a_blob_an_event_needs_must_exist(filled: EventStore, store_url: str) -> None:
    # A transcript's messages blob, deleted: every digest still matches, but the run cannot be read.
    seq, digest = next(
        (e.seq, e.payload["messages_sha256"]) for e in filled.read_all() if e.type == "transcript_recorded"
    )
    execute(filled.engine, "DELETE FROM blobs WHERE sha256 = :s", s=digest)
    assert _verify(store_url) == (1, f"event seq {seq}: blob {digest} it refers to is missing")


def test_projection_values_compare_as_stored(filled_sqlite: EventStore, sqlite_url: str) -> None:
    scored = store_events.TestScored(test_id="lisbon", score=1.0, passed=True, status="ok", threshold=0.8)
    filled_sqlite.append("run-c", [NewEvent(scored)])
    restore_append_only_triggers(filled_sqlite.engine)
    assert _verify(sqlite_url) == (0, None)
    drop_append_only_triggers(filled_sqlite.engine)
    # 115 reads back as True through a Boolean column; stored, it is not what the log says.
    execute(
        filled_sqlite.engine,
        "UPDATE results SET passed = 115 WHERE run = (SELECT stream FROM streams WHERE stream_id = 'run-c')",
    )
    code, problem = _verify(sqlite_url)
    assert code == 1 and problem.startswith("projection results: row ('run-c', 'lisbon'")
    assert problem.endswith("differs from the log; " + REBUILD_UNLESS_LOST)


# --- a single flipped byte anywhere -----------------------------------------------------------------


def _columns(table: str):  # type: ignore[no-untyped-def]
    from evalstore.store import schema

    return list((schema.metadata.tables[table]).c)


def _flip(value: Any, column: Any, rng: random.Random, pg: bool) -> Any:
    """``value`` with one bit of one of its bytes flipped, as another program could write it."""
    if isinstance(column.type, Boolean) and pg:
        return not value
    if isinstance(column.type, Float):
        raw = bytearray(struct.pack("<d", value))
        raw[rng.randrange(8)] ^= 1 << rng.randrange(8)
        return struct.unpack("<d", bytes(raw))[0]
    if isinstance(column.type, Integer | Boolean):
        return int(value) ^ (1 << (8 * rng.randrange(3) + rng.randrange(8)))
    raw = bytearray(value if isinstance(column.type, LargeBinary) else value.encode())
    raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    if isinstance(column.type, LargeBinary):
        return bytes(raw)
    if pg:
        return bytes(raw).decode("utf-8", errors="strict")  # PostgreSQL refuses invalid UTF-8 anyway
    return bytes(raw)  # SQLite: written as TEXT with these exact bytes


def _set(engine, table: str, column: Any, value: Any, key: dict) -> bool:  # type: ignore[no-untyped-def]
    """UPDATE one column of one row (by its key); False when the database itself refuses the value."""
    texty = not isinstance(column.type, LargeBinary) and isinstance(value, bytes)
    target = "CAST(:value AS TEXT)" if texty else ":value"
    where = " AND ".join(
        f"{k} = CAST(:k_{k} AS TEXT)" if isinstance(v, bytes) else f"{k} = :k_{k}" for k, v in key.items()
    )
    try:
        with engine.begin() as conn:
            n = conn.execute(
                text(f"UPDATE {table} SET {column.name} = {target} WHERE {where}"),
                {"value": value, **{f"k_{k}": v for k, v in key.items()}},
            ).rowcount
    except Exception:  # a unique key taken, NOT NULL, out of range: not a tampering this store can hold
        return False
    assert n == 1
    return True


def _expected(table: str, column: str, row: dict, new: Any) -> tuple[str, ...]:
    """What the problem starts with, or (after the first) holds."""
    if table == "records" and column == "seq":  # the record moved: the seq of the events it held is missing
        return (f"event seq {row['seq']} is missing", f"(next is {new})")
    if table == "records":
        return (f"record seq {row['seq']}",)
    if table == "dictionaries":  # the records compressed against it no longer read back as they were written
        return ("record seq ",)
    if table == "blobs":
        flipped = new.decode(errors="replace") if isinstance(new, bytes) else str(new)
        return (f"blob {row['sha256']}", f"blob {flipped}")
    return (f"projection {table}:",)


def test_every_flipped_byte_in_every_column_is_reported(filled: EventStore, store_url: str) -> None:
    engine = filled.engine
    pg = engine.dialect.name == "postgresql"
    rng = random.Random(SEED)
    tried: dict[tuple[str, str], int] = {}
    holding: set[tuple[str, str]] = set()  # columns with a value in some row (NULL has no byte to flip)
    append_many_results(filled)  # a dictionary too
    events = [(e.seq, e.event_id, e.payload_json, e.hash) for e in events_rows(engine)]
    for table in ["records", "dictionaries", "blobs", *TABLES]:
        with engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(text(f"SELECT * FROM {table}")).mappings()]
        assert rows, table
        for column in _columns(table):
            candidates = [r for r in rows if r[column.name] is not None]
            if candidates:
                holding.add((table, column.name))
            attempts = 0
            while tried.get((table, column.name), 0) < TRIALS_PER_COLUMN and candidates and attempts < 20:
                attempts += 1
                row = rng.choice(candidates)
                key = {k: row[k] for k in PRIMARY[table]}
                try:
                    new = _flip(row[column.name], column, rng, pg)
                except UnicodeDecodeError:
                    continue
                if (table, column.name) == ("dictionaries", "data"):
                    harmless = not records_reading_otherwise(engine, row["id"], new)
                if not _set(engine, table, column, new, key):
                    continue
                code, problem = _verify(store_url)
                if (table, column.name) == ("dictionaries", "data") and harmless:
                    # A preset dictionary has no digest of its own: a byte no record's DEFLATE stream copies
                    # changes no event (the records are the log; checked here), so no row is damaged and
                    # verify goes on to the guards (dropped here). Not a trial: flip another byte.
                    assert problem.startswith("append-only guard"), problem
                    assert [(e.seq, e.event_id, e.payload_json, e.hash) for e in events_rows(engine)] == events
                    assert _set(engine, table, column, row[column.name], key)
                    continue
                # Every read command on the tampered store answers or stops with one line (the first
                # flip of each column; the viewer's pages at the first of each table, on SQLite).
                first = (table, column.name) not in tried
                pages = not pg and not any(t == table for t, _ in tried)
                crashed = read_commands.failures(store_url, pages=pages) if first else []
                moved = {**key, column.name: new} if column.name in key else key
                assert _set(engine, table, column, row[column.name], moved)  # put it back
                assert code == 1, (table, column.name, row, new)
                assert not crashed, (table, column.name, new, crashed)
                assert problem.startswith(_expected(table, column.name, row, new)) or any(
                    e in problem for e in _expected(table, column.name, row, new)[1:]
                ), (table, column.name, new, problem)
                tried[(table, column.name)] = tried.get((table, column.name), 0) + 1
    # Every column of every table that holds a value, each flipped TRIALS_PER_COLUMN times.
    assert {t for t, _ in holding} == {"records", "dictionaries", "blobs", *TABLES}
    assert tried == dict.fromkeys(holding, TRIALS_PER_COLUMN)
    restore_append_only_triggers(engine)
    assert _verify(store_url) == (0, None)
