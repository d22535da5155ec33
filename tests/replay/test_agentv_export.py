"""Exports: imported AgentV results -> store events -> AgentV rows / CSV / JSON reproduce the originals."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from fixture_paths import AGENTV_FIXTURES as FIXTURES
from fixture_paths import HANDMADE_V4_RUN

from evalstore.replay.agentv import ImportedTest, detect_format, read_results
from evalstore.replay.agentv.export import (
    CSV_COLUMNS,
    JSON_CASE_FIELDS,
    JSON_RESULT_FIELDS,
    JSON_TRANSCRIPT_FIELDS,
    JSON_VERDICT_FIELDS,
    ResultBundle,
    agentv_time,
    export_row,
    export_rows,
    write_csv,
    write_json,
    write_jsonl,
)
from evalstore.replay.agentv.rows import build_test
from evalstore.store import events as ev
from evalstore.store.events import Assertion, RunStarted, SourceRef, TranscriptRecorded, VerdictRecorded

REPO = Path(__file__).resolve().parents[2]

BASELINE = FIXTURES / "v4" / "rubric" / "dataset.eval.baseline.jsonl"
V5_RUN = FIXTURES / "v5-next" / "runs" / "2026-07-06T01-06-18-244Z"
V4_RUN = HANDMADE_V4_RUN
THRESHOLD = 0.8


def imported(path: Path) -> tuple[RunStarted, list[ImportedTest]]:
    source = read_results(path, detect_format(path))
    run = RunStarted(
        run_id="run-1",
        kind="imported",
        suite=source.suite,
        source=SourceRef(file=str(path)),
        source_format=source.format,
        tool_version="test",
    )
    return run, [t for t in source.iter_tests() if isinstance(t, ImportedTest)]


def bundle_of(test: ImportedTest) -> ResultBundle:
    """What an importer naturally records for one imported test."""
    key = {"test_id": test.test_id, "target": test.target, "attempt": test.attempt}
    passed = test.passed if test.passed is not None else test.score >= THRESHOLD
    status = test.execution_status or ("ok" if passed else "quality_failure")
    scored = ev.TestScored(
        **key,
        score=test.score,
        passed=passed,
        status=status,
        threshold=THRESHOLD,
        error=test.error,
        origin="imported",
        source=test.source,
    )
    verdicts = [
        VerdictRecorded(
            **key,
            grader=v.name,
            grader_type=v.type,
            score=v.score,
            verdict=v.verdict,
            weight=v.weight,
            assertions=[Assertion(**a) for a in v.assertions],
            details=v.details,
            origin="imported",
            grader_target=v.grader_target,
            source=test.source,
        )
        for v in test.verdicts
    ]
    transcript = TranscriptRecorded(
        **key,
        messages_sha256=None,
        output_text=test.output_text,
        token_usage=test.token_usage,
        cost_usd=test.cost_usd,
        duration_ms=test.duration_ms,
        start_time=test.start_time,
        end_time=test.end_time,
        file_changes=test.file_changes,
        workspace_path=test.workspace_path,
        source=test.source,
    )
    case = ev.TestCaseRecorded(
        **key, input=test.input, expected_output=test.expected_output, criteria=test.criteria, metadata=test.metadata
    )
    return ResultBundle(
        scored=scored,
        verdicts=verdicts,
        transcript=transcript,
        case=case,
        timestamp=test.raw_row.get("timestamp"),
        rendered_prompts={v.name: v.rendered_prompt for v in test.verdicts if v.rendered_prompt is not None},
    )


def exported(path: Path) -> tuple[RunStarted, list[ResultBundle], list[dict]]:
    run, tests = imported(path)
    bundles = [bundle_of(t) for t in tests]
    return run, bundles, list(export_rows(run, bundles))


def grader_view(scores: list[dict]) -> list[tuple]:
    return [
        (
            s["name"],
            s["type"],
            s["score"],
            s["verdict"],
            s.get("weight", 1),
            [(a["text"], a["passed"], a.get("evidence")) for a in s.get("assertions", [])],
        )
        for s in scores
    ]


def test_v4_baseline_round_trip() -> None:
    originals = [json.loads(line) for line in BASELINE.read_text().splitlines()]
    _, _, rows = exported(BASELINE)
    assert len(rows) == len(originals) == 5
    for original, row in zip(originals, rows):
        for key in ("test_id", "suite", "target", "score", "timestamp"):
            assert row[key] == original[key], key
        if "scores" in original:
            assert grader_view(row["scores"]) == grader_view(original["scores"])
        # The flattened list keeps AgentV's order (passed first) and texts; its evidence is per assertion.
        assert [(a["text"], a["passed"]) for a in row["assertions"]] == [
            (a["text"], a["passed"]) for a in original["assertions"]
        ]
    multi = rows[0]
    assert multi["execution_status"] == "quality_failure"
    assert [(s["name"], s["score"], s["verdict"]) for s in multi["scores"]] == [
        ("rubrics", 0.5, "fail"),
        ("python_syntax", 1.0, "pass"),
    ]
    assert "error" not in multi and "input" not in multi["scores"][0]


def test_v4_run_export_keeps_grader_requests_and_usage() -> None:
    originals = [json.loads(line) for line in (V4_RUN / "index.jsonl").read_text().splitlines()]
    _, _, rows = exported(V4_RUN)
    first, sheet = rows
    assert first["scores"][0]["input"] == originals[0]["scores"][0]["input"]
    assert first["scores"][0]["input"]["userPrompt"].startswith("You are an expert grader.")
    assert first["scores"][0]["target"] == "judge-gpt"
    assert first["scores"][1]["input"] == {
        "command": ["uv", "run", "python", "check_syntax.py"],
        "cwd": "/tmp/agentv/graders",
    }
    for key in (
        "token_usage",
        "cost_usd",
        "duration_ms",
        "start_time",
        "end_time",
        "workspace_path",
        "metadata",
        "execution_status",
    ):
        assert first[key] == originals[0][key], key
    assert first["output"] == (V4_RUN / "dataset/code-quality-multi-eval/outputs/answer.md").read_text()
    assert sheet["scores"][0]["input"]["userPrompt"].startswith("[[ ## answer ## ]]\n[[ file: generated/report.csv ]]")
    assert sheet["output"] == "Here is the report.\n"


def test_v5_bundle_scores_round_trip() -> None:
    original = json.loads((V5_RUN / ".internal" / "index.jsonl").read_text())
    _, _, [row] = exported(V5_RUN)
    assert (row["test_id"], row["target"], row["suite"], row["score"]) == (
        "fizzbuzz",
        "codex-sdk-openai",
        "my-eval",
        1.0,
    )
    assert [(s["name"], s["type"], s["score"], s["weight"]) for s in row["scores"]] == [
        (s["name"], s["type"], s["score"], s["weight"]) for s in original["scores"]
    ]
    assert [s["verdict"] for s in row["scores"]] == ["pass" if s["pass"] else "fail" for s in original["scores"]]
    assert [s.get("target") for s in row["scores"]] == [s.get("target") for s in original["scores"]]
    assert row["scores"][3]["assertions"][1]["text"] == "[rubric-2] Handles the 3, 5, and 15 branches correctly"
    assert row["token_usage"] == original["token_usage"] and row["duration_ms"] == original["duration_ms"]


def test_exported_jsonl_imports_back(tmp_path: Path) -> None:
    _, _, rows = exported(V4_RUN)
    out = tmp_path / "export.jsonl"
    with out.open("w") as fh:
        assert write_jsonl(rows, fh) == 2
    _, again = imported(out)
    _, first = imported(V4_RUN)
    for before, after in zip(first, again):
        assert (after.test_id, after.target, after.score, after.execution_status, after.output_text) == (
            before.test_id,
            before.target,
            before.score,
            before.execution_status,
            before.output_text,
        )
        assert [(v.name, v.score, v.verdict, v.assertions, v.rendered_prompt) for v in after.verdicts] == [
            (v.name, v.score, v.verdict, v.assertions, v.rendered_prompt) for v in before.verdicts
        ]


def test_later_attempts_carry_a_sample_index() -> None:
    run, [test, *_] = imported(BASELINE)
    test.attempt = 3
    [row] = export_rows(run, [bundle_of(test)])
    assert row["sample_index"] == 2


def test_a_rows_trials_fields_are_kept_as_their_text_and_written_back_last() -> None:
    """An imported row of a test with trials keeps ``trials``, ``aggregation`` and ``cost_limited`` as the JSON
    text AgentV wrote (keys in its order, ``JSON.stringify``'s numbers), and its export writes each back, last;
    beside no ``trials[]`` (a v5 row's own ``aggregation``), or of another JSON type, they are not kept."""
    trial = {"attempt": 0, "score": 1.0, "verdict": "pass", "scores": [{"name": "g", "score": 1e-7}]}
    row = {
        "test_id": "t",
        "score": 1,
        "target": "agent",
        "trials": [trial],
        "aggregation": {"strategy": "pass_at_k", "passed_attempts": 1, "total_attempts": 1},
        "cost_limited": True,
        "category": "Uncategorized",
    }
    test = build_test(row, source=SourceRef(file="r.jsonl", line=1))
    text = '[{"attempt":0,"score":1,"verdict":"pass","scores":[{"name":"g","score":1e-7}]}]'
    assert test.row_fields == {
        "category": "Uncategorized",
        "trials": text,
        "aggregation": '{"strategy":"pass_at_k","passed_attempts":1,"total_attempts":1}',
        "cost_limited": "true",
    }
    run = RunStarted(run_id="run-1", kind="imported", tool_version="test")
    bundle = bundle_of(test)
    bundle.scored = bundle.scored.model_copy(update={"row_fields": test.row_fields})
    line = _jsonl_text([export_row(run, bundle)])
    assert line.endswith(
        f',"trials":{text},"aggregation":{{"strategy":"pass_at_k","passed_attempts":1,"total_attempts":1}},'
        '"cost_limited":true}\n'
    )
    assert build_test({**row, "trials": None}, source=SourceRef()).row_fields == {"category": "Uncategorized"}
    assert build_test({**row, "aggregation": "mean", "cost_limited": 1}, source=SourceRef()).row_fields == {
        "category": "Uncategorized",
        "trials": text,
    }


def _jsonl_text(rows: list[dict]) -> str:
    out = io.StringIO()
    write_jsonl(rows, out)
    return out.getvalue()


def _trial(attempt: int, score: float, status: str, cost: float, **labels: str) -> ResultBundle:
    key = {"test_id": "t", "target": "agent", "attempt": attempt}
    return ResultBundle(
        scored=ev.TestScored(
            **key,
            score=score,
            passed=status == "ok",
            status=status,  # type: ignore[arg-type]
            threshold=THRESHOLD,
            error=f"trial {attempt} failed" if status == "execution_error" else None,
            row_fields=labels,
        ),
        verdicts=[VerdictRecorded(**key, grader="g", grader_type="contains", score=score, verdict="fail")],
        transcript=TranscriptRecorded(**key, messages_sha256=None, output_text=f"answer {attempt}", cost_usd=cost),
    )


def test_a_tests_trials_are_one_row_as_agentv_writes_it() -> None:
    """AgentV 4.42.4's runEvalCaseWithTrials: the best trial's row (the first of the highest score), the trials'
    aggregate as its score, `execution_error` only when every trial is one (its labels the best trial's), each
    trial in `trials[]` (attempt from 0, verdict at 0.8), `aggregation`, and `cost_limited` when the limit
    stopped the trials."""
    from evalstore.replay.agentv.export import trials_row
    from evalstore.replay.evalfile.specs import TrialsSpec

    run = RunStarted(run_id="rec-1", kind="recorded", suite="s", target_name="agent", tool_version="test")
    labels = {"failure_stage": "agent", "failure_reason_code": "provider_error"}
    attempts = [_trial(1, 0.25, "execution_error", 0.5, **labels), _trial(2, 0.5, "execution_error", 0.75, **labels)]
    spec = TrialsSpec(count=3, strategy="pass_at_k", cost_limit_usd=1.0)
    row = trials_row(run, spec, attempts)
    assert (row["test_id"], row["target"], row["score"], row["output"]) == ("t", "agent", 0.5, "answer 2")
    assert "sample_index" not in row  # AgentV's row of a test with trials has none
    assert [row[k] for k in ("execution_status", "error", "failure_stage", "failure_reason_code")] == [
        "execution_error",
        "trial 2 failed",
        "agent",
        "provider_error",
    ]
    assert [{k: v for k, v in t.items() if k != "scores"} for t in row["trials"]] == [
        {
            "attempt": n - 1,
            "score": score,
            "verdict": "fail",
            "error": f"trial {n} failed",
            "cost_usd": cost,
            "execution_status": "execution_error",
            **labels,
        }
        for n, score, cost in ((1, 0.25, 0.5), (2, 0.5, 0.75))
    ]
    assert [[s["score"] for s in t["scores"]] for t in row["trials"]] == [[0.25], [0.5]]
    assert row["aggregation"] == {"strategy": "pass_at_k", "passed_attempts": 0, "total_attempts": 2}
    assert row["cost_limited"] is True
    assert list(row)[-3:] == ["trials", "aggregation", "cost_limited"]
    # A trial that is ok makes the test ok, whatever the one score: no failure labels, as AgentV drops them.
    attempts = [_trial(1, 1.0, "ok", 0.1), _trial(2, 0.5, "execution_error", 0.1, **labels), _trial(3, 1.0, "ok", 0.1)]
    row = trials_row(run, TrialsSpec(count=3, strategy="mean"), attempts)
    assert (row["score"], row["execution_status"], row["output"]) == (pytest.approx(2.5 / 3), "ok", "answer 1")
    assert "failure_stage" not in row and "failure_reason_code" not in row and "cost_limited" not in row
    assert row["aggregation"] == {"strategy": "mean", "mean": pytest.approx(2.5 / 3), "min": 0.5, "max": 1}
    assert [t["verdict"] for t in row["trials"]] == ["pass", "fail", "pass"]


def test_csv_has_one_line_per_test_and_grader() -> None:
    run, bundles, _ = exported(BASELINE)
    bundles.append(
        ResultBundle(
            scored=ev.TestScored(
                test_id="no-graders",
                target="default",
                score=0.0,
                passed=False,
                status="execution_error",
                threshold=THRESHOLD,
            )
        )
    )
    buffer = io.StringIO()
    written = write_csv(run, bundles, buffer)
    lines = list(csv.DictReader(io.StringIO(buffer.getvalue())))
    assert tuple(lines[0].keys()) == CSV_COLUMNS
    assert written == len(lines) == 2 + 1 + 1 + 1 + 1 + 1
    assert lines[0] == {
        "run_id": "run-1",
        "test_id": "code-quality-multi-eval",
        "target": "default",
        "attempt": "1",
        "test_score": "0.75",
        "passed": "false",
        "status": "quality_failure",
        "grader": "rubrics",
        "grader_type": "llm-grader",
        "grader_score": "0.5",
        "verdict": "fail",
        "weight": "1.0",
        "assertions_passed": "2",
        "assertions_total": "4",
        "error": "",
        "failed_assertions": "[rubric-2] Includes type hints: The function does not include any type hints (such as "
        "'email: str' or '-> bool') in its definition.\n[rubric-4] Handles edge cases (None, empty string): The function "
        "does not explicitly handle edge cases such as None or empty string inputs; passing None would raise an exception.",
    }
    assert (lines[1]["grader"], lines[1]["verdict"]) == ("python_syntax", "pass")
    assert (lines[-1]["test_id"], lines[-1]["grader"], lines[-1]["status"]) == ("no-graders", "", "execution_error")


def test_json_document_holds_run_and_verdicts() -> None:
    run, bundles, _ = exported(V5_RUN)
    buffer = io.StringIO()
    assert write_json(run, bundles, buffer) == 1
    doc = json.loads(buffer.getvalue())
    assert (doc["run"]["run_id"], doc["run"]["kind"], doc["run"]["suite"]) == ("run-1", "imported", "my-eval")
    [result] = doc["results"]
    assert (result["test_id"], result["score"], result["passed"], result["status"]) == ("fizzbuzz", 1.0, True, "ok")
    assert [v["grader"] for v in result["verdicts"]] == ["contains-fizz", "llm-rubric", "script", "llm-rubric"]
    assert result["verdicts"][0]["origin"] == "imported"
    assert result["transcript"]["output_text"].startswith("```python")


def test_empty_json_export_is_valid() -> None:
    run, _, _ = exported(BASELINE)
    buffer = io.StringIO()
    assert write_json(run, [], buffer) == 0
    assert json.loads(buffer.getvalue())["results"] == []


@pytest.mark.parametrize("writer", [write_csv, write_json])
def test_writers_stream_a_generator(writer) -> None:
    run, bundles, _ = exported(BASELINE)
    consumed: list[str] = []

    def results():
        for bundle in bundles:
            consumed.append(bundle.scored.test_id)
            yield bundle

    assert writer(run, results(), io.StringIO()) >= len(bundles)
    assert len(consumed) == len(bundles)


def test_csv_quotes_commas_quotes_newlines_and_keeps_non_ascii() -> None:
    run, bundles, _ = exported(BASELINE)
    first = bundles[0]
    first.scored = first.scored.model_copy(update={"error": 'agent: "boom", exit 3\nsecond line – ünïcode ✓'})
    rubric = first.verdicts[0]
    assertions = [*rubric.assertions[:2], Assertion(text="Says «bonjour», then\nstops", passed=False)]
    first.verdicts[0] = rubric.model_copy(update={"grader": "judge, strict", "assertions": assertions})
    buffer = io.StringIO(newline="")
    write_csv(run, bundles[:1], buffer)
    text = buffer.getvalue()
    assert text.startswith(",".join(CSV_COLUMNS) + "\r\n")
    lines = list(csv.DictReader(io.StringIO(text, newline="")))
    assert len(lines) == 2
    assert lines[0]["grader"] == "judge, strict"
    assert lines[0]["failed_assertions"].split("\n")[0:2] == ["Says «bonjour», then", "stops"]
    assert all(line["error"] == 'agent: "boom", exit 3\nsecond line – ünïcode ✓' for line in lines)


def test_csv_text_a_spreadsheet_would_run_gets_a_leading_quote() -> None:
    """``=HYPERLINK(...)`` in an imported test id, grader or assertion is a formula to a spreadsheet."""
    run, bundles, _ = exported(BASELINE)
    first = bundles[0]
    first.scored = first.scored.model_copy(update={"test_id": '=HYPERLINK("http://evil","x")', "error": "@SUM(A1)"})
    rubric = first.verdicts[0]
    assertions = [Assertion(text="-2+3", passed=False), Assertion(text="plain", passed=False)]
    first.verdicts[0] = rubric.model_copy(update={"grader": "+cmd", "assertions": assertions})
    buffer = io.StringIO(newline="")
    write_csv(run, bundles[:1], buffer)
    line = next(csv.DictReader(io.StringIO(buffer.getvalue(), newline="")))
    assert line["test_id"] == '\'=HYPERLINK("http://evil","x")' and line["error"] == "'@SUM(A1)"
    assert line["grader"] == "'+cmd" and line["failed_assertions"] == "'-2+3\nplain"
    assert float(line["test_score"]) == first.scored.score  # numbers as they are


def test_json_results_have_a_fixed_shape_without_store_internals() -> None:
    run, bundles, _ = exported(V4_RUN)
    bundles.append(
        ResultBundle(
            scored=ev.TestScored(test_id="bare", score=0.0, passed=False, status="execution_error", threshold=THRESHOLD)
        )
    )
    buffer = io.StringIO()
    write_json(run, bundles, buffer)
    doc = json.loads(buffer.getvalue())
    assert (doc["format"], doc["version"]) == ("evalstore-export", 3)
    first, _, bare = doc["results"]
    assert set(first) == {*JSON_RESULT_FIELDS, "timestamp", "experiment", "verdicts", "transcript", "case"}
    assert set(first["verdicts"][0]) == {*JSON_VERDICT_FIELDS, "rendered_prompt"}
    assert set(first["transcript"]) == set(JSON_TRANSCRIPT_FIELDS)
    assert set(first["case"]) == {*JSON_CASE_FIELDS, "origin"} and first["case"]["origin"] == "recorded"
    assert first["verdicts"][0]["rendered_prompt"]["userPrompt"].startswith("You are an expert grader.")
    assert (
        first["transcript"]["token_usage"]
        == json.loads((V4_RUN / "index.jsonl").read_text().splitlines()[0])["token_usage"]
    )
    assert (bare["test_id"], bare["verdicts"], bare["transcript"], bare["case"]) == ("bare", [], None, None)


@pytest.mark.parametrize(
    "stored,shown",
    [
        ("2026-11-22T18:28:37.248695+00:00", "2026-11-22T18:28:37.248Z"),
        ("2026-11-22T18:28:37+00:00", "2026-11-22T18:28:37.000Z"),
        ("2026-02-20T21:40:12.230Z", "2026-02-20T21:40:12.230Z"),  # an imported row's own text is kept
        ("2026-02-20 21:40", "2026-02-20 21:40"),
        (None, None),
    ],
)
def test_times_the_store_made_are_written_as_agentv_writes_them(stored, shown) -> None:
    assert agentv_time(stored) == shown


def test_jsonl_lines_are_compact_like_agentvs_and_keep_every_value(tmp_path: Path) -> None:
    """Lines are written as AgentV's JSON.stringify writes them (no spaces), and values orjson cannot
    write (an integer beyond 64 bits) still come out exact, through the stdlib fallback."""
    rows = [
        {"test_id": "a", "metadata": {"note": "Ünïcode, \u2028 kept", "n": 1.5}},
        {"test_id": "b", "metadata": {"big": 2**70, "small": -1}},
    ]
    out = io.StringIO()
    assert write_jsonl(rows, out) == 2
    lines = out.getvalue().split("\n")[:-1]  # not splitlines: U+2028 is a line break to it
    assert lines[0] == '{"test_id":"a","metadata":{"note":"Ünïcode, \u2028 kept","n":1.5}}'
    assert lines[1] == '{"test_id":"b","metadata":{"big":1180591620717411303424,"small":-1}}'
    assert [json.loads(line) for line in lines] == rows


def test_lines_go_to_the_bytes_under_a_utf8_file_in_order(tmp_path: Path) -> None:
    """A UTF-8 text file gets the encoded bytes directly: what was written as text before stays first,
    and what is written after comes after."""
    out = tmp_path / "out.jsonl"
    with out.open("w", encoding="utf-8", newline="") as fh:
        fh.write("head\n")
        assert write_jsonl([{"a": "é"}, {"b": [1, 2]}], fh) == 2
        fh.write("tail\n")
    assert out.read_text(encoding="utf-8") == 'head\n{"a":"é"}\n{"b":[1,2]}\ntail\n'
    with (tmp_path / "latin.jsonl").open("w", encoding="latin-1") as fh:  # not UTF-8: written as text
        assert write_jsonl([{"a": "é"}], fh) == 1
    assert (tmp_path / "latin.jsonl").read_bytes() == '{"a":"é"}\n'.encode("latin-1")


@pytest.mark.parametrize("fmt", ["agentv-jsonl", "csv", "json"])
def test_an_export_reports_its_progress_and_writes_the_same_bytes(sqlite_store, fmt, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Chunk by chunk, in this process or in forked workers, an export writes the same bytes, and reports
    the results written after each chunk."""
    from evalstore.replay.agentv import chunked, export
    from evalstore.replay.agentv.importing import import_results

    run_id = import_results(sqlite_store, BASELINE).run_id
    quiet = io.StringIO()
    written = export.export_run(sqlite_store, run_id, fmt, quiet, workers=1)
    monkeypatch.setattr(chunked, "CHUNK_RESULTS", 2)
    monkeypatch.setattr(chunked, "TAIL_PARTS", 1)  # chunks of two to the end
    results = len(BASELINE.read_text(encoding="utf-8").splitlines())
    assert results > 4
    for workers in (1, 2):
        seen: list[int] = []
        reported = io.StringIO()
        assert export.export_run(sqlite_store, run_id, fmt, reported, progress=seen.append, workers=workers) == written
        assert reported.getvalue() == quiet.getvalue()
        assert seen == sorted({*range(2, results + 1, 2), results})  # after every chunk of 2, then the end


def test_an_imported_graders_timing_is_written_back_as_agentv_wrote_it(sqlite_store) -> None:  # type: ignore[no-untyped-def]
    """Each v4 ``scores[]`` entry's ``duration_ms``, ``started_at`` and ``ended_at`` (a real AgentV 4.42.4
    run: tests/fixtures/agentv-grader-error), which the import did not keep, in AgentV's place and order."""
    from fixture_paths import FIXTURES_DIR

    from evalstore.replay.agentv import export
    from evalstore.replay.agentv.importing import import_results

    run_dir = FIXTURES_DIR / "agentv-grader-error" / "project" / "runs" / "judge-error-mean"
    originals = {r["test_id"]: r for r in map(json.loads, (run_dir / "index.jsonl").read_text().splitlines())}
    run_id = import_results(sqlite_store, run_dir).run_id
    out = io.StringIO()
    export.export_run(sqlite_store, run_id, "agentv-jsonl", out, workers=1)
    rows = {r["test_id"]: r for r in map(json.loads, out.getvalue().splitlines())}
    timing = ("duration_ms", "started_at", "ended_at")
    for test, original in originals.items():
        for ours, theirs in zip(rows[test]["scores"], original["scores"], strict=True):
            assert list(ours)[-3:] == list(theirs)[-3:] == list(timing)
            assert [ours[k] for k in timing] == [theirs[k] for k in timing]
