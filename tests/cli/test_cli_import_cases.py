"""A run imported from AgentV result rows, which carry no test case: ``label --next``, ``export --format json``
and the viewer's test page show each test's question and criteria from the eval the import kept (as a
replay builds its cases), and without one say that no question is recorded."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixture_paths import AGENTV_FIXTURES
from starlette.testclient import TestClient

from evalstore import cli as cli_package
from evalstore.replay.analysis.views import run_started
from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.material import case_event
from evalstore.store import EventStore
from evalstore.viewer import create_app

RUBRIC = AGENTV_FIXTURES / "v4" / "rubric"
EVAL = RUBRIC / "dataset.eval.yaml"
ROWS = RUBRIC / "dataset.eval.baseline.jsonl"
"""Real AgentV 4.x result rows of EVAL's tests: test ids, scores and verdicts, no input nor criteria."""
TEST = "code-explanation-simple"
QUESTION = "Explain how the quicksort algorithm works"
CRITERIA = "Provide a clear explanation of how quicksort works, including time complexity"
NO_QUESTION = "no question recorded: the result did not carry its test case"


@pytest.fixture(autouse=True)
def _elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # an import may find an eval file through the current directory


def _cli(db: str, *args: str, stdin: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args], input=stdin, catch_exceptions=False)


def _import(tmp_path: Path, *, with_eval: bool) -> tuple[str, str]:
    """The store's URL and the run imported into it from ROWS, with EVAL or (the rows copied away from it,
    so the import finds no eval) without."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    if with_eval:
        args = [str(ROWS), "--eval", str(EVAL)]
    else:
        rows = tmp_path / "results.jsonl"
        shutil.copyfile(ROWS, rows)
        args = [str(rows)]
    r = _cli(db, "import", *args, "--json")
    assert r.exit_code == 0, r.output
    run_id = json.loads(r.stdout)["run_id"]
    store = EventStore.open(db)
    try:
        assert not list(store.read_stream(run_id, types=["test_case_recorded"]))  # the rows carry no case
        kept = [s for s in run_started(store, run_id).eval_snapshot if s.role == "eval"]
        assert bool(kept) is with_eval
    finally:
        store.close()
    return db, run_id


def _label_next(db: str, run_id: str) -> str:
    """What ``label --next`` shows of the first test (by id: TEST), quitting at once."""
    r = _cli(db, "label", run_id, "--next", "--by", "ann", stdin="q\n")
    assert r.exit_code == 0, r.output
    return r.stdout.split("pass, fail, skip or quit?")[0]


def _exported(db: str, run_id: str) -> dict[str, dict]:
    r = _cli(db, "export", run_id, "--format", "json")
    assert r.exit_code == 0, r.output
    return {x["test_id"]: x for x in json.loads(r.stdout)["results"]}


def _test_page(db: str, run_id: str) -> str:
    store = EventStore.open(db)
    try:
        with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
            page = client.get(f"/runs/{run_id}/tests/{TEST}")
    finally:
        store.close()
    assert page.status_code == 200, page.text
    i = page.text.index("<h3>Input</h3>")
    return page.text[i : page.text.index("<h3>Transcript</h3>", i)]


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&#39;", "'").strip()


@pytest.fixture
def with_eval(tmp_path: Path) -> tuple[str, str]:
    return _import(tmp_path, with_eval=True)


def test_label_next_shows_the_question_and_criteria_of_the_eval_the_import_kept(with_eval) -> None:
    db, run_id = with_eval
    shown = _label_next(db, run_id).splitlines()
    assert f"[1/5] {TEST}@default" in shown
    # Headed as what it is: the test as the run's eval snapshot has it, the row having recorded none.
    at = shown.index("Question (from the run's eval snapshot):")
    assert shown[at + 1] == f"  {QUESTION}"
    assert shown[shown.index("Criteria:") + 1] == f"  {CRITERIA}"
    assert "Expected:" in shown and "(the run recorded no test case)" not in "\n".join(shown)


def test_export_json_gives_the_case_a_replay_would_record(with_eval) -> None:
    db, run_id = with_eval
    results = _exported(db, run_id)
    assert len(results) == 5 and all(r["case"] is not None for r in results.values())
    case = results[TEST]["case"]
    assert case["origin"] == "eval_snapshot"
    assert case["input"] == [{"role": "user", "content": QUESTION}] and case["criteria"] == CRITERIA
    # Built as a replay builds a test's case event, from the same eval.
    [test] = [t for t in load_eval(EVAL).tests if t.id == TEST]
    built = case_event(test, "default").model_dump(mode="json")
    assert {k: v for k, v in case.items() if k != "origin"} == {k: built[k] for k in case if k != "origin"}


def test_the_viewers_test_page_shows_the_question_and_criteria(with_eval) -> None:
    db, run_id = with_eval
    section = _test_page(db, run_id)
    text = _text(section)
    assert QUESTION in text and CRITERIA in text
    assert "From the run's eval snapshot: the result did not record its test case" in text
    assert "No test case recorded." not in text


def test_an_import_without_its_eval_says_no_question_is_recorded(tmp_path: Path) -> None:
    db, run_id = _import(tmp_path, with_eval=False)
    shown = _label_next(db, run_id).splitlines()
    at = shown.index("Question:")
    assert shown[at + 1].startswith(f"  ({NO_QUESTION}, and the run kept no eval file to build it from; ")
    assert f"evalstore replay {run_id} --eval EVAL.yaml" in shown[at + 1]
    assert "Criteria:" not in shown
    assert all(r["case"] is None for r in _exported(db, run_id).values())
    text = _text(_test_page(db, run_id))
    assert text.startswith(f"Input {NO_QUESTION}, and the run kept no eval file")


def test_the_viewer_parses_a_runs_eval_snapshot_once_for_all_its_test_pages(with_eval, monkeypatch) -> None:
    """Each test page of an import builds its case from the run's eval snapshot: parsed on the first page
    only (an eval of thousands of tests takes seconds to parse), the viewer keeping the run's cases."""
    from evalstore.replay.evalfile import snapshot

    db, run_id = with_eval
    parsed = []
    real = snapshot.snapshot_eval
    monkeypatch.setattr(snapshot, "snapshot_eval", lambda *a, **k: parsed.append(a) or real(*a, **k))
    store = EventStore.open(db)
    try:
        with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
            pages = [client.get(f"/runs/{run_id}/tests/{t}") for t in (TEST, "summary-task", TEST)]
    finally:
        store.close()
    assert [p.status_code for p in pages] == [200, 200, 200] and QUESTION in pages[2].text
    assert "Provide a concise summary" in _text(pages[1].text)
    assert len(parsed) == 1


def test_a_test_the_kept_eval_does_not_have_says_so(tmp_path: Path) -> None:
    """The eval given to the import lacks one of the results' tests: that test has no question, and says
    why; the others have theirs."""
    import yaml

    suite = yaml.safe_load(EVAL.read_text(encoding="utf-8"))
    suite["tests"] = [t for t in suite["tests"] if t["id"] != TEST]
    partial = tmp_path / "partial.eval.yaml"
    partial.write_text(yaml.safe_dump(suite), encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'store.db'}"
    r = _cli(db, "import", str(ROWS), "--eval", str(partial), "--json")
    assert r.exit_code == 0, r.output
    run_id = json.loads(r.stdout)["run_id"]
    shown = _label_next(db, run_id).splitlines()
    assert shown[shown.index("Question:") + 1] == f"  ({NO_QUESTION}, and the run's eval snapshot has no test {TEST!r})"
    results = _exported(db, run_id)
    assert results[TEST]["case"] is None
    assert {r["case"]["origin"] for t, r in results.items() if t != TEST} == {"eval_snapshot"}


def test_assert_grades_an_imported_test_against_the_case_of_the_kept_eval(tmp_path: Path) -> None:
    """`evalstore assert --run` of an imported test grades it against the case the eval snapshot gives (it
    refused: "no recorded test case"), the grader seeing the test's input and criteria."""
    import sys

    import yaml

    suite = yaml.safe_load(EVAL.read_text(encoding="utf-8"))
    (graded,) = [t for t in suite["tests"] if t["id"] == "code-quality-multi-eval"]
    (syntax,) = [a for a in graded["assertions"] if a.get("name") == "python_syntax"]
    syntax["command"] = [sys.executable, "check_syntax.py"]
    kept = tmp_path / "dataset.eval.yaml"
    kept.write_text(yaml.safe_dump(suite), encoding="utf-8")
    (tmp_path / "check_syntax.py").write_text(
        "import json, sys\n"
        "p = json.load(sys.stdin)\n"
        "asked = json.dumps(p.get('input'))\n"
        "ok = 'email' in asked.lower() and bool(p.get('criteria'))\n"
        "print(json.dumps({'score': 1 if ok else 0, 'assertions': [{'text': 'saw the question', 'passed': ok}]}))\n",
        encoding="utf-8",
    )
    # An AgentV 4.x row as the agent answered (ROWS carry no answer to grade), with no input nor criteria.
    row = {
        "test_id": "code-quality-multi-eval",
        "suite": "rubric",
        "score": 1,
        "target": "default",
        "output": "def validate_email(address: str) -> bool: ...",
        "execution_status": "ok",
        "scores": [],
    }
    rows = tmp_path / "results.jsonl"
    rows.write_text(json.dumps(row) + "\n", encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'store.db'}"
    r = _cli(db, "import", str(rows), "--eval", str(kept), "--json")
    assert r.exit_code == 0, r.output
    run_id = json.loads(r.stdout)["run_id"]
    r = _cli(db, "assert", "--run", run_id, "--test", "code-quality-multi-eval", "--grader", "python_syntax")
    assert r.exit_code == 0, r.output
    outcome = json.loads(r.stdout)
    assert outcome["score"] == 1 and outcome["assertions"][0]["passed"] is True
