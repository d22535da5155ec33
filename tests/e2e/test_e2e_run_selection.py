"""``run --test-id``/``--tag``/``--exclude-tag``: the tests and eval files ``agentv eval run`` would select,
kept by a resumed run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from e2e_helpers import cli, kill_pid_file, make_suite, ok_json, one_line_error, record, result_rows, runs, wait_for
from test_e2e_resume import SLOW_CASES, _kill, _start

CASES = [
    ("paris-1", "Write the Q1 revenue report as revenue.xlsx and summary.html."),
    ("paris-2", "Write the Q2 revenue report as revenue.xlsx and summary.html."),
    ("lyon-1", "Write the Q3 revenue report as revenue.xlsx and summary.html."),
]


def _tagged(eval_file: Path, tags: str) -> None:
    text = eval_file.read_text("utf-8")
    assert text.startswith("name: ")
    name, rest = text.split("\n", 1)
    eval_file.write_text(f"{name}\ntags: {tags}\n{rest}", encoding="utf-8")


def test_test_id_globs_run_only_the_tests_they_match(tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "suite", cases=CASES)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    out = record(db, suite, "--test-id", "paris-*")
    assert [r["test_id"] for r in out["results"]] == ["paris-1", "paris-2"]
    assert Counter(suite.calls()) == {"paris-1": 1, "paris-2": 1}
    out = record(db, suite, "--test-id", "lyon-?", "--test-id", "paris-2")  # repeated: any of them
    assert sorted(r["test_id"] for r in out["results"]) == ["lyon-1", "paris-2"]

    line = one_line_error(cli(db, "run", str(suite.eval), "--test-id", "nice-*"), code=2)
    assert f"--test-id 'nice-*' matches no test of {suite.eval} (its tests: paris-1, paris-2, lyon-1)" in line
    assert len(runs(db)) == 2  # nothing written for it


def test_tags_select_the_eval_file_as_agentv_does(tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "suite", cases=CASES)
    _tagged(suite.eval, "[smoke, fast]")
    db = f"sqlite:///{tmp_path / 'store.db'}"
    skipped = cli(db, "run", str(suite.eval), "--tag", "smoke", "--tag", "slow", "--json")
    assert (
        ok_json(skipped)["run_id"] is None
        and "not selected by the tag filters (its tags: smoke, fast)" in (ok_json(skipped)["skipped"])
    )
    assert cli(db, "run", str(suite.eval), "--exclude-tag", "fast").exit_code == 0
    assert not (tmp_path / "store.db").exists() and suite.calls() == []  # no store, no agent call
    out = record(db, suite, "--tag", "smoke", "--exclude-tag", "slow", "--test-id", "lyon-1")
    assert [r["test_id"] for r in out["results"]] == ["lyon-1"]

    # AgentV reads tags only beside a name (parseMetadata): without one, --tag skips the file, saying why.
    text = suite.eval.read_text("utf-8")
    suite.eval.write_text(text.split("\n", 1)[1], encoding="utf-8")
    unnamed = ok_json(cli(db, "run", str(suite.eval), "--tag", "smoke", "--json"))
    assert unnamed["run_id"] is None and "AgentV reads `tags:` only in a file with a `name:`" in unnamed["skipped"]


def test_a_resumed_run_runs_the_tests_its_test_ids_selected(tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "suite", cases=SLOW_CASES)
    db_file = tmp_path / "store.db"
    db = f"sqlite:///{db_file}"
    workdir = str(tmp_path / "ws")
    args = ("run", str(suite.eval), "--workers", "1", "--workdir", workdir, "--test-id", "q[13]-*")
    proc = _start(db, *args, cwd=tmp_path, env={"E2E_AGENT_SLEEP": "60"})
    try:
        wait_for(
            lambda: result_rows(db_file, "rec-") >= 1 and (suite.root / "sleeping.pid").exists(),
            60,
            "q1 recorded and q3's agent call under way",
        )
    finally:
        _kill(proc)
        kill_pid_file(suite.root / "sleeping.pid")
    (run,) = runs(db)
    line = one_line_error(cli(db, "run", "--resume", run["run_id"], "--test-id", "q2-*"), code=2)
    assert "--test-id with --resume" in line
    out = ok_json(cli(db, "run", "--resume", run["run_id"], "--json", "--workdir", workdir), 1)
    assert [r["test_id"] for r in out["results"]] == ["q1-report", "q3-report"]
    assert Counter(suite.calls()) == {"q1-report": 1, "q3-report": 2}  # q2 never: --test-id did not select it


def test_a_run_on_a_cli_target_warns_of_test_ids_agentv_cannot_run(tmp_path: Path) -> None:
    """AgentV 4.42.4's cli target writes the prompt to a temporary file named after the test id: an id holding
    `/` is an ENOENT execution error there. evalstore runs it, and says before the agent runs that AgentV will
    not."""
    suite = make_suite(tmp_path / "suite", cases=[("geo/fr", CASES[0][1]), ("plain", CASES[1][1])])
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result = cli(db, "run", str(suite.eval), "--json", "--workdir", str(tmp_path / "ws"))
    assert sorted(r["test_id"] for r in ok_json(result, 0, 1)["results"]) == ["geo/fr", "plain"]
    warned = [line for line in result.stderr.splitlines() if "AgentV 4.42.4 cannot run test" in line]
    assert len(warned) == 1 and "'geo/fr' with a cli target" in warned[0], result.stderr
