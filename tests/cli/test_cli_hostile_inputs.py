"""Hostile inputs (issue 29 items 6, 7, 9-12, 14): each is one line and exit 2 (or a refusal recorded),
never a hang, a traceback, memory exhausted, a file replaced or read where it should not be."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fixture_paths import AGENTV_FIXTURES

from evalstore import cli

BASELINE = AGENTV_FIXTURES / "v4" / "rubric" / "dataset.eval.baseline.jsonl"
EVALSTORE = str(Path(sys.executable).parent / "evalstore")


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner(env=env).invoke(cli.main, list(args))


def one_line(result: Result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr


@pytest.fixture
def imported(tmp_path: Path) -> tuple[str, str]:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result = run("--db", db, "import", str(BASELINE), "--json")
    assert result.exit_code == 0, result.output
    return db, json.loads(result.stdout)["run_id"]


# --- 6. a bundle import reads regular files inside the bundle only ----------------------------------


def _bundle(db: str, run_id: str, folder: Path) -> Path:
    assert run("--db", db, "export", run_id, "--format", "bundle", "-o", str(folder)).exit_code == 0
    return folder


@pytest.mark.parametrize("part", ["blob", "blobs folder", "events.jsonl", "manifest.json"])
def test_a_bundle_import_follows_no_symlink_out_of_the_bundle(
    imported: tuple[str, str], tmp_path: Path, part: str
) -> None:
    db, run_id = imported
    bundle = _bundle(db, run_id, tmp_path / "bundle")
    outside = tmp_path / "outside"
    outside.mkdir()
    if part == "blob":
        blob = next((bundle / "blobs").iterdir())
        shutil.move(blob, outside / blob.name)
        blob.symlink_to(outside / blob.name)
        shown = blob
    elif part == "blobs folder":
        shutil.move(bundle / "blobs", outside / "blobs")
        (bundle / "blobs").symlink_to(outside / "blobs")
        shown = bundle / "blobs"
    else:
        shutil.move(bundle / part, outside / part)
        (bundle / part).symlink_to(outside / part)
        shown = bundle / part
    other = f"sqlite:///{tmp_path / 'other.db'}"
    error = one_line(run("--db", other, "import", str(bundle)))
    assert f"{shown}: a symbolic link" in error
    assert run("--db", other, "runs", "--json").stdout.strip() in ("[]", "")


def test_a_bundle_manifest_nested_deep_is_one_line(imported: tuple[str, str], tmp_path: Path) -> None:
    db, run_id = imported
    bundle = _bundle(db, run_id, tmp_path / "bundle")
    (bundle / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    error = one_line(run("--db", f"sqlite:///{tmp_path / 'other.db'}", "import", str(bundle)))
    assert "manifest.json: not an evalstore bundle manifest (nested too deep to read)" in error


# --- 7. export -o and compare --html replace a regular file only --------------------------------------


def test_export_and_compare_html_never_replace_a_symlink_device_or_fifo(
    imported: tuple[str, str], tmp_path: Path
) -> None:
    db, run_id = imported
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "link.jsonl"
    link.symlink_to(victim)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    for path, what in (
        (link, "a symbolic link"),
        (fifo, "not a regular file"),
        (Path("/dev/null"), "not a regular file"),
    ):
        error = one_line(run("--db", db, "export", run_id, "-o", str(path)))
        assert f"{path}: {what}" in error, error
        compared = run("--db", db, "compare", run_id, run_id, "--html", str(path))  # (a note: A is B)
        assert compared.exit_code == 2 and f"'--html': {path}: {what}" in compared.stderr, compared.output
    assert link.is_symlink() and victim.read_text() == "keep me"
    assert Path("/dev/null").is_char_device() and fifo.is_fifo()
    # A regular file is replaced whole, keeping its mode.
    regular = tmp_path / "rows.jsonl"
    regular.write_text("old")
    regular.chmod(0o640)
    assert run("--db", db, "export", run_id, "-o", str(regular)).exit_code == 0
    assert regular.read_text().startswith("{") and (regular.stat().st_mode & 0o777) == 0o640


def test_an_output_path_nothing_can_be_written_to_is_refused_before_any_work(
    imported: tuple[str, str], tmp_path: Path
) -> None:
    """Exit 2 says nothing was done: a replay whose --html folder is missing must not regrade and store a
    run first (it did, then failed on the report, never reporting its gates)."""
    db, run_id = imported
    missing = tmp_path / "no-such-folder" / "report.html"
    folder = tmp_path / "a-folder"
    folder.mkdir()
    commands = [
        (["replay", run_id, "--html"], "'--html'"),
        (["compare", run_id, run_id, "--html"], "'--html'"),
        (["export", run_id, "-o"], "'-o' / '--output'"),
        (["export", run_id, "--format", "csv", "-o"], "'-o' / '--output'"),
        (["labels", "export", "-o"], "'-o' / '--output'"),
    ]
    judge = {"EVALSTORE_JUDGE_BASE_URL": "http://127.0.0.1:9/v1"}  # the replay would run: nothing to grade
    for args, option in commands:
        error = one_line(run("--db", db, *args, str(missing), env=judge))
        assert f"{option}: {missing}: the folder {missing.parent} does not exist" in error, error
    for args, option in commands[2:4]:  # export's -o may name a folder (a bundle's); the others' click refuses
        error = one_line(run("--db", db, *args, str(folder)))
        assert f"{option}: {folder}: a folder" in error, error
    runs = json.loads(run("--db", db, "runs", "--json").stdout)
    assert [r["run_id"] for r in runs] == [run_id]  # no replay stored
    assert not missing.parent.exists() and list(folder.iterdir()) == []


# --- 9. a FIFO as the eval file ----------------------------------------------------------------------


def test_run_and_validate_refuse_a_fifo_as_the_eval_file(tmp_path: Path) -> None:
    fifo = tmp_path / "suite.eval.yaml"
    os.mkfifo(fifo)
    for args in (["run", str(fifo)], ["validate", str(fifo)]):
        done = subprocess.run(
            [EVALSTORE, "--db", str(tmp_path / "s.db"), *args], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 2, (args, done.stderr)
        assert "not a regular file" in done.stderr and "Traceback" not in done.stderr


# --- 10. a YAML alias bomb ---------------------------------------------------------------------------


def _bomb(levels: int) -> str:
    lines = ["name: bomb", "metadata:", '  a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join([*lines, "tests:", "  - id: t", "    input: hi", "    criteria: says hi", ""])


def test_a_yaml_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    eval_file = tmp_path / "bomb.eval.yaml"
    eval_file.write_text(_bomb(9))
    assert len(eval_file.read_bytes()) < 700
    done = subprocess.run(
        [EVALSTORE, "--db", str(tmp_path / "s.db"), "run", str(eval_file), "--target", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "aliases expand to" in done.stderr and "alias bomb" in done.stderr
    assert not (tmp_path / "s.db").exists() or (tmp_path / "s.db").stat().st_size < 1_000_000
    targets = tmp_path / ".agentv" / "targets.yaml"
    targets.parent.mkdir()
    targets.write_text(_bomb(9).replace("name: bomb", "targets: []"))
    error = run("validate", str(targets)).output
    assert "aliases expand to" in error
    # An anchor used a few times (defaults) is fine.
    (tmp_path / "ok.eval.yaml").write_text(_bomb(3))
    assert "aliases expand" not in run("validate", str(tmp_path / "ok.eval.yaml")).output


def test_a_few_aliases_of_a_large_text_are_refused(tmp_path: Path) -> None:
    """Few values, much text: a 1 MB string aliased 300 times is 300 MB, which a replay held several times
    over. The text an anchor adds is capped as its values are; a prompt shared by many tests is not near."""
    big = "x" * (1 << 20)
    eval_file = tmp_path / "text.eval.yaml"
    eval_file.write_text(
        f'name: text\nbig: &big "{big}"\ntests:\n  - id: t\n    input: hi\n    criteria: says hi\n'
        f"    metadata: {{m: [{', '.join(['*big'] * 300)}]}}\n"
    )
    output = run("validate", str(eval_file)).output
    assert "characters of text" in output and "alias bomb" in output
    shared = tmp_path / "shared.eval.yaml"
    prompt = "Grade the answer carefully. " * 200  # 5.6 KB
    tests = "".join(f"  - id: t{i}\n    input: hi\n    criteria: *prompt\n" for i in range(300))
    shared.write_text(f'name: shared\nprompt: &prompt "{prompt}"\ntests:\n{tests}')
    assert "aliases expand" not in run("validate", str(shared)).output


# --- 11. a size cap on imported files ----------------------------------------------------------------


def test_an_imported_file_over_the_cap_is_recorded_as_refused(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "big.bin").write_bytes(b"x" * 5000)
    (folder / "small.txt").write_text("small")
    row = {
        "timestamp": "2026-02-20T21:40:12.230Z",
        "test_id": "t1",
        "suite": "s",
        "score": 0.5,
        "target": "default",
        "scores": [],
        "output": [{"role": "assistant", "content": [{"type": "file", "path": str(folder / "big.bin")},
                                                     {"type": "file", "path": str(folder / "small.txt")}]}],
    }  # fmt: skip
    (folder / "rows.jsonl").write_text(json.dumps(row) + "\n")
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result = run("--db", db, "import", str(folder / "rows.jsonl"), "--json", env={"EVALSTORE_MAX_FILE_BYTES": "4096"})
    assert result.exit_code == 0, result.output
    run_id = json.loads(result.stdout)["run_id"]
    shown = run("--db", db, "audit", run_id, "t1", "--json").stdout
    assert "is 5000 bytes, more than an import stores (4096); set EVALSTORE_MAX_FILE_BYTES" in shown
    other = f"sqlite:///{tmp_path / 'other.db'}"
    bad = run("--db", other, "import", str(folder / "rows.jsonl"), env={"EVALSTORE_MAX_FILE_BYTES": "lots"})
    assert "EVALSTORE_MAX_FILE_BYTES='lots'" in one_line(bad)


# --- 12. crashes that are bad input --------------------------------------------------------------------


def test_labels_of_random_bytes_or_nested_deep_are_one_line(imported: tuple[str, str], tmp_path: Path) -> None:
    db, run_id = imported
    noise = tmp_path / "labels.jsonl"
    noise.write_bytes(random.Random(29).randbytes(4000))
    assert "not UTF-8 text" in one_line(run("--db", db, "labels", "import", str(noise), "--run", run_id))
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    assert "deep.jsonl:1: nested too deep" in one_line(run("--db", db, "labels", "import", str(deep), "--run", run_id))


def test_threshold_nan_is_a_usage_error(imported: tuple[str, str]) -> None:
    db, run_id = imported
    for args in (["replay", run_id, "--threshold", "nan"], ["run", "x.yaml", "--threshold", "nan"]):
        assert "is not a number from 0 to 1" in one_line(run("--db", db, *args))


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"score": -5}, "score -5 for test 't1' is outside 0..1"),
        ({"answer_path": "out\x00/answer.md"}, "holds a NUL byte, which no path can"),
    ],
)
def test_an_impossible_row_is_refused_with_its_line(tmp_path: Path, change: dict, problem: str) -> None:
    row = {"timestamp": "2026-02-20T21:40:12.230Z", "test_id": "t1", "suite": "s", "score": 0.5, "scores": []}
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({**row, **change}) + "\n")
    error = one_line(run("--db", f"sqlite:///{tmp_path / 'store.db'}", "import", str(path)))
    assert f"{path}:1: " in error and problem in error


# --- 14. the current folder is not an import root --------------------------------------------------------


def test_importing_from_home_does_not_store_a_file_a_row_names_there(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY----- canary-id-rsa")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    row = {
        "timestamp": "2026-02-20T21:40:12.230Z",
        "test_id": "t1",
        "suite": "s",
        "score": 0.5,
        "scores": [],
        "output": [{"role": "assistant", "content": [{"type": "file", "path": ".ssh/id_rsa"}]}],
    }
    (downloads / "foreign.jsonl").write_text(json.dumps(row) + "\n")
    monkeypatch.chdir(home)
    db_file = tmp_path / "store.db"
    result = run("--db", str(db_file), "import", str(downloads / "foreign.jsonl"), "--json")
    assert result.exit_code == 0, result.output
    assert not any(b"canary-id-rsa" in p.read_bytes() for p in tmp_path.glob("store.db*"))
    audit = run("--db", str(db_file), "audit", json.loads(result.stdout)["run_id"], "t1", "--json").stdout
    assert "outside the folders this import may read" in audit
    # Asked for explicitly, it is read.
    other = tmp_path / "other.db"
    result = run("--db", str(other), "import", str(downloads / "foreign.jsonl"), "--files-root", ".", "--json")
    assert result.exit_code == 0, result.output
    audit = run("--db", str(other), "audit", json.loads(result.stdout)["run_id"], "t1", "--json").stdout
    assert "outside the folders" not in audit


def test_an_eval_file_the_results_name_does_not_make_its_folder_readable(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A foreign row naming an eval file in the home folder, whose targets file there has a cli target without
    cwd (AgentV ran it in the eval file's folder): the home folder is where to look, not permission."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY----- canary-id-rsa")
    (home / "notes.eval.yaml").write_text("tests:\n  - id: t1\n    input: hi\n    criteria: c\n")
    (home / ".agentv").mkdir()
    (home / ".agentv" / "targets.yaml").write_text("targets:\n  - {name: agent, provider: cli, command: run}\n")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    row = {
        "test_id": "t1",
        "target": "agent",
        "score": 1,
        "scores": [],
        "projection_identity": {"dimensions": {"eval_path": str(home / "notes.eval.yaml")}},
        "output": [{"role": "assistant", "content": [{"type": "file", "path": ".ssh/id_rsa"}]}],
    }
    (downloads / "foreign.jsonl").write_text(json.dumps(row) + "\n")
    for where in (home, tmp_path):
        monkeypatch.chdir(where)
        db_file = tmp_path / f"store-{where.name}.db"
        result = run("--db", str(db_file), "import", str(downloads / "foreign.jsonl"), "--json")
        assert result.exit_code == 0, result.output
        assert not any(b"canary-id-rsa" in p.read_bytes() for p in tmp_path.glob(f"{db_file.name}*"))
        audit = run("--db", str(db_file), "audit", json.loads(result.stdout)["run_id"], "t1", "--json").stdout
        (artifact,) = json.loads(audit)["tests"][0]["artifacts"]
        assert artifact["status"] == "refused", artifact
        assert artifact["reason"].startswith(f"{home / '.ssh' / 'id_rsa'} is outside the folders this import may read")


def test_importing_from_home_does_not_store_a_file_the_eval_beside_the_results_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY----- canary-id-rsa")
    foreign = home / "Downloads" / "foreign"
    foreign.mkdir(parents=True)
    (foreign / "results.eval.yaml").write_text(
        "name: results\ntests:\n  - id: t1\n    input: [{role: user, content: [{type: file, value: ../../.ssh/id_rsa}]}]\n"
        "    criteria: x\n"
    )
    (foreign / "results.eval.baseline.jsonl").write_text(
        json.dumps({"test_id": "t1", "score": 1, "output": "hi"}) + "\n"
    )
    monkeypatch.chdir(home)
    result = run("--db", str(tmp_path / "store.db"), "import", "Downloads/foreign/results.eval.baseline.jsonl")
    assert result.exit_code == 0, result.output
    assert not any(b"canary-id-rsa" in p.read_bytes() for p in tmp_path.glob("store.db*"))
    warning, last = result.stderr.strip().splitlines()
    assert warning.startswith(f"warning: eval file {foreign / 'results.eval.yaml'}, which came with the results, ")
    assert f"it names {home / '.ssh' / 'id_rsa'}, which is outside the folders this import may read" in warning
    assert last.startswith("no eval file used (see the warning above) for these results; to regrade them later")


# --- a second pass: integers too long to convert, targets that are not text, Inspect headers ------------

LONG_INT = "1" + "0" * 5000  # more digits than Python converts (sys.get_int_max_str_digits: 4300)


def test_an_integer_too_long_in_an_eval_or_targets_file_is_one_line(tmp_path: Path) -> None:
    eval_file = tmp_path / "suite.eval.yaml"
    eval_file.write_text(f"tests:\n  - id: a\n    input: hi\n    criteria: c\n    threshold: {LONG_INT}\n")
    checked = run("validate", str(eval_file), "--json")
    assert checked.exit_code == 1, checked.output
    assert "suite.eval.yaml:5: invalid YAML: an integer of 5001 digits is too large" in checked.stdout
    eval_file.write_text("tests:\n  - id: a\n    input: hi\n    criteria: c\n")
    targets = tmp_path / "targets.yaml"
    targets.write_text(f"targets:\n  - name: default\n    provider: openai\n    timeout_seconds: {LONG_INT}\n")
    db = f"sqlite:///{tmp_path / 'store.db'}"
    error = one_line(run("--db", db, "run", str(eval_file), "--targets", str(targets)))
    assert "targets.yaml:4: not valid YAML (an integer of 5001 digits is too large)" in error


def test_a_targets_file_that_is_not_text_is_one_line(imported: tuple[str, str], tmp_path: Path) -> None:
    db, run_id = imported
    targets = tmp_path / "targets.yaml"
    targets.write_bytes(bytes(range(256)))
    eval_file = tmp_path / "suite.eval.yaml"
    eval_file.write_text("tests:\n  - id: a\n    input: hi\n    criteria: c\n")
    other = f"sqlite:///{tmp_path / 'other.db'}"
    for args in (
        ("--db", db, "replay", run_id, "--targets", str(targets)),
        ("--db", other, "import", str(BASELINE), "--targets", str(targets)),
        ("--db", other, "run", str(eval_file), "--targets", str(targets)),
    ):
        assert f"{targets}: not a targets file: not UTF-8 text (byte 128)" in one_line(run(*args)), args


def test_an_integer_too_long_in_labels_or_results_is_one_line_naming_the_file(
    imported: tuple[str, str], tmp_path: Path
) -> None:
    db, run_id = imported
    labels = tmp_path / "labels.jsonl"
    labels.write_text(f'{{"run": "{run_id}", "test_id": "x", "verdict": "pass", "attempt": {LONG_INT}}}\n')
    assert f"{labels}:1: not JSON (an integer of more than 4300 digits)" in one_line(
        run("--db", db, "labels", "import", str(labels))
    )
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps({"test_id": "t1", "score": 0.5, "target": "default"})[:-1] + f', "cost_usd": {LONG_INT}}}\n'
    )
    error = one_line(run("--db", f"sqlite:///{tmp_path / 'o.db'}", "import", str(rows)))
    assert "rows.jsonl:1: invalid JSON (an integer of more than 4300 digits)" in error
    assert "set_int_max_str_digits" not in error  # no advice to call a Python function


def test_an_inspect_json_header_nested_deep_or_with_a_long_integer_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai")
    deep = tmp_path / "deep.json"
    deep.write_text('{"version": 2, "eval": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}")
    error = one_line(run("--db", f"sqlite:///{tmp_path / 'a.db'}", "import", str(deep)))
    assert "deep.json: not an Inspect AI log inspect_ai can read (JSON nested more than 256 levels deep)" in error
    # A long integer crashed inspect_ai's JSON parser (ijson's C backend): a segmentation fault, so this
    # runs in a process of its own.
    long = tmp_path / "long.json"
    long.write_text(f'{{"version": {LONG_INT}, "eval": {{}}}}')
    done = subprocess.run(
        [EVALSTORE, "--db", f"sqlite:///{tmp_path / 'b.db'}", "import", str(long)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.strip().endswith(
        "long.json: not an Inspect AI log inspect_ai can read (invalid JSON: an integer of more than 4300 digits)"
    )


def test_a_copilot_session_whose_workspace_holds_a_long_integer_is_passed_over(tmp_path: Path) -> None:
    from evalstore.replay.targets.copilot_log import discover

    for name, workspace in (("a-broken", f"cwd: /w\nsize: {LONG_INT}\n"), ("b-fine", "cwd: /w\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "workspace.yaml").write_text(workspace)
        (tmp_path / name / "events.jsonl").write_text("")
    assert discover(tmp_path, "/w") == [tmp_path / "b-fine"]


@pytest.mark.parametrize(
    ("snippet", "field"),
    [("assertions:\n  - {type: contains, value: x, weight: .nan}\n", "assertions[0].weight")],
)  # fmt: skip
def test_a_nan_in_an_eval_file_is_refused(tmp_path: Path, snippet: str, field: str) -> None:
    # Every comparison with NaN is false: a weight of NaN would pass any range check. (A NaN
    # `execution.threshold` is AgentV's warning and the default pass mark: tests/replay/test_evalfile.py.)
    eval_file = tmp_path / "suite.eval.yaml"
    eval_file.write_text("tests:\n  - id: a\n    input: hi\n    criteria: c\n" + snippet)
    checked = run("validate", str(eval_file), "--json")
    assert checked.exit_code == 1, checked.output
    errors = json.loads(checked.stdout)["files"][0]["errors"]
    assert any(f"field `{field}`: NaN is not a number" in e for e in errors), errors


def test_an_attestation_or_a_preprocessor_with_a_long_integer_is_one_line(tmp_path: Path) -> None:
    from evalstore.replay.errors import ReplayError
    from evalstore.replay.regrade import parse_preprocessor

    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    assert run("keys", "init", env=env).exit_code == 0
    pub = tmp_path / "signer.pub"
    pub.write_text(run("keys", "show", env=env).stdout)
    attestation = tmp_path / "att.json"
    attestation.write_text(f'{{"_type": {LONG_INT}}}')
    error = one_line(run("verify-attestation", str(attestation), "--pubkey", str(pub)))
    assert error == f"Error: {attestation}: not JSON: an integer of more than 4300 digits\n"
    with pytest.raises(ReplayError, match=r"COMMAND is not a valid JSON array \(an integer of more than 4300 digits\)"):
        parse_preprocessor(f"text/plain=[{LONG_INT}]", [str(tmp_path)])


def test_an_evalstore_json_export_given_to_import_says_what_it_is(imported: tuple[str, str], tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai")  # a .json file is read as an Inspect log otherwise
    db, run_id = imported
    export = tmp_path / "export.json"
    assert run("--db", db, "export", run_id, "--format", "json", "-o", str(export)).exit_code == 0
    error = one_line(run("--db", f"sqlite:///{tmp_path / 'other.db'}", "import", str(export))).strip()
    assert error == (
        f"Error: {export}: an evalstore JSON export (`export --format json`), written for other tools to read: "
        "to move runs between stores, export them with `--format bundle` and import that"
    )


def test_result_rows_saved_under_a_logs_name_say_what_to_name_them(tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai")
    rows = tmp_path / "rows.json"
    rows.write_text('{"test_id": "a", "score": 1}\n{"test_id": "b", "score": 0}\n', encoding="utf-8")
    error = one_line(run("--db", f"sqlite:///{tmp_path / 'store.db'}", "import", str(rows)))
    assert "not an Inspect AI log inspect_ai can read" in error and "name the file .jsonl" in error, error


def test_an_import_with_no_results_says_what_to_give_it(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert one_line(run("--db", db, "import", str(empty))).strip() == (
        f"Error: {empty}: no results to import: it holds no result rows (give the results `agentv eval` wrote: "
        "a run folder, its index.jsonl, or a results JSONL)"
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n{\n")
    assert one_line(run("--db", db, "import", str(bad), "--skip-bad")).strip() == (
        f"Error: {bad}: no results to import: all 2 line(s) were left out as bad "
        "(without --skip-bad, the first is named with why)"
    )
    assert not (tmp_path / "store.db").exists()  # refused before a store was made
