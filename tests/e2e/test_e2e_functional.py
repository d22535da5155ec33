"""Functional grading that replays (examples/functional-grading): record, lose the workspace and the
agent, replay from the stored snapshot, regrade with a stricter test, audit the snapshot."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from e2e_helpers import EXAMPLES, cli

from evalstore.store import EventStore


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "functional-grading"
    shutil.copytree(EXAMPLES / "functional-grading", root)
    monkeypatch.chdir(root)
    # The example's agent and grader run as `python3`: make that this interpreter (it has evalstore).
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return root


def _verdicts(db: str, run: str) -> dict[str, tuple[float, str]]:
    report = json.loads(cli(db, "audit", run, "fix-add", "--json").stdout)
    (test,) = report["tests"]
    return {v["grader"]: (v["score"], v["verdict"]) for v in test["verdicts"]}


def test_a_functional_grader_replays_from_the_snapshot_without_workspace_or_agent(example: Path) -> None:
    db = f"sqlite:///{example / 'store.db'}"
    recorded = cli(db, "run", "evals/functional.eval.yaml", "--workdir", "ws")
    assert recorded.exit_code == 0, recorded.output
    store = EventStore.open(db)
    (run,) = store.run_ids()
    events = {e.type: e.event for e in store.read_stream(run)}
    snapshot = events["workspace_snapshotted"]
    assert {e.path for e in snapshot.entries} == {"calc.py", "test_calc.py", "NOTES.md"}
    assert not snapshot.partial
    calc = next(e for e in snapshot.entries if e.path == "calc.py")
    assert b"return a + b" in store.get_blob(calc.sha256)
    changes = events["transcript_recorded"].file_changes
    assert "diff --git a/calc.py b/calc.py" in changes and "-    return a - b\n+    return a + b" in changes
    assert re.search(r"new file mode 100644\nindex 0000000\.\.[0-9a-f]{7}\n--- /dev/null\n\+\+\+ b/NOTES\.md", changes)
    store.close()
    assert _verdicts(db, run)["tests-pass"] == (1.0, "pass")

    shutil.rmtree(example / "ws")
    shutil.rmtree(example / "agent")
    same = cli(db, "replay", run)
    assert same.exit_code == 0, same.output
    assert _verdicts(db, "last")["tests-pass"] == (1.0, "pass")

    strict = cli(db, "replay", run, "--eval", "evals/functional.strict.eval.yaml")
    assert strict.exit_code == 1, strict.output  # the replay gate: a regraded test is now below the threshold
    assert _verdicts(db, "last")["tests-pass"] == (0.5, "fail")

    audit = cli(db, "audit", run, "fix-add", "--json")
    report = json.loads(audit.stdout)
    (test,) = report["tests"]
    entries = {e["path"]: e for e in test["workspace"]["entries"]}
    assert entries["calc.py"]["sha256"] == calc.sha256 and entries["calc.py"]["blob"] == "ok"
    assert report["blob_problems"] == {}
    text = cli(db, "audit", run, "fix-add").stdout
    assert "workspace snapshot" in text and f"calc.py sha256={calc.sha256[:12]}" in text
    assert cli(db, "verify").exit_code == 0


def test_a_partial_snapshot_carries_an_unchanged_grader_and_errors_a_changed_one(example: Path) -> None:
    """A snapshot its limits cut short cannot run the functional grader as it ran: an unchanged replay carries
    the recorded verdict (saying why), a replay that changes the grader gets an execution error naming what
    was left out."""
    eval_file = example / "evals" / "functional.eval.yaml"
    eval_file.write_text(
        eval_file.read_text().replace("  isolation: per_test\n", "  isolation: per_test\n  snapshot: {max_files: 1}\n")
    )
    db = f"sqlite:///{example / 'store.db'}"
    assert cli(db, "run", str(eval_file), "--workdir", "ws").exit_code == 0
    store = EventStore.open(db)
    (run,) = store.run_ids()
    store.close()
    recorded = _verdicts(db, run)
    assert recorded["tests-pass"] == (1.0, "pass")
    shutil.rmtree(example / "ws")

    same = cli(db, "replay", run)
    assert same.exit_code == 0, same.output
    assert _verdicts(db, "last") == recorded
    audit = json.loads(cli(db, "audit", "last", "fix-add", "--json").stdout)
    (verdict,) = [v for v in audit["tests"][0]["verdicts"] if v["grader"] == "tests-pass"]
    assert any(
        "carried: the run's snapshot of this test's workspace is partial (2 file(s)" in e for e in verdict["evidence"]
    )

    changed = cli(db, "replay", run, "--eval", "evals/functional.strict.eval.yaml")
    shown = json.loads(cli(db, "show", "last", "--json").stdout)
    (result,) = shown["results"]
    assert result["status"] == "execution_error", changed.output
    audit = json.loads(cli(db, "audit", "last", "fix-add", "--json").stdout)
    (verdict,) = [v for v in audit["tests"][0]["verdicts"] if v["grader"] == "tests-pass"]
    text = verdict["assertions"][0]["text"]
    assert "partial" in text and "2 file(s) were left out" in text and "over max_files (1)" in text
