"""Projections keyed by a stream's number, without repeating event ids.

A new projection ``streams`` numbers every stream by the seq of its first event. ``results`` and
``verdicts`` are keyed by that number (``run``) instead of the run's id, and they, ``judge_cache`` and
``conversions`` drop ``event_id``: their ``seq`` names the event (the events' primary key). On a run of
many small verdicts this is a third of the projections' size (issue 31, bench/store_layouts.py).

Projections are derived, so the rows are copied in SQL, each old table renamed aside, the new one made,
filled and the old one dropped; the log is not touched. Downgrading copies them back, reading each
row's event id from the log.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
RESULT_KEY = ("test_id", "target", "attempt")
RESULT_VALUES = ("score", "passed", "status", "error", "origin", "seq")
VERDICT_KEY = (*RESULT_KEY, "grader")
VERDICT_VALUES = ("grader_type", "score", "verdict", "status", "weight", "cache_hit", "origin", "seq")
REUSE_INDEXES = {"judge_cache": "cache_key", "conversions": "fingerprint"}


def _result_columns(run: sa.Column) -> list[sa.Column]:
    return [
        run,
        sa.Column("test_id", sa.String(500), primary_key=True),
        sa.Column("target", sa.String(200), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True, autoincrement=False),
    ]


def _results(run: sa.Column, event_id: bool) -> list[sa.Column]:
    return [
        *_result_columns(run),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("origin", sa.String(16), nullable=False),
        *([sa.Column("event_id", sa.String(36), nullable=False)] if event_id else []),
        sa.Column("seq", Seq, nullable=False),
    ]


def _verdicts(run: sa.Column, event_id: bool) -> list[sa.Column]:
    return [
        *_result_columns(run),
        sa.Column("grader", sa.String(200), primary_key=True),
        sa.Column("grader_type", sa.String(64), nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("verdict", sa.String(8), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("weight", sa.Float, nullable=False),
        sa.Column("cache_hit", sa.Boolean, nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        *([sa.Column("event_id", sa.String(36), nullable=False)] if event_id else []),
        sa.Column("seq", Seq, nullable=False),
    ]


def _reuse_index(key: str, event_id: bool) -> list[sa.Column]:
    return [
        sa.Column(key, sa.String(64), primary_key=True),
        *([sa.Column("event_id", sa.String(36), nullable=False)] if event_id else []),
        sa.Column("seq", Seq, nullable=False),
    ]


def _aside(table: str, suffix: str) -> str:
    """Rename a projection out of the way; PostgreSQL's primary-key index keeps its name, so it goes too."""
    old = f"{table}_{suffix}"
    op.rename_table(table, old)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER INDEX {table}_pkey RENAME TO {old}_pkey")
    return old


def upgrade() -> None:
    op.create_table(
        "streams",
        sa.Column("stream", Seq, primary_key=True, autoincrement=False),
        sa.Column("stream_id", sa.String(200), nullable=False),
        sa.UniqueConstraint("stream_id", name="uq_streams_stream_id"),
    )
    op.execute("INSERT INTO streams (stream, stream_id) SELECT MIN(seq), stream_id FROM events GROUP BY stream_id")
    for table, columns, key, values in (
        ("results", _results, RESULT_KEY, RESULT_VALUES),
        ("verdicts", _verdicts, VERDICT_KEY, VERDICT_VALUES),
    ):
        old = _aside(table, "0003")
        op.create_table(table, *columns(sa.Column("run", Seq, primary_key=True, autoincrement=False), False),
                        sqlite_with_rowid=False)  # fmt: skip
        copied = ", ".join(f"o.{c}" for c in (*key, *values))
        op.execute(
            f"INSERT INTO {table} (run, {', '.join((*key, *values))}) "
            f"SELECT s.stream, {copied} FROM {old} o JOIN streams s ON s.stream_id = o.run_id"
        )
        op.drop_table(old)
    for table, column in REUSE_INDEXES.items():
        old = _aside(table, "0003")
        op.create_table(table, *_reuse_index(column, False), sqlite_with_rowid=False)
        op.execute(f"INSERT INTO {table} ({column}, seq) SELECT {column}, seq FROM {old}")
        op.drop_table(old)


def downgrade() -> None:
    for table, columns, key, values in (
        ("results", _results, RESULT_KEY, RESULT_VALUES),
        ("verdicts", _verdicts, VERDICT_KEY, VERDICT_VALUES),
    ):
        new = _aside(table, "0004")
        op.create_table(table, *columns(sa.Column("run_id", sa.String(200), primary_key=True), True),
                        sqlite_with_rowid=False)  # fmt: skip
        copied = ", ".join(f"n.{c}" for c in (*key, *values))
        op.execute(
            f"INSERT INTO {table} (run_id, {', '.join((*key, *values))}, event_id) "
            f"SELECT s.stream_id, {copied}, e.event_id FROM {new} n "
            "JOIN streams s ON s.stream = n.run JOIN events e ON e.seq = n.seq"
        )
        op.drop_table(new)
    for table, column in REUSE_INDEXES.items():
        new = _aside(table, "0004")
        op.create_table(table, *_reuse_index(column, True), sqlite_with_rowid=False)
        op.execute(
            f"INSERT INTO {table} ({column}, event_id, seq) SELECT n.{column}, e.event_id, n.seq FROM {new} n "
            "JOIN events e ON e.seq = n.seq"
        )
        op.drop_table(new)
    op.drop_table("streams")
