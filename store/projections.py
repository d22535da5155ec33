"""Read models derived from the event log: runs, results, verdicts, and the two reuse indexes.

:func:`rows_for` is the one definition of how an event maps to projection rows. The recorder applies it
inside every append transaction; :func:`rebuild` applies it to the whole log; ``verify`` folds it in
memory and compares. Rows are upserts keyed by primary key, later events winning, so folding the log
from the start always reaches the same state as incremental maintenance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import bindparam, delete, update
from sqlalchemy.engine import Connection

from evalstore.store import bulk, schema
from evalstore.store.envelope import StoredEvent
from evalstore.store.records import derived_id

KEYS: dict[str, list[str]] = {
    "runs": ["run_id"],
    "streams": ["stream_id"],
    "event_ids": ["event_id"],
    "results": ["run", "test_id", "target", "attempt"],
    "verdicts": ["run", "test_id", "target", "attempt", "grader"],
    "judge_cache": ["cache_key"],
    "conversions": ["fingerprint"],
}
# Reuse indexes keep the first event that produced a key: later identical work points back at it. A
# stream keeps the number its first event gave it.
REUSE_INDEXES = frozenset({"judge_cache", "conversions"})
FIRST_WINS = REUSE_INDEXES | {"streams"}
# An event id is stored once: a second event with it is refused by the table's key (never an upsert).
INSERT_ONLY = frozenset({"event_ids"})
TABLES = {t.name: t for t in schema.PROJECTION_TABLES}
# The event types whose payload rows_for reads (each has a branch there).
_READ_PAYLOAD = frozenset(
    {"run_started", "run_moved", "test_scored", "verdict_recorded", "grader_called", "preprocessing_recorded"}
)
PROJECTED = _READ_PAYLOAD | {"run_completed", "run_failed"}
"""The event types rows_for may give rows for; it gives none for any other."""


def rows_for(
    ev: StoredEvent, payload: dict[str, Any] | None = None, stream: int | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """The projection rows an event yields; ``payload`` saves parsing when the caller has it. ``stream`` is
    the number of the event's stream (``streams``: the seq of its first event, which is this one when its
    stream version is 1), which results and verdicts are keyed by."""
    rows = _rows(ev, payload, ev.seq if ev.stream_version == 1 else stream)
    if ev.event_id != derived_id(ev.stream_id, ev.stream_version):
        rows.insert(0, ("event_ids", {"event_id": ev.event_id, "seq": ev.seq}))
    if ev.stream_version == 1:
        rows.insert(0, ("streams", {"stream": ev.seq, "stream_id": ev.stream_id}))
    return rows


def _rows(ev: StoredEvent, payload: dict[str, Any] | None, stream: int | None) -> list[tuple[str, dict[str, Any]]]:
    run_id = ev.stream_id
    t = ev.type
    if t in ("run_completed", "run_failed"):
        status = "completed" if t == "run_completed" else "failed"
        return [("runs", {"run_id": run_id, "status": status, "ended_at": ev.recorded_at})]
    if t not in _READ_PAYLOAD:  # most events of an import (transcripts, cases): their JSON is never parsed
        return []
    p = ev.payload if payload is None else payload
    if t == "run_moved":  # a run copied from another store keeps the times it had there
        return [("runs", {"run_id": run_id, "started_at": p["started_at"], "ended_at": p.get("ended_at")})]
    if t == "run_started":
        source = p.get("source") or {}
        return [
            (
                "runs",
                {
                    "run_id": run_id,
                    "kind": p["kind"],
                    "parent_run_id": p.get("parent_run_id"),
                    "suite": p.get("suite"),
                    "target_name": p.get("target_name"),
                    "eval_path": p.get("eval_path"),
                    "source": source.get("file"),
                    "status": "started",
                    # An import started when its AgentV run did; when it was imported is the event's time.
                    "started_at": p.get("source_started_at") or ev.recorded_at,
                    "ended_at": None,
                    "started_seq": ev.seq,
                },
            )
        ]
    if t == "test_scored":
        return [
            (
                "results",
                {
                    **_result_key(_number(ev, stream), p),
                    "score": p["score"],
                    "passed": p["passed"],
                    "status": p["status"],
                    "error": p.get("error"),
                    "origin": p.get("origin", "graded"),
                    "seq": ev.seq,
                },
            )
        ]
    if t == "verdict_recorded":
        return [
            (
                "verdicts",
                {
                    **_result_key(_number(ev, stream), p),
                    "grader": p["grader"],
                    "grader_type": p["grader_type"],
                    "score": p["score"],
                    "verdict": p["verdict"],
                    "status": p.get("status", "ok"),
                    "weight": p.get("weight", 1.0),
                    "cache_hit": p.get("cache_hit", False),
                    "origin": p.get("origin", "graded"),
                    "seq": ev.seq,
                },
            )
        ]
    if t == "grader_called" and p.get("cache_key") and _reusable_call(p) and not p.get("cache_hit"):
        return [("judge_cache", {"cache_key": p["cache_key"], "seq": ev.seq})]
    if t == "preprocessing_recorded" and p.get("status") in ("converted", "read_as_text") and not p.get("reused_from"):
        return [("conversions", {"fingerprint": p["fingerprint"], "seq": ev.seq})]
    return []


def read_fields(type_: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    """What :func:`rows_for` reads of a payload, small enough to keep beside its JSON, so a writer that
    encoded it earlier need not parse it again (an import spools this for every event): the top-level
    values that are neither lists nor objects (``run_started``, whose ``source`` object is read, whole);
    None for an event type without projection rows. tests/store/test_projections.py holds rows_for to the
    same rows from this as from the whole payload, for every event type."""
    if type_ not in _READ_PAYLOAD:
        return None
    if type_ == "run_started":
        return payload
    return {k: v for k, v in payload.items() if not isinstance(v, (dict, list))}


def reusable_outcome(outcome: str, parse_attempt: int | None) -> bool:
    """A reply that answers its request again: an ok one, or (for calls keyed per parse attempt) one that
    did not parse, so a replay repeats the attempts without asking. The one rule for the ``judge_cache``
    projection and for calls not yet stored (``replay.recording``)."""
    return outcome == "ok" or (outcome == "parse_error" and parse_attempt is not None)


def _reusable_call(p: dict[str, Any]) -> bool:
    return reusable_outcome(p.get("outcome", "ok"), p.get("parse_attempt"))


def first_numbers(events: Iterable[StoredEvent]) -> dict[str, int]:
    """The numbers of the streams whose first event is among ``events``: that event's seq (the rule
    :func:`rows_for` writes into ``streams``)."""
    return {ev.stream_id: ev.seq for ev in events if ev.stream_version == 1}


def _number(ev: StoredEvent, stream: int | None) -> int:
    if stream is None:
        raise ValueError(f"the number of stream {ev.stream_id} is not known (its first event was not read)")
    return stream


def _result_key(run: int, p: dict[str, Any]) -> dict[str, Any]:
    return {"run": run, "test_id": p["test_id"], "target": p.get("target") or "", "attempt": p.get("attempt", 1)}


def _is_update(table: str, row: dict[str, Any]) -> bool:
    """A row without every column (``run_completed``'s status) only changes an existing row."""
    return len(row) < len(TABLES[table].c)


def fold(state: dict[str, dict[tuple, dict]], events: Iterable[StoredEvent]) -> None:
    """Apply events to an in-memory projection state: ``{table: {key tuple: row}}``."""
    numbers = state.setdefault("streams", {})
    for ev in events:
        known = numbers.get((ev.stream_id,))
        for table, row in rows_for(ev, stream=known["stream"] if known else None):
            key = tuple(row[k] for k in KEYS[table])
            rows = state.setdefault(table, {})
            if key in rows:
                if table not in FIRST_WINS:
                    rows[key].update(row)
            elif not _is_update(table, row):
                rows[key] = dict(row)


def apply(  # type: ignore[no-untyped-def]
    conn: Connection,
    dialect,
    events: Sequence[StoredEvent],
    payloads: Sequence[dict[str, Any] | None] | None = None,
    numbers: Mapping[str, int] | None = None,
) -> None:
    """Write the projection rows of freshly appended events, in the append's transaction.

    Tables are independent, so each is written on its own; within a table, rows are written in event
    order, consecutive rows of the same shape in one statement, so the result equals :func:`fold`.
    """
    write(conn, dialect, planned(events, payloads, numbers))


Planned = list[tuple[str, list[dict[str, Any]]]]
"""Projection rows as :func:`write` takes them: per table, runs of rows of the same shape, in event order."""


def planned(
    events: Sequence[StoredEvent],
    payloads: Sequence[dict[str, Any] | None] | None = None,
    numbers: Mapping[str, int] | None = None,
) -> Planned:
    """The projection rows of events, grouped for :func:`write`: what :func:`apply` writes, computed apart
    from the writing (an import computes a batch's rows while the previous batch is written). ``numbers``
    holds the number of each stream whose first event is not among ``events``."""
    known = {**(numbers or {}), **first_numbers(events)}
    by_table: dict[str, list[dict]] = {}
    for i, ev in enumerate(events):
        for table, row in rows_for(ev, payloads[i] if payloads is not None else None, known.get(ev.stream_id)):
            by_table.setdefault(table, []).append(row)
    groups: Planned = []
    for table, rows in by_table.items():
        group: list[dict] = [rows[0]]
        for row in rows[1:]:
            if row.keys() == group[0].keys():
                group.append(row)
            else:
                groups.append((table, group))
                group = [row]
        groups.append((table, group))
    return groups


def write(conn: Connection, dialect, groups: Planned) -> None:  # type: ignore[no-untyped-def]
    """Write :func:`planned` rows, in the append's transaction."""
    for table, rows in groups:
        _write(conn, dialect, table, rows)


def _dedupe(table: str, rows: list[dict]) -> list[dict]:
    # One statement must not upsert the same key twice (PostgreSQL refuses); keep the right one.
    by_key: dict[Any, dict] = {}
    key_of = itemgetter(*KEYS[table])
    first_wins = table in FIRST_WINS
    for row in rows:
        key = key_of(row)
        if first_wins and key in by_key:
            continue
        by_key[key] = row
    return list(by_key.values())


def _write(conn: Connection, dialect, table: str, rows: list[dict]) -> None:  # type: ignore[no-untyped-def]
    tbl = TABLES[table]
    key = KEYS[table]
    columns = [c for c in rows[0] if c not in key]
    if _is_update(table, rows[0]):
        # An INSERT ... ON CONFLICT would fail the NOT NULL columns this row does not carry.
        bulk.executemany(
            conn,
            lambda: update(tbl).where(*[tbl.c[k] == bindparam(f"key_{k}") for k in key]),
            [{**{f"key_{k}": r[k] for k in key}, **{c: r[c] for c in columns}} for r in rows],
            key=("update", table),
        )
        return

    if table in INSERT_ONLY:
        bulk.executemany(conn, lambda: tbl.insert(), rows, key=("insert", table))
        return

    def upsert():  # type: ignore[no-untyped-def]
        stmt = dialect.insert(tbl)
        if table in FIRST_WINS or not columns:
            return stmt.on_conflict_do_nothing(index_elements=key)
        return stmt.on_conflict_do_update(index_elements=key, set_={c: stmt.excluded[c] for c in columns})

    # The bind names (the row's columns) are part of the cache key, so the columns updated are too.
    bulk.executemany(conn, upsert, _dedupe(table, rows), key=("upsert", table))


def clear(conn: Connection) -> None:
    for tbl in schema.PROJECTION_TABLES:
        conn.execute(delete(tbl))
