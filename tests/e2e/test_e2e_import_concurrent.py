"""Concurrent imports of the same file into one PostgreSQL store: one run, the data right, and nothing on
stderr but what the commands mean to say (no ``error ignored terminating <psycopg.Pipeline ...>`` lines
when one import's batch loses the race to another's).

Real processes (the installed console script) against the real PostgreSQL server.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from e2e_helpers import BASELINE, EVALSTORE, cli, ok_json

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
