"""``evalstore import``: AgentV results in, test by test as the source says; idempotent and atomic."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from e2e_helpers import (
    BASELINE,
    EVALSTORE,
    V5_BUNDLE,
    cli,
    evalstore,
    event_count,
    no_store,
    ok_json,
    one_line_error,
    results_by_test,
    runs,
    show,
)
from fixture_paths import FIXTURES_DIR

from evalstore.store import EventStore, make_engine
from evalstore.store.events import SourceRef

pytestmark = pytest.mark.skipif(not BASELINE.exists(), reason=f"AgentV fixtures not found at {BASELINE.parent}")


def baseline_rows() -> list[dict]:
    return [json.loads(line) for line in BASELINE.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_v4_baseline_shows_the_source_scores_test_by_test(sqlite_url: str) -> None:
    out = ok_json(cli(sqlite_url, "import", str(BASELINE), "--json"))
    assert out["format"] == "results-jsonl" and out["tests"] == 5 and out["skipped"] == 0
    shown = results_by_test(sqlite_url, out["run_id"])
    rows = baseline_rows()
    assert set(shown) == {r["test_id"] for r in rows}
    for row in rows:
        got = shown[row["test_id"]]
        assert got["score"] == pytest.approx(row["score"]), row["test_id"]
        assert got["target"] == row["target"] and got["origin"] == "imported"
        for grader in row.get("scores", []):
            assert got["graders"][grader["name"]] == pytest.approx(grader["score"]), (row["test_id"], grader["name"])
            assert got["verdicts"][grader["name"]] == grader["verdict"]
        if "scores" in row:
            assert set(got["graders"]) == {g["name"] for g in row["scores"]}
    (run,) = runs(sqlite_url)
    assert run["kind"] == "imported" and run["source"] == str(BASELINE.resolve()) and run["tests"] == 5
    assert run["target"] == rows[0]["target"] == "default"  # the rows' one target, the run naming none


def test_runs_names_no_target_for_an_import_of_several(sqlite_url: str, tmp_path: Path) -> None:
    rows = baseline_rows()
    rows[1]["target"] = "other"
    path = tmp_path / "two-targets.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ok_json(cli(sqlite_url, "import", str(path), "--json"))
    (run,) = runs(sqlite_url)
    assert run["target"] is None and run["tests"] == 5


def test_the_v5_bundle_shows_the_source_scores(sqlite_url: str) -> None:
    out = ok_json(cli(sqlite_url, "import", str(V5_BUNDLE), "--json"))
    assert out["format"] == "agentv-v5-bundle" and out["tests"] == 1
    (row,) = [json.loads(line) for line in (V5_BUNDLE / ".internal" / "index.jsonl").read_text().splitlines()]
    got = results_by_test(sqlite_url, out["run_id"])[row["test_id"]]
    assert got["score"] == pytest.approx(row["score"]) and got["target"] == row["target"]
    assert got["passed"] is True
    for name, score in row["named_scores"].items():
        assert got["graders"][name] == pytest.approx(score)
    # The bundle's answer and sidecars are stored with their bytes, and the eval it shipped is snapshotted.
    audit = ok_json(cli(sqlite_url, "audit", out["run_id"], row["test_id"], "--json"))
    (test,) = audit["tests"]
    answer = next(a for a in test["artifacts"] if a["path"].endswith("outputs/answer.md"))
    on_disk = (V5_BUNDLE / row["answer_path"]).read_bytes()
    assert answer["status"] == "stored" and answer["size"] == len(on_disk) and answer["blob"] == "ok"
    assert [s["role"] for s in audit["run"]["eval_snapshot"]] == ["eval"]
    assert test["transcript"]["source"]["line"] == 1


def test_the_v5_bundle_keeps_both_graders_of_one_name(sqlite_url: str) -> None:
    """The bundle's suite has two graders named llm-rubric: both verdicts are kept, named as the eval
    file parser names them (llm-rubric, llm-rubric-2), so a replay pairs them with its graders."""
    out = ok_json(cli(sqlite_url, "import", str(V5_BUNDLE), "--json"))
    (row,) = [json.loads(line) for line in (V5_BUNDLE / ".internal" / "index.jsonl").read_text().splitlines()]
    (test,) = ok_json(cli(sqlite_url, "audit", out["run_id"], row["test_id"], "--json"))["tests"]
    assert [v["grader"] for v in test["verdicts"]] == ["contains-fizz", "llm-rubric", "script", "llm-rubric-2"]
    rubric, rubric2 = test["verdicts"][1], test["verdicts"][3]
    assert [a["text"] for a in rubric["assertions"]] == [
        "[rubric-1] Implements correct FizzBuzz logic for multiples of 3, 5, and 15"
    ]
    assert len(rubric2["assertions"]) == 2
    graders = results_by_test(sqlite_url, out["run_id"])[row["test_id"]]["graders"]
    assert set(graders) == {"contains-fizz", "llm-rubric", "script", "llm-rubric-2"}


def test_importing_twice_gives_the_same_run_and_no_new_events(sqlite_url: str, tmp_path: Path) -> None:
    first = ok_json(cli(sqlite_url, "import", str(BASELINE), "--json"))
    events = event_count(sqlite_url)
    second = ok_json(evalstore(sqlite_url, "import", str(BASELINE), "--json", cwd=tmp_path))
    assert second["run_id"] == first["run_id"] and second["already_imported"] is True
    assert event_count(sqlite_url) == events
    assert len(runs(sqlite_url)) == 1


def _truncated_copy(tmp_path: Path) -> Path:
    lines = BASELINE.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2][: len(lines[2]) // 2]  # line 3 cut mid-way, as a crashed writer leaves it
    path = tmp_path / "truncated.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_truncated_line_aborts_naming_file_and_line_and_writes_nothing(sqlite_url: str, tmp_path: Path) -> None:
    ok_json(cli(sqlite_url, "import", str(V5_BUNDLE), "--json"))
    before_runs, before_events = runs(sqlite_url), event_count(sqlite_url)
    path = _truncated_copy(tmp_path)
    result = evalstore(sqlite_url, "import", str(path), cwd=tmp_path)
    line = one_line_error(result)
    assert "truncated.jsonl:3" in line and "--skip-bad" in line
    # Where in the line: the decoder's own "line 2" (past the line's newline) would name another line.
    assert "invalid JSON (" in line and " at character " in line and "line 2" not in line, line
    assert " at at " not in line  # "Unterminated string starting at character N"
    assert runs(sqlite_url) == before_runs and event_count(sqlite_url) == before_events


def test_a_path_that_does_not_exist_is_one_line_and_creates_no_store(tmp_path: Path) -> None:
    folder = tmp_path / "fresh"
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "EVALSTORE_DB"}
    result = subprocess.run(
        [str(EVALSTORE), "import", "nothere.jsonl"], cwd=folder, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and result.stderr.strip() == "Error: nothere.jsonl: no such file or directory"
    assert list(folder.iterdir()) == []  # no .evalstore/ made for a mistyped path


def test_skip_bad_imports_the_rest_and_records_the_skipped_line(sqlite_url: str, tmp_path: Path) -> None:
    path = _truncated_copy(tmp_path)
    out = ok_json(cli(sqlite_url, "import", str(path), "--skip-bad", "--json"))
    assert out["tests"] == 4 and out["skipped"] == 1
    skipped_test = baseline_rows()[2]["test_id"]
    shown = results_by_test(sqlite_url, out["run_id"])
    assert skipped_test not in shown and len(shown) == 4
    store = EventStore(make_engine(sqlite_url))
    try:
        (event,) = list(store.read_stream(out["run_id"], types=["line_skipped"]))
        (started,) = list(store.read_stream(out["run_id"], types=["run_started"]))
    finally:
        store.close()
    payload = event.payload
    # The line is in the imported file itself, which the run names once (events name files relative to it).
    assert payload["source"] == {"line": 3} and "JSON" in payload["reason"]
    run_source = started.event.source
    assert run_source is not None and run_source.file == str(path.resolve())
    assert SourceRef(line=3).resolved(run_source.file) == SourceRef(file=str(path.resolve()), line=3)


@pytest.mark.parametrize("field,expect", [("test_id", "test_id"), ("score", "score")])
def test_a_row_without_a_required_field_is_one_line(sqlite_url: str, tmp_path: Path, field: str, expect: str) -> None:
    rows = baseline_rows()
    del rows[1][field]
    path = tmp_path / f"no-{field}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    line = one_line_error(cli(sqlite_url, "import", str(path)))
    assert f"no-{field}.jsonl:2" in line and expect in line
    assert no_store(sqlite_url)  # refused before a store was made


@pytest.mark.parametrize(
    "field,value,expect",
    [
        ("scores", 5, "scores is a number, where AgentV writes an array"),
        ("scores", True, "scores is true or false"),
        ("execution_status", ["ok"], "execution_status is an array, where AgentV writes a string"),
        ("trace", {"messages": [{"role": "assistant", "content": "x", "tool_calls": 5}]}, "not of the type AgentV"),
    ],
)
def test_a_field_of_another_type_is_one_line_and_skip_bad_leaves_it_out(
    sqlite_url: str, tmp_path: Path, field: str, value: object, expect: str
) -> None:
    """A value of a type AgentV never writes is a bad line like any other, not an internal error."""
    rows = baseline_rows()
    rows[1][field] = value
    path = tmp_path / "typed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    line = one_line_error(cli(sqlite_url, "import", str(path)))
    assert "typed.jsonl:2" in line and expect in line, line
    assert no_store(sqlite_url)
    out = ok_json(cli(sqlite_url, "import", str(path), "--skip-bad", "--json"))
    assert (out["tests"], out["skipped"]) == (len(rows) - 1, 1)


def test_a_bundle_whose_sidecar_is_missing_is_one_line_and_writes_nothing(sqlite_url: str, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(V5_BUNDLE, bundle)
    for path in bundle.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    (row,) = [json.loads(line) for line in (bundle / ".internal" / "index.jsonl").read_text().splitlines()]
    (bundle / row["grading_path"]).unlink()
    line = one_line_error(cli(sqlite_url, "import", str(bundle)))
    assert "index.jsonl:1" in line and "grading.json" in line and "does not exist" in line
    assert no_store(sqlite_url)  # refused before a store was made


@pytest.mark.parametrize(
    "args",
    [
        ("import", "notes.txt"),
        ("import", "cut.ndjson"),
        ("import", "cut.eval"),
        ("import", "empty.jsonl"),
        ("import", "cut.ndjson", "--skip-bad"),  # every line left out
        ("label", "nowhere", "t", "--pass"),
        ("labels", "import", "labels.csv", "--run", "nowhere"),
        ("checkpoint",),
        ("attest", "nowhere"),
    ],
)
def test_a_refused_command_in_a_fresh_folder_makes_no_store(tmp_path: Path, args: tuple[str, ...]) -> None:
    """An import checks its whole source before it opens (and so makes) the store; the commands that need a
    run or a log say there is no store. Each is one line, exit 2, and leaves the folder as it was."""
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    (tmp_path / "cut.ndjson").write_text('{"test_id": "a", "score": 2}\n{"test_id": \n', encoding="utf-8")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "cut.eval").write_bytes(b"PK\x03\x04 not the rest of a zip")
    (tmp_path / "labels.csv").write_text("test_id,verdict\na,pass\n", encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    env = {k: v for k, v in os.environ.items() if k != "EVALSTORE_DB"}
    result = subprocess.run([str(EVALSTORE), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    one_line_error(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no .evalstore/


def test_a_folder_of_logs_into_a_fresh_folder_is_one_store(tmp_path: Path) -> None:
    """The store is made once the first log is checked; the second goes into it, and again is nothing new."""
    pytest.importorskip("inspect_ai")
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("agent.eval", "sums-cancelled.eval"):
        shutil.copy(FIXTURES_DIR / "inspect-newuser3" / "logs" / name, logs / name)
    env = {k: v for k, v in os.environ.items() if k != "EVALSTORE_DB"}

    def imported() -> list[dict]:
        done = subprocess.run(
            [str(EVALSTORE), "import", "logs", "--json"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return ok_json(done)

    first = imported()
    assert [r["already_imported"] for r in first] == [False, False] and (tmp_path / ".evalstore").is_dir()
    assert [r["already_imported"] for r in imported()] == [True, True]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_a_utf16_file_is_refused_whole_even_with_skip_bad(sqlite_url: str, tmp_path: Path, encoding: str) -> None:
    """Read a line at a time, a UTF-16 file's lines split apart at its NUL bytes: some read as JSON, the rest as
    bad lines. ``--skip-bad`` must not import what that leaves (with a BOM, ``utf-16``, or without one)."""
    path = tmp_path / "wide.jsonl"
    rows = ['{"test_id": "a", "score": 1}', '{"test_id": "b", "score": 0.5}']
    path.write_text("\n".join(rows) + "\n", encoding=encoding)
    for extra in ((), ("--skip-bad",)):
        line = one_line_error(cli(sqlite_url, "import", str(path), *extra))
        assert "wide.jsonl: the file is UTF-16 encoded" in line and "re-save it as UTF-8" in line
    assert no_store(sqlite_url)


def test_a_line_of_nul_bytes_is_named_as_such(sqlite_url: str, tmp_path: Path) -> None:
    """A writer that crashed leaves NUL bytes where its last line was: said so, not a guessed UTF-32 codec."""
    path = tmp_path / "crashed.jsonl"
    path.write_bytes(b'{"test_id": "a", "score": 1}\n' + b"\x00" * 9 + b"\n")
    line = one_line_error(cli(sqlite_url, "import", str(path)))
    assert "crashed.jsonl:2: the line holds NUL bytes" in line and "codec" not in line
    out = ok_json(cli(sqlite_url, "import", str(path), "--skip-bad", "--json"))
    assert (out["tests"], out["skipped"]) == (1, 1)


def test_a_line_that_is_not_an_object_names_its_json_type(sqlite_url: str, tmp_path: Path) -> None:
    path = tmp_path / "values.jsonl"
    path.write_text('{"test_id": "a", "score": 1}\nnull\n', encoding="utf-8")
    line = one_line_error(cli(sqlite_url, "import", str(path)))
    assert line.endswith(
        "values.jsonl:2: expected a JSON object, got null (fix it, or import with --skip-bad to leave it out)"
    )


def test_no_target_and_an_empty_one_are_one_result_everywhere(sqlite_url: str, tmp_path: Path) -> None:
    """The store keys a result by test, target and attempt, with no target as an empty one: the later row
    supersedes the earlier, and the import's count, ``show`` and the export agree. A numeric target is its text."""
    path = tmp_path / "targets.jsonl"
    path.write_text(
        '{"test_id": "a", "score": 1}\n{"test_id": "a", "target": "", "score": 0.2}\n'
        '{"test_id": "b", "target": 7, "score": 1}\n',
        encoding="utf-8",
    )
    out = ok_json(cli(sqlite_url, "import", str(path), "--json"))
    assert (out["tests"], out["skipped"]) == (2, 1)
    shown = show(sqlite_url, out["run_id"])
    assert {(r["test_id"], r["target"], r["score"]) for r in shown["results"]} == {("a", "", 0.2), ("b", "7", 1.0)}
    exported = cli(sqlite_url, "export", out["run_id"], "--format", "csv")
    assert exported.exit_code == 0 and len(exported.output.splitlines()) == 1 + 2
    (skipped,) = shown["skipped_lines"]
    assert skipped["source"]["line"] == 1 and f"superseded by {path.resolve()}:2" in skipped["reason"]


def test_a_reason_names_the_earlier_result_by_its_absolute_path(sqlite_url: str, tmp_path: Path) -> None:
    """Imported from another folder by a relative path, the left-out line's reason still names the file
    wherever it is read from."""
    (tmp_path / "sub").mkdir()
    path = tmp_path / "suites.jsonl"
    path.write_text(
        '{"test_id": "a", "suite": "one", "score": 1}\n{"test_id": "a", "suite": "two", "score": 0.5}\n',
        encoding="utf-8",
    )
    result = subprocess.run(
        [str(EVALSTORE), "--db", sqlite_url, "import", "../suites.jsonl", "--skip-bad", "--json"],
        cwd=tmp_path / "sub",
        capture_output=True,
        text=True,
        timeout=60,
    )
    run_id = ok_json(result)["run_id"]
    (skipped,) = show(sqlite_url, run_id)["skipped_lines"]
    assert f"no target, attempt 1) is also the result at {path.resolve()}:1 of another suite" in skipped["reason"]


def test_show_lists_the_first_left_out_lines_and_all_of_them_with_all(sqlite_url: str, tmp_path: Path) -> None:
    """A resumed AgentV run repeats every test it ran again: ``show`` lists the left-out lines as it lists
    results, the first ``TABLE_ROWS``, and says how to see the rest."""
    from evalstore.cli.output import TABLE_ROWS

    path = tmp_path / "resumed.jsonl"
    rows = [json.dumps({"test_id": f"t{i}", "score": 0.5}) for i in range(TABLE_ROWS + 5)]
    path.write_text("\n".join(rows + [r.replace("0.5", "1") for r in rows]) + "\n", encoding="utf-8")
    run_id = ok_json(cli(sqlite_url, "import", str(path), "--json"))["run_id"]
    shown = cli(sqlite_url, "show", run_id)
    listed = [line for line in shown.output.splitlines() if "superseded by" in line]
    assert len(listed) == TABLE_ROWS and f"{TABLE_ROWS + 5} source lines left out:" in shown.output
    assert "--all lists every one" in shown.output
    every = cli(sqlite_url, "show", run_id, "--all")
    assert len([line for line in every.output.splitlines() if "superseded by" in line]) == TABLE_ROWS + 5


def test_rows_of_two_prompts_of_a_test_are_not_repeats(sqlite_url: str, tmp_path: Path) -> None:
    """AgentV HEAD names a row's prompt as ``prompt.id``: two prompts' results of one test are two results,
    as with ``prompt_id``, and evalstore keeps one per test, target and attempt, so it says so."""
    path = tmp_path / "prompts.jsonl"
    path.write_text(
        '{"test_id": "a", "prompt": {"id": "p1"}, "score": 1}\n{"test_id": "a", "prompt": {"id": "p2"}, "score": 0}\n',
        encoding="utf-8",
    )
    line = one_line_error(cli(sqlite_url, "import", str(path)))
    assert "prompts.jsonl:2: test 'a' (no target, attempt 1) is also the result at" in line and "another suite" in line


def test_the_import_counts_bad_lines_apart_from_superseded_results(sqlite_url: str, tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        '{"test_id": "a", "score": 1}\n{"test_id": "a", "score": 0.5}\nnot json\n{"test_id": "b", "score": 1}\n',
        encoding="utf-8",
    )
    said = cli(sqlite_url, "import", str(path), "--skip-bad")
    assert said.exit_code == 0
    assert "2 lines left out (1 bad, 1 superseded by a later row of the same test: `evalstore show`" in said.output
    again = ok_json(cli(sqlite_url, "import", str(path), "--skip-bad", "--json"))
    assert (again["already_imported"], again["tests"], again["skipped"], again["superseded"]) == (True, 2, 2, 1)


def test_a_run_folder_whose_index_is_utf16_is_refused_whole(sqlite_url: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURES_DIR / "agentv-newuser2" / "runs" / "extract", run)
    index = run / "index.jsonl"
    index.write_bytes(index.read_text(encoding="utf-8").encode("utf-16"))
    line = one_line_error(cli(sqlite_url, "import", str(run), "--skip-bad"))
    assert "index.jsonl: the file is UTF-16 encoded" in line
    assert no_store(sqlite_url)
