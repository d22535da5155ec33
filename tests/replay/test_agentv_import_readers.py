"""AgentV result readers on real fixtures and hand-made run directories: formats, sidecars, bad input."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tracemalloc
from pathlib import Path

import pytest
from fixture_paths import AGENTV_FIXTURES as FIXTURES
from fixture_paths import HANDMADE_V4_RUN

from evalstore.replay.agentv import ImportedTest, SkippedLine, detect_format, read_results
from evalstore.replay.agentv.file_access import file_access
from evalstore.replay.errors import ImportFormatError, ReplayError

REPO = Path(__file__).resolve().parents[2]

BASELINE = FIXTURES / "v4" / "rubric" / "dataset.eval.baseline.jsonl"
V5_RUN = FIXTURES / "v5-next" / "runs" / "2026-07-06T01-06-18-244Z"
V5_CASE = "fizzbuzz--4049e3c70f38"
REPLAY_FIXTURE = FIXTURES / "v5-next" / "replay-target-output.jsonl"
V4_RUN = HANDMADE_V4_RUN


def read_all(path: Path, skip_bad: bool = False) -> list[ImportedTest | SkippedLine]:
    source = read_results(path, detect_format(path))
    return list(source.iter_tests(skip_bad=skip_bad))


def only_tests(items: list[ImportedTest | SkippedLine]) -> list[ImportedTest]:
    return [t for t in items if isinstance(t, ImportedTest)]


def write_rows(path: Path, rows: list[dict | str]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.fixture
def v5_copy(tmp_path: Path) -> Path:
    run = tmp_path / V5_RUN.name
    shutil.copytree(V5_RUN, run)
    return run


# ---- detection -------------------------------------------------------------------------------------------


def test_detects_each_layout(v5_copy: Path, tmp_path: Path) -> None:
    assert detect_format(BASELINE) == "results-jsonl"
    assert detect_format(V5_RUN) == "agentv-v5-bundle"
    assert detect_format(V5_RUN / ".internal" / "index.jsonl") == "agentv-v5-bundle"
    assert detect_format(V4_RUN) == "agentv-v4-run"
    assert detect_format(V4_RUN / "index.jsonl") == "agentv-v4-run"
    # A bundle that lost its summary and index is still recognisable by its sample folders.
    shutil.rmtree(v5_copy / ".internal")
    (v5_copy / "summary.json").unlink()
    assert detect_format(v5_copy) == "agentv-v5-bundle"


@pytest.mark.parametrize("name", ["results.ndjson", "run.agentv-jsonl", "results"])
def test_result_rows_under_another_name_are_read_as_rows(tmp_path: Path, name: str) -> None:
    """A file `export --format agentv-jsonl -o` was given any name: its first line opens a JSON object."""
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf\n  " + BASELINE.read_bytes())
    assert detect_format(path) == "results-jsonl"
    assert [t.test_id for t in read_results(path, "results-jsonl").iter_tests()] == [
        t.test_id for t in read_results(BASELINE, "results-jsonl").iter_tests()
    ]


@pytest.mark.parametrize("name", ["log.txt", "results.jsonl"])
def test_one_json_document_over_several_lines_is_not_rows(tmp_path: Path, name: str) -> None:
    """As Inspect writes a .json log: refused as what it is, not as a first row cut short."""
    path = tmp_path / name
    path.write_text(json.dumps({"version": 2, "status": "success", "samples": []}, indent=2), encoding="utf-8")
    with pytest.raises(ImportFormatError, match=r"one JSON document over several lines, not result rows .* \.json"):
        detect_format(path)


def test_unknown_directory_and_files_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-run"
    (empty / "some-dir").mkdir(parents=True)
    with pytest.raises(ImportFormatError, match="not an AgentV result directory"):
        detect_format(empty)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ImportFormatError, match=r"expected a \.jsonl file"):
        detect_format(text)
    with pytest.raises(ImportFormatError, match="no such file"):
        detect_format(tmp_path / "absent.jsonl")
    with pytest.raises(ImportFormatError, match="unknown AgentV result format"):
        read_results(BASELINE, "csv")
    assert issubclass(ImportFormatError, ReplayError)


# ---- v4 baseline JSONL -----------------------------------------------------------------------------------


def test_v4_baseline_rows() -> None:
    source = read_results(BASELINE, "results-jsonl")
    assert source.suite == "dataset"
    assert source.source_digest == hashlib.sha256(BASELINE.read_bytes()).hexdigest()
    tests = only_tests(list(source.iter_tests()))
    assert [t.test_id for t in tests] == [
        "code-quality-multi-eval",
        "code-explanation-simple",
        "summary-task",
        "summary-multi-criteria-score-ranges-proposed",
        "technical-writing-detailed",
    ]
    assert [t.source.line for t in tests] == [1, 2, 3, 4, 5]
    first = tests[0]
    assert (first.target, first.attempt, first.score, first.passed) == ("default", 1, 0.75, None)
    assert [(v.name, v.type, v.score, v.verdict, v.weight) for v in first.verdicts] == [
        ("rubrics", "llm-grader", 0.5, "fail", 1.0),
        ("python_syntax", "code-grader", 1.0, "pass", 1.0),
    ]
    rubric = first.verdicts[0]
    assert [a["passed"] for a in rubric.assertions] == [True, True, False, False]
    assert rubric.assertions[2]["text"].startswith("[rubric-2] Includes type hints")
    assert rubric.assertions[0]["evidence"].startswith("The candidate answer uses regular expressions")
    assert first.verdicts[1].assertions == [
        {"text": "Python syntax is valid", "passed": True, "evidence": "Code compiled successfully"}
    ]
    assert tests[3].score == pytest.approx(0.9666666666666667)
    # A row with only flattened assertions is the implicit llm-grader's result.
    implicit = tests[2].verdicts
    assert [(v.name, v.score, v.verdict, len(v.assertions)) for v in implicit] == [("llm-grader", 1.0, "pass", 4)]
    assert first.messages is None and first.output_text is None
    # A second pass streams the file again and yields the same tests.
    assert [t.test_id for t in only_tests(list(source.iter_tests()))] == [t.test_id for t in tests]


# ---- v4 run directory ------------------------------------------------------------------------------------


def test_v4_run_keeps_rendered_prompt_and_sidecars() -> None:
    source = read_results(V4_RUN, "agentv-v4-run")
    assert source.root == V4_RUN
    assert source.eval_path_hints[:2] == [
        Path("/home/user/agentv/examples/features/rubric/evals/dataset.eval.yaml"),
        Path("examples/features/rubric/evals/dataset.eval.yaml"),
    ]
    assert (V4_RUN / "dataset/code-quality-multi-eval/task/EVAL.yaml").resolve() in source.eval_path_hints
    quality, sheet = only_tests(list(source.iter_tests()))

    rubric, syntax = quality.verdicts
    assert set(rubric.rendered_prompt) == {"userPrompt", "systemPrompt"}
    assert rubric.rendered_prompt["userPrompt"].startswith("You are an expert grader.\n\n[[ ## criteria ## ]]")
    assert rubric.grader_target == "judge-gpt"
    assert rubric.token_usage == {"input": 812, "output": 143}
    assert syntax.rendered_prompt == {
        "command": ["uv", "run", "python", "check_syntax.py"],
        "cwd": "/tmp/agentv/graders",
    }
    assert (quality.passed, quality.execution_status, quality.cost_usd) == (False, "quality_failure", 0.0021)
    assert quality.metadata == {"source_repo": "agentv-examples"}

    answer = (V4_RUN / "dataset/code-quality-multi-eval/outputs/answer.md").read_text()
    assert quality.output_text == answer
    # transcript.jsonl rows come back in message_index order, tool calls in the content model's shape.
    assert [m["role"] for m in quality.messages] == ["user", "assistant", "assistant"]
    assert quality.messages[1]["tool_calls"][0] == {
        "tool": "Bash",
        "input": {"command": "python -m py_compile email.py"},
        "output": "",
        "id": "call-1",
        "status": "ok",
        "duration_ms": 41,
    }
    answers = [f for f in quality.files if f.role == "answer"]
    assert [(f.path, f.media_type) for f in answers] == [
        ("dataset/code-quality-multi-eval/outputs/answer.md", "text/markdown")
    ]
    assert answers[0].resolved == (V4_RUN / "dataset/code-quality-multi-eval/outputs/answer.md").resolve()
    sidecars = {f.path for f in quality.files if f.role == "sidecar"}
    assert "dataset/code-quality-multi-eval/grading.json" in sidecars
    assert "dataset/code-quality-multi-eval/outputs/transcript.jsonl" in sidecars
    assert "scores" not in quality.raw_row and "output_path" in quality.raw_row
    assert quality.raw_row["projection_identity"]["id"] == "agentv-prj-00000000000000000000000000000001"

    # trace.json envelope -> messages (events sorted by index), ContentFile blocks preserved and resolved.
    assert sheet.messages[1]["content"][1] == {"type": "file", "media_type": "text/csv", "path": "generated/report.csv"}
    content = {f.path: f for f in sheet.files if f.role == "content_file"}
    assert (
        content["generated/report.csv"].resolved
        == (V4_RUN / "dataset/spreadsheet-output/outputs/generated/report.csv").resolve()
    )
    assert content["generated/missing.xlsx"].resolved is None
    assert content["generated/missing.xlsx"].media_type.endswith("spreadsheetml.sheet")
    # Usage the row lacks comes from timing.json.
    assert (sheet.duration_ms, sheet.token_usage) == (900.0, {"input": 30, "output": 20, "reasoning": 0})
    assert (
        sheet.verdicts[0]
        .rendered_prompt["userPrompt"]
        .startswith("[[ ## answer ## ]]\n[[ file: generated/report.csv ]]")
    )


def test_v4_run_missing_sidecar_names_the_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(V4_RUN, run)
    (run / "dataset/spreadsheet-output/grading.json").unlink()
    with pytest.raises(ImportFormatError) as caught:
        read_all(run)
    message = str(caught.value)
    assert message.startswith(f"{run / 'index.jsonl'}:2: grading_path 'dataset/spreadsheet-output/grading.json'")
    assert "does not exist" in message and "\n" not in message
    items = read_all(run, skip_bad=True)
    assert [t.test_id for t in only_tests(items)] == ["code-quality-multi-eval"]
    skipped = [s for s in items if isinstance(s, SkippedLine)]
    assert [(s.source.line, "grading_path" in s.reason) for s in skipped] == [(2, True)]


def test_an_index_copied_beside_its_run_reads_its_files_and_a_moved_one_says_they_are_gone(
    tmp_path: Path, sqlite_store
) -> None:  # type: ignore[no-untyped-def]
    """A results JSONL that is a v4 index under another name (a baseline copied in its run folder) names its
    answer, transcript and grading files relative to that folder: they are read as the run's own are. The
    same file moved elsewhere imports each result from its row alone, and says so."""
    from evalstore.replay.agentv.importing import import_results

    run = tmp_path / "run"
    shutil.copytree(V4_RUN, run)
    beside = run / "baseline.jsonl"
    shutil.copy(run / "index.jsonl", beside)
    assert detect_format(beside) == "results-jsonl"
    from_run = {t.test_id: t for t in only_tests(read_all(run))}
    from_copy = {t.test_id: t for t in only_tests(read_all(beside))}
    assert from_copy.keys() == from_run.keys()
    for test_id, test in from_copy.items():
        assert (test.output_text, test.messages, test.warnings) == (
            from_run[test_id].output_text,
            from_run[test_id].messages,
            [],
        )
        assert [f.path for f in test.files] == [f.path for f in from_run[test_id].files]
    assert any(t.output_text for t in from_copy.values())

    moved = tmp_path / "elsewhere" / "baseline.jsonl"
    moved.parent.mkdir()
    shutil.copy(beside, moved)
    alone = only_tests(read_all(moved))
    assert [t.test_id for t in alone] == list(from_copy)
    for test in alone:
        assert test.files == [] and len(test.warnings) == 1
        assert test.warnings[0].startswith(f"{test.test_id}@") and "does not exist" in test.warnings[0]
        assert "import the AgentV run directory" in test.warnings[0]

    # The same bytes beside their files and without them are two sources, and the import says what it lost.
    first, second = import_results(sqlite_store, beside), import_results(sqlite_store, moved)
    assert first.run_id != second.run_id and not second.already_imported
    assert (first.warning_count, second.warning_count) == (0, len(alone))
    assert import_results(sqlite_store, beside).already_imported


# ---- v5 bundle -------------------------------------------------------------------------------------------


def test_v5_bundle_real_run() -> None:
    source = read_results(V5_RUN, "agentv-v5-bundle")
    assert source.suite == "my-eval"
    assert source.eval_path_hints == [
        Path(
            "/home/entity/projects/EntityProcess/agentv__worktrees/artifact-metrics-flatten/examples/features/"
            "readme-quickstart/evals/my-eval.eval.yaml"
        ),
        Path("examples/features/readme-quickstart/evals/my-eval.eval.yaml"),
        (V5_RUN / V5_CASE / "test" / "EVAL.yaml").resolve(),
    ]
    [test] = only_tests(list(source.iter_tests()))
    assert (test.test_id, test.target, test.attempt, test.suite) == ("fizzbuzz", "codex-sdk-openai", 1, "my-eval")
    assert (test.score, test.passed, test.execution_status) == (1.0, True, "ok")
    assert (test.duration_ms, test.token_usage) == (7363.0, {"input": 17734, "output": 102, "cached": 2432})
    assert test.source.line == 1 and test.source.file.endswith(".internal/index.jsonl")
    assert [(v.name, v.type, v.score, v.verdict) for v in test.verdicts] == [
        ("contains-fizz", "contains", 1.0, "pass"),
        ("llm-rubric", "llm-rubric", 1.0, "pass"),
        ("script", "script", 1.0, "pass"),
        ("llm-rubric", "llm-rubric", 1.0, "pass"),
    ]
    # HEAD rows drop assertions; they come back from grading.json component_results, paired by position.
    assert test.verdicts[0].assertions == [{"text": 'Output contains "fizz"', "passed": True, "evidence": None}]
    assert [a["text"] for a in test.verdicts[3].assertions] == [
        "[rubric-1] Solution is simple and idiomatic Python",
        "[rubric-2] Handles the 3, 5, and 15 branches correctly",
    ]
    assert test.verdicts[3].assertions[0]["evidence"] == "The solution is concise, clear, and idiomatic Python."
    assert test.verdicts[1].grader_target == "local-openai-grader"
    assert test.verdicts[2].assertions == [] and test.verdicts[2].reason == "Grader passed."
    assert test.raw_row["named_scores"] == {"contains-fizz": 1, "llm-rubric": 1, "script": 1}
    # transcript-raw.jsonl holds raw provider log lines here, so the messages come from transcript.json.
    assert [m["role"] for m in test.messages] == ["user", "assistant"]
    assert test.messages[0]["content"][0]["text"].startswith("Write FizzBuzz in Python.")
    answer_md = V5_RUN / V5_CASE / "sample-1" / "outputs" / "answer.md"
    assert test.output_text == answer_md.read_text()
    assert [(f.path, f.resolved) for f in test.files if f.role == "answer"] == [
        (f"{V5_CASE}/sample-1/outputs/answer.md", answer_md.resolve())
    ]
    sidecars = {f.path for f in test.files if f.role == "sidecar"}
    assert f"{V5_CASE}/sample-1/grading.json" in sidecars and f"{V5_CASE}/sample-1/metrics.json" in sidecars


def _add_second_sample(run: Path) -> None:
    """sample-2 with the intermediate grading.json shape and an agentv.transcript.v1 transcript-raw.jsonl."""
    case = run / V5_CASE
    sample = case / "sample-2"
    shutil.copytree(case / "sample-1", sample)
    (sample / "grading.json").write_text(
        json.dumps(
            {
                "score": 0.5,
                "verdict": "fail",
                "assertion_results": [
                    {"text": "has fizz", "passed": True, "evidence": "", "score": 1, "verdict": "pass"}
                ],
                "summary": {"passed": 1, "failed": 1, "total": 2},
                "graders": [
                    {
                        "name": "contains-fizz",
                        "type": "contains",
                        "score": 1,
                        "reasoning": "",
                        "weight": 1,
                        "verdict": "pass",
                        "assertion_results": [{"text": 'Output contains "fizz"', "passed": True}],
                    },
                    {
                        "name": "llm-rubric",
                        "type": "llm-rubric",
                        "score": 0,
                        "reasoning": "no file",
                        "weight": 1,
                        "verdict": "fail",
                        "assertion_results": [
                            {"text": "[rubric-1] Writes report", "passed": False, "evidence": "missing"}
                        ],
                    },
                ],
            }
        )
    )
    (sample / "outputs" / "report.csv").write_text("n,out\n3,fizz\n")
    source = {"kind": "agentv_run", "provider": "codex-sdk", "session_id": "s2"}
    rows = [
        {
            "schema_version": "agentv.transcript.v1",
            "test_id": "fizzbuzz",
            "target": "codex-sdk-openai",
            "message_index": 0,
            "role": "user",
            "content": "Write FizzBuzz",
            "source": source,
        },
        {
            "schema_version": "agentv.transcript.v1",
            "test_id": "fizzbuzz",
            "target": "codex-sdk-openai",
            "message_index": 1,
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Done"},
                {"type": "file", "media_type": "text/csv", "path": "report.csv"},
            ],
            "tool_calls": [{"tool": "Write", "id": "w1", "input": {"file_path": "report.csv"}, "status": "ok"}],
            "source": source,
        },
    ]
    write_rows(sample / "transcript-raw.jsonl", rows)
    index = run / ".internal" / "index.jsonl"
    row = json.loads(index.read_text())
    first = row.pop("attempts")[0]
    row["samples"] = [
        {**first, "sample": 1},
        {
            "sample": 2,
            "sample_index": 1,
            "sample_path": "sample-2",
            "score": 0.5,
            "verdict": "fail",
            "execution_status": "quality_failure",
        },
    ]
    write_rows(index, [row])


def test_v5_samples_intermediate_grading_and_raw_transcript(v5_copy: Path) -> None:
    _add_second_sample(v5_copy)
    one, two = only_tests(read_all(v5_copy))
    assert [(t.test_id, t.attempt, t.score, t.passed) for t in (one, two)] == [
        ("fizzbuzz", 1, 1.0, True),
        ("fizzbuzz", 2, 0.5, False),
    ]
    assert len(one.verdicts) == 4
    # The second sample has no scores of its own in the index: its verdicts are its grading.json's.
    assert [(v.name, v.score, v.verdict, v.reason) for v in two.verdicts] == [
        ("contains-fizz", 1.0, "pass", None),
        ("llm-rubric", 0.0, "fail", "no file"),
    ]
    assert two.verdicts[1].assertions == [{"text": "[rubric-1] Writes report", "passed": False, "evidence": "missing"}]
    assert two.messages[1]["content"][1] == {"type": "file", "media_type": "text/csv", "path": "report.csv"}
    assert two.messages[1]["tool_calls"][0]["tool"] == "Write"
    [content] = [f for f in two.files if f.role == "content_file"]
    assert content.resolved == (v5_copy / V5_CASE / "sample-2" / "outputs" / "report.csv").resolve()


def test_v5_bundle_without_index_reads_sample_folders(v5_copy: Path) -> None:
    shutil.rmtree(v5_copy / ".internal")
    (v5_copy / "summary.json").unlink()
    [test] = only_tests(read_all(v5_copy))
    assert (test.test_id, test.target, test.suite, test.attempt, test.score, test.passed) == (
        "fizzbuzz",
        "codex-sdk-openai",
        "my-eval",
        1,
        1.0,
        True,
    )
    assert [v.name for v in test.verdicts] == ["contains-fizz", "llm-rubric", "script", "llm-rubric"]
    assert test.verdicts[1].assertions[0]["text"].startswith("[rubric-1] Implements correct FizzBuzz logic")
    assert test.duration_ms == 7363.0
    assert test.token_usage == {"input": 17734, "output": 102, "reasoning": 0}
    assert test.source.file == str(v5_copy / V5_CASE / "sample-1")


def test_v5_missing_sidecar(v5_copy: Path) -> None:
    (v5_copy / V5_CASE / "sample-1" / "grading.json").unlink()
    index = v5_copy / ".internal" / "index.jsonl"
    with pytest.raises(
        ImportFormatError, match=r"index\.jsonl:1: grading_path '.*grading\.json' names a file that does not exist"
    ):
        read_all(v5_copy)
    [skipped] = read_all(v5_copy, skip_bad=True)
    assert isinstance(skipped, SkippedLine)
    assert (skipped.source.file, skipped.source.line) == (str(index), 1)
    assert "grading.json" in skipped.reason


# ---- legacy camelCase ------------------------------------------------------------------------------------


def test_camel_case_rows_are_normalised(tmp_path: Path) -> None:
    row = {
        "timestamp": "2025-11-01T10:00:00.000Z",
        "testId": "camel-1",
        "suite": "legacy",
        "score": 0.9,
        "target": "mock",
        "executionStatus": "ok",
        "tokenUsage": {"input": 10, "output": 5},
        "costUsd": 0.01,
        "durationMs": 1234,
        "startTime": "2025-11-01T09:59:58.000Z",
        "workspacePath": "/tmp/ws",
        "metadata": {"sourceRepo": "x", "Owner": "Team"},
        "scores": [
            {
                "name": "judge",
                "type": "llm-grader",
                "score": 0.9,
                "verdict": "pass",
                "input": {"userPrompt": "Grade this", "systemPrompt": "JSON"},
                "tokenUsage": {"input": 3, "output": 1},
            }
        ],
        "output": [
            {
                "role": "assistant",
                "content": "Reading",
                "toolCalls": [{"tool": "Read", "input": {"filePath": "a.md", "Read": 1}, "durationMs": 5}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "final answer"}]},
        ],
    }
    [test] = read_all(write_rows(tmp_path / "legacy.jsonl", [row]))
    assert (test.test_id, test.execution_status, test.passed) == ("camel-1", "ok", True)
    assert (test.token_usage, test.cost_usd, test.duration_ms) == ({"input": 10, "output": 5}, 0.01, 1234.0)
    assert (test.start_time, test.workspace_path) == ("2025-11-01T09:59:58.000Z", "/tmp/ws")
    assert test.metadata == {"source_repo": "x", "Owner": "Team"}
    # The grader request stays verbatim, as AgentV writes it; other nested keys are rewritten.
    assert test.verdicts[0].rendered_prompt == {"userPrompt": "Grade this", "systemPrompt": "JSON"}
    assert test.verdicts[0].token_usage == {"input": 3, "output": 1}
    # output as a Message[]: messages from it, the answer is the last assistant text.
    assert test.output_text == "final answer"
    call = test.messages[0]["tool_calls"][0]
    assert call == {"tool": "Read", "input": {"file_path": "a.md", "Read": 1}, "duration_ms": 5}


def test_camel_artifact_pointers_are_refused(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "legacy.jsonl", [{"testId": "x", "score": 1, "artifactPointers": {}}])
    with pytest.raises(ImportFormatError, match=r"legacy\.jsonl:1: camelCase 'artifactPointers' is not accepted"):
        read_all(path)


# ---- bad lines -------------------------------------------------------------------------------------------

GOOD = {"test_id": "ok-1", "score": 1, "target": "t"}


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ('{"test_id": "cut", "score": 0.', "invalid JSON"),
        ({"score": 0.5, "target": "t"}, "missing test_id"),
        ({"test_id": "no-score", "target": "t"}, "Missing or invalid score for test 'no-score'"),
        ('{"test_id": "nan", "score": NaN}', "Missing or invalid score"),
        ({"test_id": "text-score", "score": "0.5"}, "Missing or invalid score"),
        (
            {"test_id": "bad-grader", "score": 1, "scores": [{"name": "g", "type": "contains"}]},
            "scores[0] (g): missing or invalid score",
        ),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_bad_line_stops_the_import_with_its_line(tmp_path: Path, bad: dict | str, reason: str) -> None:
    path = write_rows(tmp_path / "results.jsonl", [GOOD, bad, GOOD])
    with pytest.raises(ImportFormatError) as caught:
        read_all(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:2: ")
    assert reason in message and "--skip-bad" in message


def test_skip_bad_yields_skipped_lines(tmp_path: Path) -> None:
    path = write_rows(
        tmp_path / "results.jsonl",
        [GOOD, '{"test_id": "cut", "sco', {"score": 1}, "", {"test_id": "x"}, {**GOOD, "test_id": "ok-2"}],
    )
    items = read_all(path, skip_bad=True)
    assert [t.test_id for t in only_tests(items)] == ["ok-1", "ok-2"]
    skipped = [(s.source.line, s.reason.split(" (")[0]) for s in items if isinstance(s, SkippedLine)]
    assert skipped == [(2, "invalid JSON"), (3, "missing test_id"), (5, "Missing or invalid score for test 'x'")]


def test_replay_fixture_is_not_a_result_file() -> None:
    with pytest.raises(
        ImportFormatError, match=r"replay-target-output\.jsonl:1: Missing or invalid score .*replay fixture"
    ):
        read_all(REPLAY_FIXTURE)
    skipped = read_all(REPLAY_FIXTURE, skip_bad=True)
    assert [s.source.line for s in skipped if isinstance(s, SkippedLine)] == [1, 2]


# ---- streaming -------------------------------------------------------------------------------------------


def test_iteration_streams_a_large_file(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    answer = "x" * 2000
    with path.open("w") as fh:
        for i in range(4000):
            row = {
                "test_id": f"t-{i}",
                "score": (i % 10) / 10,
                "target": "m",
                "output": answer,
                "scores": [
                    {
                        "name": "g",
                        "type": "contains",
                        "score": 1,
                        "verdict": "pass",
                        "assertions": [{"text": "has x", "passed": True}],
                    }
                ],
            }
            fh.write(json.dumps(row) + "\n")
    size = path.stat().st_size
    assert size > 8_000_000
    source = read_results(path, detect_format(path))
    tracemalloc.start()
    try:
        count = 0
        for item in source.iter_tests():
            assert isinstance(item, ImportedTest)
            count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 4000
    assert peak < size / 20, f"peak {peak} bytes while iterating a {size}-byte file"


# ---- untrusted paths -------------------------------------------------------------------------------------


def test_paths_outside_the_run_do_not_resolve(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not import me")
    run = tmp_path / "run"
    shutil.copytree(V4_RUN, run)
    trace = run / "dataset/spreadsheet-output/outputs/trace.json"
    doc = json.loads(trace.read_text())
    events = doc["trace"]["spans"][0]["events"]
    message = next(e for e in events if e["attributes"]["agentv.transcript.message.index"] == 1)
    message["attributes"]["agentv.transcript.message"]["content"] += [
        {"type": "file", "media_type": "text/plain", "path": str(secret)},
        {"type": "file", "media_type": "text/plain", "path": "../../../../secret.txt"},
        {"type": "file", "media_type": "text/plain", "path": "https://example.com/report.csv"},
    ]
    trace.write_text(json.dumps(doc))
    sheet = only_tests(read_all(run))[1]
    # Found where the result says, but read only inside the roots an import may read (not tmp_path).
    access = file_access(run, None, None, [])
    guarded = {f.path: f for f in access.guard(sheet).files if f.role == "content_file"}
    resolved = {path: f.resolved for path, f in guarded.items()}
    assert resolved[str(secret)] is None and "--files-root" in (guarded[str(secret)].refused or "")
    assert resolved["../../../../secret.txt"] is None and guarded["../../../../secret.txt"].refused
    assert resolved["https://example.com/report.csv"] is None
    assert resolved["generated/report.csv"] is not None

    index = run / "index.jsonl"
    rows = [json.loads(line) for line in index.read_text().splitlines()]
    rows[1]["answer_path"] = "../secret.txt"
    write_rows(index, rows)
    with pytest.raises(ImportFormatError, match=r"index\.jsonl:2: answer_path '\.\./secret\.txt' points outside"):
        read_all(run)


def _v4_row_without_sidecars(run: Path, **fields: object) -> Path:
    """A one-row v4 run folder whose row names no sidecar file: its files come from the layout."""
    run.mkdir()
    row = {"test_id": "t", "suite": "s", "target": "default", "score": 1, "scores": [], **fields}
    return write_rows(run / "index.jsonl", [row])


def _secret_answer(folder: Path) -> Path:
    (folder / "outputs").mkdir(parents=True)
    (folder / "outputs" / "answer.md").write_text("TOP SECRET")
    return folder


def test_an_artifact_dir_outside_the_run_is_a_bad_row(tmp_path: Path) -> None:
    """``artifact_dir`` is where the layout's sidecars are looked for: one outside the run folder would
    have its answer.md read, wherever it is."""
    _secret_answer(tmp_path / "secret")
    _v4_row_without_sidecars(tmp_path / "run", artifact_dir="../secret")
    with pytest.raises(ImportFormatError, match=r"index\.jsonl:1: artifact_dir '\.\./secret' points outside"):
        read_all(tmp_path / "run")
    (skipped,) = read_all(tmp_path / "run", skip_bad=True)
    assert isinstance(skipped, SkippedLine) and "points outside" in skipped.reason


def test_layout_files_that_lead_outside_the_run_are_not_read(tmp_path: Path) -> None:
    """A suite named ``..`` puts ``<suite>/<test_id>`` beside the run folder, and a symlink in the run
    leads anywhere: neither file is read (the answer comes from the row, as for a row with no sidecar)."""
    _secret_answer(tmp_path / "t")  # <run>/../t: the folder of test t in suite ".."
    _v4_row_without_sidecars(tmp_path / "run", suite="..", output="the row's own answer")
    (item,) = only_tests(read_all(tmp_path / "run"))
    assert item.output_text == "the row's own answer" and not item.files

    _secret_answer(tmp_path / "elsewhere")
    (tmp_path / "linked" / "s" / "t" / "outputs").mkdir(parents=True)
    (tmp_path / "linked" / "s" / "t" / "outputs" / "answer.md").symlink_to(tmp_path / "elsewhere/outputs/answer.md")
    write_rows(tmp_path / "linked" / "index.jsonl", [{"test_id": "t", "suite": "s", "score": 1, "scores": []}])
    (item,) = only_tests(read_all(tmp_path / "linked"))
    assert "TOP SECRET" not in (item.output_text or "") and not item.files

    # The same file inside the run is read: the check is what keeps the others out.
    _secret_answer(tmp_path / "inside" / "s" / "t")
    write_rows(tmp_path / "inside" / "index.jsonl", [{"test_id": "t", "suite": "s", "score": 1, "scores": []}])
    (item,) = only_tests(read_all(tmp_path / "inside"))
    assert item.output_text == "TOP SECRET"


def _v5_rows_pointing_outside(run: Path, secret: Path, **fields: str) -> None:
    """The bundle's index row with its sidecar paths left out (so samples are found from the folders it
    names), and ``fields`` set; ``secret`` a copy of its sample folder holding another answer."""
    shutil.copytree(run / "fizzbuzz--4049e3c70f38", secret)
    (secret / "sample-1" / "outputs" / "answer.md").write_text("TOP SECRET")
    index = run / ".internal" / "index.jsonl"
    row = json.loads(index.read_text().splitlines()[0])
    row = {k: v for k, v in row.items() if not k.endswith("_path") or k == "eval_path"}
    for item in row["attempts"]:
        item.pop("sample_path")
    write_rows(index, [{**row, **fields}])


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"result_dir": "../secret"}, "result_dir '../secret'"),
        ({"grading_path": "../secret/sample-1/grading.json", "result_dir": "fizzbuzz--4049e3c70f38"}, "grading_path"),
    ],
)
def test_v5_sample_folders_outside_the_bundle_are_bad_rows(
    v5_copy: Path, tmp_path: Path, fields: dict[str, str], named: str
) -> None:
    _v5_rows_pointing_outside(v5_copy, tmp_path / "secret", **fields)
    if "grading_path" in fields:  # a row with one sample: its folder is the grading file's
        index = v5_copy / ".internal" / "index.jsonl"
        row = json.loads(index.read_text())
        write_rows(index, [{k: v for k, v in row.items() if k != "attempts"}])
    with pytest.raises(ImportFormatError, match=rf"index\.jsonl:1: {re.escape(named)}.* points outside"):
        read_all(v5_copy)


def test_a_v5_sample_path_outside_the_bundle_is_a_bad_row(v5_copy: Path, tmp_path: Path) -> None:
    _v5_rows_pointing_outside(v5_copy, v5_copy.parent / "secret", result_dir="fizzbuzz--4049e3c70f38")
    index = v5_copy / ".internal" / "index.jsonl"
    row = json.loads(index.read_text())
    row["attempts"][0]["sample_path"] = "../../secret/sample-1"
    write_rows(index, [row])
    with pytest.raises(ImportFormatError, match=r"sample_path '\.\./\.\./secret/sample-1' points outside"):
        read_all(v5_copy)
    row["attempts"][0]["sample_path"] = "sample-1"  # the same row, inside: read
    write_rows(index, [row])
    assert [t.output_text for t in only_tests(read_all(v5_copy))] != ["TOP SECRET"]


def test_a_v5_index_path_outside_the_bundle_is_refused(v5_copy: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere.jsonl").write_text((v5_copy / ".internal" / "index.jsonl").read_text())
    shutil.rmtree(v5_copy / ".internal")
    summary = v5_copy / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "index_path": "../elsewhere.jsonl"}))
    with pytest.raises(ImportFormatError, match=r"summary\.json: index_path '\.\./elsewhere\.jsonl' points outside"):
        read_all(v5_copy)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"attempt": 2**63}, "attempt 9223372036854775808"),
        ({"sample": 2**100}, "sample 1267"),
        ({"sample_index": 2**31 - 1}, "sample_index"),
    ],
)
def test_an_attempt_no_store_can_hold_is_a_bad_row(tmp_path: Path, fields: dict[str, int], named: str) -> None:
    """An INTEGER column holds it on neither backend: it was an internal error half-way through the writes."""
    path = write_rows(tmp_path / "r.jsonl", [{"test_id": "t", "score": 1, "output": "ok", **fields}])
    with pytest.raises(ImportFormatError, match=rf"r\.jsonl:1: {named}.* out of range"):
        read_all(path)
    path = write_rows(tmp_path / "r.jsonl", [{"test_id": "t", "score": 1, "output": "ok", "attempt": 2**31 - 2}])
    assert only_tests(read_all(path))[0].attempt == 2**31 - 1


def test_a_path_with_a_nul_byte_is_a_file_not_found(tmp_path: Path) -> None:
    row = {"test_id": "t", "score": 1, "workspace_path": "/tmp/a\x00b"}
    row["output"] = [{"role": "assistant", "content": [{"type": "file", "path": "a\x00b"}]}]
    (item,) = only_tests(read_all(write_rows(tmp_path / "r.jsonl", [row])))
    assert [(f.path, f.resolved) for f in item.files if f.role == "content_file"] == [("a\x00b", None)]


def test_a_fifo_or_a_folder_is_named_for_what_it_is(tmp_path: Path) -> None:
    """Not "does not exist": it does, and reading a FIFO would wait for a writer."""
    run = _v4_row_without_sidecars(tmp_path / "run", answer_path="s/t/outputs/answer.md").parent
    (run / "s" / "t" / "outputs").mkdir(parents=True)
    os.mkfifo(run / "s" / "t" / "outputs" / "answer.md")
    with pytest.raises(
        ImportFormatError, match=r"answer_path 's/t/outputs/answer\.md' names .*, which is not a regular file"
    ):
        read_all(run)
    os.mkfifo(tmp_path / "results.jsonl")
    with pytest.raises(ImportFormatError, match=r"results\.jsonl: not a regular file or a folder"):
        detect_format(tmp_path / "results.jsonl")


def test_a_folder_another_target_overwrote_is_left_out_with_a_warning(tmp_path: Path, sqlite_store) -> None:  # type: ignore[no-untyped-def]
    """AgentV 4.42 writes every target of a test to one folder (``<suite>/<test>/``), so the target that
    finishes last overwrites the others' answer and transcript (seen in a real two-target run). A row
    whose transcript sidecar is all another target's does not take that target's answer."""
    from evalstore.replay.agentv.importing import import_results

    run = tmp_path / "run"
    outputs = run / "suite" / "greeting" / "outputs"
    outputs.mkdir(parents=True)
    (outputs / "answer.md").write_text("beta's answer")
    (outputs / "transcript.jsonl").write_text(
        "".join(
            json.dumps({"test_id": "greeting", "target": "beta", "message_index": i, "role": r, "content": c}) + "\n"
            for i, (r, c) in enumerate([("user", "hi"), ("assistant", "beta's answer")])
        )
    )
    rows = [
        {
            "test_id": "greeting",
            "suite": "suite",
            "target": t,
            "score": s,
            "scores": [],
            "timestamp": "2026-01-01T00:00:00Z",
        }
        for t, s in (("alpha", 1.0), ("beta", 0.0))
    ]
    write_rows(run / "index.jsonl", rows)
    alpha, beta = only_tests(read_all(run))
    assert (alpha.target, alpha.output_text, alpha.messages, alpha.files) == ("alpha", None, None, [])
    assert alpha.warnings and "transcript.jsonl holds target beta's transcript, not alpha's" in alpha.warnings[0]
    assert beta.output_text == "beta's answer" and beta.messages and not beta.warnings

    outcome = import_results(sqlite_store, run)
    assert outcome.warning_count == 1 and outcome.warnings == alpha.warnings


@pytest.mark.parametrize(
    "usage,expected",
    [({"input": 0, "output": 0, "reasoning": 0}, None), ({"input": 30, "output": 20}, {"input": 30, "output": 20})],
)
def test_timing_json_zeros_are_no_usage(tmp_path: Path, usage: dict, expected: dict | None) -> None:
    """AgentV writes timing.json's token_usage as zeros when the target reported none; its row then has no
    token_usage and its graders get null, so the import takes zeros there as no usage."""
    run = tmp_path / "run"
    folder = run / "suite" / "t"
    folder.mkdir(parents=True)
    (folder / "timing.json").write_text(json.dumps({"duration_ms": 157, "token_usage": usage}))
    write_rows(run / "index.jsonl", [{"test_id": "t", "suite": "suite", "target": "a", "score": 1.0, "scores": []}])
    [test] = only_tests(read_all(run))
    assert (test.token_usage, test.duration_ms) == (expected, 157.0)


def test_timing_json_zero_duration_is_no_duration(tmp_path: Path) -> None:
    """timing.json writes 0 ms when the target reported no duration (its row has none, and AgentV's latency
    grader saw none): the import keeps it absent rather than a duration of 0 that would pass a latency check."""
    run = tmp_path / "run"
    folder = run / "suite" / "t"
    folder.mkdir(parents=True)
    (folder / "timing.json").write_text(json.dumps({"duration_ms": 0, "token_usage": {"input": 0, "output": 0}}))
    write_rows(run / "index.jsonl", [{"test_id": "t", "suite": "suite", "target": "a", "score": 1.0, "scores": []}])
    [test] = only_tests(read_all(run))
    assert (test.token_usage, test.duration_ms) == (None, None)


def test_transcript_rows_from_agentv_import_are_refused_with_the_recipe_that_works() -> None:
    """`agentv import claude` writes transcript rows with no run folder behind them: the refusal gives the way
    that works (AgentV grades them with --transcript, its output folder is imported), not "import the run
    folder", which a transcript of a run's own outputs/transcript.jsonl gets."""
    path = FIXTURES.parent / "agentv-import-claude" / "transcript.jsonl"
    with pytest.raises(ImportFormatError) as caught:
        read_results(path, detect_format(path))
    message = str(caught.value)
    assert "from `agentv import`" in message and "\n" not in message
    assert f"agentv eval run EVAL --transcript {path} --output DIR" in message
    assert "evalstore import DIR --eval EVAL" in message and "import the run folder" not in message
