"""A folder of Inspect logs is imported in two passes: every log read and built before anything is written
(a log inspect_ai cannot read, anywhere in the folder, writes nothing and makes no store), then each written,
only one log's built samples kept on disk through the first pass and the others built again, into the runs
their own imports make. A ``.json`` log is held to ``EVALSTORE_MAX_FILE_BYTES``, read as for ``.eval``. And
``audit`` reaches an imported sample's stored record: its digest checked, the record printed on request."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fixture_paths import FIXTURES_DIR

from evalstore import cli
from evalstore.replay.inspect import importing
from evalstore.replay.inspect.importing import import_log, import_logs
from evalstore.store import EventStore, make_engine

pytest.importorskip("inspect_ai.log")

LOGS = FIXTURES_DIR / "inspect" / "logs"
EVALS = ("arithmetic.eval", "capitals.eval", "choice.eval")


def evalstore(db: str, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner(env=env).invoke(cli.main, ["--db", db, *args])


def folder_with_a_broken_log(tmp_path: Path) -> Path:
    """A good log, then (in the folder's order) the first 3000 bytes of one: not a zip."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(LOGS / "capitals.eval", folder)
    (folder / "zz-broken.eval").write_bytes((LOGS / "arithmetic.eval").read_bytes()[:3000])
    return folder


def test_a_folder_holding_a_log_inspect_ai_cannot_read_writes_nothing_and_makes_no_store(tmp_path: Path) -> None:
    folder = folder_with_a_broken_log(tmp_path)
    result = evalstore(f"sqlite:///{tmp_path / 'store.db'}", "import", str(folder))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""  # no "imported" line: nothing was
    assert result.stderr == (
        f"Error: {folder / 'zz-broken.eval'}: not an Inspect AI log inspect_ai can read (File is not a zip file)\n"
    )
    assert not (tmp_path / "store.db").exists()


def test_a_folder_holding_a_log_inspect_ai_cannot_read_leaves_a_store_as_it_was(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    assert evalstore(db, "import", str(LOGS / "choice.eval")).exit_code == 0
    before = json.loads(evalstore(db, "verify", "--json").stdout)["events"]
    assert evalstore(db, "import", str(folder_with_a_broken_log(tmp_path))).exit_code == 2
    assert json.loads(evalstore(db, "verify", "--json").stdout)["events"] == before
    assert [r["suite"] for r in json.loads(evalstore(db, "runs", "--json").stdout)] == ["choice"]


def stream(store: EventStore, run_id: str) -> list[tuple[str, str, dict]]:
    return [(e.event_id, e.type, e.payload) for e in store.read_stream(run_id)]


def test_a_folder_s_logs_keep_one_spool_and_are_built_again_into_their_own_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    for name in EVALS:
        shutil.copy(LOGS / name, folder)
    alive: list[object] = []
    most = [0]

    class Counted(importing.Spool):
        def __init__(self) -> None:
            super().__init__()
            alive.append(self)
            most[0] = max(most[0], len(alive))

        def close(self) -> None:
            if self in alive:
                alive.remove(self)
            super().close()

    monkeypatch.setattr(importing, "Spool", Counted)
    together = EventStore(make_engine(f"sqlite:///{tmp_path / 'together.db'}"))
    apart = EventStore(make_engine(f"sqlite:///{tmp_path / 'apart.db'}"))
    try:
        done = import_logs(together, folder)
        assert most[0] == 2 and not alive  # the kept spool and the one being built; none left open
        assert [o.tests for o in done] == [14, 3, 9]
        for outcome, name in zip(done, EVALS, strict=True):
            alone = import_log(apart, folder / name)
            assert alone.run_id == outcome.run_id
            assert stream(together, outcome.run_id) == stream(apart, alone.run_id)
    finally:
        together.close()
        apart.close()


def test_a_log_that_changed_after_it_was_checked_is_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    for name in ("arithmetic.eval", "capitals.eval"):  # capitals (fewer samples) is built again when written
        shutil.copy(LOGS / name, folder)
    real = importing._file_digest
    seen: list[Path] = []

    def rewritten(path: Path) -> str:  # the second read of capitals finds other bytes
        seen.append(path)
        return real(path) if seen.count(path) == 1 else "0" * 64

    monkeypatch.setattr(importing, "_file_digest", rewritten)
    store = EventStore(make_engine(f"sqlite:///{tmp_path / 'store.db'}"))
    try:
        with pytest.raises(importing.ImportFormatError, match=r"capitals\.eval: changed since it was checked"):
            import_logs(store, folder)
        assert [r["suite"] for r in store.query("runs")] == ["arithmetic"]
    finally:
        store.close()


@pytest.mark.parametrize("log", ["capitals.eval", "capitals.json"])
def test_the_cap_on_a_document_read_whole_is_read_alike_for_eval_and_json_logs(tmp_path: Path, log: str) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    bad = evalstore(db, "import", str(LOGS / log), env={"EVALSTORE_MAX_FILE_BYTES": "abc"})
    assert bad.exit_code == 2, bad.output
    assert bad.stderr == (
        "Error: EVALSTORE_MAX_FILE_BYTES='abc': give the largest file to import, in bytes (a positive integer)\n"
    )
    small = evalstore(db, "import", str(LOGS / log), env={"EVALSTORE_MAX_FILE_BYTES": "1000"})
    assert small.exit_code == 2, small.output
    assert "more than an import reads" in small.stderr and "set EVALSTORE_MAX_FILE_BYTES" in small.stderr
    assert not (tmp_path / "store.db").exists()
    assert evalstore(db, "import", str(LOGS / log), env={"EVALSTORE_MAX_FILE_BYTES": "100000000"}).exit_code == 0


def test_a_json_log_larger_than_the_cap_is_refused_naming_its_size_and_the_variable(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    log = LOGS / "capitals.json"
    result = evalstore(db, "import", str(log), env={"EVALSTORE_MAX_FILE_BYTES": "1000"})
    assert result.stderr == (
        f"Error: {log}: a JSON log of {log.stat().st_size} bytes, more than an import reads whole (1000); set "
        "EVALSTORE_MAX_FILE_BYTES to raise the cap, or convert it to an .eval log, read a sample at a time "
        "(inspect log convert --to eval)\n"
    )


def test_audit_names_an_imported_sample_s_stored_record_checks_it_and_prints_it(tmp_path: Path) -> None:
    """Down to the bytes the import kept of a sample: its digest, checked against the blob store, and with
    --show-source the stored record itself (what `export --format inspect` writes back)."""
    import hashlib

    db = f"sqlite:///{tmp_path / 'store.db'}"
    run = json.loads(evalstore(db, "import", str(LOGS / "capitals.eval"), "--json").stdout)["run_id"]
    report = json.loads(evalstore(db, "audit", run, "1", "--json", "--show-source").stdout)
    (test,) = report["tests"]
    transcript = test["transcript"]
    digest = transcript["source_record_sha256"]
    assert transcript["source_record_blob"] == "ok"
    assert hashlib.sha256(transcript["source_record"].encode()).hexdigest() == digest
    assert importing.sample_record(transcript["source_record"].encode())["id"] == 1
    assert [a["blob"] for a in transcript["attachments"]] == ["ok"] * len(transcript["attachments"]) != []

    shown = evalstore(db, "audit", run, "1")
    assert shown.exit_code == 0, shown.output
    assert f"  source record {digest[:12]} (the result as its source wrote it: an Inspect sample)" in shown.stdout
    assert "--show-source prints it" in shown.stdout and "--- source record ---" not in shown.stdout
    printed = evalstore(db, "audit", run, "1", "--show-source")
    # Indented for people (it is stored as one line of JSON: 70 KB for a sample with a traceback).
    indented = json.dumps(json.loads(transcript["source_record"]), indent=2, ensure_ascii=False)
    assert f"    --- source record ---\n{indented}\n" in printed.stdout and '\n  "sample": {\n' in printed.stdout


def test_audit_of_an_errored_sample_says_its_error(tmp_path: Path) -> None:
    """`audit` printed `status=error exit=None` and no word of what failed."""
    from inspect_ai.log import read_eval_log_samples

    log = LOGS / "arithmetic.eval"
    errored = [s for s in read_eval_log_samples(log, all_samples_required=False) if s.error]
    assert errored
    db = f"sqlite:///{tmp_path / 'store.db'}"
    run = json.loads(evalstore(db, "import", str(log), "--json").stdout)["run_id"]
    sample = errored[0]
    shown = evalstore(db, "audit", run, str(sample.id))  # every epoch of the sample
    assert shown.exit_code == 0, shown.output
    failed = [line for line in shown.stdout.splitlines() if line.startswith("  transcript ") and "status=error" in line]
    first = sample.error.message.splitlines()[0]
    assert failed and all("status=error — " in line and "exit=" not in line for line in failed), failed
    assert any(first in line for line in failed), failed
