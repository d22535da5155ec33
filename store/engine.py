"""Where the store lives and how to open it: URL resolution, engine setup, the migration check.

Everything that needs a database URL (the CLI, the tests, ``migrations/env.py``) calls
:func:`resolve_url` (or :func:`locate`), so there is one order of precedence: ``--db``, then
``EVALSTORE_DB``, then the embedded SQLite file found the way git finds ``.git``: the nearest
``.evalstore/evalstore.db`` in the current folder or a parent (not above a folder named in
``EVALSTORE_CEILING_DIRECTORIES``), else a new one in the current folder.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError

from evalstore.store import reading
from evalstore.store.errors import SchemaOutOfDate, StoreDamaged, StoreError, StoreMissing, error_line
from evalstore.store.location import (  # noqa: F401  (where a store is: imported from here by callers)
    CEILING_VAR,
    DEFAULT_URL,
    ENV_VAR,
    STORE_DIR,
    STORE_FILE,
    Location,
    find_store,
    locate,
    resolve_url,
)

_READ_ONLY_URI = {"mode": "ro", "uri": "true"}
"""A read-only SQLite store's URL query (``mode=ro`` in ``--db``): SQLite's URI parameter, passed on with ``uri``."""

SQLITE_BUSY_TIMEOUT_MS = 60_000
# Events run from a few hundred bytes to a few KB: in SQLite's default 4 KB pages the space left at the
# end of each page (less than one row) wastes about a sixth of the file; 16 KB pages waste a few percent.
# It applies to new files only (SQLite fixes the page size when the first table is created).
SQLITE_PAGE_SIZE = 16_384

# Execution option read by the "begin" hook: appends take SQLite's write lock up front so two writers
# never both read the chain head and then race (which would fork the hash chain).
IMMEDIATE = "evalstore_begin_immediate"


def _normalize_driver(url: str) -> str:
    parsed = make_url(url)
    if (
        parsed.get_backend_name() == "postgresql"
        and parsed.get_driver_name() in ("psycopg2", "", None)
        and "+" not in url.split("://", 1)[0]
    ):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def make_engine(db: str | Location | None = None, *, create: bool = True) -> Engine:
    """An engine for the resolved URL, with SQLite's pragmas and explicit transaction control.

    ``create=False`` (commands that only read) refuses a SQLite file that does not exist, saying where
    it looked, instead of creating it and its folder. A URL that cannot name a store (an unknown or
    missing driver, a port that is not a number) is a :class:`StoreError` naming what is wrong."""
    location = db if isinstance(db, Location) else locate(db)
    try:
        return _engine(location, create)
    except (ArgumentError, NoSuchModuleError, ImportError, ValueError) as exc:
        reason = error_line(exc)
        if isinstance(exc, (NoSuchModuleError, ImportError)):
            reason += "; use sqlite:///PATH or postgresql://USER@HOST/DB (the psycopg 3 driver)"
        raise StoreError(f"cannot open the store {_shown(location.url)}: {reason}") from None


def _shown(url: str) -> str:
    try:
        return make_url(url).render_as_string()  # the password masked
    except (ArgumentError, ValueError):
        return url.split("://", 1)[0] + "://..."


def _engine(location: Location, create: bool) -> Engine:
    url = _normalize_driver(location.url)
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        path, read_only = location.path, location.read_only  # as locate read them (location.sqlite_target)
        target: str | URL = url
        if path is not None:
            if path.is_dir():
                raise StoreError(
                    f"{path.resolve()} is a folder, not a store: give a SQLite file's path "
                    f"({path / STORE_FILE} makes one in it)"
                )
            if (read_only or not create) and not path.is_file():
                raise location.missing()
            if create and not read_only:
                path.parent.mkdir(parents=True, exist_ok=True)
            # The file found, as sqlite_target read it (a `~` expanded: SQLAlchemy made `~/x.db` ./~/x.db,
            # and the store was looked for in one place and made in another); read-only as SQLite's URI.
            target = (
                URL.create(parsed.drivername, database=f"file:{quote(str(path.absolute()))}", query=_READ_ONLY_URI)
                if read_only
                else URL.create(parsed.drivername, database=str(path))
            )
        engine = create_engine(target, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        _configure_sqlite(engine)
        return engine
    if backend == "postgresql":
        from evalstore.store.postgres import quiet_aborted_pipelines

        quiet_aborted_pipelines()
        return create_engine(url, pool_pre_ping=True)
    raise StoreError(f"unsupported database URL {parsed.render_as_string()!r}: use sqlite:///PATH or postgresql://...")


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # type: ignore[no-untyped-def]
        # Let us issue BEGIN ourselves (pysqlite's implicit transactions cannot do BEGIN IMMEDIATE).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")  # before WAL, which fixes it for a new file
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # type: ignore[no-untyped-def]
        immediate = conn.get_execution_options().get(IMMEDIATE, False)
        # An append runs each row's INSERT as a statement that the append-only triggers may abort, so
        # SQLite journals the pages it changes; at 16 KB pages that journal spilled to a temporary file
        # for every row (an import of 100 MB wrote 6 GB to such files). Appends keep it in memory (one
        # row's pages); reads keep SQLite's default, under which large sorts may use temporary files.
        temp_store = "MEMORY" if immediate else "DEFAULT"
        if conn.info.get("temp_store") != temp_store:  # the setting stays with the pooled DBAPI connection
            conn.exec_driver_sql(f"PRAGMA temp_store={temp_store}")
            conn.info["temp_store"] = temp_store
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def migrations_dir() -> Path:
    from evalstore import migrations

    return Path(migrations.__file__).parent


def alembic_config(url: str):  # type: ignore[no-untyped-def]
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["evalstore_url"] = url
    return config


def _script():  # type: ignore[no-untyped-def]
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://"))


def head_revision() -> str:
    return _script().get_current_head()


def current_revision(engine: Engine) -> str | None:
    with _connect(engine) as conn:
        try:
            return _revision(conn)
        except DatabaseError as exc:  # SQLite connects lazily: a file that is not a database fails here
            raise _unopened(engine, exc) from exc


def _connect(engine: Engine) -> Connection:
    """The first connection a command makes: an unreachable store is bad input, not a crash."""
    try:
        return engine.connect()
    except DatabaseError as exc:  # OperationalError (unreachable), or a file that is not a database
        raise _unopened(engine, exc) from exc


SQLITE_CORRUPT = 11
"""SQLite's primary result code for a damaged database file ("database disk image is malformed")."""


def _unopened(engine: Engine, exc: DatabaseError) -> StoreError:
    """Why a store could not be opened: a database file SQLite finds damaged is damage (``verify`` fails,
    exit 1); anything else (unreachable, not a database at all) is a store that cannot be used as given."""
    code = getattr(exc.orig, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == SQLITE_CORRUPT:
        return StoreDamaged(f"the store's database file {engine.url.database} is damaged: {error_line(exc)}")
    return StoreError(f"cannot open the store {engine.url.render_as_string()}: {error_line(exc)}")


def upgrade(engine: Engine, revision: str = "head") -> None:
    _migrate(engine, "upgrade", revision)


def downgrade(engine: Engine, revision: str) -> None:
    _migrate(engine, "downgrade", revision)


def _migrate(engine: Engine, direction: str, revision: str, *, only_if_empty: bool = False) -> None:
    """Run Alembic in one transaction, under a lock, so two processes creating or upgrading one store take
    turns (the second finds the work done) instead of both creating the same tables: on PostgreSQL an
    advisory lock; on SQLite the write lock, taken up front (``BEGIN IMMEDIATE``, waiting out the busy
    timeout), since a plain ``BEGIN`` that read first and then wrote failed at once with "database is
    locked" when another creator held it. ``only_if_empty``: a store's first upgrade, decided again under
    the lock."""
    from alembic import command
    from alembic.util import CommandError

    config = alembic_config(engine.url.render_as_string(hide_password=False))
    try:
        with _connect(engine) as conn, conn.execution_options(**{IMMEDIATE: True}).begin():
            if engine.dialect.name == "postgresql":
                from evalstore.store.postgres import lock_for_migration

                lock_for_migration(conn)
            # Decided under the lock: another process may have created the store while this one waited.
            if direction == "upgrade" and _unrecorded(conn):
                raise StoreDamaged(f"{_UNRECORDED}, which will not write over it")
            if only_if_empty and _revision(conn) is not None:
                return
            config.attributes["connection"] = conn
            getattr(command, direction)(config, revision)
    except CommandError as exc:  # an unknown revision, given or stamped in the store
        raise SchemaOutOfDate(f"cannot {direction} the store to {revision}: {exc}") from exc


def _revision(conn: Connection) -> str | None:
    """The store's ``alembic_version``, read with one query (Alembic itself costs 0.1 s to import). A
    record evalstore cannot have written (a BLOB, bytes that are not UTF-8, several rows, a value that is
    no revision id) is :class:`StoreDamaged`; a well-formed id it does not know is a newer evalstore's."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    rows: list[tuple[Any, str]]
    if conn.dialect.name == "sqlite":  # read as stored: a retyped or undecodable value is damage, not a crash
        query = "SELECT CAST(version_num AS BLOB), typeof(version_num) FROM alembic_version"
        rows = [(value, str(kind)) for value, kind in conn.exec_driver_sql(query)]
    else:
        rows = [(value, "text") for (value,) in conn.exec_driver_sql("SELECT version_num FROM alembic_version")]
    if not rows:
        return None  # downgraded to base
    if len(rows) > 1:
        raise StoreDamaged(f"{_DAMAGED}: it holds {len(rows)} revisions, evalstore writes one")
    value, kind = rows[0]
    if kind != "text":
        raise StoreDamaged(f"{_DAMAGED}: the revision is stored as {kind}, not text")
    if isinstance(value, bytes | memoryview):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise StoreDamaged(f"{_DAMAGED}: the revision is not valid UTF-8") from None
    if not _REVISION_ID.fullmatch(value):
        raise StoreDamaged(f"{_DAMAGED}: {value!r} is not a revision id")
    return value


LOG_TABLES = frozenset({"events", "records", "blobs"})
"""Tables only an evalstore store holds (``events`` before migration 0005, ``records`` after)."""
_DAMAGED = "the store's migration record (alembic_version) is damaged"
_REVISION_ID = re.compile(r"[0-9A-Za-z_]{1,32}")


def _unrecorded(conn: Connection) -> bool:
    """Whether the database holds evalstore tables but no migration record (not made by evalstore)."""
    return _revision(conn) is None and bool(set(inspect(conn).get_table_names()) & LOG_TABLES)


_UNRECORDED = "this database has evalstore tables but no migration record; it was not created by evalstore db upgrade"


def event_count(engine: Engine) -> int:
    """How many events the store holds (0 without a log), in either layout of the log (before and after
    migration 0005)."""
    with _connect(engine) as conn:
        tables = set(inspect(conn).get_table_names())
        if "records" in tables:
            return int(conn.exec_driver_sql("SELECT sum(count) FROM records").scalar() or 0)
        if "events" in tables:
            return int(conn.exec_driver_sql("SELECT count(*) FROM events").scalar() or 0)
        return 0


def _stamped_revision(engine: Engine) -> str | None:
    with _connect(engine) as conn:
        return _revision(conn)


def ensure_current(engine: Engine, *, create: bool = True, adopt_empty: bool = True) -> None:
    """Upgrade a brand-new empty store by itself (unless ``create=False``: a command that only reads
    refuses an empty database, except a SQLite file that holds nothing at all, unless ``adopt_empty=False``);
    refuse one that is behind, saying how to fix it."""
    current = _stamped_revision(engine)
    if current == reading.SCHEMA_REVISION:  # the common case: no Alembic needed
        return
    script = _script()
    head = script.get_current_head()
    if current == head:
        return
    if current is None:
        existing = set(inspect(engine).get_table_names())
        if not existing & LOG_TABLES:
            # A SQLite file that holds nothing at all is what a first upgrade killed before it committed
            # leaves (the pragmas wrote the header): it is created, not refused by every command.
            if not create and not (adopt_empty and engine.dialect.name == "sqlite" and not existing):
                raise StoreMissing(
                    f"no store at {engine.url.render_as_string()}: the database holds no evalstore tables; "
                    "`evalstore db upgrade` creates them (so does any command that records)"
                )
            _migrate(engine, "upgrade", "head", only_if_empty=True)
            return
        current = _stamped_revision(engine)  # another process's first upgrade may have committed meanwhile
        if current is None:
            raise StoreDamaged(_UNRECORDED)
        if current == head:
            return
    if current not in {r.revision for r in script.walk_revisions()}:
        raise SchemaOutOfDate(
            f"the store is at schema revision {current!r}, which this evalstore does not know (its newest is "
            f"{head}): a newer evalstore migrated it; upgrade evalstore (pip install -U evalstore) to open it"
        )
    raise SchemaOutOfDate(
        f"the store is at schema revision {current}, this evalstore needs {head}: "
        "run `evalstore db upgrade` (back up the store first if you like)"
    )
