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
from sqlalchemy import Column, Engine, MetaData, String, inspect, text

from evalstore import cli
from evalstore.store import EventStore, SchemaOutOfDate, make_engine
from evalstore.store import engine as store_engine
from evalstore.store.schema import metadata

STORE_TABLES = {"events", "blobs", "runs", "streams", "results", "verdicts", "judge_cache", "conversions"}
TRIGGERS = {
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
    from evalstore.store.schema import SCHEMA_REVISION

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
    (target / "versions" / f"{NEXT}_index_event_type.py").write_text(
        '"""Index events by type."""\n'
        "from alembic import op\n\n"
        f'revision = "{NEXT}"\ndown_revision = "{store_engine.head_revision()}"\n'
        "branch_labels = None\ndepends_on = None\n\n\n"
        "def upgrade():\n"
        '    op.create_index("ix_events_type", "events", ["type"])\n\n\n'
        "def downgrade():\n"
        '    op.drop_index("ix_events_type", table_name="events")\n'
    )
    return target


def test_a_store_behind_the_code_is_refused_until_upgraded(
    engine: Engine, store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = store_engine.head_revision()
    EventStore(engine)  # at the head of this checkout
    newer = _newer_migrations(tmp_path)
    monkeypatch.setattr(store_engine, "migrations_dir", lambda: newer)
    monkeypatch.setattr(store_engine, "SCHEMA_REVISION", NEXT)  # as the newer evalstore's tables would say

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
    assert "ix_events_type" in {ix["name"] for ix in inspect(engine).get_indexes("events")}
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
