"""Eval files refused or warned about at load time, before any agent runs: an unknown assertion type,
values nested thousands of levels deep, files referenced from outside the project root."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from evalstore.replay.errors import EvalFileError
from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.evalfile.source import MAX_NESTING


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return root


# -- unknown assertion types ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "suggestion"),
    [("contians", "contains"), ("llm_grador", "llm-grader"), ("regx", "regex"), ("code-grder", "code-grader")],
)
def test_an_unknown_assertion_type_is_an_error_naming_file_line_field_and_the_closest_type(
    project: Path, written: str, suggestion: str
) -> None:
    eval_file = write(
        project / "suite.eval.yaml",
        f"""\
        name: typo
        tests:
          - id: only
            input: hi
            criteria: says hi
            assertions:
              - name: greets
                type: {written}
                value: hi
        """,
    )
    with pytest.raises(EvalFileError) as caught:
        load_eval(eval_file)
    assert str(caught.value) == (
        f"{eval_file}:8: field `tests[0].assertions[0].type`: unknown grader type `{written}`; "
        f"did you mean `{suggestion}`?"
    )


def test_a_type_like_nothing_known_lists_the_types(project: Path) -> None:
    eval_file = write(
        project / "suite.eval.yaml",
        """\
        name: typo
        tests:
          - {id: only, input: hi, criteria: c, assertions: [{type: zzzzqqq}]}
        """,
    )
    with pytest.raises(EvalFileError, match=r"unknown grader type `zzzzqqq`; use one of .*contains.*llm-grader"):
        load_eval(eval_file)


def test_types_agentv_grades_and_custom_assertions_it_discovers_load_as_graders(project: Path) -> None:
    """A custom assertion AgentV discovers (``.agentv/assertions/NAME.ts`` above the eval file) is a code
    grader run as AgentV runs it: ``bun run FILE``, named by its type, with no config."""
    script = write(project / ".agentv" / "assertions" / "word-count.ts", "export default {}\n")
    eval_file = write(
        project / "suite.eval.yaml",
        """\
        name: agentv-only
        tests:
          - id: only
            input: hi
            criteria: c
            assertions:
              - {type: latency, threshold: 100}
              - {type: word-count, min: 3}
              - {type: contains, value: hi}
        """,
    )
    suite = load_eval(eval_file)
    latency, custom, contains = suite.tests[0].graders
    assert (latency.type, latency.threshold) == ("latency", 100)
    assert (custom.type, custom.name, custom.custom_type) == ("code-grader", "word-count", "word-count")
    assert custom.command == ["bun", "run", str(script)] and custom.config is None
    assert contains.type == "contains"
    assert not suite.warnings


# -- nesting ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_NESTING + 5, 900, 5000])
def test_a_deeply_nested_eval_file_is_a_one_line_error(project: Path, depth: int) -> None:
    nested = "{a: " * depth + "1" + "}" * depth
    eval_file = write(
        project / "suite.eval.yaml",
        f"name: deep\ntests:\n  - id: a\n    input: hi\n    criteria: c\n    metadata: {nested}\n",
    )
    with pytest.raises(EvalFileError) as caught:
        load_eval(eval_file)
    message = str(caught.value)
    assert message.startswith(f"{eval_file}:6: ") and "\n" not in message
    assert "nest" in message


@pytest.mark.parametrize("depth", [MAX_NESTING + 5, 200_000])
def test_a_deeply_nested_tests_file_line_is_a_one_line_error(project: Path, depth: int) -> None:
    row = json.dumps({"id": "a", "input": "hi", "criteria": "c"})[:-1]
    write(project / "cases.jsonl", row + ', "metadata": {"k": ' + "[" * depth + "]" * depth + "}}\n")
    eval_file = write(project / "suite.eval.yaml", "name: deep\ntests: ./cases.jsonl\n")
    with pytest.raises(EvalFileError) as caught:
        load_eval(eval_file)
    assert str(caught.value) == f"{project / 'cases.jsonl'}:1: nested more than {MAX_NESTING} levels deep; flatten it"


def test_nesting_up_to_the_limit_loads(project: Path) -> None:
    depth = MAX_NESTING - 10
    nested = "{a: " * depth + "1" + "}" * depth
    eval_file = write(
        project / "suite.eval.yaml",
        f"name: deep\ntests:\n  - id: a\n    input: hi\n    criteria: c\n    metadata: {nested}\n",
    )
    assert load_eval(eval_file).tests[0].id == "a"


# -- files outside the project root -------------------------------------------------------------


def test_each_file_referenced_from_outside_the_project_root_is_warned_about_once(project: Path, tmp_path: Path) -> None:
    outside = write(tmp_path / "elsewhere" / "judge.md", "Grade {{output}}\n")
    write(project / "prompts" / "inside.md", "Grade {{output}}\n")
    eval_file = write(
        project / "evals" / "suite.eval.yaml",
        f"""\
        name: refs
        tests:
          - id: a
            input: hi
            criteria: c
            assertions:
              - {{name: one, type: llm-grader, prompt: "file://{outside}"}}
              - {{name: two, type: llm-grader, prompt: "file://{outside}"}}
              - {{name: three, type: llm-grader, prompt: file://../prompts/inside.md}}
          - id: b
            input: hi
            criteria: c
            assertions:
              - {{name: one, type: llm-grader, prompt: "file://{outside}"}}
        """,
    )
    suite = load_eval(eval_file)
    about = [w for w in suite.warnings if "outside the project root" in w]
    assert about == [
        f"{eval_file}: references {outside}, outside the project root {project}; "
        "its bytes are stored with the run's eval snapshot"
    ]
