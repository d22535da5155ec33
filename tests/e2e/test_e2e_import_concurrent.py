"""Concurrent imports of the same file into one store: one run, the data right, and nothing on stderr but
what the commands mean to say (no ``error ignored terminating <psycopg.Pipeline ...>`` lines when one
import's batch loses the race to another's on PostgreSQL; no "database is locked" when imports create a
new SQLite store together); an import that does wait too long for another command's lock says how to
finish it.

Real processes (the installed console script) against the real PostgreSQL server and SQLite files.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from e2e_helpers import BASELINE, EVALSTORE, cli, ok_json, one_line_error

from evalstore.store import EventStore

PROCESSES = 4
ROUNDS = 4


def test_concurrent_imports_of_the_same_file_agree_and_print_no_driver_noise(postgres_url: str, tmp_path: Path) -> None:
    assert cli(postgres_url, "db", "upgrade").exit_code == 0
    source = BASELINE.read_text(encoding="utf-8")
    run_ids = set()
    for round_ in range(ROUNDS):
        # A new file each round (a trailing blank line changes its digest, not its results): a new race.
        path = tmp_path / f"results-{round_}.jsonl"
        path.write_text(source + "\n" * (round_ + 1), encoding="utf-8")
        procs = [
            subprocess.Popen(
                [str(EVALSTORE), "--db", postgres_url, "import", str(path), "--json"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(PROCESSES)
        ]
        outputs = [proc.communicate(timeout=120) for proc in procs]
        for proc, (_out, err) in zip(procs, outputs, strict=True):
            assert proc.returncode == 0, err
            assert "error ignored" not in err and "Pipeline" not in err, err
        ids = {json.loads(out)["run_id"] for out, _ in outputs}
        assert len(ids) == 1  # every process names the one run the file became
        run_ids |= ids
    assert {r["run_id"] for r in ok_json(cli(postgres_url, "runs", "--json"))} == run_ids
    assert ok_json(cli(postgres_url, "verify", "--json"))["ok"] is True


def test_verify_while_an_import_writes_sees_one_consistent_snapshot(postgres_url: str, tmp_path: Path) -> None:
    """verify reads the log and then the projections: on PostgreSQL each statement saw newer rows than
    the last (read committed), so an import in progress looked like a damaged projection."""
    assert cli(postgres_url, "db", "upgrade").exit_code == 0
    rows = [json.loads(line) for line in BASELINE.read_text(encoding="utf-8").splitlines() if line.strip()]
    path = tmp_path / "many.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for i in range(3000):
            row = dict(rows[i % len(rows)], test_id=f"case-{i:05d}")
            fh.write(json.dumps(row) + "\n")
    importing = subprocess.Popen(
        [str(EVALSTORE), "--db", postgres_url, "import", str(path), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    store = EventStore.open(postgres_url)
    reports = []
    try:
        while importing.poll() is None:
            reports.append(store.verify())
    finally:
        store.close()
        _out, err = importing.communicate(timeout=300)
    assert importing.returncode == 0, err
    assert len(reports) >= 2  # some ran while the import wrote
    assert [r.problem for r in reports if not r.ok] == []


def test_the_first_writers_of_an_empty_postgresql_store_create_it_once(postgres_url: str, tmp_path: Path) -> None:
    """No `db upgrade` first: each process finds no tables and creates the store. They take turns (an
    advisory lock); the ones that waited find it made. Before, one of two crashed on the tables the other
    was creating (pg_type_typname_nsp_index), or found tables without a migration record."""
    procs = [
        subprocess.Popen(
            [str(EVALSTORE), "--db", postgres_url, *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for command in (["import", str(BASELINE), "--json"], ["db", "upgrade"], ["import", str(BASELINE), "--json"])
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], [err for _, err in outputs]
    assert ok_json(cli(postgres_url, "verify", "--json"))["ok"] is True


def test_imports_racing_to_create_a_new_sqlite_store_all_succeed(tmp_path: Path) -> None:
    """What a new user did: several imports at once, no store yet. Before, one creator's migration read the
    empty file, then failed with "database is locked" when another committed the tables first."""
    for round_ in range(ROUNDS):
        db = f"sqlite:///{tmp_path / f'store-{round_}.db'}"
        procs = [
            subprocess.Popen(
                [str(EVALSTORE), "--db", db, "import", str(BASELINE), "--json"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(PROCESSES)
        ]
        outputs = [proc.communicate(timeout=120) for proc in procs]
        assert [proc.returncode for proc in procs] == [0] * PROCESSES, [err for _, err in outputs]
        assert len({json.loads(out)["run_id"] for out, _ in outputs}) == 1
        assert ok_json(cli(db, "verify", "--json"))["ok"] is True


def test_an_import_locked_out_by_another_command_says_to_import_again(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another command holding the write lock past the busy timeout: the import's error says so, and says
    what finishes it (importing the same source again), not `evalstore replay --resume`."""
    import evalstore.store.engine as engine_module

    assert cli(sqlite_url, "db", "upgrade").exit_code == 0
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 200)
    holder = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer, for longer than the import waits
        line = one_line_error(cli(sqlite_url, "import", str(BASELINE)))
    finally:
        holder.close()
    assert line == (
        "Error: database error: database is locked (another evalstore command is writing this store; nothing "
        "uncommitted was recorded; when that command has finished, import the same source again: what was "
        "written stays, and the import completes it)"
    )
    again = ok_json(cli(sqlite_url, "import", str(BASELINE), "--json"))
    assert again["tests"] == 5 and ok_json(cli(sqlite_url, "verify", "--json"))["ok"] is True
