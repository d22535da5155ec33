"""The event log, blobs, projections, and the triggers that make the log append-only.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
APPEND_ONLY = ("events", "blobs")


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("seq", Seq, primary_key=True, autoincrement=False),
        sa.Column("event_id", sa.String(36), nullable=False),
        sa.Column("stream_id", sa.String(200), nullable=False),
        sa.Column("stream_version", sa.Integer, nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.String(40), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("event_id", name="uq_events_event_id"),
        sa.UniqueConstraint("stream_id", "stream_version", name="uq_events_stream_version"),
    )
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("encoding", sa.String(16), nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("parent_run_id", sa.String(200), nullable=True),
        sa.Column("suite", sa.String(200), nullable=True),
        sa.Column("target_name", sa.String(200), nullable=True),
        sa.Column("eval_path", sa.Text, nullable=True),
        sa.Column("source", sa.Text, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", sa.String(40), nullable=False),
        sa.Column("ended_at", sa.String(40), nullable=True),
        sa.Column("started_seq", Seq, nullable=False),
    )
    op.create_index("ix_runs_parent", "runs", ["parent_run_id"])
    op.create_table(
        "results",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("test_id", sa.String(500), primary_key=True),
        sa.Column("target", sa.String(200), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("event_id", sa.String(36), nullable=False),
        sa.Column("seq", Seq, nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "verdicts",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("test_id", sa.String(500), primary_key=True),
        sa.Column("target", sa.String(200), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("grader", sa.String(200), primary_key=True),
        sa.Column("grader_type", sa.String(64), nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("verdict", sa.String(8), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("weight", sa.Float, nullable=False),
        sa.Column("cache_hit", sa.Boolean, nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("event_id", sa.String(36), nullable=False),
        sa.Column("seq", Seq, nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "judge_cache",
        sa.Column("cache_key", sa.String(64), primary_key=True),
        sa.Column("event_id", sa.String(36), nullable=False),
        sa.Column("seq", Seq, nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "conversions",
        sa.Column("fingerprint", sa.String(64), primary_key=True),
        sa.Column("event_id", sa.String(36), nullable=False),
        sa.Column("seq", Seq, nullable=False),
        sqlite_with_rowid=False,
    )
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for table in APPEND_ONLY:
            for operation in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_no_{operation.lower()} BEFORE {operation} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, 'evalstore: {table} is append-only; {operation} is not allowed'); END"
                )
    elif dialect == "postgresql":
        op.execute(
            """
            CREATE FUNCTION evalstore_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION 'evalstore: % is append-only; % is not allowed', TG_TABLE_NAME, TG_OP;
            END
            $$
            """
        )
        for table in APPEND_ONLY:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION evalstore_append_only()"
            )
            op.execute(
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION evalstore_append_only()"
            )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for table in ("conversions", "judge_cache", "verdicts", "results"):
        op.drop_table(table)
    op.drop_index("ix_runs_parent", table_name="runs")
    op.drop_table("runs")
    # Dropping a table drops its triggers too (on both dialects); the function goes after them.
    op.drop_table("blobs")
    op.drop_table("events")
    if dialect == "postgresql":
        op.execute("DROP FUNCTION evalstore_append_only()")
