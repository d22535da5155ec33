"""A real AgentV 4.42.4 run of cli targets without a workspace (tests/fixtures/agentv-cli-cwd): the agents
wrote their reports where AgentV ran them, the eval file's folder (a cli target without ``cwd``, and a
custom provider AgentV runs as one) or a ``cwd`` relative to it, and an import finds and stores them there.

Paths named inside the results are data: the eval file they name says where to look, and a file found
there is read only inside a folder the user chose (``--eval``, ``--files-root``). Each test copies the
fixture into tmp_path and runs from an unrelated folder; ``benchmark.json`` is pointed at the copy's eval
file, as it points at the user's own eval file on the machine that ran AgentV.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import audit, cli, ok_json, results_by_test, runs

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "agentv-cli-cwd"
REPORTS = {
    "here-report": "evals/report-here-agent.txt",
    "scratch-report": "evals/scratch/report-scratch-agent.txt",
    "custom-report": "evals/report-custom-agent.txt",
}
"""Each test's report, where the agent wrote it (under project/)."""


@pytest.fixture
def copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fixture copied, its run naming the copy's eval file; the import runs from an unrelated folder."""
    copy = tmp_path / "agentv-cli-cwd"
    shutil.copytree(FIXTURE, copy)
    benchmark = copy / "runs" / "cli-cwd" / "benchmark.json"
    doc = json.loads(benchmark.read_text("utf-8"))
    doc["metadata"]["eval_file"] = str(copy / "project" / "evals" / "cli-cwd.eval.yaml")
    benchmark.write_text(json.dumps(doc, indent=2), "utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return copy


def _import(db: str, copy: Path, *extra: str) -> str:
    out = ok_json(cli(db, "import", str(copy / "runs" / "cli-cwd"), "--json", *extra))
    assert out["tests"] == 3
    return str(out["run_id"])


def _reports(db: str, run: str) -> dict[str, dict[str, Any]]:
    """Each test's report artifact, as the audit shows it."""
    out = {}
    for test_id in REPORTS:
        (test,) = audit(db, run, test_id)["tests"]
        (report,) = [a for a in test["artifacts"] if Path(a["path"]).name.startswith("report-")]
        out[test_id] = report
    return out


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_reports_are_stored_from_the_folder_agentv_ran_each_agent_in(sqlite_url: str, copy: Path) -> None:
    eval_file = copy / "project" / "evals" / "cli-cwd.eval.yaml"
    run = _import(sqlite_url, copy, "--eval", str(eval_file))
    for test_id, report in _reports(sqlite_url, run).items():
        written = copy / "project" / REPORTS[test_id]
        assert (report["status"], report["sha256"], report["blob"]) == ("stored", _sha(written), "ok"), report
    # AgentV's own scores, unchanged by the import.
    rows = [json.loads(line) for line in (copy / "runs" / "cli-cwd" / "index.jsonl").read_text("utf-8").splitlines()]
    shown = results_by_test(sqlite_url, run)
    assert {r["test_id"]: r["score"] for r in rows} == {t: shown[t]["score"] for t in REPORTS}


def test_the_eval_file_the_results_name_is_where_to_look_not_permission(sqlite_url: str, copy: Path) -> None:
    """Without --eval, the eval file benchmark.json names says where the agents ran: the reports are found
    there, and refused (the folder comes from the imported data), naming the flag that reads them."""
    eval_file = copy / "project" / "evals" / "cli-cwd.eval.yaml"
    run = _import(sqlite_url, copy)
    for test_id, report in _reports(sqlite_url, run).items():
        assert (report["status"], report["sha256"]) == ("refused", None), report
        written = (copy / "project" / REPORTS[test_id]).resolve()
        assert report["reason"].startswith(f"{written} is outside the folders this import may read; ")
        assert f"pass --eval {eval_file.resolve()}" in report["reason"] and "--files-root" in report["reason"]
    db_file = Path(sqlite_url.removeprefix("sqlite:///"))
    assert not any(b"Q1 total: 2,150" in p.read_bytes() for p in db_file.parent.glob(db_file.name + "*"))

    # The folder given as a root: read.
    other = f"sqlite:///{copy / 'other.db'}"
    run = _import(other, copy, "--files-root", str(copy / "project"))
    assert {t: r["status"] for t, r in _reports(other, run).items()} == dict.fromkeys(REPORTS, "stored")


def test_a_relative_cwd_is_the_eval_files_folders_not_the_targets_files(sqlite_url: str, copy: Path) -> None:
    """`cwd: scratch` is evals/scratch, where AgentV ran the agent (the report is there), not .agentv/scratch
    beside the targets file: a file of the same name put there is not the one stored."""
    decoy = copy / "project" / ".agentv" / "scratch" / "report-scratch-agent.txt"
    decoy.parent.mkdir()
    decoy.write_text("not what the agent wrote\n", "utf-8")
    targets = copy / "project" / ".agentv" / "targets.yaml"
    written = copy / "project" / REPORTS["scratch-report"]
    run = _import(sqlite_url, copy, "--targets", str(targets), "--files-root", str(copy / "project"))
    assert _reports(sqlite_url, run)["scratch-report"]["sha256"] == _sha(written)
    # --targets alone: the eval file is the results' (data), so the folder is where to look, and refused.
    other = f"sqlite:///{copy / 'other.db'}"
    run = _import(other, copy, "--targets", str(targets))
    report = _reports(other, run)["scratch-report"]
    assert report["status"] == "refused" and report["reason"].startswith(str(written.resolve()))


def test_the_cwd_of_the_users_targets_file_is_read_with_eval(sqlite_url: str, copy: Path, tmp_path: Path) -> None:
    """The eval's folder is granted to a cli target without cwd only: a target of the user's targets file with
    an absolute cwd elsewhere is read there, and not in the eval's folder."""
    elsewhere = tmp_path / "agent-home"
    elsewhere.mkdir()
    (elsewhere / "report-here-agent.txt").write_text("written in agent-home\n", "utf-8")
    targets = copy / "project" / ".agentv" / "targets.yaml"
    text = targets.read_text("utf-8")
    targets.write_text(
        text.replace(
            "  - name: here-agent  # no cwd: runs in evals/\n",
            "  - name: here-agent\n    cwd: " + str(elsewhere) + "\n",
        ),
        "utf-8",
    )
    run = _import(sqlite_url, copy, "--eval", str(copy / "project" / "evals" / "cli-cwd.eval.yaml"))
    reports = _reports(sqlite_url, run)
    assert reports["here-report"]["sha256"] == _sha(elsewhere / "report-here-agent.txt")
    assert reports["custom-report"]["status"] == "stored"


def test_a_test_run_in_a_workspace_is_not_looked_for_in_the_eval_folder(sqlite_url: str, tmp_path: Path) -> None:
    """agentv-real's `workspace` suite: a cli target without cwd, run in AgentV's workspace (deleted since).
    Its report is not in the eval file's folder: a file of that name there is not taken for it."""
    real = tmp_path / "agentv-real"
    shutil.copytree(FIXTURE.parent / "agentv-real", real)
    (real / "project" / "evals" / "report.md").write_text("Total: 2,150 (not the agent's)\n", "utf-8")
    eval_file = real / "project" / "evals" / "workspace.eval.yaml"
    out = ok_json(cli(sqlite_url, "import", str(real / "runs" / "workspace"), "--eval", str(eval_file), "--json"))
    (test,) = audit(sqlite_url, out["run_id"], "ws-report")["tests"]
    (report,) = [a for a in test["artifacts"] if a["path"] == "report.md"]
    assert report["status"] == "missing", report


def test_a_replay_of_the_import_grades_the_stored_reports(sqlite_url: str, copy: Path) -> None:
    """The replay grades the bytes the import stored (it looks up no file on disk): with the reports gone,
    a code grader given them (``files``) still reads each one."""
    evals = copy / "project" / "evals"
    run = _import(sqlite_url, copy, "--eval", str(evals / "cli-cwd.eval.yaml"))
    for path in REPORTS.values():
        (copy / "project" / path).unlink()
    (evals / "check_report.py").write_text(
        "import json, sys\n"
        "files = json.load(sys.stdin).get('files') or []\n"
        "texts = [open(f['path'], encoding='utf-8').read() for f in files if f.get('path')]\n"
        "ok = any('Q1 total: 2,150' in t for t in texts)\n"
        "print(json.dumps({'score': 1 if ok else 0, 'assertions': [{'text': 'report read', 'passed': ok}]}))\n",
        "utf-8",
    )
    regrade = evals / "regrade.eval.yaml"
    tests = "".join(
        f"  - id: {test_id}\n    criteria: c\n    input: i\n"
        "    assertions:\n      - type: code-grader\n        name: report\n        command: [python3, check_report.py]\n"
        for test_id in REPORTS
    )
    regrade.write_text(f"name: cli-cwd\ntests:\n{tests}", "utf-8")
    replay = str(ok_json(cli(sqlite_url, "replay", run, "--eval", str(regrade), "--json"), 0, 1)["run_id"])
    for test_id in REPORTS:
        (test,) = audit(sqlite_url, replay, test_id)["tests"]
        (verdict,) = [v for v in test["verdicts"] if v["grader"] == "report"]
        assert (verdict["score"], verdict["verdict"]) == (1, "pass"), verdict


def test_an_import_that_refuses_the_agents_files_says_so_in_one_line(sqlite_url: str, copy: Path) -> None:
    """Without --eval the reports are refused: the import says how many, and that --eval (naming the eval
    file) or --files-root reads them, in one line on stderr and in --json; `validate` says it beforehand."""
    eval_file = (copy / "project" / "evals" / "cli-cwd.eval.yaml").resolve()
    run_folder = str(copy / "runs" / "cli-cwd")
    checked = ok_json(cli(sqlite_url, "validate", run_folder, "--json"))["files"][0]["warnings"]
    assert [w for w in checked if "refused" in w] == [
        "3 files the results name were refused (outside the folders this import may read), and a replay grades "
        f"without them: pass --eval {eval_file} (AgentV ran the agent in its folder) or --files-root DIR"
    ]

    result = cli(sqlite_url, "import", run_folder)
    assert result.exit_code == 0, result.output
    run = result.stdout.split(" as run ")[1].split()[0]
    refused = [line for line in result.stderr.splitlines() if "refused" in line]
    assert refused == [
        "warning: 3 files the results name were refused (outside the folders this import may read), and a replay "
        f"grades without them: pass --eval {eval_file} (AgentV ran the agent in its folder) or --files-root DIR "
        "(importing the results again so writes a new run that stores them; "
        f"`evalstore audit {run} TEST` says why for each)"
    ]
    other = f"sqlite:///{copy / 'other.db'}"
    out = ok_json(cli(other, "import", run_folder, "--json"))
    assert (out["refused_files"], out["reimport_of"]) == (3, None)
    assert sum("3 files the results name were refused" in w for w in out["warnings"]) == 1
    # Read, nothing is said.
    stored = ok_json(cli(f"sqlite:///{copy / 'third.db'}", "import", run_folder, "--eval", str(eval_file), "--json"))
    assert stored["refused_files"] == 0 and not any("refused" in w for w in stored["warnings"])


def test_importing_again_with_eval_stores_the_refused_files_in_a_new_run(sqlite_url: str, copy: Path) -> None:
    """The import the warning asks for: the same results with --eval read the reports the first import
    refused. The first run does not change (an imported run is immutable): a new run stores them, and that
    import, made again, is that run."""
    eval_file = copy / "project" / "evals" / "cli-cwd.eval.yaml"
    first = _import(sqlite_url, copy)
    again = ok_json(cli(sqlite_url, "import", str(copy / "runs" / "cli-cwd"), "--eval", str(eval_file), "--json"))
    assert again["already_imported"] is False and again["run_id"] != first
    assert (again["reimport_of"], again["refused_files_now_stored"], again["refused_files"]) == (first, 3, 0)
    for test_id, report in _reports(sqlite_url, again["run_id"]).items():
        assert (report["status"], report["sha256"]) == ("stored", _sha(copy / "project" / REPORTS[test_id]))
    assert {r["status"] for r in _reports(sqlite_url, first).values()} == {"refused"}

    text = cli(sqlite_url, "import", str(copy / "runs" / "cli-cwd"), "--eval", str(eval_file))
    assert text.stdout == f"already imported as run {again['run_id']} (3 results); nothing written\n"
    # --files-root reading the same files is the same import.
    same = cli(sqlite_url, "import", str(copy / "runs" / "cli-cwd"), "--files-root", str(copy / "project"), "--json")
    assert (ok_json(same)["run_id"], ok_json(same)["already_imported"]) == (again["run_id"], True)
    assert len([r for r in runs(sqlite_url) if r["kind"] == "imported"]) == 2


def test_importing_again_what_still_cannot_be_read_says_how_to_read_it(sqlite_url: str, copy: Path) -> None:
    """Imported again as before, nothing is written, and the refused files are named with the option that
    reads them and what it does (a new run)."""
    eval_file = (copy / "project" / "evals" / "cli-cwd.eval.yaml").resolve()
    first = _import(sqlite_url, copy)
    result = cli(sqlite_url, "import", str(copy / "runs" / "cli-cwd"))
    assert result.stdout == f"already imported as run {first} (3 results); nothing written\n"
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        "warning: 3 files its results name were refused when it was imported, and an imported run does not "
        "change: importing the results again with what lets the import read them writes a new run that stores "
        "them ("
    )
    assert f"pass --eval {eval_file} " in line and "--files-root DIR" in line
    # An option that reads none of them: still refused, and said so.
    elsewhere = copy / "nothing-here"
    elsewhere.mkdir()
    out = ok_json(cli(sqlite_url, "import", str(copy / "runs" / "cli-cwd"), "--files-root", str(elsewhere), "--json"))
    assert (out["run_id"], out["already_imported"], out["refused_files"]) == (first, True, 3)
    assert out["warnings"][0].startswith(
        "3 files its results name were refused when it was imported, and they still are with the options given ("
    )
