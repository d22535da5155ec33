"""``field-accuracy`` dates as the real AgentV 4.42.4 reads them (tests/fixtures/agentv-dates: its run of a
suite of date fields, and its grader's verdicts on some 1,900 date strings).

AgentV reads a date with JavaScript's ``new Date`` and then its own fallbacks: ``2024-03`` is 1 March,
``2024-02-30`` rolls over to 1 March, an RFC 2822 date is read, ``20240305`` is not. An import of its run
and an unchanged replay of the import must give AgentV's scores and assertions, and ``evalstore run`` the
same.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from e2e_helpers import cli, ok_json, results_by_test, verdict_signature
from fixture_paths import FIXTURES_DIR

from evalstore.replay.evalfile.specs import FieldSpec
from evalstore.replay.grading.graders.field_accuracy import compare_field

DATES = FIXTURES_DIR / "agentv-dates"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(DATES / "project", copy)
    (copy / ".git").mkdir()  # the repository root AgentV ran in
    monkeypatch.chdir(copy)
    return copy


def _agentv_rows(project: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    rows = [json.loads(line) for line in (project / "runs" / "r1" / "index.jsonl").read_text().splitlines()]
    return {row["test_id"]: row for row in rows}


def _signature(row: dict) -> tuple:  # type: ignore[type-arg]
    (grader,) = row["scores"]
    return grader["score"], tuple((a["text"], a["passed"]) for a in grader["assertions"])


def test_an_unchanged_replay_of_an_agentv_import_keeps_agentvs_date_scores(project: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    agentv = _agentv_rows(project)
    assert _signature(agentv["dates"])[0] == 0.75  # the new user's test, as AgentV scored it

    eval_file = str(project / "evals" / "dates.eval.yaml")
    imported = ok_json(cli(db, "import", str(project / "runs" / "r1"), "--eval", eval_file, "--json"))["run_id"]
    replay = ok_json(cli(db, "replay", imported, "--json"), 1)  # both tests below 0.8: exit 1
    assert replay["comparison"]["flipped"] == []
    replayed = results_by_test(db, replay["run_id"])
    signature = verdict_signature(db, replay["run_id"])
    for test_id, row in agentv.items():
        assert replayed[test_id]["score"] == pytest.approx(row["score"])
        (grader,) = row["scores"]
        score, verdict, _, assertions = signature[(test_id, grader["name"])]
        assert (pytest.approx(score), assertions) == _signature(row)
        assert verdict == grader["verdict"]


def test_a_run_of_the_suite_grades_its_dates_as_agentv_did(project: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    run = ok_json(cli(db, "run", "evals/dates.eval.yaml", "--json"), 1)["run_id"]  # both tests below 0.8: exit 1
    signature = verdict_signature(db, run)
    for test_id, row in _agentv_rows(project).items():
        (grader,) = row["scores"]
        score, _, _, assertions = signature[(test_id, grader["name"])]
        assert (pytest.approx(score), assertions) == _signature(row)


def test_every_date_string_is_read_as_agentvs_grader_reads_it() -> None:
    data = json.loads((DATES / "cases.json").read_text())
    assert (data["agentv"], data["timezone"]) == ("4.42.4", "UTC")
    differing = []
    for case in data["cases"]:
        field = FieldSpec(path="d", match="date", formats=case.get("formats"))
        score, _, hit, text = compare_field(field, {"d": case["candidate"]}, {"d": case["expected"]})
        want = case["agentv"]
        if (score, hit, text) != (want["score"], want["passed"], want["text"]):
            differing.append(f"{case}: evalstore {(score, hit, text)}")
    assert len(data["cases"]) > 1800
    assert differing == [], "\n".join(differing[:20])
