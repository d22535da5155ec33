"""A newcomer's first hour (issue 13): the store is found like git finds .git, read-only commands never
create one, exit codes mean one thing, tables keep ids whole, and replays say what they changed."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from e2e_helpers import BASELINE, EVALSTORE, TESTS, Recorded, cli, ok_json, one_line_error

READ_ONLY = [
    ["runs"],
    ["show", "last"],
    ["compare", "last", "last"],
    ["audit", "last", "some-test"],
    ["export", "last"],
    ["verify"],
    ["db", "current"],
    ["labels", "list", "last"],
    ["labels", "export"],
    ["agreement", "last"],
]


def run_here(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The console script with no --db (the store is found from ``cwd``)."""
    environ = {k: v for k, v in os.environ.items() if k != "EVALSTORE_DB"}
    return subprocess.run(
        [str(EVALSTORE), *args], cwd=cwd, env={**environ, **(env or {})}, capture_output=True, text=True, timeout=90
    )


def files_under(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


# -- finding the store --------------------------------------------------------------------------


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a))
def test_a_read_only_command_without_a_store_creates_nothing_and_says_where_it_looked(
    tmp_path: Path, args: list[str]
) -> None:
    (tmp_path / "evals").mkdir()
    result = run_here(tmp_path / "evals", *args)
    line = one_line_error(result)
    assert f"looked for .evalstore/evalstore.db in {tmp_path / 'evals'} and every parent folder" in line
    assert files_under(tmp_path) == {Path("evals")}


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a))
def test_an_explicit_missing_sqlite_file_is_refused_not_created(tmp_path: Path, args: list[str]) -> None:
    result = run_here(tmp_path, "--db", "sqlite:///missing/dir/x.db", *args)
    assert f"no store at {tmp_path / 'missing/dir/x.db'}" in one_line_error(result)
    assert not (tmp_path / "missing").exists()


def test_commands_in_a_subfolder_use_the_store_of_a_parent_folder(tmp_path: Path) -> None:
    imported = ok_json(run_here(tmp_path, "import", str(BASELINE), "--json"))
    store = tmp_path / ".evalstore" / "evalstore.db"
    assert store.is_file()
    sub = tmp_path / "evals" / "deeper"
    sub.mkdir(parents=True)
    listed = run_here(sub, "runs", "--json")
    assert [r["run_id"] for r in ok_json(listed)] == [imported["run_id"]]
    assert listed.stderr.strip() == f"using the store {store}"
    # A command that writes also finds it (no second store appears under the subfolder).
    again = run_here(sub, "import", str(BASELINE), "--json")
    assert ok_json(again)["already_imported"] is True
    assert not (sub / ".evalstore").exists() and not (tmp_path / "evals" / ".evalstore").exists()
    # In the store's own folder nothing is said.
    assert run_here(tmp_path, "runs", "--json").stderr == ""


def test_the_search_for_a_store_does_not_climb_into_a_ceiling_folder(tmp_path: Path) -> None:
    ok_json(run_here(tmp_path, "import", str(BASELINE), "--json"))
    sub = tmp_path / "project" / "evals"
    sub.mkdir(parents=True)
    ceiling = {"EVALSTORE_CEILING_DIRECTORIES": f"/nonexistent{os.pathsep}{tmp_path / 'project'}"}
    refused = run_here(sub, "runs", "--json", env=ceiling)
    assert refused.returncode == 2 and "no store found" in one_line_error(refused)
    # A ceiling stops only searches started below it (as git's): from the ceiling folder itself, or above
    # it, the store is found.
    assert run_here(tmp_path / "project", "runs", "--json", env=ceiling).returncode == 0
    assert run_here(tmp_path, "runs", "--json", env=ceiling).returncode == 0
    # Without the ceiling the parent's store is found again.
    assert run_here(sub, "runs", "--json").returncode == 0


def test_a_command_that_writes_creates_the_store_in_the_current_folder(tmp_path: Path) -> None:
    result = run_here(tmp_path, "import", str(BASELINE))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / ".evalstore" / "evalstore.db").is_file()
    assert "imported 5 results" in result.stdout


# -- the --db URL -----------------------------------------------------------------------------------


def _store_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize(
    "spelling",
    ["sqlite:///{path}?mode=ro", "sqlite:///file:{path}?mode=ro&uri=true", "sqlite:///{path}?mode=ro&uri=true"],
)
def test_mode_ro_reads_the_store_and_refuses_to_write_it(tmp_path: Path, spelling: str) -> None:
    """SQLAlchemy dropped ``mode=ro`` with a two-line warning, and ``replay`` wrote a new run anyway; with
    ``uri=true`` it opened a new file ``x.db?mode=ro`` while ``show`` read ``x.db``."""
    store = tmp_path / "store"
    store.mkdir()
    plain = f"sqlite:///{store / 'x.db'}"
    run = ok_json(run_here(tmp_path, "--db", plain, "import", str(BASELINE), "--json"))["run_id"]
    read_only = spelling.format(path=store / "x.db")
    for args in (["runs", "--json"], ["show", "last", "--json"], ["export", "last", "--format", "json"]):
        assert run_here(tmp_path, "--db", read_only, *args).stdout == run_here(tmp_path, "--db", plain, *args).stdout
    before = _store_files(store)
    other = tmp_path / "other.jsonl"  # another run to import
    other.write_text(BASELINE.read_text().replace('"test_id":"', '"test_id":"other-'))
    writes = (
        ["replay", run, "--graders", "python_syntax"],
        ["import", str(other)],
        ["label", run, "code-quality-multi-eval", "--pass"],
    )
    for args in writes:
        line = one_line_error(run_here(tmp_path, "--db", read_only, *args))
        assert "attempt to write a readonly database" in line and "opened with mode=ro" in line, line
    after = _store_files(store)  # SQLite may leave a read-only connection's empty WAL and its index
    assert after["x.db"] == before["x.db"] and not after.get("x.db-wal")
    assert set(after) <= {"x.db", "x.db-wal", "x.db-shm"}
    assert files_under(tmp_path) == {Path("store"), Path("other.jsonl"), *(Path("store") / name for name in after)}
    for args in writes:  # refused for being read-only, not for anything else
        assert run_here(tmp_path, "--db", plain, *args).returncode in (0, 1)


@pytest.mark.parametrize("args", [["runs"], ["import", str(BASELINE)]], ids=["read", "write"])
@pytest.mark.parametrize(
    ("query", "named"),
    [("timeout=3", "timeout=3"), ("mode=rw", "mode=rw"), ("mode=ro&mode=ro", "'mode' twice"), ("cache", "cache=")],
)
def test_a_sqlite_url_argument_evalstore_does_not_take_is_one_line(
    tmp_path: Path, args: list[str], query: str, named: str
) -> None:
    result = run_here(tmp_path, "--db", f"sqlite:///x.db?{query}", *args)
    line = one_line_error(result)
    assert named in line and f"sqlite:///x.db?{query}" in line, line
    assert files_under(tmp_path) == set()


def test_mode_ro_on_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    line = one_line_error(run_here(tmp_path, "--db", "sqlite:///new/x.db?mode=ro", "import", str(BASELINE)))
    assert f"no store at {tmp_path / 'new' / 'x.db'}" in line
    assert files_under(tmp_path) == set()


def test_a_tilde_in_db_is_the_home_folder_for_every_command(tmp_path: Path) -> None:
    """The file was looked for under the home folder and opened by SQLAlchemy as ./~/x.db, so an import
    into ``--db '~/x.db'`` failed with "unable to open database file"."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {"HOME": str(home)}
    imported = run_here(work, "--db", "~/stores/x.db", "import", str(BASELINE), "--json", env=env)
    assert imported.returncode == 0, imported.stderr
    assert (home / "stores" / "x.db").is_file()
    listed = json.loads(run_here(work, "--db", "sqlite:///~/stores/x.db", "runs", "--json", env=env).stdout)
    assert [r["run_id"] for r in listed] == [json.loads(imported.stdout)["run_id"]]
    assert files_under(work) == set()


@pytest.mark.parametrize("url", ["sqlite://", ":memory:", "sqlite:///:memory:", "sqlite:///", "sqlite+pysqlite://"])
def test_an_in_memory_store_is_refused_before_anything_runs(tmp_path: Path, url: str) -> None:
    """An import into one failed after its first write with a traceback of 125 lines; ``runs`` said "no
    runs yet"; ``run`` asked the agent every test, then failed."""
    for how in (["--db", url, "import", str(BASELINE)], ["runs", "--db", url]):
        line = one_line_error(run_here(tmp_path, *how))
        assert "in-memory SQLite database" in line and "give a file" in line, line
    assert "in-memory" in one_line_error(run_here(tmp_path, "runs", env={"EVALSTORE_DB": url}))
    assert files_under(tmp_path) == set()


@pytest.mark.parametrize("args", [["import", str(BASELINE)], ["runs"], ["show", "last"]], ids=lambda a: a[0])
def test_a_folder_given_as_the_store_is_named_as_one(tmp_path: Path, args: list[str]) -> None:
    """An import said "unable to open database file", a read "no store at" the folder."""
    (tmp_path / "stores").mkdir()
    line = one_line_error(run_here(tmp_path, "--db", "stores", *args))
    assert f"{tmp_path / 'stores'} is a folder, not a store" in line and "stores/evalstore.db makes one" in line
    assert files_under(tmp_path) == {Path("stores")}


# -- exit codes ------------------------------------------------------------------------------------


def test_replay_exits_1_like_run_when_a_regraded_test_fails(recorded: Recorded, recorded_db: str) -> None:
    failing = [r["test_id"] for r in recorded.output["results"] if not r["passed"]]
    assert failing, "the recorded suite should have a failing test"
    result = cli(recorded_db, "replay", recorded.run_id, "--json")
    out = ok_json(result, 1)
    assert sorted(out["failed"]) == sorted(failing)
    assert "below the threshold" in result.stderr
    # A pass mark every test reaches: exit 0.
    assert ok_json(cli(recorded_db, "replay", recorded.run_id, "--threshold", "0", "--json"))["failed"] == []


def test_replay_fails_on_a_regression_like_compare(recorded: Recorded, recorded_db: str, tmp_path: Path) -> None:
    passing = [r["test_id"] for r in recorded.output["results"] if r["passed"]]
    assert passing, "the recorded suite should have a passing test"
    # A threshold nobody reaches turns every pass into a fail: a pass->fail flip.
    result = cli(recorded_db, "replay", recorded.run_id, "--threshold", "1", "--fail-on-regression", "flip", "--json")
    out = ok_json(result, 1)
    assert "pass->fail" in out["regression"] and "regression:" in result.stderr
    # The same replay can write the HTML report, with every test's verdicts in both runs.
    report = tmp_path / "replay.html"
    again = cli(recorded_db, "replay", recorded.run_id, "--threshold", "1", "--html", str(report))
    assert again.exit_code == 1, again.stderr
    page = report.read_text(encoding="utf-8")
    assert f"Every test, side by side ({len(TESTS)})" in page and all(f"<code>{t}" in page for t in TESTS)
    # Every test passing and none flipping to fail: both gates are clear.
    unchanged = cli(recorded_db, "replay", recorded.run_id, "--threshold", "0", "--fail-on-regression", "any")
    assert unchanged.exit_code == 0, unchanged.stderr


def test_a_closed_stdout_does_not_change_the_exit_code(recorded: Recorded, recorded_db: str) -> None:
    for gate_trips, code in ((False, 0), (True, 1)):
        args = ["compare", recorded.run_id, recorded.run_id, "--fail-on-regression", "any"]
        if gate_trips:
            replayed = ok_json(cli(recorded_db, "replay", recorded.run_id, "--threshold", "1", "--json"), 1)
            args = ["compare", recorded.run_id, replayed["run_id"], "--fail-on-regression", "flip"]
        proc = subprocess.Popen(
            [str(EVALSTORE), "--db", recorded_db, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before the first line (`| head -0`)
        stderr = proc.stderr.read().decode()
        assert proc.wait(timeout=90) == code, stderr
        assert "Error" not in stderr and "Traceback" not in stderr
        assert ("regression:" in stderr) is gate_trips


# -- tables and reports ------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [80, 120])
def test_run_ids_never_wrap_at_80_or_120_columns(recorded: Recorded, recorded_db: str, width: int) -> None:
    replayed = ok_json(cli(recorded_db, "replay", recorded.run_id, "--graders", "workbook", "--json"), 0, 1)
    result = cli(recorded_db, "runs", env={"COLUMNS": str(width)})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert all(len(line.rstrip()) <= width for line in lines), result.stdout
    for run_id in (recorded.run_id, replayed["run_id"]):
        assert any(line.startswith(run_id + " ") for line in lines), result.stdout
    (replay_line,) = [line for line in lines if line.startswith(replayed["run_id"])]
    assert recorded.run_id in replay_line  # the parent id is whole on the same line
    wide = cli(recorded_db, "runs", env={"COLUMNS": "200"}).stdout
    assert "graders workbook" in wide and "left out" not in wide


def test_runs_and_show_say_what_a_replay_changed(recorded: Recorded, recorded_db: str) -> None:
    replayed = ok_json(cli(recorded_db, "replay", recorded.run_id, "--graders", "workbook", "--json"), 0, 1)
    by_id = {r["run_id"]: r for r in ok_json(cli(recorded_db, "runs", "--json"))}
    assert by_id[replayed["run_id"]]["changes"] == ["graders workbook"]
    assert by_id[recorded.run_id]["changes"] == []
    shown = cli(recorded_db, "show", replayed["run_id"])
    assert "changes: graders workbook" in shown.stdout
    # --kind, --suite, --limit
    assert [r["run_id"] for r in ok_json(cli(recorded_db, "runs", "--kind", "replay", "--json"))] == [
        replayed["run_id"]
    ]
    assert [r["run_id"] for r in ok_json(cli(recorded_db, "runs", "--limit", "1", "--json"))] == [replayed["run_id"]]
    suite = by_id[recorded.run_id]["suite"]
    assert len(ok_json(cli(recorded_db, "runs", "--suite", suite, "--json"))) == 2
    assert ok_json(cli(recorded_db, "runs", "--suite", "no-such-suite", "--json")) == []
    assert cli(recorded_db, "runs", "--suite", "no-such-suite").stdout.strip() == "no runs match"


def test_audit_of_a_missing_test_lists_the_tests_that_exist(recorded: Recorded, recorded_db: str) -> None:
    line = one_line_error(cli(recorded_db, "audit", recorded.run_id, "no-such-test"))
    assert f"its tests: {', '.join(sorted(TESTS))}" in line


def test_import_speaks_in_plurals_and_names_the_command_that_works(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    lone = tmp_path / "one.jsonl"
    lone.write_text(BASELINE.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    first = cli(db, "import", str(lone))
    assert first.exit_code == 0 and "imported 1 result (" in first.stdout
    run_id = ok_json(cli(db, "runs", "--json"))[0]["run_id"]
    # A lone copy of the rows, away from its eval file: the hint names the command that takes one.
    assert (
        f"no eval file found for these results; to regrade them later, name it: evalstore replay {run_id} --eval FILE"
        in first.stderr
    )
    again = cli(db, "import", str(lone))
    assert "(1 result)" in again.stdout


def test_an_import_started_when_its_agentv_run_did_and_says_when_it_was_imported(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    before = datetime.now(UTC)
    run_id = ok_json(cli(db, "import", str(BASELINE), "--eval", str(BASELINE.parent / "dataset.eval.yaml"), "--json"))[
        "run_id"
    ]
    (listed,) = ok_json(cli(db, "runs", "--json"))
    # The earliest of the rows' own `timestamp`s, not the moment of the import.
    assert listed["started_at"] == "2026-02-20T21:40:12.230000+00:00"
    assert before <= datetime.fromisoformat(listed["imported_at"]) <= datetime.now(UTC)
    shown = ok_json(cli(db, "show", run_id, "--json"))["run"]
    assert (shown["started_at"], shown["imported_at"]) == (listed["started_at"], listed["imported_at"])
    table = cli(db, "runs", env={"COLUMNS": "200"}).stdout
    assert "2026-02-20 21:40" in table and "imported" in table and listed["imported_at"][:10] in table
    assert "started=2026-02-20 21:40 UTC  imported=" in cli(db, "show", run_id).stdout

    # A replay of the import keeps its suite label (AgentV's `dataset`), not the eval file's name (`rubric`).
    # (Its code grader only: the LLM graders have no judge here.)
    replayed = ok_json(cli(db, "replay", run_id, "--graders", "python_syntax", "--json"), 0, 1)["run_id"]
    suites = {r["run_id"]: r["suite"] for r in ok_json(cli(db, "runs", "--json"))}
    assert suites == {run_id: "dataset", replayed: "dataset"}
    replay = next(r for r in ok_json(cli(db, "runs", "--json")) if r["run_id"] == replayed)
    assert replay["imported_at"] is None and "imported" not in cli(db, "runs", "--kind", "replay").stdout


def test_an_imports_start_is_the_earliest_start_time_or_timestamp_in_utc(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in BASELINE.read_text(encoding="utf-8").splitlines()[:3]]
    rows[0]["timestamp"] = "2026-03-01T09:30:00"  # no zone: UTC
    rows[1]["timestamp"], rows[1]["start_time"] = "2026-03-01T11:00:00+02:00", "2026-03-01T10:59:30.5+02:00"
    rows[2]["timestamp"], rows[2]["start_time"] = "not a time", 1772354400  # ignored, as AgentV's types say
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'x.db'}"
    ok_json(cli(db, "import", str(results), "--json"))
    (listed,) = ok_json(cli(db, "runs", "--json"))
    assert listed["started_at"] == "2026-03-01T08:59:30.500000+00:00"
