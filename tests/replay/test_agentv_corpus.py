"""AgentV 4.42.4's own example corpus through ``evalstore validate``: the acceptance suite of the parity work.

What AgentV says of each file is read from ``tests/fixtures/agentv-corpus-verdicts/verdicts.json``, written by
the real AgentV (``regenerate.mjs`` there): ``agentv validate``'s verdict, and what ``agentv eval``'s own
loader makes of each eval file (test ids, graders, input messages). An eval file AgentV accepts must pass
with no warning that something is skipped or ignored, and load the tests, graders and input AgentV loads;
one AgentV accepts but loads no test of refuses here with AgentV's reason. Every targets file must pass and
every results file import.

A file marked ``xfail(strict=True)`` fails for work another part of the parity effort owns (the reason says
whose and what): when it lands, the test passes, strict xfail turns that red, and the mark must go.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fixture_paths import FIXTURES_DIR

from evalstore import cli as cli_package

CORPUS = FIXTURES_DIR / "agentv-examples-4.42.4"
VERDICTS = json.loads((FIXTURES_DIR / "agentv-corpus-verdicts" / "verdicts.json").read_text(encoding="utf-8"))

NOT_RESULTS = {
    # JSONL files of the corpus that are not AgentV results: test sets, a replay fixture, transcripts.
    "examples/features/basic-jsonl/evals/dataset.jsonl": "a JSONL test set",
    "examples/features/external-datasets/evals/cases/regression.jsonl": "a JSONL test set",
    "examples/features/sdk-python/evals/dataset.jsonl": "a JSONL test set",
    "examples/showcase/offline-grader-benchmark/fixtures/labeled-grader-export.jsonl": "a JSONL test set",
    "examples/showcase/trace-evaluation/fixtures/replay-target-output.jsonl": "a replay provider fixture",
    "examples/showcase/trace-evaluation/fixtures/imported-codex-transcript.jsonl": "an imported transcript",
}
RESULT_FILES = sorted(
    rel
    for p in CORPUS.rglob("*.jsonl")
    if (rel := p.relative_to(CORPUS).as_posix()) not in NOT_RESULTS and "/raw/codex-sessions/" not in rel
)

SKIPPED_OR_IGNORED = re.compile(r"skipped|ignored|not supported|not applied|not read", re.IGNORECASE)


def _accepted() -> list[str]:
    return sorted(rel for rel, entry in VERDICTS["eval"].items() if entry["validate"]["valid"])


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    """``evalstore validate --json`` over every eval, targets and results file of the corpus, run once from
    the corpus root (as from AgentV's repository root)."""
    paths = [*VERDICTS["eval"], *VERDICTS["targets"], *RESULT_FILES]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(CORPUS)
        result = CliRunner().invoke(cli_package.main, ["validate", "--json", *paths], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    files = json.loads(result.stdout)["files"]
    by_path = {Path(f["path"]).relative_to(CORPUS).as_posix(): f for f in files}
    assert sorted(by_path) == sorted(paths)
    assert result.exit_code == (1 if any(not f["ok"] for f in files) else 0)
    return by_path


def test_the_corpus_is_what_agentv_saw() -> None:
    """The fixture describes this copy of the corpus: 110 eval files (109 valid), 23 targets files, 47 results."""
    assert len(VERDICTS["eval"]) == 110
    assert len(_accepted()) == 109
    assert len(VERDICTS["targets"]) == 23
    assert len(RESULT_FILES) == 47
    for rel in [*VERDICTS["eval"], *VERDICTS["targets"], *RESULT_FILES]:
        assert (CORPUS / rel).is_file(), rel


def _agentv_refusal(rel: str) -> str | None:
    """AgentV's reason when it loads no test of a file ``agentv validate`` accepts (it skips each test)."""
    load = VERDICTS["eval"][rel]["load"]
    if load.get("tests"):
        return None
    skipped = [line for line in load["logs"] if line.startswith("Error: Skipping test")]
    return skipped[0].split(": ", 3)[-1] if skipped else None


@pytest.mark.parametrize("rel", _accepted())
def test_eval_file_loads_the_tests_agentv_loads(reports: dict[str, dict], rel: str) -> None:
    report = reports[rel]
    refusal = _agentv_refusal(rel)
    if refusal is not None:
        assert not report["ok"]
        assert any(refusal in error for error in report["errors"]), (refusal, report["errors"])
        return
    assert report["ok"], report["errors"]
    theirs = VERDICTS["eval"][rel]["load"]["tests"]
    assert report["tests"] == len(theirs)
    suite = _load(rel)
    assert [t.id for t in suite.tests] == [t["id"] for t in theirs]
    for test, agentv in zip(suite.tests, theirs):
        assert _our_input(test.input) == _agentv_input(agentv["input"]), test.id


@pytest.mark.parametrize("rel", _accepted())
def test_eval_file_keeps_every_grader_and_key(reports: dict[str, dict], rel: str) -> None:
    report = reports[rel]
    if _agentv_refusal(rel) is not None:
        return  # refused, as AgentV refuses its tests (above)
    assert not [w for w in report["warnings"] if SKIPPED_OR_IGNORED.search(w)]
    theirs = {t["id"]: t for t in VERDICTS["eval"][rel]["load"]["tests"]}
    for test in _load(rel).tests:
        ours = [(g.name, getattr(g, "custom_type", None) or g.type) for g in test.graders]
        agentv = [(g["name"], g["type"]) for g in theirs[test.id]["graders"]]
        if not agentv and "mode" not in theirs[test.id]:  # AgentV's default llm-grader (not for a conversation)
            agentv = [("llm-grader", "llm-grader")]
        assert ours == agentv, test.id


@pytest.mark.parametrize("rel", sorted(VERDICTS["targets"]))
def test_targets_file_loads(reports: dict[str, dict], rel: str) -> None:
    assert VERDICTS["targets"][rel]["validate"]["valid"]
    assert reports[rel]["ok"], reports[rel]["errors"]


@pytest.mark.parametrize("rel", RESULT_FILES)
def test_results_file_imports(reports: dict[str, dict], rel: str) -> None:
    report = reports[rel]
    assert report["kind"] == "results"
    assert report["ok"], report["errors"]
    assert report["tests"] > 0


def _load(rel: str):  # type: ignore[no-untyped-def]
    from evalstore.replay.evalfile.parser import load_eval

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(CORPUS)
        return load_eval(CORPUS / rel)


def _agentv_input(messages: list[dict]) -> list[tuple[str, list[tuple[str, str]]]]:
    """AgentV's input messages as (role, [(kind, text or resolved path)]); an object content is the JSON
    text of it, as evalstore's content model holds it (``content.render_object``)."""
    from evalstore.replay.content import render_object

    out = []
    for message in messages:
        content = message.get("content")
        parts: list[tuple[str, str]] = []
        if isinstance(content, str):
            parts = [("text", content)]
        elif isinstance(content, list):
            for segment in content:
                if isinstance(segment, str):
                    parts.append(("text", segment))
                elif segment["type"] == "file":
                    resolved = segment.get("resolvedPath") or segment["value"]
                    parts.append(("file", resolved.replace("<corpus>", str(CORPUS))))
                else:
                    parts.append((segment["type"], segment["value"]))
        elif isinstance(content, dict):
            parts = [("text", render_object(content))]
        out.append((message["role"], parts))
    return out


def _our_input(messages: list[Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    out = []
    for message in messages:
        parts = []
        for block in message.blocks():
            if block.type == "text":
                parts.append(("text", block.text))
            elif block.type == "file":
                parts.append(("file", block.path))
            else:
                parts.append((block.type, block.source))
        out.append((message.role, parts))
    return out


@pytest.mark.parametrize("rel", sorted(r for r, what in NOT_RESULTS.items() if what == "a JSONL test set"))
def test_importing_a_test_set_says_it_holds_test_cases_not_results(rel: str, tmp_path: Path) -> None:
    """It said "missing test_id (fix it, or import with --skip-bad to leave it out)", which skips every line."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result = CliRunner().invoke(cli_package.main, ["--db", db, "import", str(CORPUS / rel)], catch_exceptions=False)
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"Error: {CORPUS / rel}:1: missing test_id: this is a test case (id, input, criteria), not a result row: an "
        "eval's tests file, which its eval file names (`tests: file://...`); `evalstore run EVAL.yaml` runs them, "
        "`evalstore import` takes the results `agentv eval` writes"
    )
    assert not (tmp_path / "store.db").exists()
