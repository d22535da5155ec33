"""Real-world AgentV variants the fixtures do not show: encodings, odd optional fields, repeated results,
HEAD grading.json without components, hand-made v4 run directories with sidecars missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalstore.replay.agentv import ImportedTest, detect_format, read_results
from evalstore.replay.agentv.importing import import_results
from evalstore.replay.errors import ImportFormatError
from evalstore.store import EventStore

ROW = {"timestamp": "2026-01-01T00:00:00Z", "test_id": "t1", "suite": "s", "score": 1, "target": "a"}


def write(path: Path, rows: list[dict], *, newline: str = "\n", prefix: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(json.dumps(r, ensure_ascii=False) + newline for r in rows)
    path.write_bytes(prefix + body.encode("utf-8"))
    return path


def read_tests(path: Path) -> list[ImportedTest]:
    return [t for t in read_results(path, detect_format(path)).iter_tests() if isinstance(t, ImportedTest)]


def results(store: EventStore, run_id: str) -> dict[tuple, dict]:
    return {(r["test_id"], r["target"]): r for r in store.query("results", run_id=run_id)}


def test_bom_crlf_and_blank_lines_are_read(tmp_path: Path) -> None:
    path = tmp_path / "win.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf\r\n"  # a BOM alone on the first line, as some editors leave it
        + json.dumps(ROW).encode()
        + b"\r\n\r\n   \r\n"
        + json.dumps({**ROW, "test_id": "t2"}).encode()
        + b"\r\n"
    )
    assert [(t.test_id, t.source.line) for t in read_tests(path)] == [("t1", 2), ("t2", 5)]
    bom_first = write(tmp_path / "bom.jsonl", [ROW], newline="\r\n", prefix=b"\xef\xbb\xbf")
    assert [t.test_id for t in read_tests(bom_first)] == ["t1"]


def test_a_bom_in_a_json_sidecar_is_read(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write(run / "index.jsonl", [{**ROW, "grading_path": "s/t1/grading.json"}])
    grading = {"assertions": [], "graders": [{"name": "g", "type": "contains", "score": 1, "verdict": "pass"}]}
    (run / "s" / "t1").mkdir(parents=True)
    (run / "s" / "t1" / "grading.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(grading).encode())
    (test,) = read_tests(run)
    assert [v.name for v in test.verdicts] == ["g"]


def test_a_utf16_file_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "ps.jsonl"
    path.write_bytes(("\ufeff" + json.dumps(ROW) + "\r\n").encode("utf-16-le"))
    with pytest.raises(ImportFormatError, match=r"ps\.jsonl: the file is UTF-16 encoded"):
        read_tests(path)


def test_too_deeply_nested_json_is_a_bad_line_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(
        json.dumps(ROW) + "\n" + '{"test_id":"t","score":1,"metadata":' + "[" * 100_000 + "]" * 100_000 + "}\n"
    )
    with pytest.raises(ImportFormatError, match=r"deep\.jsonl:2: JSON nested too deeply"):
        read_tests(path)


def test_a_lone_surrogate_escape_is_replaced_and_imports(sqlite_store: EventStore, tmp_path: Path) -> None:
    """JSON.stringify of a string cut mid-emoji writes ``\\ud83d``; UTF-8 cannot hold it, so it becomes U+FFFD."""
    path = tmp_path / "cut.jsonl"
    path.write_text('{"test_id":"t1","score":1,"output":"cut \\ud83d here","metadata":{"k\\udc00":"v"}}\n')
    (test,) = read_tests(path)
    assert test.output_text == "cut \ufffd here" and test.metadata == {"k\ufffd": "v"}
    out = import_results(sqlite_store, path)
    (started, *_) = sqlite_store.read_stream(out.run_id)
    assert out.tests == 1 and sqlite_store.query("runs", run_id=out.run_id)[0]["status"] == "completed"
    assert started.event.run_id == out.run_id


def test_optional_fields_of_the_wrong_type_are_treated_as_absent(store: EventStore, tmp_path: Path) -> None:
    row = {
        **ROW,
        "start_time": 1735689600000,
        "end_time": None,
        "token_usage": "n/a",
        "file_changes": {"a": 1},
        "cost_usd": "0.1",
        "workspace_path": 7,
    }
    path = write(tmp_path / "odd.jsonl", [row])
    (test,) = read_tests(path)
    assert (test.start_time, test.end_time, test.token_usage, test.file_changes, test.cost_usd) == (None,) * 5
    out = import_results(store, path)
    assert out.tests == 1
    assert store.query("runs", run_id=out.run_id)[0]["status"] == "completed"


def test_an_input_file_segment_keeps_its_content(tmp_path: Path) -> None:
    """Authored input file blocks carry their text (formats 2); dropping it would lose what the agent was shown."""
    row = {
        **ROW,
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Summarise"},
                    {
                        "type": "file",
                        "value": "./notes.md",
                        "path": "notes.md",
                        "text": "the notes",
                        "resolved_path": "/x/notes.md",
                    },
                ],
            }
        ],
    }
    (test,) = read_tests(write(tmp_path / "in.jsonl", [row]))
    file_block = test.input[0]["content"][1]
    assert file_block == {"type": "file", "path": "notes.md", "text": "the notes"}


def test_the_same_test_on_two_targets_gives_two_results(store: EventStore, tmp_path: Path) -> None:
    path = write(tmp_path / "matrix.jsonl", [ROW, {**ROW, "target": "b", "score": 0}])
    out = import_results(store, path)
    got = results(store, out.run_id)
    assert out.tests == 2 and set(got) == {("t1", "a"), ("t1", "b")}
    assert got[("t1", "a")]["score"] == 1 and got[("t1", "b")]["score"] == 0


def test_a_repeated_result_is_replaced_by_the_last_as_agentv_does(store: EventStore, tmp_path: Path) -> None:
    """A resumed run appends the re-run test again; AgentV's deduplicateByTestIdTarget keeps the last."""
    path = write(tmp_path / "resumed.jsonl", [{**ROW, "score": 0.2}, {**ROW, "test_id": "t2"}, {**ROW, "score": 0.9}])
    out = import_results(store, path)
    assert (out.tests, out.skipped) == (2, 1)
    assert results(store, out.run_id)[("t1", "a")]["score"] == pytest.approx(0.9)
    (skipped,) = [e.payload for e in store.read_stream(out.run_id, types=["line_skipped"])]
    assert (
        skipped["source"] == {"line": 1}
        and "superseded by" in skipped["reason"]
        and "resumed.jsonl:3" in skipped["reason"]
    )
    again = import_results(store, path)
    assert again.already_imported and again.run_id == out.run_id


def test_one_test_id_in_two_suites_is_refused_naming_both_lines(store: EventStore, tmp_path: Path) -> None:
    path = write(tmp_path / "multi.jsonl", [ROW, {**ROW, "test_id": "t2"}, {**ROW, "suite": "other"}])
    with pytest.raises(ImportFormatError, match=r"multi\.jsonl:3: test 't1' .* at .*multi\.jsonl:1 of another suite"):
        import_results(store, path)
    assert store.query("runs") == []
    out = import_results(store, path, skip_bad=True)
    assert (out.tests, out.skipped) == (2, 1)
    assert results(store, out.run_id)[("t1", "a")]["score"] == 1


def test_head_grading_without_components_is_read(tmp_path: Path) -> None:
    """A HEAD sample whose target failed before grading: grading.json has pass/score/metadata only."""
    sample = tmp_path / "run" / "broken--0123456789ab" / "sample-1"
    sample.mkdir(parents=True)
    (sample / "grading.json").write_text(
        json.dumps(
            {"pass": False, "score": 0, "reason": "Target failed", "metadata": {"execution_status": "execution_error"}}
        )
    )
    (sample / "result.json").write_text(json.dumps({"execution_status": "execution_error", "verdict": "fail"}))
    (test,) = read_tests(tmp_path / "run")
    assert (test.test_id, test.score, test.passed, test.execution_status) == ("broken", 0, False, "execution_error")
    assert test.verdicts == []


def test_v4_run_with_spaces_unicode_ids_and_missing_sidecars(store: EventStore, tmp_path: Path) -> None:
    run = tmp_path / "my runs" / "2026-01-01T00-00-00-000Z"
    rows = [
        {**ROW, "test_id": "résumé: 1/2", "score": 0.5, "execution_status": "quality_failure"},  # folder résumé_ 1_2
        {
            **ROW,
            "test_id": "t-err",
            "score": 0,
            "execution_status": "execution_error",
            "error": "agent crashed",
            "failure_stage": "agent",
        },  # no folder at all
    ]
    write(run / "index.jsonl", rows)
    folder = run / "s" / "résumé_ 1_2"
    (folder / "outputs").mkdir(parents=True)
    (folder / "grading.json").write_text(
        json.dumps(
            {"assertions": [], "graders": [{"name": "has x", "type": "contains", "score": 0.5, "verdict": "fail"}]}
        )
    )
    (folder / "outputs" / "answer.md").write_text("the answer\r\n")  # no timing.json, trace or transcript
    assert detect_format(run) == "agentv-v4-run"
    by_id = {t.test_id: t for t in read_tests(run)}
    assert by_id["résumé: 1/2"].output_text == "the answer\r\n"
    assert [v.name for v in by_id["résumé: 1/2"].verdicts] == ["has x"]
    assert by_id["t-err"].files == [] and by_id["t-err"].error == "agent crashed"
    out = import_results(store, run)
    got = results(store, out.run_id)
    assert got[("t-err", "a")]["status"] == "execution_error" and got[("t-err", "a")]["passed"] is False
    assert got[("résumé: 1/2", "a")]["status"] == "quality_failure"


def test_import_reports_progress_while_checking_and_while_writing(sqlite_store: EventStore, tmp_path: Path) -> None:
    rows = [{**ROW, "test_id": f"t{i:03d}"} for i in range(450)] + [{**ROW, "test_id": "t000", "score": 0.5}]
    calls: list[tuple[str, int, int | None]] = []
    outcome = import_results(sqlite_store, write(tmp_path / "many.jsonl", rows), progress=lambda *a: calls.append(a))
    assert outcome.tests == 450 and outcome.skipped == 1  # the repeated t000: last wins
    checking = [c for c in calls if c[0] == "checking"]
    importing = [c for c in calls if c[0] == "importing"]
    assert checking == [("checking", 200, None), ("checking", 400, None)]
    assert calls.index(importing[0]) > calls.index(checking[-1])  # checked first, then written
    assert [done for _, done, _ in importing] == sorted(done for _, done, _ in importing)
    assert importing[-1] == ("importing", 450, 450) and {total for _, _, total in importing} == {450}


# ---- what the results name is data: eval and targets files found from them -----------------------------


def _eval_naming(folder: Path, secret: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "e.eval.yaml").write_text(
        "name: demo\ntests:\n  - id: t1\n    input: [{role: user, content: [{type: file, value: "
        f"{secret}}}]}}]\n    criteria: x\n"
    )
    return folder / "e.eval.yaml"


def test_an_eval_file_the_results_name_is_used_only_inside_the_folders_an_import_may_read(
    sqlite_store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its snapshot would store what it references: a file anywhere on the disk, named by the data."""
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "secret.txt").write_text("TOP SECRET")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    run = tmp_path / "run"
    eval_file = _eval_naming(run, tmp_path / "secret" / "secret.txt")
    source = write(run / "res.jsonl", [{"test_id": "t1", "score": 1, "output": "ok", "eval_path": "e.eval.yaml"}])
    out = import_results(sqlite_store, source)
    assert out.eval_path is None
    assert out.warnings[0] == (
        f"eval file {eval_file}, which came with the results, was not used: it names "
        f"{tmp_path / 'secret' / 'secret.txt'}, which is outside the folders this import may read; "
        f"pass --eval {eval_file} if you trust it"
    )
    assert b"TOP SECRET" not in _all_blobs(sqlite_store)

    # The eval file itself outside (an absolute eval_path), and then the same file named with --eval.
    outside = _eval_naming(tmp_path / "elsewhere", run / "res.jsonl")
    source = write(run / "res2.jsonl", [{"test_id": "t1", "score": 1, "output": "ok", "eval_path": str(outside)}])
    out = import_results(sqlite_store, source)
    assert (
        out.eval_path is None
        and f"eval file {outside}, named by the results, was not used: it is outside" in (out.warnings[0])
    )
    out = import_results(sqlite_store, write(run / "res3.jsonl", [{"test_id": "t1", "score": 1}]), eval_path=eval_file)
    assert out.eval_path == str(eval_file) and b"TOP SECRET" in _all_blobs(sqlite_store)


def test_a_file_the_results_name_in_the_current_folder_is_not_read_or_quoted_unless_it_is_yaml(
    sqlite_store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Results from elsewhere, imported from one's home, name ``.ssh/id_rsa`` as their eval: it is not
    read (an eval file is YAML), and a YAML file there that does not load is not quoted in the warning."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n")
    (home / ".config").mkdir()
    (home / ".config" / "hosts.yml").write_text("oauth-token-gho-SECRETVALUE-1234567890abcdef\n")
    monkeypatch.chdir(home)
    for named in (".ssh/id_rsa", ".config/hosts.yml"):
        results = write(
            home / "Downloads" / "evil" / f"{Path(named).name}.jsonl",
            [{"test_id": "t1", "score": 1, "output": "hi", "eval_path": named, "target": "x"}],
        )
        out = import_results(sqlite_store, results)
        assert out.eval_path is None
        text = " ".join(out.warnings)
        assert f"eval file {home / named}, named by the results, was not used: " in text, text
        assert "OPENSSH" not in text and "SECRETVALUE" not in text
    assert b"OPENSSH" not in _all_blobs(sqlite_store) and b"SECRETVALUE" not in _all_blobs(sqlite_store)


def test_an_eval_file_that_came_with_the_results_reaches_no_file_of_the_current_folder(
    sqlite_store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A foreign folder imported from one's home: the eval beside its results names ``~/.ssh/id_rsa``. The
    current folder is where an eval of the user's own repository may reach, not one shipped with the data."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    key = home / ".ssh" / "id_rsa"
    key.write_text("PRIVATE KEY")
    monkeypatch.chdir(home)
    foreign = home / "Downloads" / "foreign"
    _eval_naming(foreign, Path("../../.ssh/id_rsa")).rename(foreign / "results.eval.yaml")
    write(foreign / "results.eval.baseline.jsonl", [{"test_id": "t1", "score": 1, "output": "ok"}])
    out = import_results(sqlite_store, Path("Downloads/foreign/results.eval.baseline.jsonl"))
    assert out.eval_path is None and out.evals_not_used == 1
    assert (
        f"results.eval.yaml, which came with the results, was not used: it names {key}, which is outside"
        in (out.warnings[0])
    )
    assert b"PRIVATE KEY" not in _all_blobs(sqlite_store)

    # An eval of the repository one imports from (outside the imported folder) names files there.
    (home / "data").mkdir()
    (home / "data" / "in.txt").write_text("REPOSITORY DATA")
    _eval_naming(home / "evals", Path("../data/in.txt"))
    run = write(home / "runs" / "r1" / "res.jsonl", [{"test_id": "t1", "score": 1, "eval_path": "evals/e.eval.yaml"}])
    out = import_results(sqlite_store, run)
    assert out.eval_path == str(home / "evals" / "e.eval.yaml") and out.evals_not_used == 0
    assert b"REPOSITORY DATA" in _all_blobs(sqlite_store)


def test_an_eval_file_beside_the_results_that_does_not_load_says_why(sqlite_store: EventStore, tmp_path: Path) -> None:
    (tmp_path / "bad.eval.yaml").write_text(
        "name: bad\ntests:\n  - {id: t1, input: hi, criteria: x}\nassertions:\n  - {name: nope, type: ''}\n"
    )
    out = import_results(sqlite_store, write(tmp_path / "bad.eval.baseline.jsonl", [{"test_id": "t1", "score": 1}]))
    assert out.eval_path is None and out.evals_not_used == 1
    assert out.warnings[0].startswith(
        f"eval file {tmp_path / 'bad.eval.yaml'}, which came with the results, was not used: "
    )
    assert "`type` is required" in out.warnings[0]


def test_a_targets_file_shipped_with_the_results_grants_no_folder(
    sqlite_store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The targets' ``cwd`` is a folder an import may read only when the targets file is the user's
    (``--targets``, or found above ``--eval``), not one found above an eval file the results name."""
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "secret.txt").write_text("TOP SECRET")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    run = tmp_path / "run"
    (run / ".agentv").mkdir(parents=True)
    targets = run / ".agentv" / "targets.yaml"
    targets.write_text(f'targets:\n  - {{name: default, provider: cli, command: "true", cwd: {tmp_path / "secret"}}}\n')
    (run / "e.eval.yaml").write_text("name: demo\ntests:\n  - {id: t1, input: hi, criteria: x}\n")
    part = {"type": "file", "path": str(tmp_path / "secret" / "secret.txt")}
    row = {"test_id": "t1", "score": 1, "target": "default", "eval_path": "e.eval.yaml"}
    row["output"] = [{"role": "assistant", "content": [part]}]

    out = import_results(sqlite_store, write(run / "res.jsonl", [row]))
    assert out.eval_path == str(run / "e.eval.yaml")  # inside the imported folder: used
    assert b"TOP SECRET" not in _all_blobs(sqlite_store) and b'"status":"refused"' in _all_blobs(sqlite_store)
    # Another source (the same bytes would be the same run, already imported), with the user's --targets.
    out = import_results(sqlite_store, write(run / "res2.jsonl", [{**row, "score": 0.5}]), targets_path=targets)
    assert b"TOP SECRET" in _all_blobs(sqlite_store)


def _all_blobs(store: EventStore) -> bytes:
    """Every stored blob's bytes, decoded, joined."""
    from sqlalchemy import text

    with store.engine.connect() as conn:
        digests = [r[0] for r in conn.execute(text("SELECT sha256 FROM blobs"))]
    return b"\n".join(store.get_blobs(digests).values())
