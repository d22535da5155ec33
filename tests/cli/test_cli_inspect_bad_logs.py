"""Inspect logs that are malformed, or that a folder only links to: a lone surrogate in a sample is stored as
U+FFFD (as an AgentV import stores one), a JSON log inspect_ai asserts about is refused in one line naming
it (exit 2, nothing written), and a folder's log that is a symlink leading outside the folder is left out
with a warning (given by its own path, it is imported)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fixture_paths import FIXTURES_DIR

from evalstore import cli

LOGS = FIXTURES_DIR / "inspect" / "logs"
SAMPLE = "samples/add_epoch_1.json"


@pytest.fixture(autouse=True)
def _inspect() -> None:
    pytest.importorskip("inspect_ai")
    import inspect_ai._util.zipfile  # noqa: F401  # the fixture's members are zstd: this teaches zipfile it


def evalstore(db: str, *args: str) -> Result:
    return CliRunner().invoke(cli.main, ["--db", db, *args])


def events(db: str) -> int:
    result = evalstore(db, "verify", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["events"]


def with_surrogate(dst: Path) -> Path:
    """arithmetic.eval with its first sample's metadata holding a lone surrogate, as JSON escapes one."""
    with zipfile.ZipFile(LOGS / "arithmetic.eval") as src, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as out:
        for name in src.namelist():
            data = src.read(name)
            if name == SAMPLE:
                sample = json.loads(data)
                sample["metadata"] = {"x": "SURROGATE"}
                data = json.dumps(sample).replace("SURROGATE", "\\ud800 x").encode()
            out.writestr(name, data)
    return dst


def test_a_lone_surrogate_in_a_sample_is_stored_as_u_fffd(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    imported = evalstore(db, "import", str(with_surrogate(tmp_path / "surrogate.eval")), "--json")
    assert imported.exit_code == 0, imported.output
    run = json.loads(imported.stdout)["run_id"]
    assert json.loads(evalstore(db, "verify", "--json").stdout)["ok"] is True
    out = tmp_path / "out.eval"
    exported = evalstore(db, "export", run, "--format", "inspect", "-o", str(out))
    assert exported.exit_code == 0, exported.output
    from inspect_ai.log import read_eval_log_sample

    assert read_eval_log_sample(str(out), "add", 1).metadata == {"x": "\ufffd x"}
    assert read_eval_log_sample(str(out), "add", 2).metadata == {"op": "add"}  # the other samples as they were


def test_a_json_log_inspect_ai_asserts_about_is_one_line_naming_it(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    assert evalstore(db, "import", str(LOGS / "capitals.eval")).exit_code == 0
    before = events(db)
    log = tmp_path / "odd.json"
    log.write_text('{"version": 2, "status": "success"}', encoding="utf-8")
    result = evalstore(db, "import", str(log))
    assert result.exit_code == 2, result.output
    assert result.stderr == f"Error: {log}: not an Inspect AI log inspect_ai can read (Must encounter a 'eval')\n"
    assert events(db) == before


def test_a_folder_s_log_linking_outside_it_is_left_out_with_a_warning(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "private.json").write_text('{"token": "not a log"}', encoding="utf-8")
    folder = tmp_path / "logs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.eval").symlink_to(LOGS / "arithmetic.eval")
    (folder / "b.json").symlink_to(elsewhere / "private.json")
    (folder / "sub" / "c.eval").write_bytes((LOGS / "capitals.eval").read_bytes())
    (folder / "d.eval").symlink_to(Path("sub") / "c.eval")  # inside: read (a second import of c is a no-op)
    db = f"sqlite:///{tmp_path / 'store.db'}"

    result = evalstore(db, "import", str(folder), "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(Path(r["path"]).name, r["task"], r["already_imported"]) for r in rows] == [
        ("d.eval", "capitals", False),
        ("c.eval", "capitals", True),
    ]
    assert rows[0]["warnings"] == [
        f"{folder / name}: not imported: it leads outside {folder} (a symlink); import it by its own path"
        for name in ("a.eval", "b.json")
    ]
    assert [r["suite"] for r in json.loads(evalstore(db, "runs", "--json").stdout)] == ["capitals"]

    shown = evalstore(db, "import", str(folder))
    assert shown.stderr.count("not imported: it leads outside") == 2

    given = evalstore(db, "import", str(folder / "a.eval"))  # named by the user: followed
    assert given.exit_code == 0, given.output
    assert "task arithmetic" in given.stdout


def test_a_folder_holding_only_links_outside_it_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.eval").symlink_to(LOGS / "arithmetic.eval")
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result = evalstore(db, "import", str(folder))
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"Error: {folder}: no Inspect AI logs (.eval, .json) in this folder or .eval in its subfolders "
        "(1 leading outside it, not followed: import one by its own path)\n"
    )
    assert not (tmp_path / "store.db").exists()
