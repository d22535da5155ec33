"""``evalstore validate``: which files a path means, each checked as run/import load it, exit codes, --json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixture_paths import FIXTURES_DIR

from evalstore import cli as cli_package

CORPUS = FIXTURES_DIR / "agentv-examples-4.42.4"
EVAL = """\
execution:
  target: agent
tests:
  - id: one
    input: What is 2+2?
    criteria: Says 4
    assertions:
      - type: contains
        value: "4"
  - id: two
    input: Capital of France?
    expected_output: Paris
"""
TARGETS = """\
targets:
  - name: agent
    provider: cli
    command: echo hi
"""


def _validate(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["validate", *args], catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".agentv").mkdir()
    (tmp_path / ".agentv" / "targets.yaml").write_text(TARGETS)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "good.eval.yaml").write_text(EVAL)
    monkeypatch.chdir(tmp_path)
    # A store this command must never touch: the URL names a database no server answers for.
    monkeypatch.setenv("EVALSTORE_DB", "postgresql+psycopg://nobody@127.0.0.1:1/none")
    return tmp_path


def test_valid_files_exit_0_with_each_files_kind_and_test_count(project: Path) -> None:
    result = _validate("--json", "evals/good.eval.yaml", ".agentv/targets.yaml")
    assert result.exit_code == 0, result.output
    files = json.loads(result.stdout)["files"]
    assert files == [
        {
            "path": str(project / ".agentv" / "targets.yaml"),
            "kind": "targets",
            "ok": True,
            "tests": 0,
            "errors": [],
            "warnings": [],
        },
        {
            "path": str(project / "evals" / "good.eval.yaml"),
            "kind": "eval",
            "ok": True,
            "tests": 2,
            "errors": [],
            "warnings": [],
        },
    ]
    assert not (project / ".evalstore").exists()


def test_an_invalid_file_exits_1_with_the_error_run_would_stop_with(project: Path) -> None:
    bad = project / "evals" / "bad.eval.yaml"
    bad.write_text(EVAL.replace("      - type: contains", "      - type: ''"))
    result = _validate("--json", "evals/")
    assert result.exit_code == 1
    files = {Path(f["path"]).name: f for f in json.loads(result.stdout)["files"]}
    assert files["good.eval.yaml"]["ok"] is True
    assert files["bad.eval.yaml"]["ok"] is False
    assert files["bad.eval.yaml"]["tests"] == 0
    [error] = files["bad.eval.yaml"]["errors"]
    assert (
        error
        == f"{bad}:8: field `tests[0].assertions[0]`: `type` is required; e.g. llm-grader, rubrics, code-grader, contains"
    )

    people = _validate("evals/")
    assert people.exit_code == 1
    assert f"✗ {bad} (eval, 0 tests)\n  ✗ {error}\n" in people.output
    assert f"✓ {project / 'evals' / 'good.eval.yaml'} (eval, 2 tests)\n" in people.output
    assert people.output.endswith("2 files: 1 valid, 1 invalid, 0 with warnings\n")


def test_a_type_agentv_does_not_register_is_warned_about_grader_by_grader(project: Path) -> None:
    """AgentV 4.42.4 loads such a file (its validate warns "Unknown assertion type") and fails each grader when
    it runs, a 0 counted in the score: valid, with one warning per grader naming its test, its name and the
    type meant; a deprecated type is skipped with AgentV's own warning."""
    typo = project / "evals" / "typo.eval.yaml"
    typo.write_text(
        EVAL.replace("      - type: contains", "      - type: Contains").replace(
            "    expected_output: Paris\n",
            "    expected_output: Paris\n    assertions:\n      - {name: run-it, type: script, command: [true]}\n"
            "      - {type: llm_judge}\n",
        )
    )
    result = _validate("--json", "evals/typo.eval.yaml")
    assert result.exit_code == 0, result.output
    [checked] = json.loads(result.stdout)["files"]
    assert (checked["ok"], checked["tests"], checked["errors"]) == (True, 2, [])
    suffix = 'scores 0 and fails when it runs ("Unknown grader type"), counted in the score, in AgentV and here'
    assert checked["warnings"] == [
        f"{typo}:8: field `tests[0].assertions[0].type`: AgentV 4.42.4 has no grader type `Contains` (did you mean "
        f"`contains`?): grader `Contains` of test `one` {suffix}",
        f"{typo}:14: field `tests[1].assertions[0].type`: AgentV 4.42.4 has no grader type `script` (did you mean "
        f"`code-grader`?): grader `run-it` of test `two` {suffix}",
        f"{typo}:15: field `tests[1].assertions[1].type`: Skipping evaluator '<unnamed>' in 'two': 'llm_judge' is "
        "deprecated. Use 'llm-grader' instead",
    ]


def test_warnings_are_listed_and_do_not_fail(project: Path) -> None:
    (project / "evals" / "good.eval.yaml").write_text(EVAL.replace("execution:", "colour: blue\nexecution:"))
    result = _validate("--json", "evals/good.eval.yaml")
    assert result.exit_code == 0
    [file] = json.loads(result.stdout)["files"]
    assert file["ok"] is True
    assert len(file["warnings"]) == 1 and "unknown key `colour` ignored" in file["warnings"][0]


def test_agentvs_cache_folder_does_not_hide_the_repository_from_another_folder(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agentv eval run` leaves `.agentv/cache.json` where it ran (the eval's folder): the prompt in the
    repository root that AgentV finds is still found, with no warning, from a folder outside the repository."""
    (project / ".git").mkdir()
    (project / "shared-prompts").mkdir()
    (project / "shared-prompts" / "p.md").write_text("Grade {{output}}\n")
    (project / "evals" / ".agentv").mkdir()
    (project / "evals" / ".agentv" / "cache.json").write_text('{"lastRunDir": "runs/p"}\n')
    suite = project / "evals" / "p.eval.yaml"
    suite.write_text(
        EVAL.replace(
            '        value: "4"\n',
            '        value: "4"\n      - {name: judged, type: llm-grader, prompt: "file://shared-prompts/p.md"}\n',
        )
    )
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = _validate("--json", str(suite))
    assert result.exit_code == 0, result.output
    [file] = json.loads(result.stdout)["files"]
    assert (file["ok"], file["warnings"]) == (True, []), file


def test_a_regrade_file_of_suite_level_graders_is_valid_and_said_to_be_one(project: Path) -> None:
    # What `replay RUN --eval FILE` takes (the run's own tests graded by the file's graders): valid here too.
    regrade = project / "evals" / "regrade.eval.yaml"
    regrade.write_text("assertions:\n  - name: short\n    type: contains\n    value: '4'\n")
    result = _validate("--json", "evals/regrade.eval.yaml")
    assert result.exit_code == 0, result.output
    [file] = json.loads(result.stdout)["files"]
    assert (file["ok"], file["tests"]) == (True, 0)
    assert not any("the suite has no tests" in w for w in file["warnings"])  # it has the run's: said below
    assert any(
        "no `tests`: a file whose suite-level graders regrade a stored run's own tests "
        "(`evalstore replay RUN --eval regrade.eval.yaml`); `evalstore run` needs tests" in w
        for w in file["warnings"]
    ), file["warnings"]


def test_a_bad_targets_file_is_invalid(project: Path) -> None:
    (project / ".agentv" / "targets.yaml").write_text("targets:\n  - name: agent\n")
    result = _validate("--json", ".agentv/targets.yaml")
    assert result.exit_code == 1
    [file] = json.loads(result.stdout)["files"]
    assert file["kind"] == "targets"
    assert file["errors"] == [
        f"{project / '.agentv' / 'targets.yaml'}:2: target 'agent': field 'provider' is required (a string), "
        "or 'use_target' naming the target it stands for"
    ]


def test_a_placeholder_inside_quotes_of_a_cli_command_is_warned_about(project: Path) -> None:
    """``--prompt "{PROMPT}"``: the prompt is filled shell-quoted, so inside double quotes its quotes are
    literal and a ``$(...)`` in it runs. Bare, or inside a ``$(...)``, it is one word: no warning."""
    (project / ".agentv" / "targets.yaml").write_text(
        "targets:\n"
        "  - name: quoted\n    provider: cli\n    command: agent --prompt \"{PROMPT}\" --out '{OUTPUT_FILE}'\n"
        "  - name: bare\n    provider: cli\n"
        '    command: agent --prompt {PROMPT} --note "it\'s {fine}" --in "$(cat {PROMPT_FILE})" --out {OUTPUT_FILE}\n'
        "  - name: argv\n    provider: cli\n    command: [agent, '\"{PROMPT}\"']\n"
    )
    result = _validate("--json", ".agentv/targets.yaml")
    assert result.exit_code == 0
    [file] = json.loads(result.stdout)["files"]
    assert file["warnings"] == [
        f"{project / '.agentv' / 'targets.yaml'}:2: target 'quoted' writes {{PROMPT}}, {{OUTPUT_FILE}} inside "
        "quotes: the value is filled quoted for the shell already, so the quotes become part of it and a "
        "double-quoted $(...) in a prompt is run; write it without quotes"
    ]


def test_a_targets_file_is_known_by_its_schema_anywhere(project: Path) -> None:
    (project / "my-targets.yaml").write_text("$schema: agentv-targets-v2.2\n" + TARGETS)
    [file] = json.loads(_validate("--json", "my-targets.yaml").stdout)["files"]
    assert file["kind"] == "targets" and file["ok"]


def test_a_targets_file_is_known_by_what_it_holds_anywhere(project: Path) -> None:
    """Not under .agentv/ and no $schema: a top-level ``targets:`` list of providers is still a targets file,
    checked as one (before, it was checked as an eval and refused for its ``${{ API_KEY }}`` reference,
    which a targets file is where it belongs)."""
    (project / "config").mkdir()
    keyed = (
        TARGETS
        + "  - name: judge\n    provider: openai\n    api_key: ${{ OPENAI_API_KEY }}\n    model: ${{ JUDGE_MODEL }}\n"
    )
    (project / "config" / "targets.yaml").write_text(keyed)
    (project / "config" / "broken.yml").write_text("targets:\n  - name: agent\n")
    result = _validate("--json", "config/targets.yaml", "config/broken.yml")
    files = {Path(f["path"]).name: f for f in json.loads(result.stdout)["files"]}
    assert files["targets.yaml"] == {
        "path": str(project / "config" / "targets.yaml"),
        "kind": "targets",
        "ok": True,
        "tests": 0,
        "errors": [],
        "warnings": [],
    }
    assert files["broken.yml"]["kind"] == "targets"  # its error is the targets loader's
    assert files["broken.yml"]["errors"] == [
        f"{project / 'config' / 'broken.yml'}:2: target 'agent': field 'provider' is required (a string), "
        "or 'use_target' naming the target it stands for"
    ]
    assert result.exit_code == 1


def test_an_eval_file_with_targets_under_execution_stays_an_eval(project: Path) -> None:
    (project / "evals" / "matrix.yaml").write_text(EVAL.replace("  target: agent", "  targets: [agent, other]"))
    [file] = json.loads(_validate("--json", "evals/matrix.yaml").stdout)["files"]
    assert file["kind"] == "eval" and file["ok"] and file["tests"] == 2


def test_a_targets_file_given_to_run_says_it_is_one(project: Path) -> None:
    (project / "targets.yaml").write_text(TARGETS + "    api_key: ${{ OPENAI_API_KEY }}\n")
    result = CliRunner().invoke(cli_package.main, ["run", "targets.yaml"], catch_exceptions=False)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"Error: {project / 'targets.yaml'}:1: a targets file (a top-level `targets:` list of providers), not an "
        "eval file: pass it as `--targets FILE` with an eval file (`evalstore validate FILE` checks it as a "
        "targets file)"
    ]


def test_a_folder_is_searched_as_agentv_validate_searches_it(project: Path) -> None:
    """``*.eval.yaml``/``*.eval.yml`` at any depth; hidden folders and node_modules left out; other YAML not
    taken (AgentV's ``findYamlFiles``)."""
    (project / "evals" / "deep" / "er").mkdir(parents=True)
    (project / "evals" / "deep" / "er" / "x.EVAL.yml").write_text(EVAL)
    for skipped in ("node_modules", ".hidden"):
        (project / "evals" / skipped).mkdir()
        (project / "evals" / skipped / "y.eval.yaml").write_text("not: [valid")
    (project / "evals" / "cases.yaml").write_text("not: [valid")
    result = _validate("--json", ".")
    assert result.exit_code == 0, result.output
    paths = [f["path"] for f in json.loads(result.stdout)["files"]]
    assert paths == [str(project / "evals" / "deep" / "er" / "x.EVAL.yml"), str(project / "evals" / "good.eval.yaml")]


def test_a_results_file_and_a_run_folder_are_checked_as_import_reads_them(project: Path) -> None:
    shutil.copy(CORPUS / "examples/features/basic/evals/dataset.eval.baseline.jsonl", project / "results.jsonl")
    shutil.copy(project / "results.jsonl", project / "results.ndjson")  # rows under another name, as import reads
    run = CORPUS / "examples/features/trend/sample-runs/2026-03-01T10-00-00-000Z"
    shutil.copytree(run, project / "run")
    result = _validate("--json", "results.jsonl", "results.ndjson", "run")
    assert result.exit_code == 0, result.output
    files = {Path(f["path"]).name: f for f in json.loads(result.stdout)["files"]}
    assert files["results.jsonl"]["kind"] == files["results.ndjson"]["kind"] == files["run"]["kind"] == "results"
    assert files["results.jsonl"]["tests"] == files["results.ndjson"]["tests"] == 7
    assert files["run"]["tests"] == 3
    assert not (project / ".evalstore").exists()


def test_a_bad_results_line_is_the_imports_error(project: Path) -> None:
    (project / "results.jsonl").write_text('{"test_id": "a", "score": 1}\n{"test_id": \n')
    result = _validate("--json", "results.jsonl")
    assert result.exit_code == 1
    [file] = json.loads(result.stdout)["files"]
    [error] = file["errors"]
    assert error.startswith(f"{project / 'results.jsonl'}:2: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nothere.eval.yaml"], "Error: nothere.eval.yaml: no such file or directory\n"),
        (["evals/good.eval.yaml", "notes.txt"], "Error: notes.txt: not an eval or targets file"),
        (["task.eval"], "Error: task.eval: an Inspect AI log's name; validate checks AgentV files"),
        (["empty"], "Error: empty: no *.eval.yaml files in this folder or below it\n"),
    ],
)
def test_bad_usage_exits_2_before_checking_anything(project: Path, args: list[str], message: str) -> None:
    (project / "notes.txt").write_text("hello")
    (project / "task.eval").write_bytes(b"PK")
    (project / "empty").mkdir()
    result = _validate(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(message)


def test_no_path_is_a_usage_error(project: Path) -> None:
    result = _validate()
    assert result.exit_code == 2
    assert "Missing argument 'PATHS...'" in result.stderr


def test_an_assertion_without_a_type_is_skipped_with_agentvs_warning(project: Path) -> None:
    """AgentV 4.42.4 skips it ("Skipping evaluator with invalid type") and runs the rest, so a run of the file
    exists to import; evalstore refused the file, and an import of that run took another eval file."""
    typo = project / "evals" / "typo.eval.yaml"
    typo.write_text(EVAL.replace("      - type: contains", "      - tpye: contains"))
    result = _validate("--json", "evals/typo.eval.yaml")
    assert result.exit_code == 0, result.output
    [checked] = json.loads(result.stdout)["files"]
    assert checked["ok"] is True and checked["tests"] == 2
    assert checked["warnings"] == [
        f"{typo}:8: field `tests[0].assertions[0]`: Skipping evaluator with invalid type in 'one' "
        "(`tpye`: did you mean `type`?)"
    ]
