"""The append-only guards as migrations ``0001``, ``0003`` and ``0005`` create them, so ``verify`` can check they are
still there and unchanged.

A guard someone dropped (``DROP TRIGGER records_no_update``), disabled (``ALTER TABLE records DISABLE
TRIGGER ALL``), demoted (``ENABLE TRIGGER``: skipped under ``session_replication_role = replica``) or
rewrote (a trigger of the same name that does nothing, a function that returns the row) lets the next
UPDATE or DELETE through, and the hash chain only tells afterwards. The texts below are copies of what the
migrations write (migrations are frozen history, so they do not import this module); a fresh store's
``verify`` passing is the test that the two agree.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

APPEND_ONLY = ("records", "dictionaries", "blobs")


def _sqlite_triggers() -> dict[str, str]:
    triggers = {}
    for table in APPEND_ONLY:  # migrations 0001 (blobs) and 0005
        for operation in ("UPDATE", "DELETE"):
            triggers[f"{table}_no_{operation.lower()}"] = (
                f"CREATE TRIGGER {table}_no_{operation.lower()} BEFORE {operation} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, 'evalstore: {table} is append-only; {operation} is not allowed'); END"
            )
    replace = {  # migrations 0003 (blobs) and 0005
        "records_no_replace": ("records", "seq", "SELECT 1 FROM records WHERE seq = NEW.seq"),
        "records_no_reuse_stream_version": (
            "records",
            "records.stream, records.version",
            "SELECT 1 FROM records WHERE stream = NEW.stream AND version = NEW.version",
        ),
        "dictionaries_no_replace": ("dictionaries", "id", "SELECT 1 FROM dictionaries WHERE id = NEW.id"),
        "blobs_no_replace": (
            "blobs",
            "blobs.sha256",
            "SELECT 1 FROM blobs WHERE sha256 = NEW.sha256 OR rowid = NEW.rowid",
        ),
    }
    for trigger, (table, key, taken) in replace.items():
        message = f"evalstore: {table} is append-only; REPLACE is not allowed ({key} is already stored)"
        triggers[trigger] = (
            f"CREATE TRIGGER {trigger} BEFORE INSERT ON {table} WHEN EXISTS ({taken}) "
            f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
        )
    return triggers


SQLITE_TRIGGERS = _sqlite_triggers()

# PostgreSQL: trigger -> (table, its definition as pg_get_triggerdef prints it, with the table unqualified).
PG_TRIGGERS = {
    f"{table}_{name}": (table, f"CREATE TRIGGER {table}_{name} BEFORE {when} ON {table} FOR EACH {each} {call}")
    for table in APPEND_ONLY
    for name, when, each in (
        ("append_only", "DELETE OR UPDATE", "ROW"),
        ("no_truncate", "TRUNCATE", "STATEMENT"),
    )
    for call in ("EXECUTE FUNCTION evalstore_append_only()",)
}
PG_FUNCTION_BODY = "BEGIN RAISE EXCEPTION 'evalstore: % is append-only; % is not allowed', TG_TABLE_NAME, TG_OP; END"


def missing_guard(conn: Connection) -> str | None:
    """The first append-only guard that is not in place as the migrations made it, in one line; None when
    every one is."""
    if conn.dialect.name == "sqlite":
        return _sqlite(conn)
    if conn.dialect.name == "postgresql":
        return _postgres(conn)
    return None


def _sqlite(conn: Connection) -> str | None:
    query = "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
    stored: dict[str, str] = {str(name): str(sql) for name, sql in conn.exec_driver_sql(query)}
    for name, sql in SQLITE_TRIGGERS.items():
        if name not in stored:
            return f"append-only guard {name} is missing (dropped): UPDATE, DELETE or REPLACE would go through"
        if stored[name] != sql:
            return f"append-only guard {name} is not the one evalstore made (redefined)"
    return None


def _postgres(conn: Connection) -> str | None:
    rows = conn.exec_driver_sql(
        "SELECT c.relname, t.tgname, t.tgenabled, pg_get_triggerdef(t.oid), n.nspname "
        "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE t.tgrelid IN (" + ", ".join(f"to_regclass('{t}')" for t in APPEND_ONLY) + ") AND NOT t.tgisinternal"
    ).all()
    stored: dict[tuple[str, str], tuple[str, str, str]] = {
        (table, name): (str(enabled), definition, schema) for table, name, enabled, definition, schema in rows
    }
    for name, (table, definition) in PG_TRIGGERS.items():
        found = stored.get((table, name))
        if found is None:
            return f"append-only guard {name} on {table} is missing (dropped): UPDATE or DELETE would go through"
        enabled, actual, schema = found
        if actual.replace(f" ON {schema}.{table} ", f" ON {table} ").replace(f"{schema}.evalstore_", "evalstore_") != (
            definition
        ):
            return f"append-only guard {name} on {table} is not the one evalstore made (redefined)"
        if enabled != "A":
            state = "disabled" if enabled == "D" else "not ENABLE ALWAYS (skipped for replication roles)"
            return f"append-only guard {name} on {table} is {state}: UPDATE or DELETE would go through"
    body = conn.exec_driver_sql(
        "SELECT p.prosrc FROM pg_proc p WHERE p.oid = to_regprocedure('evalstore_append_only()')"
    ).scalar()
    if body is None:
        return "append-only guard function evalstore_append_only() is missing"
    if " ".join(str(body).split()) != PG_FUNCTION_BODY:
        return "append-only guard function evalstore_append_only() is not the one evalstore made (redefined)"
    return None
