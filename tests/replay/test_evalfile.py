"""Eval YAML parsing: real AgentV fixtures, the v4 semantics, and errors that name file, line and field."""

from __future__ import annotations

import glob
import json
import shutil
import textwrap
from pathlib import Path

import pytest
from fixture_paths import AGENTV_FIXTURES as FIXTURES

from evalstore.replay.errors import EvalFileError, ReferenceNotFoundError
from evalstore.replay.evalfile.aliases import normalize_media_type
from evalstore.replay.evalfile.metadata import merge_metadata, suite_metadata
from evalstore.replay.evalfile.parser import load_eval, load_eval_text
from evalstore.replay.evalfile.search_roots import SnapshotResolver, build_search_roots, resolve_reference
from evalstore.replay.evalfile.specs import AssertionSpec, CodeGraderSpec, LlmGraderSpec

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def write(base: Path, rel: str, text: str = "") -> Path:
    path = base / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def load(tmp_path: Path, text: str, rel: str = "evals/suite.eval.yaml"):
    (tmp_path / ".git").mkdir(exist_ok=True)
    return load_eval(write(tmp_path, rel, text))


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The current directory is the last search root; keep it inside the test's sandbox.
    sandbox = tmp_path / "cwd"
    sandbox.mkdir()
    monkeypatch.chdir(sandbox)


# --- real AgentV fixtures ---------------------------------------------------------------------


def test_rubric_fixture_gives_the_tests_graders_and_rubrics_it_describes(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "v4/rubric/dataset.eval.yaml", tmp_path / "dataset.eval.yaml")
    script = write(tmp_path, "check_syntax.py", "print('ok')\n")
    suite = load_eval(tmp_path / "dataset.eval.yaml")

    assert suite.name == "rubric"
    assert suite.target == "llm"
    assert suite.threshold == 0.8
    assert [t.id for t in suite.tests] == [
        "code-explanation-simple",
        "technical-writing-detailed",
        "code-quality-multi-eval",
        "summary-task",
        "summary-multi-criteria-score-ranges-proposed",
    ]
    simple, detailed, multi, summary, ranges = suite.tests

    (bare,) = simple.graders
    assert isinstance(bare, LlmGraderSpec)
    assert (bare.name, bare.declared_type, bare.weight) == ("rubrics", "rubrics", 3.0)
    assert [(r.id, r.weight, r.required) for r in bare.rubrics] == [
        ("rubric-1", 1.0, True),
        ("rubric-2", 1.0, True),
        ("rubric-3", 1.0, True),
    ]
    assert bare.rubrics[1].outcome == "Explains the partition step"
    assert simple.input[0].content == "Explain how the quicksort algorithm works"
    assert simple.expected_output[0]["role"] == "assistant"

    (rubrics,) = detailed.graders
    assert isinstance(rubrics, LlmGraderSpec) and rubrics.weight == 1.0
    assert [(r.id, r.weight, r.required) for r in rubrics.rubrics] == [
        ("structure", 1.0, True),
        ("success-codes", 2.0, True),
        ("client-errors", 2.0, True),
        ("server-errors", 1.5, False),
        ("practical-examples", 1.0, False),
    ]

    assert [(g.name, g.type) for g in multi.graders] == [("rubrics", "llm-grader"), ("python_syntax", "code-grader")]
    assert [r.id for r in multi.graders[0].rubrics] == ["rubric-1", "rubric-2", "rubric-3", "rubric-4"]
    code = multi.graders[1]
    assert isinstance(code, CodeGraderSpec)
    assert code.command == ["uv", "run", "python", str(script)]
    assert code.script == str(script)
    assert code.cwd == str(tmp_path)
    assert code.timeout == 60.0

    (implicit,) = summary.graders
    assert isinstance(implicit, LlmGraderSpec)
    assert (implicit.name, implicit.declared_type, implicit.rubrics) == ("llm-grader", "implicit", [])
    assert summary.criteria.startswith("Provide a concise summary")

    factual, brevity = ranges.graders[0].rubrics
    assert (factual.id, factual.weight, factual.min_score, factual.outcome) == ("factual_accuracy", 2.0, 0.8, "")
    assert [r["score_range"] for r in factual.score_ranges] == [[0, 2], [3, 5], [6, 7], [8, 9], [10, 10]]
    assert factual.score_ranges[3]["outcome"].startswith("Accurate and covers")
    assert (brevity.id, brevity.weight, brevity.min_score) == ("brevity_and_clarity", 1.0, None)

    assert suite.referenced_files == [("grader_script", str(script), "check_syntax.py")]
    assert suite.warnings == []


def test_rubric_fixture_as_shipped_loads_and_warns_about_the_missing_grader_script() -> None:
    suite = load_eval(FIXTURES / "v4/rubric/dataset.eval.yaml")
    assert [t.id for t in suite.tests][:3] == [
        "code-explanation-simple",
        "technical-writing-detailed",
        "code-quality-multi-eval",
    ]
    grader = suite.tests[2].graders[1]
    assert (grader.name, grader.type, grader.script) == ("python_syntax", "code-grader", None)
    (warning,) = suite.warnings
    assert warning.startswith(f"{FIXTURES}/v4/rubric/dataset.eval.yaml:148: field `tests[2].assertions[1].command[3]`")
    assert "grader script `check_syntax.py` not found" in warning


def test_preprocessors_fixture_resolves_the_converter_script(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "v4/preprocessors/dataset.eval.yaml", write(tmp_path, "evals/dataset.eval.yaml"))
    script = write(tmp_path, "scripts/preprocessors/xlsx-to-csv.ts", "console.log('x')\n")
    suite = load_eval(tmp_path / "evals/dataset.eval.yaml")

    (converter,) = suite.preprocessors
    assert (converter.type, converter.media_type) == ("xlsx", XLSX)
    assert converter.command == ["bun", "run", str(script)]
    (test,) = suite.tests
    (grader,) = test.graders
    assert isinstance(grader, LlmGraderSpec)
    assert grader.declared_type == "rubrics" and grader.preprocessors == [converter]
    assert grader.rubrics[0].outcome.startswith("Output contains the transformed spreadsheet")
    assert suite.referenced_files == [("converter", str(script), "../scripts/preprocessors/xlsx-to-csv.ts")]


def test_preprocessors_fixture_as_shipped_fails_clearly() -> None:
    with pytest.raises(EvalFileError) as err:
        load_eval(FIXTURES / "v4/preprocessors/dataset.eval.yaml")
    assert (err.value.line, err.value.field) == (5, "preprocessors[0].command[2]")
    assert "preprocessor command file `../scripts/preprocessors/xlsx-to-csv.ts` not found" in str(err.value)


def _v5_bundle() -> Path:
    (path,) = glob.glob(str(FIXTURES / "v5-next/runs/*/fizzbuzz--*/test/EVAL.yaml"))
    return Path(path)


def test_v5_bundle_loads_with_its_validator_present(tmp_path: Path) -> None:
    shutil.copy(_v5_bundle(), write(tmp_path, "run/test/EVAL.yaml"))
    script = write(tmp_path, "run/validators/check_syntax.py", "")
    suite = load_eval(tmp_path / "run/test/EVAL.yaml")

    assert suite.target == "codex-sdk-openai"
    (test,) = suite.tests
    assert test.input[0].content.startswith("Write FizzBuzz in Python.")
    assert [(g.name, g.type) for g in test.graders] == [
        ("contains-fizz", "contains"),
        ("llm-rubric", "llm-grader"),
        ("script", "code-grader"),
        ("llm-rubric-2", "llm-grader"),
    ]
    contains, rubric, script_grader, rubric2 = test.graders
    assert isinstance(contains, AssertionSpec) and contains.value == "fizz"
    assert rubric.declared_type == "llm-rubric" and "{{ output }}" in rubric.prompt
    assert [(r.id, r.weight) for r in rubric2.rubrics] == [("rubric-1", 0.5), ("rubric-2", 1.5)]
    assert script_grader.command == ["python3", str(script)]
    assert script_grader.cwd == str(tmp_path / "run/test")
    assert any("`undefined` not found" in w for w in suite.warnings)


def test_v5_bundle_as_shipped_loads_with_a_warning_for_its_missing_script() -> None:
    suite = load_eval(_v5_bundle())
    assert [t.id for t in suite.tests] == ["fizzbuzz"]
    assert any(
        ":36: field `tests[0].assert[2].command[1]`" in w and "`../validators/check_syntax.py` not found" in w
        for w in suite.warnings
    )


# --- metadata, input, defaults -------------------------------------------------------------------


def test_metadata_merge_rules() -> None:
    suite = {"tags": ["a", "b"], "nested": {"x": 1, "deep": {"k": "suite"}}, "owner": "suite", "only_suite": 1}
    test = {"tags": ["b", "c"], "nested": {"y": 2, "deep": {"k": "test"}}, "owner": "test"}
    assert merge_metadata(suite, test) == {
        "tags": ["a", "b", "c"],
        "nested": {"x": 1, "y": 2, "deep": {"k": "test"}},
        "owner": "test",
        "only_suite": 1,
    }
    # Objects in arrays dedupe by value; the inputs are not mutated.
    assert merge_metadata({"l": [{"a": 1}]}, {"l": [{"a": 1}, {"a": 2}]}) == {"l": [{"a": 1}, {"a": 2}]}
    assert suite["tags"] == ["a", "b"]


def test_suite_metadata_and_governance_reach_every_test(tmp_path: Path) -> None:
    suite = load(
        tmp_path,
        """
        metadata:
          source_repo: https://example.org/dexter
          tags: [finance]
          governance: {owner: metadata-team, level: 1}
        governance: {owner: governance-team}
        tests:
          - id: t1
            input: hi
            criteria: c
            metadata: {tags: [finance, slow], source_repo: override}
          - id: t2
            input: hi
            criteria: c
        """,
    )
    t1, t2 = suite.tests
    assert t1.metadata == {
        "source_repo": "override",
        "tags": ["finance", "slow"],
        "governance": {"owner": "governance-team"},
    }
    assert t2.metadata["source_repo"] == "https://example.org/dexter"
    assert suite.metadata["governance"] == {"owner": "governance-team"}
    assert suite_metadata({"governance": {"a": 1}}, None) == {"governance": {"a": 1}}


def test_object_input_becomes_one_user_message_of_formatted_json(tmp_path: Path) -> None:
    suite = load(
        tmp_path,
        """
        tests:
          - id: apple
            input: {company: Apple, ticker: AAPL}
            criteria: Uses the ticker
        """,
    )
    (message,) = suite.tests[0].input
    assert message.role == "user"
    assert message.content == '{\n  "company": "Apple",\n  "ticker": "AAPL"\n}'
    assert json.loads(message.content) == {"company": "Apple", "ticker": "AAPL"}


def test_suite_input_is_prepended_and_suite_assertions_appended(tmp_path: Path) -> None:
    suite = load(
        tmp_path,
        """
        input: [{role: system, content: You are terse.}]
        assertions:
          - {type: contains, value: done}
        tests:
          - id: normal
            input: do it
            assertions:
              - {type: regex, value: "^ok", flags: i}
          - id: skipping
            input: do it
            criteria: c
            execution: {skip_defaults: true}
        """,
    )
    normal, skipping = suite.tests
    assert [(m.role, m.content) for m in normal.input] == [("system", "You are terse."), ("user", "do it")]
    # Unnamed deterministic assertions get AgentV's names: type and value.
    assert [(g.name, g.type) for g in normal.graders] == [("regex-^ok", "regex"), ("contains-done", "contains")]
    assert normal.graders[0].flags == "i"
    assert [m.role for m in skipping.input] == ["user"]
    assert [g.declared_type for g in skipping.graders] == ["implicit"]


def test_suite_level_skip_defaults_applies_to_every_test(tmp_path: Path) -> None:
    suite = load(
        tmp_path,
        """
        execution: {skip_defaults: true, threshold: 0.6, target: judge-a}
        input: prefix
        assertions: [{type: is-json}]
        tests:
          - {id: a, input: x, criteria: c}
          - {id: b, input: x, criteria: c, execution: {skip_defaults: false, threshold: 0.9, target: other}}
        """,
    )
    a, b = suite.tests
    assert (suite.threshold, suite.target) == (0.6, "judge-a")
    assert [m.content for m in a.input] == ["x"] and a.graders[0].declared_type == "implicit"
    assert [m.content for m in b.input] == ["prefix", "x"] and b.graders[0].type == "is-json"
    assert (a.threshold, a.target, b.threshold, b.target) == (None, None, 0.9, "other")


def test_bare_strings_collect_into_one_rubrics_grader_at_the_first_string(tmp_path: Path) -> None:
    suite = load(
        tmp_path,
        """
        tests:
          - id: t
            input: x
            assertions:
              - {type: contains, value: a}
              - First point
              - {type: contains, value: b}
              - Second point
              - {type: llm-grader, name: rubrics}
        """,
    )
    graders = suite.tests[0].graders
    assert [(g.name, g.type) for g in graders] == [
        ("contains-a", "contains"),
        ("rubrics", "llm-grader"),
        ("contains-b", "contains"),
        ("rubrics-2", "llm-grader"),
    ]
    bare = graders[1]
    assert (bare.declared_type, bare.weight) == ("rubrics", 2.0)
    assert [(r.id, r.outcome) for r in bare.rubrics] == [("rubric-1", "First point"), ("rubric-2", "Second point")]


def test_rubric_items_accept_criteria_alias_and_defaults(tmp_path: Path) -> None:
    suite = load(
        tmp_path,
        """
        tests:
          - id: t
            input: x
            assertions:
              - type: llm-grader
                target: judge
                rubrics:
                  - operator: correctness
                    criteria: Uses the provided ticker.
                  - {id: no-contra, operator: contradiction, criteria: Does not contradict, weight: 2, required: false}
                  - {criteria: Odd operator, operator: sideways}
        """,
    )
    grader = suite.tests[0].graders[0]
    assert grader.target == "judge"
    first, second, third = grader.rubrics
    assert (first.id, first.outcome, first.operator, first.weight, first.required) == (
        "rubric-1",
        "Uses the provided ticker.",
        "correctness",
        1.0,
        True,
    )
    assert (second.id, second.operator, second.weight, second.required) == ("no-contra", "contradiction", 2.0, False)
    assert third.operator is None
    assert any("unknown operator `sideways`" in w and ":12:" in w for w in suite.warnings)


def test_score_ranges_list_form_and_validation(tmp_path: Path) -> None:
    def rubric(ranges: str):
        return load(
            tmp_path,
            f"""
            tests:
              - id: t
                input: x
                assertions:
                  - type: rubrics
                    criteria:
                      - id: r
                        score_ranges: {ranges}
            """,
        )

    ok = rubric("[{score_range: [6, 10], outcome: good}, {score_range: [0, 5], outcome: bad}]")
    assert ok.tests[0].graders[0].rubrics[0].score_ranges == [
        {"score_range": [0, 5], "outcome": "bad"},
        {"score_range": [6, 10], "outcome": "good"},
    ]
    with pytest.raises(EvalFileError, match="leave 4-5 uncovered") as err:
        rubric("[{score_range: [0, 3], outcome: a}, {score_range: [6, 10], outcome: b}]")
    assert (err.value.line, err.value.field) == (9, "tests[0].assertions[0].criteria[0].score_ranges")
    with pytest.raises(EvalFileError, match="overlap at 3"):
        rubric("[{score_range: [0, 4], outcome: a}, {score_range: [3, 10], outcome: b}]")
    shorthand = rubric("{0: bad, 5: ok, 9: great}")
    assert [r["score_range"] for r in shorthand.tests[0].graders[0].rubrics[0].score_ranges] == [
        [0, 4],
        [5, 8],
        [9, 10],
    ]
    with pytest.raises(EvalFileError, match="leave 0-2 uncovered"):
        rubric("{3: meh, 10: top}")
    with pytest.raises(EvalFileError, match="must be an integer 0-10"):
        rubric("{0: bad, 11: beyond}")


def test_ranges_ending_early_are_rejected(tmp_path: Path) -> None:
    text = """
    tests:
      - id: t
        input: x
        assertions:
          - type: rubrics
            criteria:
              - id: r
                score_ranges: [{score_range: [0, 9], outcome: all but ten}]
    """
    with pytest.raises(EvalFileError, match="end at 9; the last range must reach 10"):
        load(tmp_path, text)


def test_rubric_min_score_out_of_range_is_an_error_with_its_line(tmp_path: Path) -> None:
    text = """
    tests:
      - id: t
        input: x
        assertions:
          - type: rubrics
            criteria:
              - id: r
                outcome: o
                min_score: 1.5
    """
    with pytest.raises(EvalFileError) as err:
        load(tmp_path, text)
    assert (err.value.line, err.value.field) == (10, "tests[0].assertions[0].criteria[0].min_score")


# --- warnings and errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,refused", [("report-suite-2", False), ("üni-suite", True), ("Report", True), ("a_b", True), ("x" * 65, True)]
)
def test_a_suite_name_agentv_refuses_is_a_warning(tmp_path: Path, name: str, refused: bool) -> None:
    """AgentV 4.42 refuses a suite named other than with 1 to 64 lowercase letters, digits and ``-``;
    evalstore runs it, and says AgentV will not."""
    suite = load(tmp_path, f"name: {name}\ntests:\n  - {{id: t, input: x, criteria: c}}\n")
    assert suite.name == name
    found = [w for w in suite.warnings if "AgentV refuses the suite name" in w]
    assert bool(found) == refused
    if refused:
        assert found[0].startswith(f"{tmp_path / 'evals/suite.eval.yaml'}:1: ") and repr(name) in found[0]


def test_unknown_keys_warn_with_file_and_line(tmp_path: Path) -> None:
    suite = load(
        tmp_path,
        """
        name: s
        colour: blue
        tests:
          - id: t
            input: x
            criteria: c
            flavour: vanilla
            assertions:
              - {type: contains, value: a, strength: 3}
              - {type: composite, graders: []}
        """,
    )
    path = tmp_path / "evals/suite.eval.yaml"
    assert f"{path}:3: field `colour`: unknown key `colour` ignored" in "\n".join(suite.warnings)
    assert any(w.startswith(f"{path}:8: field `tests[0].flavour`: unknown key") for w in suite.warnings)
    assert any(w.startswith(f"{path}:10: field `tests[0].assertions[0].strength`") for w in suite.warnings)
    # AgentV reads a composite's members from `assertions` (or `assert`, `evaluators`), not `graders`
    assert any("composite grader `composite` skipped, as AgentV skips it" in w and ":11:" in w for w in suite.warnings)
    assert [g.type for g in suite.tests[0].graders] == ["contains"]


def test_a_numeric_required_is_read_and_said_to_be_deprecated(tmp_path: Path):
    """AgentV 4.42.4 reads `required: 0.5` as required with min_score 0.5 and warns that it is deprecated."""
    suite = load(
        tmp_path,
        "tests:\n  - id: t\n    input: x\n    assertions:\n      - {type: contains, value: a, required: 0.5}\n",
    )
    (grader,) = suite.tests[0].graders
    assert grader.required == 0.5
    (warning,) = suite.warnings
    assert "`required: 0.5` is deprecated; use `required: true` and `min_score: 0.5`" in warning


@pytest.mark.parametrize(
    ("body", "line", "field", "fragment"),
    [
        ("tests:\n  - input: x\n    criteria: c\n", 2, "tests[0]", "`id` is required"),
        ("tests:\n  - id: a\n    criteria: c\n", 2, "tests[0]", "`input` is required"),
        ("tests:\n  - id: a\n    input: x\n", 2, "tests[0]", "nothing to grade"),
        (
            "tests:\n  - id: a\n    input: x\n    assertions:\n      - type: code-grader\n        cwd: .\n",
            5,
            "tests[0].assertions[0]",
            "`command` is required",
        ),
        (
            "tests:\n  - {id: a, input: x, criteria: c}\n  - {id: a, input: y, criteria: c}\n",
            3,
            "tests[1].id",
            "duplicate test id `a`",
        ),
        (
            "preprocessors:\n  - type: pdf\n    command: pdftotext x.py\ntests: []\n",
            3,
            "preprocessors[0].command",
            "not a string",
        ),
    ],
)
def test_invalid_files_raise_one_error_naming_line_and_field(
    tmp_path: Path, body: str, line: int, field: str, fragment: str
) -> None:
    path = write(tmp_path, "e.eval.yaml", body)
    with pytest.raises(EvalFileError) as err:
        load_eval(path)
    assert (err.value.line, err.value.field) == (line, field)
    assert fragment in str(err.value)
    assert str(err.value).startswith(f"{path}:{line}: field `{field}`: ")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("written", "shown"),
    [("1.5", "1.5"), ("-0.1", "-0.1"), ('"0.5"', "0.5"), (".nan", "NaN"), ("true", "true"), ("[0.5]", "0.5"),
     ("{a: 1}", "[object Object]"), ("${{ EVALSTORE_TEST_UNSET_THRESHOLD }}", ""), ("abc", "abc")],
)  # fmt: skip
def test_an_invalid_suite_threshold_is_warned_about_and_ignored_as_agentv_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: str, shown: str
) -> None:
    # AgentV 4.42.4's extractThreshold: anything but a number in 0..1 is "Invalid ... Ignoring." and the
    # default pass mark (an unset `${{ VAR }}` is the empty string).
    monkeypatch.delenv("EVALSTORE_TEST_UNSET_THRESHOLD", raising=False)
    body = f"name: th\nexecution:\n  threshold: {written}\ntests:\n  - {{id: a, input: x, criteria: c}}\n"
    path = write(tmp_path, "e.eval.yaml", body)
    suite = load_eval(path)
    assert suite.threshold == 0.8
    assert suite.warnings == [
        f"{path}:3: field `execution.threshold`: Invalid execution.threshold: {shown}. "
        "Must be a number between 0 and 1. Ignoring."
    ]


def test_an_invalid_test_threshold_is_ignored_with_a_warning(tmp_path: Path) -> None:
    # AgentV drops it without a word; evalstore says so, and the test is marked against the suite's.
    body = "tests:\n  - id: a\n    input: x\n    criteria: c\n    execution: {threshold: 2}\n"
    path = write(tmp_path, "e.eval.yaml", body)
    suite = load_eval(path)
    assert suite.tests[0].threshold is None
    assert suite.warnings == [
        f"{path}:5: field `tests[0].execution.threshold`: Invalid execution.threshold: 2. "
        "Must be a number between 0 and 1. Ignoring."
    ]


def test_a_test_with_only_suite_assertions_is_told_what_agentv_does_and_what_works(tmp_path: Path) -> None:
    # AgentV skips a test with no criteria, expected_output or assertions of its own, even when suite-level
    # assertions would apply; the message says so instead of asking for assertions the suite already has.
    suite = "assertions:\n  - {type: contains, value: ok}\ntests:\n  - id: a\n    input: x\n"
    path = write(tmp_path, "e.eval.yaml", suite)
    with pytest.raises(EvalFileError) as err:
        load_eval(path)
    message = str(err.value)
    assert message.startswith(f"{path}:4: field `tests[0]`: nothing to grade: suite-level `assertions` apply only")
    assert "AgentV skips a test with none of them" in message and "`assertions: []`" in message
    # What the message proposes works: the test is graded by the suite's assertion alone.
    fixed = write(tmp_path, "f.eval.yaml", suite + "    assertions: []\n")
    assert [g.type for g in load_eval(fixed).tests[0].graders] == ["contains"]
    # A test that skips the suite defaults has none to fall back on: the plain message.
    skipping = write(tmp_path, "g.eval.yaml", suite + "    execution: {skip_defaults: true}\n")
    with pytest.raises(EvalFileError, match="nothing to grade: add `criteria`, `expected_output` or `assertions`"):
        load_eval(skipping)
    # A misspelled key, which is otherwise only warned of, is named in the refusal.
    misspelled = write(tmp_path, "h.eval.yaml", "tests:\n  - id: a\n    input: hi\n    expcted_output: Jupiter\n")
    with pytest.raises(EvalFileError) as err:
        load_eval(misspelled)
    assert str(err.value).endswith("`assertions` (`expcted_output`: not a test key; misspelled?)")


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.yaml", "tests:\n  - id: a\n    input: [unclosed\n")
    with pytest.raises(EvalFileError, match="invalid YAML") as err:
        load_eval(path)
    assert err.value.line == 4


# --- file references -------------------------------------------------------------------------------


def test_search_roots_order_and_project_root(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    eval_path = write(project, "a/b/suite.yaml", "")
    cwd = tmp_path / "cwd"
    assert build_search_roots(eval_path, cwd=cwd) == [
        str(project / "a/b"),
        str(project / "a"),
        str(project),
        str(cwd),
    ]
    # An explicit project root that is not an ancestor is still searched, after the parents.
    other = tmp_path / "elsewhere"
    roots = build_search_roots(eval_path, project_root=other, cwd=cwd)
    assert roots[:3] == [str(project / "a/b"), str(project / "a"), str(project)]
    assert roots[-2:] == [str(other), str(cwd)]
    assert "/" in roots  # no marker reached: the walk goes on to the filesystem root


def test_an_agentv_folder_does_not_end_the_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AgentV leaves `.agentv/cache.json` in the folder it ran from (here the eval's): its repository root is
    still the folder with `.git` (findRepoRoot), so a prompt there is found from any working directory,
    and the repository's files are inside the project root (no warning)."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo, ".agentv/targets.yaml", "targets: []\n")
    write(repo, "suite/.agentv/cache.json", '{"lastRunDir": "runs/p"}\n')
    prompt = write(repo, "shared-prompts/p.md", "Grade {{output}}\n")
    grader = write(repo, "graders/score.py", "print('{}')\n")
    eval_path = write(
        repo,
        "suite/p.eval.yaml",
        """\
        tests:
          - id: t1
            criteria: anything
            input: hi
            assertions:
              - {name: judged, type: llm-grader, prompt: "file://shared-prompts/p.md"}
              - {name: scored, type: code-grader, command: [python3, graders/score.py]}
        """,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert build_search_roots(eval_path) == [str(repo / "suite"), str(repo), str(elsewhere)]
    suite = load_eval(eval_path)
    assert {str(p) for _, p, _ in suite.referenced_files} >= {str(prompt), str(grader)}
    assert not [w for w in suite.warnings if "outside the project root" in w], suite.warnings


def test_references_resolve_to_the_nearest_root(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    eval_path = write(project, "evals/deep/suite.yaml", "")
    far = write(project, "grader.md", "{{output}}")
    roots = build_search_roots(eval_path, cwd=tmp_path / "cwd")
    assert resolve_reference("grader.md", roots) == far
    near = write(project, "evals/grader.md", "{{output}}")
    assert resolve_reference("file://grader.md", roots) == near
    in_cwd = write(tmp_path, "cwd/only-in-cwd.md", "x")
    assert resolve_reference("only-in-cwd.md", roots) == in_cwd
    with pytest.raises(ReferenceNotFoundError, match=r"nowhere\.md"):
        resolve_reference("nowhere.md", roots)


def test_llm_grader_prompts(tmp_path: Path) -> None:
    prompt = write(tmp_path, "prompts/judge.md", "Grade this: {{  output\t}}\n")
    suite = load(
        tmp_path,
        """
        tests:
          - id: t
            input: x
            assertions:
              - {type: llm-grader, prompt: "file://prompts/judge.md", name: file}
              - {type: llm-grader, prompt: "Is it polite? {{output}}", name: inline}
              - {type: llm-grader, prompt: "prompts/judge.md", name: looks-like-a-path}
        """,
    )
    from_file, inline, path_like = suite.tests[0].graders
    assert (from_file.prompt, from_file.prompt_file, from_file.prompt_ref) == (
        None,
        str(prompt),
        "file://prompts/judge.md",
    )
    assert (inline.prompt, inline.prompt_file) == ("Is it polite? {{output}}", None)
    assert (path_like.prompt, path_like.prompt_file) == ("prompts/judge.md", None)
    assert suite.referenced_files == [("prompt", str(prompt), "file://prompts/judge.md")]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(None, "prompt file `file://missing.md` not found"), ("Grade {{ criteria }}", "neither {{output}}")],
)
def test_bad_prompt_files_are_errors(tmp_path: Path, content: str | None, fragment: str) -> None:
    if content is not None:
        write(tmp_path, "evals/missing.md", content)
    text = """
    tests:
      - id: t
        input: x
        assertions:
          - type: llm-grader
            prompt: file://missing.md
    """
    with pytest.raises(EvalFileError) as err:
        load(tmp_path, text)
    assert (err.value.line, err.value.field) == (7, "tests[0].assertions[0].prompt")
    assert fragment in str(err.value)


def test_code_graders(tmp_path: Path) -> None:
    script = write(tmp_path, "graders/check.py", "")
    write(tmp_path, "evals/work/keep", "")
    suite = load(
        tmp_path,
        """
        tests:
          - id: t
            input: x
            assertions:
              - {type: code-grader, command: "python3 graders/check.py --strict", name: shell}
              - type: code_grader
                command: [python3, -u, graders/check.py, data.json]
                cwd: work
                timeout: 5
                weight: 2
                required: true
                min_score: 0.5
                negate: true
                config: {level: 3}
                threshold: 0.9
              - {type: code-grader, command: [echo, hi]}
              - {type: code-grader, command: [/bin/bash, -c, "python3 graders/check.py"]}
              - {type: code-grader, command: "cd graders && python3 run.py"}
              - {type: code-grader, command: [/usr/bin/env, python3, graders/check.py]}
        """,
    )
    shell, argv, plain, bash_c, compound, env = suite.tests[0].graders
    assert (env.command, env.script) == (["/usr/bin/env", "python3", str(script)], str(script))
    assert shell.command == ["sh", "-c", "python3 graders/check.py --strict"]
    assert shell.script == str(script)
    assert argv.command == ["python3", "-u", str(script), "data.json"]
    assert argv.cwd == str(tmp_path / "evals/work")
    assert (argv.timeout, argv.weight, argv.required, argv.min_score, argv.negate) == (5.0, 2.0, True, 0.5, True)
    assert argv.config == {"level": 3, "threshold": 0.9}
    assert not any("threshold" in w for w in suite.warnings)  # AgentV passes it in config, silently
    assert (plain.script, plain.command, plain.cwd) == (None, ["echo", "hi"], str(tmp_path / "evals"))
    assert (bash_c.command, bash_c.script) == (["/bin/bash", "-c", "python3 graders/check.py"], str(script))
    assert compound.script is None
    assert any("`run.py` not found" in w and "digest cannot be recorded" in w for w in suite.warnings)
    assert suite.referenced_files == [("grader_script", str(script), "graders/check.py")]


def test_missing_grader_script_is_a_warning_naming_line_and_field(tmp_path: Path) -> None:
    text = """
    tests:
      - id: t
        input: x
        assertions:
          - {type: code-grader, command: "bash scripts/grade.sh"}
    """
    suite = load(tmp_path, text)
    (warning,) = suite.warnings
    assert ":6: field `tests[0].assertions[0].command`" in warning
    assert "grader script `scripts/grade.sh` not found" in warning and "will fail when it runs" in warning
    assert suite.tests[0].graders[0].script is None


def test_grader_preprocessors_override_suite_ones_by_normalized_type(tmp_path: Path) -> None:
    suite_script = write(tmp_path, "conv/xlsx_suite.py", "")
    grader_script = write(tmp_path, "conv/xlsx_grader.py", "")
    pdf_script = write(tmp_path, "conv/pdf.py", "")
    suite = load(
        tmp_path,
        f"""
        preprocessors:
          - {{type: XLSX, command: [python3, conv/xlsx_suite.py]}}
          - {{type: pdf, command: [python3, {pdf_script}], timeout: 5, max_output_bytes: 1000}}
        tests:
          - id: t
            input: x
            assertions:
              - type: llm-grader
                preprocessors:
                  - {{type: "{XLSX}", command: [python3, conv/xlsx_grader.py]}}
                  - {{type: html, command: [python3, conv/pdf.py]}}
              - Plain rubric
        """,
    )
    overridden, bare = suite.tests[0].graders
    assert [(c.media_type, c.command[-1]) for c in overridden.preprocessors] == [
        (XLSX, str(grader_script)),
        ("application/pdf", str(pdf_script)),
        ("text/html", str(pdf_script)),
    ]
    assert bare.preprocessors == suite.preprocessors
    assert suite.preprocessors[0].command == ["python3", str(suite_script)]
    assert (suite.preprocessors[1].timeout, suite.preprocessors[1].max_output_bytes) == (5.0, 1000)
    assert [r for r, _, _ in suite.referenced_files] == ["converter"] * 3


def test_normalize_media_type() -> None:
    assert normalize_media_type("  XLSX ") == XLSX
    assert normalize_media_type("md") == "text/markdown"
    assert normalize_media_type("yml") == "application/yaml"
    assert normalize_media_type("Application/PDF") == "application/pdf"
    assert normalize_media_type("image/x-custom") == "image/x-custom"


# --- tests as a file, snapshots -----------------------------------------------------------------


def test_tests_from_a_yaml_file(tmp_path: Path) -> None:
    cases = write(
        tmp_path,
        "evals/cases.yaml",
        """
        - id: one
          input: first
          criteria: c
        - id: two
          input: second
          assertions: [{type: equals, value: '2'}]
        """,
    )
    suite = load(tmp_path, "name: from-file\nassertions: [Is polite]\ntests: ./cases.yaml\n")
    assert [t.id for t in suite.tests] == ["one", "two"]
    assert [g.type for g in suite.tests[1].graders] == ["equals", "llm-grader"]
    assert suite.referenced_files == [("tests", str(cases), "./cases.yaml")]

    write(tmp_path, "evals/cases.yaml", "- id: one\n  input: first\n- id: two\n  criteria: c\n")
    with pytest.raises(EvalFileError) as err:
        load(tmp_path, "tests: ./cases.yaml\n")
    assert (err.value.file, err.value.line, err.value.field) == (str(cases), 1, "tests[0]")


def test_tests_from_a_jsonl_file(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "input": "hello", "criteria": "greets"},
        {"id": "b", "input": {"q": 1}, "expected_output": "1", "metadata": {"k": "v"}},
    ]
    cases = write(tmp_path, "evals/cases.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    suite = load(tmp_path, "metadata: {suite: yes}\ntests: cases.jsonl\n")
    a, b = suite.tests
    assert a.input[0].content == "hello"
    assert json.loads(b.input[0].content) == {"q": 1}
    assert b.metadata == {"suite": "yes", "k": "v"}  # YAML 1.2, as AgentV reads it: `yes` is a string
    assert b.graders[0].declared_type == "implicit"

    cases.write_text(json.dumps(rows[0]) + "\n" + json.dumps({"id": "c", "input": "x"}) + "\n")
    with pytest.raises(EvalFileError) as err:
        load(tmp_path, "tests: cases.jsonl\n")
    assert (err.value.file, err.value.line, err.value.field) == (str(cases), 2, "tests[1]")
    cases.write_text(json.dumps(rows[0]) + "\n\n{not json\n")
    with pytest.raises(EvalFileError, match="invalid JSON") as err:
        load(tmp_path, "tests: cases.jsonl\n")
    assert err.value.line == 3


def test_snapshot_resolver_replays_without_files_on_disk(tmp_path: Path) -> None:
    eval_path = tmp_path / "snap/suite.eval.yaml"
    text = textwrap.dedent(
        """
        preprocessors: [{type: csv, command: [python3, conv.py]}]
        tests:
          - id: t
            input: x
            assertions:
              - {type: llm-grader, prompt: "file://judge.md"}
              - {type: code-grader, command: [python3, check.py]}
        """
    )
    base = tmp_path / "snap"
    files = {
        str(base / "conv.py"): b"print()",
        str(base / "judge.md"): b"{{ expected_output }}",
        str(base / "check.py"): b"",
    }
    suite = load_eval_text(text, eval_path, file_resolver=SnapshotResolver(files))
    assert not base.exists()
    assert sorted(p for _, p, _ in suite.referenced_files) == sorted(files)
    assert suite.tests[0].graders[1].command == ["python3", str(base / "check.py")]
    with pytest.raises(EvalFileError, match=r"prompt file `file://judge\.md` not found"):
        load_eval_text(text, eval_path, file_resolver=SnapshotResolver({str(base / "conv.py"): b""}))


def test_default_name_and_input_files(tmp_path: Path) -> None:
    """A test's own ``input_files`` replace the suite's (AgentV's ``resolveInputMessages``): one user message,
    the files' segments then the input text; a test without its own gets the suite's."""
    doc = write(tmp_path, "evals/docs/guide.md", "# Guide")
    suite = load(
        tmp_path,
        """
        input_files: [docs/guide.md]
        tests:
          - id: t
            input: Summarise the attached guide
            criteria: c
            input_files: [missing.txt]
          - id: u
            input: And this one
            criteria: c
        """,
        rel="evals/my-suite.eval.yml",
    )
    assert suite.name == "my-suite"
    t, u = suite.tests
    assert t.input_files == ["missing.txt"]
    assert u.input_files == [str(doc)]
    assert [(b.type, getattr(b, "path", None), getattr(b, "text", None)) for b in t.input[0].blocks()] == [
        ("file", "missing.txt", None),
        ("text", None, "Summarise the attached guide"),
    ]
    assert [(m.role, [b.type for b in m.blocks()]) for m in u.input] == [("user", ["file", "text"])]
    assert any("input file `missing.txt` not found" in w for w in suite.warnings)
    assert ("input_file", str(doc), "docs/guide.md") in suite.referenced_files


def test_input_files_need_a_string_input(tmp_path: Path) -> None:
    write(tmp_path, "evals/a.md", "a")
    with pytest.raises(EvalFileError, match="`input_files` needs `input` to be a string") as err:
        load(
            tmp_path,
            """
            input_files: [a.md]
            tests:
              - id: t
                input: [{role: user, content: hi}]
                criteria: c
            """,
        )
    assert err.value.field == "tests[0].input"
    suite = load(
        tmp_path,
        """
        input_files: [a.md]
        tests:
          - id: t
            input: [{role: user, content: hi}]
            criteria: c
            execution: {skip_defaults: true}
        """,
    )
    assert suite.tests[0].input_files == []


def test_tests_given_as_a_folder_of_case_folders(tmp_path: Path) -> None:
    """AgentV's directory discovery: each folder holding case.yaml is a test, in name order; its id is the
    folder's name unless the case gives one; its ``workspace/`` folder is its workspace template."""
    write(tmp_path, "evals/cases/b-second/case.yaml", "id: second\ninput: two\ncriteria: says two\n")
    write(tmp_path, "evals/cases/a-first/case.yml", "input: one\ncriteria: says one\n")
    write(tmp_path, "evals/cases/c-notes/readme.md", "not a case")
    write(tmp_path, "evals/cases/notes.txt", "not a case")
    suite = load(tmp_path, "tests: ./cases/\n")
    assert [t.id for t in suite.tests] == ["a-first", "second"]
    assert [(role, ref) for role, _, ref in suite.referenced_files] == [
        ("tests", "./cases/a-first/case.yml"),
        ("tests", "./cases/b-second/case.yaml"),
    ]
    assert any("`c-notes` holds no case.yaml; it is not a test" in w for w in suite.warnings)


def test_tests_paths_are_relative_to_the_eval_files_folder(tmp_path: Path) -> None:
    """Not found through the search roots: AgentV resolves ``tests: PATH`` and ``file://`` entries against the
    eval file's folder only."""
    write(tmp_path, "cases.yaml", "- {id: t, input: x, criteria: c}\n")
    with pytest.raises(EvalFileError, match=r"cannot read the tests file `\./cases\.yaml` .*: no such file"):
        load(tmp_path, "tests: ./cases.yaml\n")
    suite = load(tmp_path, "tests: ../cases.yaml\n")
    assert [t.id for t in suite.tests] == ["t"]


def test_an_empty_tests_folder_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "evals" / "cases").mkdir(parents=True)
    with pytest.raises(EvalFileError, match=r"tests folder `./cases` .* holds no \*/case.yaml"):
        load(tmp_path, "tests: ./cases\n")


def test_file_references_in_the_tests_list_are_expanded_where_they_stand(tmp_path: Path) -> None:
    """AgentV's ``expandFileReferences``: a ``file://`` entry becomes that file's tests in its place; a glob
    (``*``, ``{a,b}``) takes every file it matches, sorted; one matching nothing adds no test, with a warning."""
    b = write(tmp_path, "evals/cases/b.yaml", "- {id: b1, input: x, criteria: c}\n- {id: b2, input: x, criteria: c}\n")
    write(tmp_path, "evals/more/d.yml", "- {id: d1, input: x, criteria: c}\n")
    write(tmp_path, "evals/more/c.jsonl", json.dumps({"id": "c1", "input": "${{ GREETING }}", "criteria": "c"}) + "\n")
    write(tmp_path, "evals/more/skip.txt", "not tests")
    text = """
        tests:
          - {id: first, input: x, criteria: c}
          - file://cases/b.yaml
          - {id: middle, input: x, criteria: c}
          - file://more/*.{jsonl,yml}
          - file://none/*.yaml
        """
    suite = load_eval(write(tmp_path, "evals/suite.eval.yaml", text), env={"GREETING": "hello"})
    assert [t.id for t in suite.tests] == ["first", "b1", "b2", "middle", "c1", "d1"]
    assert suite.tests[4].input[0].content == "hello"  # ${{ VAR }} is filled in a tests file too
    assert ("tests", str(b), "file://cases/b.yaml") in suite.referenced_files
    assert any("`file://none/*.yaml` matches no file" in w for w in suite.warnings)
    files = {ref for role, _, ref in suite.referenced_files if role == "tests"}
    assert files == {"file://cases/b.yaml", "file://more/c.jsonl", "file://more/d.yml"}


@pytest.mark.parametrize(
    ("tests", "files", "message"),
    [
        ("[just-a-string]", {}, r"a test given as a string must be a file reference"),
        ("[file://cases.txt]", {"cases.txt": "x"}, r"unsupported tests file format `\.txt`"),
        ("[file://gone.yaml]", {}, r"cannot read the tests file `file://gone\.yaml`"),
        ("./cases.yaml", {"cases.yaml": "tests:\n  - {id: t, input: x}\n"}, r"expected a YAML list of tests"),
        ("./cases.yaml", {"cases.yaml": "- just text\n"}, r"expected a test object; a tests file holds test objects"),
        ("./cases.jsonl", {"cases.jsonl": "[1, 2]\n"}, r"expected a JSON object \(a test\) on this line"),
    ],
)
def test_what_agentv_refuses_in_a_tests_list_is_refused(
    tmp_path: Path, tests: str, files: dict[str, str], message: str
) -> None:
    for rel, text in files.items():
        write(tmp_path, f"evals/{rel}", text)
    with pytest.raises(EvalFileError, match=message):
        load(tmp_path, f"tests: {tests}\n")


def test_an_empty_tests_file_adds_no_test(tmp_path: Path) -> None:
    write(tmp_path, "evals/empty.yaml", "\n")
    suite = load(tmp_path, "tests:\n  - file://empty.yaml\n  - {id: t, input: x, criteria: c}\n")
    assert [t.id for t in suite.tests] == ["t"]
    assert any("the tests file `file://empty.yaml` is empty" in w for w in suite.warnings)


def test_a_folder_of_cases_replays_from_a_snapshot(tmp_path: Path) -> None:
    """A replay parses the eval from the bytes its run recorded: the case files are found in the snapshot."""
    base = tmp_path / "gone"
    files = {
        str(base / "cases" / "one" / "case.yaml"): b"input: first\ncriteria: c\n",
        str(base / "cases" / "two" / "case.yaml"): b"id: custom\ninput: second\ncriteria: c\n",
        str(base / "more" / "x.yaml"): b"- {id: x, input: x, criteria: c}\n",
    }
    folder = load_eval_text("tests: ./cases\n", base / "suite.eval.yaml", file_resolver=SnapshotResolver(files))
    assert [t.id for t in folder.tests] == ["one", "custom"]
    globbed = load_eval_text(
        "tests: [file://more/*.yaml]\n", base / "s.eval.yaml", file_resolver=SnapshotResolver(files)
    )
    assert [t.id for t in globbed.tests] == ["x"]
    assert not base.exists()


def test_test_vars_fill_placeholders_in_input_criteria_and_expected_output(tmp_path: Path) -> None:
    text = """
    tests:
      - id: t
        vars: {city: Paris, n: 3}
        input: "Name {{ city }}'s {{n}} largest parks"
        criteria: "Lists {{ n }} parks in {{city}}; keeps {{ unknown }}"
        expected_output: [{role: assistant, content: "{{city}} parks"}]
    """
    (test,) = load(tmp_path, text).tests
    assert test.input[0].content == "Name Paris's 3 largest parks"
    assert test.criteria == "Lists 3 parks in Paris; keeps {{ unknown }}"
    assert test.expected_output == [{"role": "assistant", "content": "Paris parks"}]


def test_assertion_ids_agent_settings_and_extra_keys_are_kept_as_agentv_keeps_them(tmp_path: Path) -> None:
    """An assertion's ``id`` stays with its grader (a code or LLM grader's ``config`` carries it, as AgentV's
    does); an llm-grader's ``max_steps``/``temperature`` are read, its other keys go to ``config``, as a
    code grader's do; none of this is warned about."""
    write(tmp_path, "evals/check.py", "")
    text = """
    tests:
      - id: t
        input: x
        assertions:
          - {type: contains, value: P0, id: CLASSIFIES_P0}
          - {type: llm-grader, id: JUDGED, max_steps: 3, temperature: 0, style: terse, config: {style: long}}
          - {type: code-grader, command: [python3, check.py], id: CODE, expected_tools: [Read]}
          - {type: llm-grader, name: bad, max_steps: 99, temperature: 3}
    """
    suite = load(tmp_path, text)
    contains, judged, code, bad = suite.tests[0].graders
    assert (contains.id, judged.id, code.id) == ("CLASSIFIES_P0", "JUDGED", "CODE")
    assert (judged.max_steps, judged.temperature) == (3, 0.0)
    assert judged.config == {"id": "JUDGED", "style": "long"}
    assert code.config == {"id": "CODE", "expected_tools": ["Read"]}
    assert (bad.max_steps, bad.temperature) == (None, None)
    assert [w.split(": ", 2)[1:] for w in suite.warnings] == [
        [
            "field `tests[0].assertions[3].max_steps`",
            "99 is not a whole number from 1 to 50; AgentV ignores it, and so does evalstore",
        ],
        [
            "field `tests[0].assertions[3].temperature`",
            "3 is not a number from 0 to 2; AgentV ignores it, and so does evalstore",
        ],
    ]


def test_a_key_holding_anchors_is_not_unknown_and_a_merge_override_is_not_a_duplicate(tmp_path: Path) -> None:
    """AgentV's autoresearch example keeps shared messages under ``defaults:`` only to alias them; a key set
    beside a merge (``<<: *gov``) overrides the merged one, as YAML means it."""
    text = """
    defaults:
      system: &system You classify incidents.
    governance: &gov {owner: security, tags: [a, b]}
    tests:
      - id: t
        input: [{role: system, content: *system}, {role: user, content: hi}]
        criteria: c
        metadata:
          governance:
            <<: *gov
            tags: [c]
    notes: not used anywhere
    """
    suite = load(tmp_path, text)
    assert suite.tests[0].input[0].content == "You classify incidents."
    assert suite.tests[0].metadata["governance"] == {"owner": "security", "tags": ["a", "b", "c"]}
    assert len(suite.warnings) == 1 and "unknown key `notes` ignored" in suite.warnings[0]


def test_an_external_workspace_file_is_read_with_its_paths_from_its_folder(tmp_path: Path) -> None:
    """``workspace: FILE`` (AgentV's workspace config in a file of its own): the file holds the workspace object, its
    template, hook cwd and local repos are relative to its folder, and it is snapshotted with the run."""
    (tmp_path / "common" / "template").mkdir(parents=True)
    (tmp_path / "common" / "repo").mkdir()
    ws = write(
        tmp_path,
        "common/workspace.yaml",
        """
        template: ./template
        isolation: per_test
        hooks:
          before_each: {command: [python3, setup.py], reset: fast}
        repos: [{path: ./lib, repo: ./repo}]
        env: {required_commands: [git]}
        """,
    )
    text = "workspace: ../common/workspace.yaml\ntests: [{id: t, input: x, criteria: c}]\n"
    suite = load(tmp_path, text)
    common = tmp_path / "common"
    assert suite.workspace.template == str(common / "template")
    assert suite.workspace.isolation == "per_test"
    assert suite.workspace.hook("before_each").cwd == str(common)  # type: ignore[union-attr]
    assert suite.workspace.repos[0].repo == str(common / "repo")
    assert suite.workspace_env.required_commands == ["git"]
    assert ("workspace", str(ws), "../common/workspace.yaml") in suite.referenced_files
    assert suite.warnings == []

    ws.write_text("workspace:\n  template: ./template\n")
    with pytest.raises(EvalFileError, match="remove the top-level `workspace:` wrapper"):
        load(tmp_path, text)
    with pytest.raises(EvalFileError, match=r"workspace file not found: gone.yaml \(resolved to "):
        load(tmp_path, "workspace: gone.yaml\ntests: [{id: t, input: x, criteria: c}]\n")


def test_a_test_level_workspace_is_merged_into_the_suites_as_agentv_merges_it(tmp_path: Path) -> None:
    """AgentV 4.42.4's ``mergeWorkspaceConfigs`` (yaml-parser.ts:1317): each key the test gives replaces the
    suite's (``repos`` whole, not concatenated); hooks merge per hook, the test's fields over the suite's;
    ``hooks.enabled`` is the test's, else the suite's; a hook with only ``timeout_ms`` is no hook to AgentV,
    so it changes nothing. A test's ``workspace: FILE`` is read from its file, paths from its folder."""
    for folder in ("a", "b", "repo1", "repo2", "common/tpl"):
        (tmp_path / folder).mkdir(parents=True)
    write(tmp_path, "common/ws.yaml", "template: ./tpl\nhooks:\n  before_all: {command: [python3, ba.py]}\n")
    suite = load(
        tmp_path,
        """
        workspace:
          template: ../a
          repos: [{path: r1, repo: ../repo1}]
          hooks:
            before_each: {command: [python3, suite.py], timeout_ms: 5000, cwd: ..}
            after_each: {command: [python3, after.py]}
        tests:
          - {id: plain, input: x, criteria: c}
          - id: own
            input: x
            criteria: c
            workspace:
              template: ../b
              isolation: per_test
              repos: [{path: r2, repo: ../repo2}]
              hooks:
                before_each: {command: [python3, own.py]}
                after_each: {timeout_ms: 1}
                after_all: {reset: none}
          - {id: off, input: x, criteria: c, workspace: {hooks: {enabled: false}}}
          - {id: file, input: x, criteria: c, workspace: ../common/ws.yaml}
        """,
    )
    plain, own, off, from_file = suite.tests
    assert plain.workspace is None and suite.workspace_for(plain) is suite.workspace
    ws = suite.workspace_for(own)
    assert (ws.template, ws.isolation) == (str(tmp_path / "b"), "per_test")
    assert [r.path for r in ws.repos] == ["r2"]
    before_each = ws.hook("before_each")
    assert before_each is not None
    assert (before_each.command, before_each.timeout_ms, before_each.cwd) == (
        ["python3", "own.py"],
        5000,
        str(tmp_path),
    )
    after_each = ws.hook("after_each")
    assert after_each is not None and (after_each.command, after_each.timeout_ms) == (["python3", "after.py"], 30_000)
    assert suite.workspace.template == str(tmp_path / "a") and suite.workspace.isolation == "shared"
    assert suite.workspace_for(off).hooks == [] and suite.workspace_for(off).template == str(tmp_path / "a")
    ws = suite.workspace_for(from_file)
    assert ws.template == str(tmp_path / "common" / "tpl")
    assert [h.name for h in ws.hooks] == ["before_all", "before_each", "after_each"]
    assert ws.hook("before_all").cwd == str(tmp_path / "common")  # type: ignore[union-attr]
    assert ws.hook("before_each").cwd == str(tmp_path)  # type: ignore[union-attr]  (its cwd: `..` from evals/)
    (warning,) = [w for w in suite.warnings if "workspace" in w]
    assert "`tests[1].workspace.hooks.after_each`: the hook has no `command` (or `reset`); AgentV ignores it" in warning


def test_a_test_level_workspace_is_checked_merged(tmp_path: Path) -> None:
    """The merge can make what neither block says alone: the suite's static ``path`` with a test's
    ``per_test``."""
    (tmp_path / "fixed").mkdir()
    with pytest.raises(EvalFileError, match=r"suite.eval.yaml:\d+.*cannot be combined with `isolation: per_test`"):
        load(
            tmp_path,
            "workspace: {path: ../fixed}\ntests: [{id: t, input: x, criteria: c, workspace: {isolation: per_test}}]\n",
        )


def test_execution_cache_is_said_to_differ_where_it_does(tmp_path: Path) -> None:
    """AgentV's ``execution.cache`` reuses the agent's earlier answers (its ResponseCache, off with trials);
    evalstore run asks the agent every time, so ``cache: true`` is a warning saying so and naming replay."""
    tests = "tests: [{id: t, input: x, criteria: c}]\n"

    def warnings(execution: str) -> list[str]:
        return [w for w in load(tmp_path, f"execution: {execution}\n{tests}").warnings if "cache" in w]

    (warning,) = warnings("{cache: true, cache_path: .cache/agentv}")
    assert "AgentV answers a test from its cache of the agent's earlier answers" in warning
    assert "`evalstore replay RUN`" in warning
    assert warnings("{cache: false}") == []
    assert warnings("{cache: true, trials: {count: 3}}") == []  # AgentV turns its cache off for trials
    (invalid,) = warnings("{cache: 'yes'}")
    assert "invalid execution.cache: 'yes'; it must be a boolean" in invalid


def test_vars_as_agentv_fills_them(tmp_path: Path) -> None:
    """AgentV's ``interpolateTemplateVars``: dotted names; a placeholder that is the whole value takes the
    var's value as it is; inside text a value that is not a string is JSON; the suite's input and input
    files get each test's vars; assertions are left alone."""
    write(tmp_path, "evals/geo.md", "maps")
    text = """
    input: "You answer {{ topic }} questions."
    input_files: ["{{ doc }}"]
    tests:
      - id: t
        vars: {topic: geography, doc: geo.md, person: {name: Ada}, sizes: [1, 2], flag: true}
        input: "Greet {{person.name}}; sizes {{ sizes }}, flag {{flag}}, {{ person.age }}"
        expected_output: "{{ sizes }}"
        criteria: "about {{person}}"
        assertions: [{type: contains, value: "{{ topic }}"}]
    """
    (test,) = load(tmp_path, text).tests
    suite_input, own = test.input
    assert suite_input.content == "You answer geography questions."
    blocks = own.blocks()
    assert blocks[0].path == str(tmp_path / "evals" / "geo.md")
    assert blocks[1].text == "Greet Ada; sizes [1,2], flag true, {{ person.age }}"
    assert test.expected_output == [1, 2]
    assert test.criteria == 'about {"name":"Ada"}'
    assert test.graders[0].value == "{{ topic }}"


def test_env_variables_are_filled_as_agentv_fills_them(tmp_path: Path) -> None:
    """``${{ NAME }}`` anywhere in the eval file, from the environment; unset is empty; alone, ``true`` and a
    plain number take their type. A secret-looking name is refused: what the eval says is stored."""
    path = write(
        tmp_path,
        "evals/env.eval.yaml",
        """
        execution: {threshold: "${{ PASS_MARK }}"}
        tests:
          - id: t
            input: [{role: system, content: "${{ PERSONA }}"}, {role: user, content: "Hi ${{ WHO }}${{ UNSET }}!"}]
            criteria: c
        """,
    )
    suite = load_eval(path, env={"PASS_MARK": "0.5", "PERSONA": "You are kind.", "WHO": "Ada"})
    assert suite.threshold == 0.5
    assert [m.content for m in suite.tests[0].input] == ["You are kind.", "Hi Ada!"]
    path.write_text("tests:\n  - id: t\n    input: x\n    criteria: c\n    metadata: {k: '${{ OPENAI_API_KEY }}'}\n")
    with pytest.raises(EvalFileError, match=r"`\$\{\{ OPENAI_API_KEY \}\}` looks like a secret") as err:
        load_eval(path, env={"OPENAI_API_KEY": "sk-123"})
    assert (err.value.line, err.value.field) == (5, "tests[0].metadata.k")


@pytest.mark.parametrize(
    ("assertion", "name"),
    [
        ("{type: contains, value: Paris}", "contains-Paris"),
        ("{type: icontains, value: JUPITER}", "icontains-JUPITER"),
        ("{type: starts-with, value: Release}", "starts-with-Release"),
        ("{type: ends-with, value: X}", "ends-with-X"),
        ("{type: equals, value: '42'}", "equals-42"),
        ("{type: contains-any, value: [a, b]}", "contains-any-2"),
        ("{type: icontains-all, value: [a, b, c]}", "icontains-all-3"),
        (
            "{type: regex, value: 'capital of [A-Z][a-z]+ and a very long pattern tail'}",
            "regex-capital of [A-Z][a-z]+ and a v",
        ),
        # JavaScript counts UTF-16 units: each emoji is two (the name AgentV 4.42.4 gave this regex).
        ("{type: regex, value: '(?:🎉|🎈|🎊|🎁|🎂|🎃|🎄|🎅)|Price'}", "regex-(?:🎉|🎈|🎊|🎁|🎂|🎃|🎄|🎅)|Pr"),
        ("{type: is-json}", "is-json"),
        ("{type: contains, value: Paris, name: mine}", "mine"),
    ],
)
def test_unnamed_deterministic_assertions_are_named_as_agentv_names_them(
    tmp_path: Path, assertion: str, name: str
) -> None:
    path = tmp_path / "names.eval.yaml"
    path.write_text(f"tests:\n  - id: t\n    input: q\n    assertions:\n      - {assertion}\n", encoding="utf-8")
    assert [g.name for g in load_eval(path).tests[0].graders] == [name]


@pytest.mark.parametrize(
    "assertion",
    [
        "{type: equals, value: 42}",
        "{type: contains, value: 1.0}",
        "{type: contains, value: ''}",
        "{type: regex}",
        "{type: contains_any, value: one}",
        "{type: contains-all, value: [1, 2]}",
    ],
)
def test_a_value_agentv_skips_is_skipped_with_a_warning(tmp_path: Path, assertion: str) -> None:
    """AgentV 4.42 grades only string values (its asString/asStringArrayStrict), skipping the rest with a
    warning; the suite still loads and its other graders still grade."""
    path = tmp_path / "skips.eval.yaml"
    path.write_text(
        f"tests:\n  - id: t\n    input: q\n    assertions:\n      - {assertion}\n      - {{type: contains, value: x}}\n",
        encoding="utf-8",
    )
    suite = load_eval(path)
    assert [g.name for g in suite.tests[0].graders] == ["contains-x"]
    assert any("assertion skipped (as AgentV does)" in w and "tests[0].assertions[0]" in w for w in suite.warnings)


def test_list_values_keep_their_strings_as_agentv_does(tmp_path: Path) -> None:
    path = tmp_path / "list.eval.yaml"
    path.write_text(
        "tests:\n  - id: t\n    input: q\n    assertions:\n      - {type: contains-any, value: [1, '1.0']}\n"
    )
    [grader] = load_eval(path).tests[0].graders
    assert (grader.name, grader.value) == ("contains-any-2", ["1.0"])


@pytest.mark.parametrize(
    ("assertion", "warning"),
    [
        ("{type: regex, value: '(', flags: i}", "Invalid regular expression: /(/i"),
        ("{type: regex, value: a, flags: x}", "Invalid flags supplied to RegExp constructor 'x'"),
        ("{type: regex, value: '(?P<n>a)'}", "Invalid group"),
    ],
)
def test_a_regex_javascript_refuses_loads_with_a_warning(tmp_path: Path, assertion: str, warning: str) -> None:
    """AgentV fails such a grader when it runs and grades the rest; so the suite (and an AgentV run
    graded with it) still loads, and the grader scores 0 and fails."""
    path = tmp_path / "rx.eval.yaml"
    path.write_text(f"tests:\n  - id: t\n    input: q\n    assertions:\n      - {assertion}\n", encoding="utf-8")
    suite = load_eval(path)
    assert [g.type for g in suite.tests[0].graders] == ["regex"]
    assert any(warning in w and "tests[0].assertions[0].value" in w for w in suite.warnings)


def test_plain_scalars_are_read_as_yaml_1_2_core_as_agentv_reads_them(tmp_path: Path) -> None:
    """AgentV parses its YAML with the npm ``yaml`` package (YAML 1.2, core schema); PyYAML alone follows
    1.1, where ``yes``, ``on``, ``0777``, ``1_000`` and dates are something else. What a test's metadata
    holds reaches graders and judge prompts, so it must be what AgentV passes on."""
    suite = load(
        tmp_path,
        """
        tests:
          - id: t
            input: hi
            criteria: c
            metadata:
              sourceOk: yes
              legacy: off
              flag: true
              shout: FALSE
              big: 1e3
              mode: 0777
              octal: 0o17
              hex: 0x1F
              spaced: 1_000
              clock: 1:20
              day: 2024-01-01
              ratio: .5
              nothing: ~
        """,
    )
    assert suite.tests[0].metadata == {
        "sourceOk": "yes",
        "legacy": "off",
        "flag": True,
        "shout": False,
        "big": 1000.0,
        "mode": 777,
        "octal": 15,
        "hex": 31,
        "spaced": "1_000",
        "clock": "1:20",
        "day": "2024-01-01",
        "ratio": 0.5,
        "nothing": None,
    }


def test_expected_output_files_are_read_as_agentv_reads_them_and_snapshotted(tmp_path: Path) -> None:
    """AgentV's judge sees an expected file's text (reference_answer: the content as JSON with `path`,
    `text`, `resolvedPath`); its code graders get the same segments. A file not found is left out."""
    write(tmp_path, "evals/snippets/answer.md", "line one\r\nline two\n")
    text = """
    tests:
      - id: t
        input: Write it
        expected_output:
          - role: assistant
            content:
              - {type: text, value: "See the file:"}
              - {type: file, value: ./snippets/answer.md}
              - {type: file, value: ./snippets/never-written.md}
      - id: shorthand
        input: Write it
        expected_output: [{type: file, value: /snippets/answer.md}]
    """
    suite = load(tmp_path, text)
    found = str(tmp_path / "evals" / "snippets" / "answer.md")
    first, shorthand = suite.tests
    assert first.expected_output == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "value": "See the file:"},
                {"type": "file", "path": "./snippets/answer.md", "text": "line one\nline two\n", "resolvedPath": found},
            ],
        }
    ]
    # A leading separator is trimmed from the path shown, and the file is looked for under the roots.
    assert shorthand.expected_output == [
        {"type": "file", "path": "snippets/answer.md", "text": "line one\nline two\n", "resolvedPath": found}
    ]
    assert any("never-written.md` not found" in w for w in suite.warnings)
    assert ("expected_file", found, "./snippets/answer.md") in suite.referenced_files
    # Replayed from a snapshot, the text comes from the recorded bytes.
    files = {str(tmp_path / "evals" / "suite.eval.yaml"): textwrap.dedent(text).encode(), found: b"recorded\n"}
    replayed = load_eval(tmp_path / "evals" / "suite.eval.yaml", file_resolver=SnapshotResolver(files))
    assert replayed.tests[1].expected_output[0]["text"] == "recorded\n"


def test_a_string_under_rubrics_is_graded_and_warned_about_as_agentv_skips_it(tmp_path: Path) -> None:
    """AgentV 4.42.4 reads strings only under ``type: rubrics`` + ``criteria:``; under an llm-grader's
    ``rubrics:`` it skips them ("Skipping invalid rubric entry"), and a replay of its run moved the score
    with no word of why. evalstore still grades them (a documented difference) and now says so per item."""
    suite = load(
        tmp_path,
        """
        tests:
          - id: t
            input: x
            assertions:
              - {type: llm-grader, name: judged, rubrics: [Mentions Paris, {outcome: Is short}]}
              - {type: rubrics, name: listed, criteria: [Mentions Lyon]}
        """,
    )
    judged, listed = suite.tests[0].graders
    assert [r.id for r in judged.rubrics] == ["rubric-1", "rubric-2"] and [r.id for r in listed.rubrics] == ["rubric-1"]
    (warning,) = suite.warnings
    assert "assertions[0].rubrics[0]" in warning and "skipped by AgentV 4.42.4" in warning
