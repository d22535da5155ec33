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

# trigger -> (table, the key an inserted row would take from a stored one, the condition). One trigger
# per key, so the message names it: evalstore's optimistic append tells a retried event id by it.
SQLITE_TRIGGERS = {
    "events_no_replace": ("events", "seq", "SELECT 1 FROM events WHERE seq = NEW.seq"),
    "events_no_reuse_event_id": ("events", "events.event_id", "SELECT 1 FROM events WHERE event_id = NEW.event_id"),
    "events_no_reuse_stream_version": (
        "events",
        "events.stream_id, events.stream_version",
        "SELECT 1 FROM events WHERE stream_id = NEW.stream_id AND stream_version = NEW.stream_version",
    ),
    "blobs_no_replace": ("blobs", "blobs.sha256", "SELECT 1 FROM blobs WHERE sha256 = NEW.sha256 OR rowid = NEW.rowid"),
}
PG_TRIGGERS = {
    "events": ("events_append_only", "events_no_truncate"),
    "blobs": ("blobs_append_only", "blobs_no_truncate"),
}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for trigger, (table, key, taken) in SQLITE_TRIGGERS.items():
            message = f"evalstore: {table} is append-only; REPLACE is not allowed ({key} is already stored)"
            op.execute(
                f"CREATE TRIGGER {trigger} BEFORE INSERT ON {table} WHEN EXISTS ({taken}) "
                f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
            )
    elif dialect == "postgresql":
        for table, triggers in PG_TRIGGERS.items():
            for trigger in triggers:
                op.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {trigger}")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for trigger in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER {trigger}")
    elif dialect == "postgresql":
        for table, triggers in PG_TRIGGERS.items():
            for trigger in triggers:
                op.execute(f"ALTER TABLE {table} ENABLE TRIGGER {trigger}")
