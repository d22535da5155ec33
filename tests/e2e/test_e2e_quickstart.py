"""``evalstore quickstart`` in an empty directory, as the README tells a new user to run it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from e2e_helpers import EVALSTORE, SUBPROCESS_TIMEOUT, cli, ok_json
from judge_server import JudgeServer

JUDGE_VARS = ("EVALSTORE_JUDGE_BASE_URL", "EVALSTORE_JUDGE_MODEL", "EVALSTORE_JUDGE_API_KEY_ENV", "EVALSTORE_DB")


def _quickstart(cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in JUDGE_VARS}
    return subprocess.run(
        [str(EVALSTORE), "quickstart"],
        cwd=cwd,
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )


def _runs(cwd: Path) -> list[dict]:
    return ok_json(cli(f"sqlite:///{cwd / '.evalstore' / 'evalstore.db'}", "runs", "--json"))


def test_quickstart_in_an_empty_directory(tmp_path: Path) -> None:
    result = _quickstart(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    out = result.stdout
    recorded, replay = _runs(tmp_path)
    assert recorded["kind"] == "recorded" and recorded["status"] == "completed" and recorded["tests"] == 3
    assert replay["kind"] == "replay" and replay["parent_run_id"] == recorded["run_id"]
    assert replay["status"] == "completed"
    # The comparison, the audit and the next commands are printed.
    assert f"compare {recorded['run_id']} (A) -> {replay['run_id']} (B)" in out
    assert "McNemar" in out and "fail->pass" in out
    assert "digests checked against the blob store: all match" in out
    assert f"evalstore compare {recorded['run_id']} {replay['run_id']}" in out
    # No judge configured: the quickstart says how to turn the LLM grader on.
    assert "EVALSTORE_JUDGE_BASE_URL" in result.stdout + result.stderr


def test_quickstart_runs_the_llm_grader_when_a_judge_is_configured(tmp_path: Path, judge: JudgeServer) -> None:
    before = len(judge.requests)
    result = _quickstart(tmp_path, EVALSTORE_JUDGE_BASE_URL=judge.base_url, EVALSTORE_JUDGE_MODEL="qs-judge")
    assert result.returncode == 0, result.stderr
    sent = judge.requests[before:]
    assert len(sent) >= 3 and {r.body["model"] for r in sent} == {"qs-judge"}
    assert any("revenue" in r.user for r in sent)
    recorded, _replay = _runs(tmp_path)
    (row,) = [
        r
        for r in ok_json(
            cli(f"sqlite:///{tmp_path / '.evalstore' / 'evalstore.db'}", "show", recorded["run_id"], "--json")
        )["results"]
        if r["test_id"] == "q1-report"
    ]
    assert "report-quality" in row["graders"]


def test_quickstart_json_reports_both_runs_the_comparison_and_the_audit(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in JUDGE_VARS}
    result = subprocess.run(
        [str(EVALSTORE), "quickstart", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    import json

    report = json.loads(result.stdout)
    assert [r["run_id"] for r in _runs(tmp_path)] == [report["run_id"], report["replay_id"]]
    assert report["llm_grader"] is False
    assert {r["test_id"] for r in report["replayed"]} == {"q1-report", "q2-report", "q3-report"}
    counts = report["comparison"]["overall"]["counts"]
    assert counts["n"] == 3 and counts["b_only_pass"] == 2
    assert report["audit"]["blob_problems"] == {} and report["audit"]["blobs_checked"] > 0


def test_the_quickstarts_replay_replayed_again_unchanged_flips_nothing(tmp_path: Path) -> None:
    # The quickstart's replay swapped the eval (v2) and the xlsx converter; a replay of it inherits both.
    assert _quickstart(tmp_path).returncode == 0
    db = f"sqlite:///{tmp_path / '.evalstore' / 'evalstore.db'}"
    _recorded, replay = _runs(tmp_path)
    again = ok_json(cli(db, "replay", replay["run_id"], "--json"), 0, 1)  # 1: q3 fails its threshold, as before
    counts = again["comparison"]["overall"]["counts"]
    assert counts["n"] == 3 and counts["a_only_pass"] == counts["b_only_pass"] == 0, counts
    scores = {
        r["test_id"]: (r["score"], r["passed"]) for r in ok_json(cli(db, "show", replay["run_id"], "--json"))["results"]
    }
    shown = ok_json(cli(db, "show", again["run_id"], "--json"))["results"]
    assert {r["test_id"]: (r["score"], r["passed"]) for r in shown} == scores


def test_show_says_which_required_grader_set_a_score_to_zero(tmp_path: Path) -> None:
    assert _quickstart(tmp_path).returncode == 0
    db = f"sqlite:///{tmp_path / '.evalstore' / 'evalstore.db'}"
    _recorded, replay = _runs(tmp_path)
    rows = {r["test_id"]: r for r in ok_json(cli(db, "show", replay["run_id"], "--json"))["results"]}
    # q3's graders score 1.000, 1.000 and 0.750, and the test 0: the workbook grader is required.
    assert rows["q3-report"]["score"] == 0
    assert rows["q3-report"]["note"].startswith("required grader workbook failed (0.750, below the threshold")
    assert rows["q1-report"]["note"] == ""
    table = cli(db, "show", replay["run_id"], env={"COLUMNS": "200"})  # the why column whole, whatever the terminal
    assert "required grader workbook" in table.stdout


def test_show_notes_do_not_depend_on_where_the_results_are_chunked(tmp_path: Path, monkeypatch) -> None:
    from evalstore.replay.analysis import views
    from evalstore.store import EventStore

    assert _quickstart(tmp_path).returncode == 0
    _recorded, replay = _runs(tmp_path)
    store = EventStore.open(f"sqlite:///{tmp_path / '.evalstore' / 'evalstore.db'}")
    try:
        whole = list(views.noted_results(store, replay["run_id"]))
        assert [r for r, _ in whole] == views.run_results(store, replay["run_id"])
        assert any(note for _, note in whole)
        for size in (1, 2):  # a note's result first, last and alone in its chunk
            monkeypatch.setattr(views, "_NOTE_CHUNK", size)
            assert list(views.noted_results(store, replay["run_id"])) == whole
    finally:
        store.close()


def test_payload_fields_are_the_decoded_events_fields(tmp_path: Path) -> None:
    """What exports read instead of the event models: the same fields, and the same JSON for each; a
    nested model keeps its stored form (its defaults left out), which validates to the same value."""
    import json
    import typing

    from pydantic import BaseModel, TypeAdapter

    from evalstore.store import EventStore
    from evalstore.store.events import payload_fields

    def nested(annotation: object) -> bool:
        return any(
            (isinstance(a, type) and issubclass(a, BaseModel)) or nested(a)
            for a in typing.get_args(annotation)
            if a is not annotation
        ) or (isinstance(annotation, type) and issubclass(annotation, BaseModel))

    assert _quickstart(tmp_path).returncode == 0
    store = EventStore.open(f"sqlite:///{tmp_path / '.evalstore' / 'evalstore.db'}")
    try:
        types = set()
        for stored in store.read_all():
            fields = payload_fields(stored.type, stored.schema_version, stored.payload)
            event = stored.event
            dumped = event.model_dump(mode="json")
            assert set(fields) == set(dumped), stored.type
            for name, info in type(event).model_fields.items():
                if nested(info.annotation):
                    adapter = TypeAdapter(info.annotation)
                    value = adapter.dump_python(adapter.validate_python(fields[name]), mode="json")
                    assert value == dumped[name], (stored.type, name)
                else:  # the same JSON: 1.0 stays a float, as the model would write it
                    assert json.dumps(fields[name]) == json.dumps(dumped[name]), (stored.type, name)
            types.add(stored.type)
        assert {"test_scored", "verdict_recorded", "transcript_recorded", "grader_called"} <= types
    finally:
        store.close()


def test_the_next_commands_name_the_store_given_and_each_one_runs(tmp_path: Path) -> None:
    """With EVALSTORE_DB (as with --db) the printed commands carry the store, so they read the runs just made;
    without a judge the audit line does not offer --show-prompt (there is no prompt to show)."""
    db = str(tmp_path / "elsewhere.db")
    result = subprocess.run(
        [str(EVALSTORE), "--db", db, "quickstart"],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k not in JUDGE_VARS},
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("Next:")[1].splitlines()
    commands = [line.split("#")[0].strip() for line in lines if line.strip()]
    assert commands and all(c.startswith(f"evalstore --db {db} ") for c in commands)
    audit = next(c for c in commands if " audit " in c)
    assert "--show-prompt" not in audit
    for command in (c for c in commands if c.split()[3] in ("runs", "show", "audit", "verify")):
        argv = [str(EVALSTORE), *command.split()[1:]]  # `evalstore` as installed in this environment
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
        assert done.returncode == 0, (command, done.stderr)


def test_the_next_lines_use_real_paths_and_the_copy_they_name_runs(tmp_path: Path) -> None:
    """A wheel user follows the Next: lines: they name no placeholder path, and copying the examples
    then running the copied suite works as printed."""
    result = _quickstart(tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("Next:")[1].splitlines()
    commands = [line.split("  #")[0].strip() for line in lines if line.strip().startswith("evalstore")]
    assert not any("PATH/TO" in c or "GRADER=" in c or " RUN " in c for c in commands), commands
    copy = next(c for c in commands if c.startswith("evalstore examples copy"))  # no --db: none was given
    run = next(c for c in commands if c.startswith("evalstore run "))
    env = {k: v for k, v in os.environ.items() if k not in JUDGE_VARS}
    for command in (copy, run):
        done = subprocess.run(
            [str(EVALSTORE), *command.split()[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
        )
        assert done.returncode in (0, 1), f"{command}: {done.stderr}"  # 1: the suite's tests below threshold
        assert "Traceback" not in done.stderr and "Error:" not in done.stderr
    assert len(_runs(tmp_path)) == 3
