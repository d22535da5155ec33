"""``verify``: recompute the hash chain, every blob digest, the blobs events refer to, and the projections;
then the database's own check of its pages and indexes, and the append-only guards.

Everything is read as the driver stores it, never through SQLAlchemy's type processing: on SQLite text
comes back as bytes (``text_factory``) and is decoded here, so a damaged value (invalid UTF-8, a
boolean column holding 115) is reported against its row instead of crashing the read or reading back
as something it is not. Text comes back as :class:`_Text`, a BLOB as plain bytes: a key retyped to a
BLOB with the same bytes (``CAST(run_id AS BLOB)``) no longer matches the text queries use, so it hides
its row from every command while its bytes compare equal. The first problem found is the report; a file
that is not a database, or is damaged beneath the rows (an index page: rows the table holds that its
index does not, so a lookup misses them), is a problem too, naming the file.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import Boolean, Float, Integer, LargeBinary
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from evalstore.store import guards, projections, records, schema
from evalstore.store.codec import GENESIS_HASH
from evalstore.store.envelope import StoredEvent
from evalstore.store.errors import StoreError, error_line

# Payload fields that name a blob the event needs (its bytes live in ``blobs``). ``script_sha256`` is a
# digest of script files kept on disk, and ``fingerprint``/``cache_key`` are reuse keys: not blobs.
BLOB_FIELDS = frozenset(
    {
        "sha256",
        "messages_sha256",
        "artifact_sha256",
        "output_sha256",
        "request_sha256",
        "reply_sha256",
        "stderr_sha256",
        "rendered_prompt_sha256",
        "source_record_sha256",
    }
)
BATCH = 2000
SMALL_BLOB_BYTES = 64 * 1024
REBUILD = "run `evalstore db rebuild`"
REBUILD_UNLESS_LOST = (
    f"{REBUILD}, unless the log lost events (`evalstore verify --checkpoint FILE` tells; a rebuild hides it)"
)
"""A projection ahead of its log is also what a log cut short leaves."""


class _Text(bytes):
    """A SQLite TEXT value's bytes, told apart from a BLOB's (plain ``bytes``)."""

    __slots__ = ()


class Problem(Exception):
    """The first thing that does not match; its message is the report's ``problem``."""


class Progress:
    def __init__(self) -> None:
        self.events = 0
        self.blobs = 0


def verify(
    engine: Engine, blob_digest: Callable[[str, bytes, str | None], tuple[str, int]]
) -> tuple[int, int, str | None]:
    """(events verified, blobs verified, the first problem or None). ``blob_digest(encoding, data,
    dictionary)`` is the store's own (SHA-256, size) of what a blobs row holds (it resolves dictionaries
    and reads a large blob's chunks one at a time)."""
    progress = Progress()
    try:
        # One read snapshot for the log and the projections, while others write: PostgreSQL's default
        # (read committed) gives each statement a newer one, so rows appended meanwhile looked like damage.
        snapshot = {"isolation_level": "REPEATABLE READ"} if engine.dialect.name == "postgresql" else {}
        with engine.connect().execution_options(**snapshot) as conn, conn.begin():
            _verify(conn, progress, blob_digest)
    except Problem as problem:
        return progress.events, progress.blobs, str(problem)
    except (DBAPIError, engine.dialect.loaded_dbapi.Error) as exc:
        # Not a row that is wrong but the file or server beneath them: name where, in one line. (The
        # driver's own errors come from the rows read straight from its cursor.)
        return progress.events, progress.blobs, f"{_where(engine)}: {error_line(exc)}"
    return progress.events, progress.blobs, None


def _where(engine: Engine) -> str:
    """The file or server, for a problem beneath the rows."""
    if engine.dialect.name == "sqlite":
        return f"database file {engine.url.database}"
    return f"database {engine.url.render_as_string()}"


def _verify(
    conn: Connection, progress: Progress, blob_digest: Callable[[str, bytes, str | None], tuple[str, int]]
) -> None:
    needed: dict[str, int] = {}  # blob digest -> the first seq whose payload names it
    state: dict[str, dict[tuple, dict]] = {}
    zdicts = _dictionaries(conn)
    prev = GENESIS_HASH
    expected_seq = 1
    streams: dict[int, str] = {}  # a stream's number -> its id, from its first record
    versions: dict[int, int] = {}  # a stream's number -> the version of its last event so far
    columns = [c.name for c in schema.records.c]
    for raw in _rows(conn, f"SELECT {', '.join(columns)} FROM records ORDER BY seq"):
        row = dict(zip(columns, raw))
        seq = _value(row["seq"], "seq", int, "a record")
        where = f"record seq {seq}"
        if seq != expected_seq:
            raise Problem(f"event seq {expected_seq} is missing (next is {seq})")
        stream, version, count = (_value(row[c], c, int, where) for c in ("stream", "version", "count"))
        recorded_at = _value(row["recorded_at"], "recorded_at", str, where)
        dictionary = _value(row["dictionary"], "dictionary", int, where, nullable=True)
        body, stored_hash = _bytes(row["body"], "body", where), _bytes(row["hash"], "hash", where)
        if dictionary is not None and dictionary not in zdicts:
            raise Problem(f"{where}: its compression dictionary {dictionary} is missing")
        try:
            header, items = records.parse_body(records.inflate(body, zdicts.get(dictionary)))
        except (zlib.error, ValueError) as exc:
            raise Problem(f"{where}: its body cannot be read ({type(exc).__name__}: {exc})") from None
        last = seq + len(items) - 1
        if len(items) != count or count < 1:
            raise Problem(f"{where}: holds {len(items)} events, not the {count} its count says")
        if version == 1:
            if not header or stream != seq or stream in streams:
                raise Problem(f"{where}: starts stream {stream} but is not its first record")
            streams[stream] = header
        elif header or stream not in streams:
            raise Problem(f"{where}: the first record of its stream {stream} is missing")
        elif version != versions[stream] + 1:
            raise Problem(f"{where}: stream version {version} does not follow {versions[stream]}")
        versions[stream] = version + count - 1
        stream_id = streams[stream]
        events = [StoredEvent.of_row(f) for f in records.event_fields(seq, stream_id, version, recorded_at, items)]
        computed = records.chain_of(events, prev)
        if len(stored_hash) != 32 or computed[-1][1] != stored_hash.hex():
            span = f"event seq {seq}" if count == 1 else f"events seq {seq}-{last}"
            raise Problem(f"{where} ({span}): content does not match its hash (altered after it was written)")
        prev = stored_hash.hex()
        for ev in events:
            try:
                parsed = ev.payload  # parsed once: the fold below reads it too
                for digest in _blob_refs(parsed):
                    needed.setdefault(digest, ev.seq)
                projections.fold(state, [ev])
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                # Only reachable when the whole chain was recomputed over a forged payload.
                raise Problem(f"event seq {ev.seq}: payload cannot be read ({type(exc).__name__}: {exc})") from None
            progress.events += 1
        expected_seq = last + 1

    stored: set[str] = set()
    columns = [c.name for c in schema.blobs.c]
    select_blobs = f"SELECT {', '.join(columns)} FROM blobs WHERE "
    # Small rows many at a time, the rest (chunks of large blobs, up to CHUNK_BYTES each) two at a time:
    # what verify holds stays a few chunks whatever the store holds. A size that is not a number (damage)
    # falls in the second part.
    parts = (
        (f"{select_blobs}size <= {SMALL_BLOB_BYTES} ORDER BY sha256", 200),
        (f"{select_blobs}NOT (size <= {SMALL_BLOB_BYTES}) OR size IS NULL ORDER BY sha256", 2),
    )
    for raw in (r for sql, batch in parts for r in _rows(conn, sql, batch=batch)):
        row = dict(zip(columns, raw))
        sha = _value(row["sha256"], "sha256", str, "a blob")
        where = f"blob {sha}"
        size = _value(row["size"], "size", int, where)
        encoding = _value(row["encoding"], "encoding", str, where)
        dictionary = _value(row["dictionary"], "dictionary", str, where, nullable=True)
        data = row["data"]
        if not isinstance(data, bytes | memoryview) or isinstance(data, _Text):
            raise Problem(f"{where}: data is not bytes (a BLOB)")
        try:
            digest, decoded_size = blob_digest(encoding, bytes(data), dictionary)
        except StoreError as exc:
            raise Problem(f"{where}: {exc}") from None
        except DBAPIError as exc:  # the dictionary blob's row, read on its own, is damaged
            raise Problem(
                f"{where}: cannot be decoded against its dictionary, blob {dictionary}: {error_line(exc)}"
            ) from None
        if digest != sha or decoded_size != size:
            raise Problem(f"{where}: bytes do not match their digest")
        stored.add(sha)
        progress.blobs += 1
    for digest, seq in sorted(needed.items(), key=lambda item: item[1]):
        if digest not in stored:
            raise Problem(f"event seq {seq}: blob {digest} it refers to is missing")

    sqlite = conn.dialect.name == "sqlite"
    for name, table in projections.TABLES.items():
        want = {key: _as_stored(table, row, sqlite) for key, row in state.get(name, {}).items()}
        have = _projection(conn, name)
        if want != have or any(not _same(want[k], have[k]) for k in want):
            missing = sorted(set(want) - set(have), key=str)[:1]
            extra = sorted(set(have) - set(want), key=str)[:1]
            changed = [k for k in want if k in have and not _same(want[k], have[k])][:1]
            what = (
                f"row {_shown(name, missing[0], state)} missing"
                if missing
                else f"row {_shown(name, extra[0], state)} not derived from the log"
                if extra
                else f"row {_shown(name, changed[0], state)} differs from the log"
            )
            raise Problem(f"projection {name}: {what}; {REBUILD if missing else REBUILD_UNLESS_LOST}")

    # Last, so that the rows' own damage (named by seq or row) is what a tampered store reports first.
    damage = _integrity(conn)
    if damage:
        raise Problem(f"{_where(conn.engine)}: {damage}")
    unguarded = guards.missing_guard(conn)
    if unguarded:
        raise Problem(unguarded)


def _bytes(value: Any, column: str, where: str) -> bytes:
    if not isinstance(value, bytes | memoryview) or isinstance(value, _Text):
        raise Problem(f"{where}: {column} is not bytes (a BLOB)")
    return bytes(value)


def _dictionaries(conn: Connection) -> dict[int, bytes]:
    """The records' compression dictionaries, by number."""
    found = {}
    for number, data in _rows(conn, "SELECT id, data FROM dictionaries ORDER BY id"):
        where = f"compression dictionary {number}"
        found[_value(number, "id", int, where)] = _bytes(data, "data", where)
    return found


def _integrity(conn: Connection) -> str | None:
    """The database's own check of its pages and indexes, first line of what it reports; None when sound.

    SQLite: ``PRAGMA integrity_check`` (an index entry flipped in its page, which ``quick_check`` or
    reading the rows never sees: lookups through the index then miss rows). PostgreSQL: ``amcheck``'s
    ``bt_index_check`` of every B-tree index of the store's tables, when the extension is installed in the
    database (``CREATE EXTENSION amcheck``; verify installs nothing)."""
    if conn.dialect.name == "sqlite":
        rows = [r[0] for r in conn.exec_driver_sql("PRAGMA integrity_check(20)")]
        if rows == ["ok"]:
            return None
        return f"integrity check failed ({len(rows)}{'+' if len(rows) == 20 else ''} problems): {rows[0]}"
    if conn.dialect.name != "postgresql":
        return None
    namespace = conn.exec_driver_sql(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'amcheck'"
    ).scalar()
    if namespace is None:
        return None
    tables = [*guards.APPEND_ONLY, *projections.TABLES]
    indexes = conn.exec_driver_sql(
        "SELECT i.indexrelid::regclass::text, i.indexrelid FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
        "WHERE a.amname = 'btree' AND i.indrelid = ANY(ARRAY[" + ", ".join(f"to_regclass('{t}')" for t in tables) + "])"
    ).all()
    quoted = '"' + str(namespace).replace('"', '""') + '"'
    for name, oid in indexes:
        try:
            with conn.begin_nested():
                conn.exec_driver_sql(f"SELECT {quoted}.bt_index_check(%(oid)s::oid, true)", {"oid": oid})
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) in _CHECKER_GONE:
                return None  # amcheck went while verify ran (its schema dropped with it): no check, not damage
            return f"index {name}: {error_line(exc)}"
    return None


_CHECKER_GONE = frozenset({"3F000", "42883"})
"""PostgreSQL's invalid_schema_name and undefined_function: amcheck's ``bt_index_check`` or the schema it was
installed in no longer exists (dropped after verify found it: the extension is one per database, in whichever
schema it was created)."""


def _rows(conn: Connection, sql: str, batch: int = BATCH) -> Iterator[tuple]:
    """Rows as the driver stores them; on SQLite every text value comes back as bytes, undecoded."""
    if conn.dialect.name != "sqlite":  # a server-side cursor, ``batch`` rows at a time
        yield from conn.exec_driver_sql(sql, execution_options={"stream_results": True, "max_row_buffer": batch})
        return
    raw = conn.connection.driver_connection
    saved = raw.text_factory  # type: ignore[union-attr]
    raw.text_factory = _Text  # type: ignore[union-attr]
    try:
        cursor = raw.execute(sql)  # type: ignore[union-attr]
        while rows := cursor.fetchmany(batch):
            yield from rows
    finally:
        raw.text_factory = saved  # type: ignore[union-attr]


def _value(value: Any, column: str, kind: type, where: str, *, nullable: bool = False) -> Any:
    if value is None and nullable:
        return None
    if kind is str:
        if isinstance(value, bytes) and not isinstance(value, _Text):
            raise Problem(f"{where}: {column} is stored as a BLOB, not text")
        if isinstance(value, bytes):
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                raise Problem(f"{where}: {column} is not valid UTF-8") from None
        if isinstance(value, str):
            return value
    elif isinstance(value, int) and not isinstance(value, bool):
        return value
    raise Problem(f"{where}: {column} is not {'text' if kind is str else 'an integer'} ({type(value).__name__})")


def blob_refs(payload: Any) -> set[str]:
    """The digests of the blobs an event payload names (``BLOB_FIELDS``, at any depth)."""
    return set(_blob_refs(payload))


def _blob_refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in BLOB_FIELDS and isinstance(item, str):
                yield item
            else:
                yield from _blob_refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _blob_refs(item)


def _projection(conn: Connection, name: str) -> dict[tuple, dict]:
    table = projections.TABLES[name]
    columns = [c.name for c in table.c]
    rows: dict[tuple, dict] = {}
    for raw in _rows(conn, f"SELECT {', '.join(columns)} FROM {name}"):
        row = {}
        for column, value in zip(columns, raw):
            if isinstance(value, bytes) and not isinstance(value, _Text):
                kind = table.c[column].type
                if not isinstance(kind, LargeBinary):
                    wanted = "a number" if isinstance(kind, Integer | Float) else "text"
                    raise Problem(f"projection {name}: {column} is stored as a BLOB, not {wanted}, in a row; {REBUILD}")
            elif isinstance(value, bytes):
                try:
                    value = value.decode("utf-8")
                except UnicodeDecodeError:
                    raise Problem(f"projection {name}: {column} is not valid UTF-8 in a row") from None
            row[column] = value
        rows[tuple(row[k] for k in projections.KEYS[name])] = row
    return rows


def _shown(name: str, key: tuple, state: dict[str, dict[tuple, dict]]) -> tuple:
    """A projection row's key as people name it: a results or verdicts row's run by its id, not its number."""
    if projections.KEYS[name][0] == "run":
        runs = {row["stream"]: stream_id for (stream_id,), row in state.get("streams", {}).items()}
        return (runs.get(key[0], key[0]), *key[1:])
    return key


def _as_stored(table: Any, row: dict, sqlite: bool) -> dict:
    """A folded row as the database holds it: SQLite keeps booleans as 0/1 and REAL as float."""
    out = {}
    for column in table.c:
        value = row.get(column.name)
        if value is not None:
            if isinstance(column.type, Boolean):
                value = int(value) if sqlite else bool(value)
            elif isinstance(column.type, Float):
                value = float(value)
            elif isinstance(column.type, Integer):
                value = int(value)
        out[column.name] = value
    return out


def _same(a: dict, b: dict) -> bool:
    """Equal values of the same type: 115 is not True, and "1" is not 1."""
    return a.keys() == b.keys() and all(type(a[k]) is type(b[k]) and a[k] == b[k] for k in a)
