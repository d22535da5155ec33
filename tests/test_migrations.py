"""Alembic migrations on SQLite and PostgreSQL: up and down, no drift from evalstore.store.schema, and the
check every command makes before it touches a store."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from click.testing import CliRunner
from sqlalchemy import Boolean, Column, Engine, MetaData, String, inspect, text

from evalstore import cli
from evalstore.store import EventStore, SchemaOutOfDate, make_engine
from evalstore.store import engine as store_engine
from evalstore.store import reading as store_reading
from evalstore.store.schema import metadata

PROJECTIONS = {"runs", "streams", "event_ids", "results", "verdicts", "judge_cache", "conversions"}
STORE_TABLES = {"records", "dictionaries", "blobs", *PROJECTIONS}
TRIGGERS = {
    "sqlite": {
        "records_no_update",
        "records_no_delete",
        "records_no_replace",
        "records_no_reuse_stream_version",
        "dictionaries_no_update",
        "dictionaries_no_delete",
        "dictionaries_no_replace",
        "blobs_no_update",
        "blobs_no_delete",
        "blobs_no_replace",
    },
    "postgresql": {
        "records_append_only",
        "records_no_truncate",
        "dictionaries_append_only",
        "dictionaries_no_truncate",
        "blobs_append_only",
        "blobs_no_truncate",
    },
}
# Revision 0004's: the log was the events table.
TABLES_0004 = {"events", "blobs", *PROJECTIONS} - {"event_ids"}
TRIGGERS_0004 = {
    "sqlite": {
        "events_no_update",
        "events_no_delete",
        "events_no_replace",
        "events_no_reuse_event_id",
        "events_no_reuse_stream_version",
        "blobs_no_update",
        "blobs_no_delete",
        "blobs_no_replace",
    },
    "postgresql": {"events_append_only", "events_no_truncate", "blobs_append_only", "blobs_no_truncate"},
}
EVENT_COLUMNS = (
    "seq",
    "event_id",
    "stream_id",
    "stream_version",
    "type",
    "schema_version",
    "payload",
    "recorded_at",
    "prev_hash",
    "hash",
)


@pytest.fixture
def engine(store_url: str):  # type: ignore[no-untyped-def]
    eng = make_engine(store_url)
    yield eng
    eng.dispose()


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def _triggers(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            return set(conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'")).scalars())
        return set(
            conn.execute(
                text(
                    "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE NOT t.tgisinternal AND n.nspname = current_schema()"
                )
            ).scalars()
        )


def _pg_functions(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return set(
            conn.execute(
                text(
                    "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                    "WHERE n.nspname = current_schema()"
                )
            ).scalars()
        )


def _diff(engine: Engine, target: MetaData) -> list:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
        return list(compare_metadata(context, target))


def test_upgrade_from_empty_to_head_and_down_to_base(engine: Engine) -> None:
    head = store_engine.head_revision()
    assert _tables(engine) == set()
    store_engine.upgrade(engine)
    assert store_engine.current_revision(engine) == head
    assert _tables(engine) == STORE_TABLES | {"alembic_version"}
    assert _triggers(engine) == TRIGGERS[engine.dialect.name]
    if engine.dialect.name == "postgresql":
        assert "evalstore_append_only" in _pg_functions(engine)

    store_engine.downgrade(engine, "base")
    assert store_engine.current_revision(engine) is None
    assert _tables(engine) - {"alembic_version"} == set()
    assert _triggers(engine) == set()
    if engine.dialect.name == "postgresql":
        assert "evalstore_append_only" not in _pg_functions(engine)

    # And back up again: the downgrade left nothing behind that the upgrade trips over.
    store_engine.upgrade(engine)
    assert _triggers(engine) == TRIGGERS[engine.dialect.name]
    assert store_engine.current_revision(engine) == head


def test_the_tables_name_the_migrations_head() -> None:
    """Opening a current store compares alembic_version with SCHEMA_REVISION, without loading Alembic."""
    from evalstore.store.reading import SCHEMA_REVISION

    assert store_engine.head_revision() == SCHEMA_REVISION


def test_metadata_and_migrations_do_not_drift(engine: Engine) -> None:
    store_engine.upgrade(engine)
    assert _diff(engine, metadata) == []
    # The comparison is able to see drift: a column the migrations never made shows up.
    drifted = MetaData()
    for table in metadata.tables.values():
        table.to_metadata(drifted)
    drifted.tables["runs"].append_column(Column("label", String(50)))
    assert [d[0] for d in _diff(engine, drifted)] == ["add_column"]


def test_a_brand_new_store_is_upgraded_on_first_use(engine: Engine) -> None:
    assert store_engine.current_revision(engine) is None
    store = EventStore(engine)
    assert store_engine.current_revision(engine) == store_engine.head_revision()
    assert _tables(engine) >= STORE_TABLES
    assert store.run_ids() == []


def test_a_brand_new_store_is_upgraded_by_the_first_command(store_url: str) -> None:
    # A command that only reads never creates a store (tests/e2e/test_e2e_newcomer.py); one that writes does.
    result = CliRunner().invoke(cli.main, ["--db", store_url, "db", "rebuild"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "rebuilt projections from 0 events"
    assert CliRunner().invoke(cli.main, ["--db", store_url, "runs", "--json"]).stdout.strip() == "[]"
    eng = make_engine(store_url)
    try:
        assert store_engine.current_revision(eng) == store_engine.head_revision()
    finally:
        eng.dispose()


NEXT = "9999"


def _newer_migrations(tmp_path: Path) -> Path:
    """A copy of the migrations plus one more revision after the head, as a newer evalstore would ship."""
    target = tmp_path / "migrations"
    shutil.copytree(store_engine.migrations_dir(), target, ignore=shutil.ignore_patterns("__pycache__"))
    (target / "versions" / f"{NEXT}_index_record_time.py").write_text(
        '"""Index records by time."""\n'
        "from alembic import op\n\n"
        f'revision = "{NEXT}"\ndown_revision = "{store_engine.head_revision()}"\n'
        "branch_labels = None\ndepends_on = None\n\n\n"
        "def upgrade():\n"
        '    op.create_index("ix_records_recorded_at", "records", ["recorded_at"])\n\n\n'
        "def downgrade():\n"
        '    op.drop_index("ix_records_recorded_at", table_name="records")\n'
    )
    return target


def test_a_store_behind_the_code_is_refused_until_upgraded(
    engine: Engine, store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = store_engine.head_revision()
    EventStore(engine)  # at the head of this checkout
    newer = _newer_migrations(tmp_path)
    monkeypatch.setattr(store_engine, "migrations_dir", lambda: newer)
    # as the newer evalstore's tables would say: the one definition, which the full store and SqliteReads read
    monkeypatch.setattr(store_reading, "SCHEMA_REVISION", NEXT)

    message = f"the store is at schema revision {head}, this evalstore needs {NEXT}: run `evalstore db upgrade`"
    with pytest.raises(SchemaOutOfDate, match=message):
        EventStore(engine)
    runner = CliRunner()
    for args in (["runs"], ["show", "last"], ["verify"], ["db", "rebuild"]):
        result = runner.invoke(cli.main, ["--db", store_url, *args])
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.startswith(f"Error: {message}"), args
        assert len(result.stderr.strip().splitlines()) == 1
        assert "Traceback" not in result.output

    current = runner.invoke(cli.main, ["--db", store_url, "db", "current", "--json"])
    assert current.exit_code == 0
    assert '"up_to_date": false' in current.stdout

    upgraded = runner.invoke(cli.main, ["--db", store_url, "db", "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output
    assert upgraded.stdout == f"store at revision {NEXT}\n"
    assert "ix_records_recorded_at" in {ix["name"] for ix in inspect(engine).get_indexes("records")}
    assert runner.invoke(cli.main, ["--db", store_url, "runs", "--json"]).exit_code == 0


def test_a_store_stamped_with_an_unknown_revision_is_refused(engine: Engine, store_url: str) -> None:
    EventStore(engine)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'f00dbabe'"))
    with pytest.raises(
        SchemaOutOfDate, match=r"revision 'f00dbabe', which this evalstore does not know.*upgrade evalstore"
    ):
        EventStore(engine)
    result = CliRunner().invoke(cli.main, ["--db", store_url, "runs"])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: the store is at schema revision 'f00dbabe'")
    # `db upgrade` cannot help either, and says why in one line rather than a traceback.
    result = CliRunner().invoke(cli.main, ["--db", store_url, "db", "upgrade"])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: cannot upgrade the store to head:") and "f00dbabe" in result.stderr
    assert "Traceback" not in result.output


def test_tables_without_a_migration_record_are_refused(engine: Engine) -> None:
    EventStore(engine)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE alembic_version"))
    with pytest.raises(SchemaOutOfDate, match="has evalstore tables but no migration record"):
        EventStore(engine)


def test_blob_dictionaries_revision_keeps_older_blobs_and_refuses_to_go_back_over_newer(engine: Engine) -> None:
    import zlib

    from evalstore.store import StoreError, sha256_hex

    store_engine.upgrade(engine, "0001")
    old = b"a transcript written before blob dictionaries existed\n" * 40
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO blobs (sha256, size, encoding, data) VALUES (:s, :n, 'zlib', :d)"),
            {"s": sha256_hex(old), "n": len(old), "d": zlib.compress(old)},
        )
    store_engine.upgrade(engine)
    store = EventStore(engine)
    assert store.get_blob(sha256_hex(old)) == old
    assert store.verify().ok

    # Without rows that need a dictionary, going back is fine (and forward again).
    store_engine.downgrade(engine, "0001")
    assert "dictionary" not in {c["name"] for c in inspect(engine).get_columns("blobs")}
    store_engine.upgrade(engine)

    template = ("The rendered grader prompt template, the same for every test of the suite. " * 12).encode()
    store = EventStore(engine)
    for i in range(3):
        data = template + f"question {i}".encode()
        store.put_blobs({sha256_hex(data): data})
    with pytest.raises(
        StoreError, match="cannot downgrade below revision 0002: 2 blobs are compressed against a dictionary"
    ):
        store_engine.downgrade(engine, "0001")
    assert store_engine.current_revision(engine) == store_engine.head_revision()
    assert "dictionary" in {c["name"] for c in inspect(engine).get_columns("blobs")}


# --- a damaged migration record is damage (issue 29 item 13) ----------------------------------------


def _damage_cases(dialect: str) -> list[tuple[str, str]]:
    cases = [
        ("DROP TABLE alembic_version", "this database has evalstore tables but no migration record"),
        ("INSERT INTO alembic_version VALUES ('0002')", "is damaged: it holds 2 revisions, evalstore writes one"),
        ("UPDATE alembic_version SET version_num = '0 03'", "is damaged: '0 03' is not a revision id"),
    ]
    if dialect == "sqlite":  # a value the typed PostgreSQL column cannot hold
        cases += [
            ("UPDATE alembic_version SET version_num = CAST(version_num AS BLOB)", "is damaged: the revision is stored as blob"),
            ("UPDATE alembic_version SET version_num = CAST(x'30ff3033' AS TEXT)", "is damaged: the revision is not valid UTF-8"),
        ]  # fmt: skip
    return cases


def test_a_damaged_migration_record_is_reported_as_damage(store_url: str) -> None:
    for tamper, problem in _damage_cases(make_engine(store_url).dialect.name):
        engine = make_engine(store_url)
        EventStore(engine)
        with engine.begin() as conn:
            conn.execute(text(tamper))
        runner = CliRunner()
        result = runner.invoke(cli.main, ["--db", store_url, "verify"])
        assert result.exit_code == 1, (tamper, result.output)
        assert result.stderr.startswith("FAILED: ") and problem in result.stderr, (tamper, result.stderr)
        assert len(result.stderr.splitlines()) == 1 and "--resume" not in result.stderr
        as_json = runner.invoke(cli.main, ["--db", store_url, "verify", "--json"])
        assert as_json.exit_code == 1 and problem in as_json.stdout
        other = runner.invoke(cli.main, ["--db", store_url, "runs"])  # refused, in one line, no unrelated hint
        assert other.exit_code == 2 and problem in other.stderr and "--resume" not in other.stderr, other.output
        with engine.begin() as conn:  # back as it was, for the next case
            conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
            conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"))
            conn.execute(text(f"INSERT INTO alembic_version VALUES ('{store_engine.head_revision()}')"))
        assert runner.invoke(cli.main, ["--db", store_url, "verify"]).exit_code == 0
        engine.dispose()


KILL_DURING_FIRST_UPGRADE = """
import os, sys
from sqlalchemy import event
from evalstore.store.engine import ensure_current, make_engine
engine = make_engine(sys.argv[1])
@event.listens_for(engine, "after_cursor_execute")
def _kill(conn, cursor, statement, *args):
    if "CREATE TABLE runs" in statement:
        os.kill(os.getpid(), 9)
ensure_current(engine)
"""


def test_a_first_upgrade_killed_midway_leaves_a_file_every_command_opens(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "store.db"
    done = subprocess.run([sys.executable, "-c", KILL_DURING_FIRST_UPGRADE, str(path)], timeout=60, check=False)
    assert done.returncode == -9 and path.exists()
    runner = CliRunner()
    for args in (["runs"], ["verify"]):
        result = runner.invoke(cli.main, ["--db", str(path), *args])
        assert result.exit_code == 0, (args, result.output)
    assert store_engine.current_revision(make_engine(str(path))) == store_engine.head_revision()


# --- 0004: projections keyed by a stream's number (issue 31) -----------------------------------------


def _projection_rows(engine: Engine) -> dict[str, list[tuple]]:
    with engine.connect() as conn:
        return {
            name: sorted(tuple(row) for row in conn.execute(text(f"SELECT * FROM {name}")))
            for name in ("streams", "results", "verdicts", "judge_cache", "conversions")
        }


def test_slim_projections_revision_carries_every_row_both_ways(engine: Engine) -> None:
    sys.path.insert(0, str(Path(__file__).parent / "store"))
    from sample_runs import populate

    store = EventStore(engine)
    populate(store)
    slim = _projection_rows(engine)
    assert len(slim["streams"]) == 3 and slim["results"] and slim["verdicts"] and slim["judge_cache"]

    store_engine.downgrade(engine, "0003")
    assert "streams" not in _tables(engine)
    with engine.connect() as conn:
        # Each row has its run's id and its event's id back, read from the log.
        for name in ("results", "verdicts", "judge_cache", "conversions"):
            run = "run_id" if name in ("results", "verdicts") else "NULL"
            rows = conn.execute(text(f"SELECT {run}, t.seq, t.event_id, e.stream_id, e.event_id FROM {name} t "
                                     "JOIN events e ON e.seq = t.seq")).all()  # fmt: skip
            assert rows and all(r[2] == r[4] and r[0] in (None, r[3]) for r in rows), name
    old = EventStore(engine, check_schema=False)
    assert old.query("runs")  # the runs projection is the same in both revisions

    store_engine.upgrade(engine)
    assert _projection_rows(engine) == slim
    store = EventStore(engine)
    assert store.verify().ok
    assert store.rebuild_projections() and _projection_rows(engine) == slim


# --- 0005: the log as records (issue 31) ---------------------------------------------------------------


def _events_0004(engine: Engine) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(text(f"SELECT {', '.join(EVENT_COLUMNS)} FROM events ORDER BY seq"))]


def _store_at_0004(engine: Engine, tmp_path: Path) -> list[tuple]:
    """``engine`` at revision 0004 holding a log as that revision wrote one: the sample runs (and two runs
    many results long, appended at once), their events rows written with their hash chain, every event
    with an id of its own (0004 gave an event without one a random id), their blobs and projections.
    The content comes from a store made at the head (only its projections, the same in both revisions,
    are copied as they are). Returns the events rows."""
    sys.path.insert(0, str(Path(__file__).parent / "store"))
    from log_rows import events_rows
    from sample_runs import append_many_results, populate

    from evalstore.store import records
    from evalstore.store.codec import GENESIS_HASH, event_hash
    from evalstore.store.envelope import new_event_id

    source = EventStore(make_engine(f"sqlite:///{tmp_path / 'source.db'}"))
    try:
        populate(source)
        append_many_results(source, "run-many")
        append_many_results(source, "run-many-2")
        events = events_rows(source.engine)
        with source.engine.connect() as conn:
            copied = {
                name: [dict(row) for row in conn.execute(text(f"SELECT * FROM {name}")).mappings()]
                for name in sorted(TABLES_0004 - {"events"})
            }
    finally:
        source.close()
    rows, prev = [], GENESIS_HASH
    for ev in events:
        own = records.split_derived(ev.event_id) is None
        fields = {
            "seq": ev.seq,
            "event_id": ev.event_id if own else new_event_id(),
            "stream_id": ev.stream_id,
            "stream_version": ev.stream_version,
            "type": ev.type,
            "schema_version": ev.schema_version,
            "payload": ev.payload_json,
            "recorded_at": ev.recorded_at,
        }
        digest = event_hash(prev, **fields)  # type: ignore[arg-type]
        rows.append((*fields.values(), prev, digest))
        prev = digest
    store_engine.upgrade(engine, "0004")
    with engine.begin() as conn:
        conn.execute(
            text(f"INSERT INTO events VALUES ({', '.join(':' + c for c in EVENT_COLUMNS)})"),
            [dict(zip(EVENT_COLUMNS, row)) for row in rows],
        )
        for name, table_rows in copied.items():
            if table_rows:
                columns = list(table_rows[0])
                flags = [c.name for c in metadata.tables[name].c if isinstance(c.type, Boolean)]
                table_rows = [{**row, **{f: bool(row[f]) for f in flags}} for row in table_rows]  # SQLite's 0/1
                conn.execute(
                    text(f"INSERT INTO {name} ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"),
                    table_rows,
                )
    assert _tables(engine) - {"alembic_version"} == TABLES_0004
    assert _triggers(engine) == TRIGGERS_0004[engine.dialect.name]
    return rows


def test_records_revision_keeps_every_event_and_hash_and_gives_them_back(engine: Engine, tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent / "store"))
    from log_rows import events_rows, records_rows

    old = _store_at_0004(engine, tmp_path)
    assert len({row[1] for row in old}) == len(old) > 80  # every id its own

    store_engine.upgrade(engine, "0005")
    assert store_engine.current_revision(engine) == "0005"
    assert _tables(engine) - {"alembic_version"} == STORE_TABLES
    assert _triggers(engine) == TRIGGERS[engine.dialect.name]
    # The same events, read from the records as the format says (tests/store/log_rows.py), each with the
    # hash it had: every checkpoint and attestation made before still holds.
    events = events_rows(engine)
    assert [(*(getattr(e, f) for f in ("seq", "event_id", "stream_id", "stream_version", "type",
                                       "schema_version", "payload_json", "recorded_at")), e.prev_hash, e.hash)
            for e in events] == old  # fmt: skip
    # Cut as an append cuts them: one record per append of a test's events (up to its test_scored), and
    # compressed against the dictionary the first records made.
    cut = [(r.seq, r.count) for r in records_rows(engine)]
    assert cut[:5] == [(1, 1), (2, 7), (9, 7), (16, 7), (23, 1)]
    assert len(cut) == 14 + 2 * 17 and sum(n for _, n in cut) == len(old)
    assert {r.dictionary for r in records_rows(engine)} == {1}
    store = EventStore(engine)
    report = store.verify()
    assert report.ok and report.events == len(old), report.problem
    # Found by their ids (kept in the body and in the event_ids projection) and by seq, through the store.
    assert {ev.event_id: ev.hash for ev in store.get_events(row[1] for row in old).values()} == {
        row[1]: row[9] for row in old
    }
    assert [(ev.seq, ev.hash) for ev in store.read_all()] == [(row[0], row[9]) for row in old]
    # And appending goes on from the same chain.
    sys.path.insert(0, str(Path(__file__).parent / "store"))
    from sample_runs import append_run

    append_run(store, "run-after")
    assert store.verify().ok
    store.close()


def test_records_revision_downgrades_to_the_same_events_rows(engine: Engine, tmp_path: Path) -> None:
    old = _store_at_0004(engine, tmp_path)
    store_engine.upgrade(engine, "0005")
    store_engine.downgrade(engine, "0004")
    assert store_engine.current_revision(engine) == "0004"
    assert _tables(engine) - {"alembic_version"} == TABLES_0004
    assert _triggers(engine) == TRIGGERS_0004[engine.dialect.name]
    assert _events_0004(engine) == old
    # And up again: the downgrade left nothing behind that the upgrade trips over.
    store_engine.upgrade(engine)
    assert EventStore(engine).verify().ok


def test_records_revision_round_trip_of_a_store_with_derived_ids(engine: Engine) -> None:
    # Events appended at the head without ids of their own have ids derived from where they are; going
    # down to 0004 writes them out, and coming back must leave a store that verifies (and reads them alike).
    sys.path.insert(0, str(Path(__file__).parent / "store"))
    from log_rows import events_rows
    from sample_runs import append_many_results, populate

    store = EventStore(engine)
    populate(store)
    append_many_results(store)
    before = [(e.seq, e.event_id, e.hash) for e in events_rows(engine)]
    store_engine.downgrade(engine, "0004")
    assert [(row[0], row[1], row[9]) for row in _events_0004(engine)] == before
    store_engine.upgrade(engine)
    assert [(e.seq, e.event_id, e.hash) for e in events_rows(engine)] == before
    report = EventStore(engine).verify()
    assert report.ok, report.problem
