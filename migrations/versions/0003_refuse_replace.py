"""The append-only guard holds for every client: no REPLACE on SQLite, no replica-role bypass on PostgreSQL.

SQLite: ``INSERT OR REPLACE`` / ``REPLACE INTO`` deletes the conflicting row without firing its DELETE
trigger (recursive triggers are off by default, and evalstore cannot set a pragma on other programs'
connections). A BEFORE INSERT trigger that refuses a row whose key (any unique key, or the rowid the
row asks for) is already taken makes the database itself refuse the rewrite, whatever the conflict
clause. evalstore never inserts a taken key: blobs already stored are skipped inside the write lock.

PostgreSQL: an ordinary trigger does not fire under ``SET session_replication_role = replica``, so a
superuser could delete rows without touching the trigger. ``ENABLE ALWAYS`` makes it fire in every role.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# table -> the condition under which an inserted row would take the place of a stored one.
SQLITE_TAKEN = {
    "events": (
        "SELECT 1 FROM events WHERE seq = NEW.seq OR event_id = NEW.event_id "
        "OR (stream_id = NEW.stream_id AND stream_version = NEW.stream_version)"
    ),
    "blobs": "SELECT 1 FROM blobs WHERE sha256 = NEW.sha256 OR rowid = NEW.rowid",
}
PG_TRIGGERS = {
    "events": ("events_append_only", "events_no_truncate"),
    "blobs": ("blobs_append_only", "blobs_no_truncate"),
}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for table, taken in SQLITE_TAKEN.items():
            op.execute(
                f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table} WHEN EXISTS ({taken}) "
                f"BEGIN SELECT RAISE(ABORT, 'evalstore: {table} is append-only; REPLACE is not allowed'); END"
            )
    elif dialect == "postgresql":
        for table, triggers in PG_TRIGGERS.items():
            for trigger in triggers:
                op.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {trigger}")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for table in SQLITE_TAKEN:
            op.execute(f"DROP TRIGGER {table}_no_replace")
    elif dialect == "postgresql":
        for table, triggers in PG_TRIGGERS.items():
            for trigger in triggers:
                op.execute(f"ALTER TABLE {table} ENABLE TRIGGER {trigger}")
