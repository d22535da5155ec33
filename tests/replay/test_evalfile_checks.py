"""Eval files refused or warned about at load time, before any agent runs: a grader type AgentV 4.42.4 does
not register or has deprecated, values nested thousands of levels deep, files referenced from outside the
project root."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from evalstore.replay.errors import EvalFileError
from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.evalfile.source import MAX_NESTING
from evalstore.replay.evalfile.specs import UnknownTypeSpec, result_type


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


# -- grader types AgentV 4.42.4 does not register, and the deprecated ones ----------------------------

REGISTERED = (
    "llm-grader, code-grader, composite, tool-trajectory, field-accuracy, latency, cost, token-usage, "
    "execution-metrics, skill-trigger, contains, contains-any, contains-all, icontains, icontains-any, "
    "icontains-all, starts-with, ends-with, regex, is-json, equals, inline-assert"
)
"""AgentV 4.42.4's built-in registry, as its "Unknown grader type" error lists it."""
UNKNOWN = 'scores 0 and fails when it runs ("Unknown grader type"), counted in the score, in AgentV and here'


@pytest.mark.parametrize(
    ("written", "looked_up", "suggestion"),
    [
        ("contians", "contians", "contains"),
        ("llm_grador", "llm-grador", "llm-grader"),
        ("regx", "regx", "regex"),
        ("code-grder", "code-grder", "code-grader"),
        ("Contains", "Contains", "contains"),
        ("IS_JSON", "IS-JSON", "is-json"),
        ("script", "script", "code-grader"),
        ("llm-rubric", "llm-rubric", "llm-grader"),
        ("agent-rubric", "agent-rubric", "llm-grader"),
    ],
)
def test_a_type_agentv_does_not_register_loads_as_a_grader_that_scores_0_with_a_warning(
    project: Path, written: str, looked_up: str, suggestion: str
) -> None:
    """AgentV 4.42.4's parser keeps such an entry as a custom type (``_`` read as ``-``, the case as written),
    and its registry throws when the grader runs; evalstore loads it as that grader, warned about."""
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
                weight: 2
        """,
    )
    suite = load_eval(eval_file)
    [grader] = suite.tests[0].graders
    assert isinstance(grader, UnknownTypeSpec)
    assert (grader.name, grader.written_type, grader.weight, result_type(grader)) == ("greets", looked_up, 2, looked_up)
    assert grader.message == f'Unknown grader type: "{looked_up}". Registered types: {REGISTERED}'
    assert suite.warnings == [
        f"{eval_file}:8: field `tests[0].assertions[0].type`: AgentV 4.42.4 has no grader type `{looked_up}` "
        f"(did you mean `{suggestion}`?): grader `greets` of test `only` {UNKNOWN}"
    ]


def test_a_type_like_nothing_known_lists_agentvs_types_and_is_named_by_its_type(project: Path) -> None:
    eval_file = write(
        project / "suite.eval.yaml",
        """\
        name: typo
        assertions: [{type: zzzzqqq}]
        tests:
          - {id: only, input: hi, criteria: c, assertions: []}
        """,
    )
    suite = load_eval(eval_file)
    [grader] = suite.tests[0].graders
    assert (grader.type, grader.name) == ("unknown-type", "zzzzqqq")
    assert suite.warnings == [
        f"{eval_file}:2: field `assertions[0].type`: AgentV 4.42.4 has no grader type `zzzzqqq` (its types: "
        f"{REGISTERED}): grader `zzzzqqq` of every test (a suite-level assertion) {UNKNOWN}"
    ]


def test_the_registered_types_hold_the_custom_assertions_agentv_discovers_in_its_order(
    project: Path, tmp_path: Path
) -> None:
    """``discoverAssertions`` (``.agentv/assertions/`` from the eval's folder up, nearest first), then
    ``discoverGraders`` (``graders/`` and ``judges/``, folder by folder); a built-in name or one registered
    already is not registered again, a hidden file or another suffix not at all."""
    for path in (
        project / "evals" / ".agentv" / "assertions" / "near.ts",
        project / "evals" / ".agentv" / "assertions" / "contains.ts",
        project / "evals" / ".agentv" / "assertions" / ".hidden.ts",
        project / "evals" / ".agentv" / "assertions" / "notes.md",
        project / "evals" / ".agentv" / "graders" / "grade-near.mjs",
        project / ".agentv" / "assertions" / "far.js",
        project / ".agentv" / "assertions" / "near.ts",
        project / ".agentv" / "judges" / "judge-far.mts",
        project / ".agentv" / "graders" / "b-far.ts",
        project / ".agentv" / "graders" / "a-far.ts",
    ):
        write(path, "export default {}\n")
    eval_file = write(
        project / "evals" / "suite.eval.yaml",
        """\
        name: typo
        tests:
          - {id: only, input: hi, criteria: c, assertions: [{type: nope}, {type: far}]}
        """,
    )
    suite = load_eval(eval_file)
    unknown, custom = suite.tests[0].graders
    assert unknown.registered == [*REGISTERED.split(", "), "near", "far", "grade-near", "a-far", "b-far", "judge-far"]
    assert (custom.type, custom.custom_type, custom.script) == (
        "code-grader",
        "far",
        str(project / ".agentv" / "assertions" / "far.js"),
    )


DEPRECATED = """\
name: deprecated
assertions:
  - {type: code-judge}
tests:
  - id: first
    input: hi
    criteria: c
    assertions:
      - {name: old, type: code_judge, command: [python3, missing.py]}
      - {type: contains, value: hi}
  - id: second
    input: hi
    criteria: c
    assertions:
      - {type: llm-judge}
      - name: agg
        type: composite
        aggregator: {type: llm_judge}
        assertions: [{name: has, type: contains, value: hi}]
  - id: own-only
    input: hi
    criteria: c
    execution: {skip_defaults: true}
    assertions:
      - {type: contains, value: hi}
"""


def test_the_deprecated_types_are_skipped_with_agentvs_warning_naming_each_test(project: Path) -> None:
    """AgentV 4.42.4 skips ``code-judge`` and ``llm-judge`` (``isDeprecatedJudgeType``, after ``_`` is read as
    ``-``) before reading anything else of the entry, and says so of each test, a suite-level one in each test
    it would be added to; a composite whose aggregator has such a type is skipped. A test left with no
    graders is graded by the implicit llm-grader, as AgentV grades it."""
    eval_file = write(project / "suite.eval.yaml", DEPRECATED)
    suite = load_eval(eval_file)
    assert [[g.name for g in t.graders] for t in suite.tests] == [["contains-hi"], ["llm-grader"], ["contains-hi"]]
    assert suite.tests[1].graders[0].declared_type == "implicit"
    at = f"{eval_file}:"
    assert suite.warnings == [
        f"{at}9: field `tests[0].assertions[0].type`: Skipping evaluator 'old' in 'first': 'code_judge' is "
        "deprecated. Use 'code-grader' instead",
        f"{at}3: field `assertions[0].type`: Skipping evaluator '<unnamed>' in 'first': 'code-judge' is "
        "deprecated. Use 'code-grader' instead",
        f"{at}15: field `tests[1].assertions[0].type`: Skipping evaluator '<unnamed>' in 'second': 'llm-judge' is "
        "deprecated. Use 'llm-grader' instead",
        f"{at}18: field `tests[1].assertions[1].aggregator.type`: Skipping composite evaluator 'agg' in 'second': "
        "aggregator type 'llm_judge' is deprecated. Use 'llm-grader' instead",
        f"{at}3: field `assertions[0].type`: Skipping evaluator '<unnamed>' in 'second': 'code-judge' is "
        "deprecated. Use 'code-grader' instead",
    ]


@pytest.mark.parametrize(("where", "owner"), [("suite", "global"), ("test", "only")])
def test_an_evaluator_naming_a_deprecated_type_is_refused_as_agentv_refuses_the_file(
    project: Path, where: str, owner: str
) -> None:
    suite_key = "evaluator: code_judge\n" if where == "suite" else ""
    test_key = "    evaluator: code_judge\n" if where == "test" else ""
    eval_file = write(
        project / "suite.eval.yaml",
        f"name: e\n{suite_key}tests:\n  - id: only\n    input: hi\n    criteria: c\n{test_key}",
    )
    with pytest.raises(EvalFileError) as caught:
        load_eval(eval_file)
    assert str(caught.value).endswith(
        f"field `{'evaluator' if where == 'suite' else 'tests[0].evaluator'}`: Unsupported grader 'code_judge' in "
        f"{owner}. Use 'code-grader' instead. (AgentV 4.42.4 does not load the eval file)"
    )


def test_a_turns_assertion_types_are_looked_up_as_written(project: Path) -> None:
    """AgentV hands a conversation turn's assertions to its grader registry as written: no ``_`` read as
    ``-``, no ``rubrics`` (its parser's), no deprecation skip: each such grader scores 0. The whole
    conversation's assertions are its parser's, as a test's."""
    eval_file = write(
        project / "suite.eval.yaml",
        """\
        name: turns
        tests:
          - id: chat
            mode: conversation
            input: hi
            turns:
              - input: one
                assertions:
                  - {type: code_grader, command: [python3, -c, "print(1)"]}
                  - {type: rubrics, criteria: [{outcome: ok}]}
                  - {type: code-judge, command: [python3, -c, "print(1)"]}
                  - {type: contains, value: x}
            assertions:
              - {type: code-judge}
              - {type: is_json}
        """,
    )
    suite = load_eval(eval_file)
    [test] = suite.tests
    assert [(g.type, result_type(g)) for g in test.turns[0].graders] == [
        ("unknown-type", "code_grader"),
        ("unknown-type", "rubrics"),
        ("unknown-type", "code-judge"),
        ("contains", "contains"),
    ]
    assert [g.type for g in test.graders] == ["is-json"]
    turn = "a turn's assertion is looked up as written, and AgentV 4.42.4 has no grader type"
    assert [w.split(": ", 2)[-1] for w in suite.warnings] == [
        "Skipping evaluator '<unnamed>' in 'chat': 'code-judge' is deprecated. Use 'code-grader' instead",
        f"{turn} `code_grader` (did you mean `code-grader`?): grader `code_grader` of test `chat` {UNKNOWN}",
        f"{turn} `rubrics` (did you mean `llm-grader`?): grader `rubrics` of test `chat` {UNKNOWN}",
        f"{turn} `code-judge` (did you mean `code-grader`?): grader `code-judge` of test `chat` {UNKNOWN}",
    ]


def test_v5_next_names_are_its_graders_in_its_bundles_only(project: Path) -> None:
    """``llm-rubric`` and ``script`` are what a v5-next bundle (Promptfoo-shaped) names an LLM and a code
    grader, graded by that AgentV; in an AgentV 4.42.4 eval file they are unknown types."""
    body = """\
    tests:
      - id: only
        input: hi
        criteria: c
        assertions:
          - {type: llm-rubric, value: says hi}
          - {type: script, command: [python3, -c, "print(1)"]}
    """
    v4 = load_eval(write(project / "v4.eval.yaml", "name: v4\n" + textwrap.dedent(body)))
    assert [g.type for g in v4.tests[0].graders] == ["unknown-type", "unknown-type"]
    v5 = load_eval(write(project / "v5.eval.yaml", 'prompts: ["{{ input }}"]\n' + textwrap.dedent(body)))
    assert [(g.name, g.type) for g in v5.tests[0].graders] == [("llm-rubric", "llm-grader"), ("script", "code-grader")]


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
