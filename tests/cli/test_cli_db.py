"""``evalstore db upgrade|downgrade|current|history|rebuild``, ``verify``, ``runs`` and ``show``: output,
``--json``, exit codes, and one-line errors, in process (CliRunner) and through the installed script."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from evalstore import cli
from evalstore.store import EventStore, sha256_hex
from evalstore.store import engine as store_engine

# The store tests' sample runs, shared rather than copied (tests/ is not a package).
sys.path.insert(0, str(Path(__file__).parents[1] / "store"))
from log_rows import event_count, payload_at, rewrite_event
from sample_runs import drop_append_only_triggers, execute, populate, populated_sqlite, scalar


def evalstore(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli.main, ["--db", url, *args])


def ok(url: str, *args: str) -> Result:
    result = CliRunner().invoke(cli.main, ["--db", url, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def one_line_error(result: Result, exit_code: int, starts: str) -> None:
    assert result.exit_code == exit_code, result.output
    assert result.stderr.startswith(starts), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.output


@pytest.fixture
def filled(store: EventStore, store_url: str) -> str:
    populate(store)
    return store_url


def test_db_current_upgrade_history_downgrade(store_url: str) -> None:
    head = store_engine.head_revision()
    if store_url.startswith("sqlite:///"):  # a file that does not exist is not created by a read
        path = Path(store_url.removeprefix("sqlite:///"))
        one_line_error(evalstore(store_url, "db", "current"), 2, f"Error: no store at {path}")
        assert not path.exists()
        sqlite3.connect(path).close()  # an empty database: current none
    assert json.loads(ok(store_url, "db", "current", "--json").stdout) == {
        "current": None,
        "head": head,
        "up_to_date": False,
        "problem": None,
    }
    assert ok(store_url, "db", "current").stdout == f"current: none (empty store)\nhead:    {head}\n"

    assert ok(store_url, "db", "upgrade").stdout == f"store at revision {head}\n"
    assert json.loads(ok(store_url, "db", "current", "--json").stdout)["up_to_date"] is True
    assert ok(store_url, "db", "upgrade").stdout == f"store at revision {head}\n"  # idempotent

    history = json.loads(ok(store_url, "db", "history", "--json").stdout)
    assert history[-1]["revision"] == "0001" and history[-1]["down_revision"] is None
    assert history[0]["revision"] == head
    assert ok(store_url, "db", "history").stdout.splitlines()[-1].startswith("<base> -> 0001: The event log")

    assert ok(store_url, "db", "downgrade", "base").stdout == "store at revision base\n"
    assert json.loads(ok(store_url, "db", "current", "--json").stdout)["current"] is None


def test_db_current_and_upgrade_name_a_schema_they_cannot_use(sqlite_url: str) -> None:
    """Tables without a migration record were 'none (empty store)', and upgrade crashed creating them again;
    a revision from a newer evalstore was shown without a word."""
    ok(sqlite_url, "db", "upgrade")
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        conn.execute("DROP TABLE alembic_version")
    current = ok(sqlite_url, "db", "current").stdout
    assert current.splitlines()[0] == "current: none" and "no migration record" in current.splitlines()[2]
    one_line_error(
        evalstore(sqlite_url, "db", "upgrade"), 2, "Error: this database has evalstore tables but no migration"
    )
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES ('0099')")
    shown = json.loads(ok(sqlite_url, "db", "current", "--json").stdout)
    assert shown["current"] == "0099" and "a newer evalstore migrated it" in shown["problem"]


def test_db_downgrade_to_base_of_a_store_holding_events_needs_yes(filled: str) -> None:
    """On a team's shared store it is one command from deleting the whole log."""
    one_line_error(evalstore(filled, "db", "downgrade", "base"), 2, "Error: downgrading to base deletes the store's")
    assert json.loads(ok(filled, "db", "current", "--json").stdout)["up_to_date"] is True
    assert ok(filled, "db", "downgrade", "base", "--yes").stdout == "store at revision base\n"


def test_db_downgrade_over_blobs_it_could_not_read_is_refused_in_one_line(store: EventStore, store_url: str) -> None:
    template = b"one grader template, rendered for each test of a suite; " * 20
    for i in range(2):
        data = template + b"test %d" % i
        store.put_blobs({sha256_hex(data): data})
    one_line_error(
        evalstore(store_url, "db", "downgrade", "0001"), 2, "Error: cannot downgrade below revision 0002: 1 blobs"
    )
    assert store.verify().ok


def test_a_new_sqlite_store_uses_16k_pages(sqlite_url: str) -> None:
    store = EventStore.open(sqlite_url)
    try:
        assert scalar(store.engine, "PRAGMA page_size") == store_engine.SQLITE_PAGE_SIZE == 16384
        assert scalar(store.engine, "PRAGMA journal_mode") == "wal"
    finally:
        store.close()


def test_db_upgrade_to_an_unknown_revision_is_one_line(store_url: str) -> None:
    one_line_error(
        evalstore(store_url, "db", "upgrade", "nosuchrev"), 2, "Error: cannot upgrade the store to nosuchrev:"
    )


def test_verify_ok_and_json(filled: str, store: EventStore) -> None:
    n_events = event_count(store.engine)
    n_blobs = scalar(store.engine, "SELECT count(*) FROM blobs")
    assert ok(filled, "verify").stdout == f"ok: {n_events} events, {n_blobs} blobs verified\n"
    assert json.loads(ok(filled, "verify", "--json").stdout) == {
        "ok": True,
        "events": n_events,
        "blobs": n_blobs,
        "problem": None,
    }


def test_rebuild_repairs_projections_that_verify_flags(filled: str, store: EventStore) -> None:
    execute(
        store.engine,
        "UPDATE results SET score = 0.99 WHERE run = (SELECT stream FROM streams WHERE stream_id = 'run-b') "
        "AND test_id = 'paris'",
    )
    failed = evalstore(filled, "verify")
    assert failed.exit_code == 1
    assert failed.stderr == (
        "FAILED: projection results: row ('run-b', 'paris', 'default', 1) differs from the log; "
        "run `evalstore db rebuild`, unless the log lost events (`evalstore verify --checkpoint FILE` tells; "
        "a rebuild hides it)\n"
    )
    n_events = event_count(store.engine)
    assert ok(filled, "db", "rebuild").stdout == f"rebuilt projections from {n_events} events\n"
    assert ok(filled, "verify").stdout.startswith("ok: ")


def test_runs_lists_every_run(filled: str) -> None:
    runs = json.loads(ok(filled, "runs", "--json").stdout)
    assert [(r["run_id"], r["kind"], r["parent_run_id"], r["status"], r["tests"], r["passed"]) for r in runs] == [
        ("run-a", "recorded", None, "completed", 3, 0),
        ("run-b", "imported", None, "completed", 2, 0),
        ("run-a-replay", "replay", "run-a", "completed", 3, 0),
    ]
    assert runs[0]["mean_score"] == pytest.approx((0.75 + 0.25 + 0.75) / 3)
    table = ok(filled, "runs").stdout
    for run_id in ("run-a", "run-b", "run-a-replay"):
        assert run_id in table


def test_runs_on_an_empty_store(store_url: str) -> None:
    ok(store_url, "db", "upgrade")
    assert ok(store_url, "runs", "--json").stdout == "[]\n"
    assert ok(store_url, "runs").stdout.startswith("no runs yet")


def test_show_a_run_by_id_prefix_and_last(filled: str) -> None:
    shown = json.loads(ok(filled, "show", "run-b", "--json").stdout)
    assert shown["run"]["run_id"] == "run-b"
    assert [(r["test_id"], r["score"], r["graders"]) for r in shown["results"]] == [
        ("madrid", 0.25, {"judge": 0.5, "rubric": 0.0}),
        ("paris", 0.75, {"judge": 0.5, "rubric": 1.0}),
    ]
    # An exact id wins over being a prefix of another; a unique prefix resolves.
    assert json.loads(ok(filled, "show", "run-a", "--json").stdout)["run"]["run_id"] == "run-a"
    assert json.loads(ok(filled, "show", "run-a-r", "--json").stdout)["run"]["parent_run_id"] == "run-a"
    assert json.loads(ok(filled, "show", "last", "--json").stdout)["run"]["run_id"] == "run-a-replay"
    text = ok(filled, "show", "run-a").stdout
    assert text.startswith("run run-a  kind=recorded  status=completed  suite=capitals")
    assert "rubric=1.000" in text


def test_show_errors_are_one_line(filled: str, store_url: str) -> None:
    one_line_error(evalstore(filled, "show", "zzz"), 2, "Error: no run 'zzz' in this store")
    one_line_error(evalstore(filled, "show", "run"), 2, "Error: run id 'run' is ambiguous")
    one_line_error(evalstore(filled, "show", ""), 2, "Error: the run id is empty")


def test_usage_errors_exit_2(sqlite_url: str) -> None:
    result = evalstore(sqlite_url, "verify", "--no-such-flag")
    assert result.exit_code == 2
    assert re.search(r"Error: No such option:? '?--no-such-flag", result.stderr), result.stderr


def test_an_unreachable_store_is_one_line() -> None:
    url = "postgresql+psycopg://nobody:secret@127.0.0.1:1/none?connect_timeout=5"
    for args in (["runs"], ["verify"], ["db", "current"], ["db", "upgrade"]):
        result = evalstore(url, *args)
        one_line_error(result, 2, "Error: cannot open the store postgresql+psycopg://nobody:***@127.0.0.1:1/none")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "postgresql+psycopg2://u@127.0.0.1/x",
            "Error: cannot open the store postgresql+psycopg2://u@127.0.0.1/x: No module named 'psycopg2'",
        ),
        (
            "postgresql+psycopg3://u@127.0.0.1/x",
            "Error: cannot open the store postgresql+psycopg3://u@127.0.0.1/x: Can't load plugin",
        ),
        ("postgresql://u@127.0.0.1:abc/x", "Error: the database URL postgresql://... cannot be read: invalid literal"),
        ("postgresql://u:p@ss@127.0.0.1/x", "Error: the database URL's user or password holds '@': write it as %40"),
        ("", "Error: --db is empty"),
    ],
)
def test_a_url_that_cannot_name_a_store_is_one_line(url: str, expected: str) -> None:
    """Not 'internal error' (exit 3); and nothing of a password after an unencoded @ is shown."""
    result = evalstore(url, "runs")
    one_line_error(result, 2, expected)
    assert "ss@127" not in result.stderr


# --- the installed console script, in a real subprocess -----------------------------------------


def _script() -> str:
    beside = Path(sys.executable).parent / "evalstore"
    found = str(beside) if beside.exists() else shutil.which("evalstore")
    assert found, "the evalstore console script is not installed (pip install -e .)"
    return found


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "EVALSTORE_DB"} | env
    return subprocess.run([_script(), *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=60)


def test_installed_script_verifies_and_names_the_tampered_record(
    filled: str, store: EventStore, tmp_path: Path
) -> None:
    drop_append_only_triggers(store.engine)
    rewrite_event(store.engine, 9, payload=payload_at(store.engine, 9).replace("berlin", "bonn"))
    tampered = _run(["--db", filled, "verify"], tmp_path)
    assert tampered.returncode == 1
    assert tampered.stderr == (
        "FAILED: record seq 9 (events seq 9-15): content does not match its hash (altered after it was written)\n"
    )
    as_json = _run(["--db", filled, "verify", "--json"], tmp_path)
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["problem"].startswith("record seq 9 (events seq 9-15):")


def _lists_the_sample_runs(listed: subprocess.CompletedProcess[str]) -> None:
    assert listed.returncode == 0, listed.stderr
    assert [r["run_id"] for r in json.loads(listed.stdout)] == ["run-a", "run-b", "run-a-replay"]


def test_installed_script_takes_the_store_from_the_environment(tmp_path: Path) -> None:
    url = populated_sqlite(tmp_path / "env.db")
    listed = _run(["runs", "--json"], tmp_path, EVALSTORE_DB=url)
    _lists_the_sample_runs(listed)
    missing = _run(["show", "nope"], tmp_path, EVALSTORE_DB=url)
    assert missing.returncode == 2
    assert missing.stderr == "Error: no run 'nope' in this store; `evalstore runs` lists them\n"
    version = _run(["--version"], tmp_path)
    assert version.returncode == 0 and "0.1.0" in version.stdout


def test_the_store_can_be_named_after_the_command(tmp_path: Path) -> None:
    """``evalstore runs --db X`` as ``evalstore --db X runs``: people type it after the command as often as
    before; it overrides EVALSTORE_DB, reaches a group's commands, and given twice apart is refused."""
    url = populated_sqlite(tmp_path / "after.db")
    other = f"sqlite:///{tmp_path / 'other.db'}"
    _lists_the_sample_runs(_run(["runs", "--json", "--db", url], tmp_path, EVALSTORE_DB=other))
    assert not (tmp_path / "other.db").exists()
    current = _run(["db", "current", "--db", url], tmp_path)
    assert current.returncode == 0, current.stderr
    same = _run(["--db", url, "runs", "--db", url, "--json"], tmp_path)
    assert same.returncode == 0, same.stderr
    twice = _run(["--db", other, "runs", "--db", url], tmp_path)
    assert twice.returncode == 2
    assert twice.stderr == (
        f"Error: --db is given twice, as {other} and as {url}: give it once (see 'evalstore runs --help')\n"
    )
    assert not (tmp_path / "other.db").exists()


def test_verify_fails_a_store_whose_file_is_cut_short_and_other_commands_say_so(tmp_path: Path) -> None:
    """A database file SQLite finds damaged is damage (verify: exit 1, naming the file), not a store given
    wrongly (exit 2), which a file that is not a database at all stays."""
    path = tmp_path / "store.db"
    url = populated_sqlite(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    result = evalstore(url, "verify")
    assert result.exit_code == 1, result.output
    assert result.stderr == f"FAILED: the store's database file {path} is damaged: database disk image is malformed\n"
    assert json.loads(evalstore(url, "verify", "--json").stdout)["ok"] is False
    one_line_error(evalstore(url, "runs"), 2, f"Error: the store's database file {path} is damaged")

    (tmp_path / "text.db").write_text("not a database, " * 1000)
    result = evalstore(f"sqlite:///{tmp_path / 'text.db'}", "verify")
    assert result.exit_code == 2 and "file is not a database" in result.stderr
