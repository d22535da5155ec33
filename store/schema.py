"""Tables, as SQLAlchemy Core metadata. Alembic migrations create them; this module only describes them.

``records``, ``dictionaries`` and ``blobs`` are the source of truth and append-only (database triggers reject UPDATE and
DELETE). Everything else is a projection: derived from the events in the same transaction as each
append, and rebuildable from the log alone (``evalstore db rebuild``).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()


# SQLite only auto-assigns INTEGER PRIMARY KEY; BIGINT elsewhere. We assign seq ourselves anyway.
SeqType = BigInteger().with_variant(Integer(), "sqlite")

# The log: one row per record of consecutive events of one stream from one append (store/records.py says
# what each column holds and how a record's events are read back).
records = Table(
    "records",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=False),
    Column("stream", SeqType, nullable=False),
    Column("version", Integer, nullable=False),
    Column("count", Integer, nullable=False),
    Column("recorded_at", String(40), nullable=False),
    Column("dictionary", Integer, nullable=True),
    Column("body", LargeBinary, nullable=False),
    Column("hash", LargeBinary, nullable=False),
    UniqueConstraint("stream", "version", name="uq_records_stream_version"),
)

# Preset dictionaries records are compressed against (append-only, like the log).
dictionaries = Table(
    "dictionaries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("data", LargeBinary, nullable=False),
)

blobs = Table(
    "blobs",
    metadata,
    Column("sha256", String(64), primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("encoding", String(16), nullable=False),
    Column("data", LargeBinary, nullable=False),
    # The blob whose bytes were zlib's preset dictionary for ``data`` (store/blobs.py); NULL for none.
    Column("dictionary", String(64), nullable=True),
)

# --- projections -------------------------------------------------------------------------------

# Projection tables keyed by text columns are stored as their primary-key index on SQLite (WITHOUT
# ROWID, ``sqlite_with_rowid=False``): half the size, since the key columns are not kept twice.

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(200), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("parent_run_id", String(200), nullable=True),
    Column("suite", String(200), nullable=True),
    Column("target_name", String(200), nullable=True),
    Column("eval_path", Text, nullable=True),
    Column("source", Text, nullable=True),
    Column("status", String(16), nullable=False),
    Column("started_at", String(40), nullable=False),
    Column("ended_at", String(40), nullable=True),
    Column("started_seq", SeqType, nullable=False),
)

# Every stream's number: the seq of its first event (so folding the log numbers streams as appending
# did). The results and verdicts projections are keyed by it instead of repeating the run's id in every
# row (a run of 20,000 results has 80,000 such rows: a third of the projections' size).
streams = Table(
    "streams",
    metadata,
    Column("stream", SeqType, primary_key=True, autoincrement=False),
    Column("stream_id", String(200), nullable=False),
    UniqueConstraint("stream_id", name="uq_streams_stream_id"),
)

# The ids of events that are not derived from their stream and version (store/records.py): given by the
# caller (a run's, which its other events name before it is stored) or stored before migration 0005.
event_ids = Table(
    "event_ids",
    metadata,
    Column("event_id", String(36), primary_key=True),
    Column("seq", SeqType, nullable=False),
    sqlite_with_rowid=False,
)

# ``seq`` names the event a row comes from: the rows do not repeat its id.
results = Table(
    "results",
    metadata,
    Column("run", SeqType, primary_key=True, autoincrement=False),
    Column("test_id", String(500), primary_key=True),
    Column("target", String(200), primary_key=True),
    Column("attempt", Integer, primary_key=True, autoincrement=False),
    Column("score", Float, nullable=False),
    Column("passed", Boolean, nullable=False),
    Column("status", String(32), nullable=False),
    Column("error", Text, nullable=True),
    Column("origin", String(16), nullable=False),
    Column("seq", SeqType, nullable=False),
    sqlite_with_rowid=False,
)

verdicts = Table(
    "verdicts",
    metadata,
    Column("run", SeqType, primary_key=True, autoincrement=False),
    Column("test_id", String(500), primary_key=True),
    Column("target", String(200), primary_key=True),
    Column("attempt", Integer, primary_key=True, autoincrement=False),
    Column("grader", String(200), primary_key=True),
    Column("grader_type", String(64), nullable=False),
    Column("score", Float, nullable=False),
    Column("verdict", String(8), nullable=False),
    Column("status", String(32), nullable=False),
    Column("weight", Float, nullable=False),
    Column("cache_hit", Boolean, nullable=False),
    Column("origin", String(16), nullable=False),
    Column("seq", SeqType, nullable=False),
    sqlite_with_rowid=False,
)

judge_cache = Table(
    "judge_cache",
    metadata,
    Column("cache_key", String(64), primary_key=True),
    Column("seq", SeqType, nullable=False),
    sqlite_with_rowid=False,
)

conversions = Table(
    "conversions",
    metadata,
    Column("fingerprint", String(64), primary_key=True),
    Column("seq", SeqType, nullable=False),
    sqlite_with_rowid=False,
)

Index("ix_runs_parent", runs.c.parent_run_id)

PROJECTION_TABLES = (runs, streams, event_ids, results, verdicts, judge_cache, conversions)
