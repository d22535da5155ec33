"""A local replay whose tests never wait grades a share of them in a forked worker (``executors/forked_share.py``).

The suite is ``test_e2e_replay_reuse.py``'s graders (three Python code graders that log each process they run), over
enough tests for a share: the worker's tests must come back graded exactly as this process grades them,
once each, and a test of its share that has to run a process is handed back and run here.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_e2e_replay_reuse import GRADER as REUSE_GRADER
from test_e2e_replay_reuse import GRADERS

from evalstore import cli as cli_package
from evalstore.replay.executors import forked_share
from evalstore.replay.executors.local import LocalExecutor
from evalstore.replay.regrade import ReplayOptions, replay_run
from evalstore.store import EventStore, make_engine

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or (os.cpu_count() or 1) < 2, reason="a forked share needs Linux and two cores"
)

GRADER = REUSE_GRADER.replace("VERSION", "v1")
TESTS = 130
"""Tests t000..t129: the first 16 graded here, then a third of the rest here and two thirds in the worker."""


def _cli(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args], catch_exceptions=False)


def _imported(db: str, root: Path) -> tuple[Path, str]:
    log = root / "processes.log"
    graders = []
    for name in GRADERS:
        (root / f"{name}.py").write_text(GRADER)
        command = [sys.executable, f"{name}.py", name, str(log)]
        graders.append(f"  - name: {name}\n    type: code-grader\n    command: {json.dumps(command)}")
    eval_file = root / "share.eval.yaml"
    eval_file.write_text("name: share\ntests: ./cases.yaml\nassertions:\n" + "\n".join(graders) + "\n")
    ids = [f"t{i:03d}" for i in range(TESTS)]
    (root / "cases.yaml").write_text(
        json.dumps([{"id": t, "input": f"question {t}", "criteria": "states a total"} for t in ids])
    )
    rows = [
        {
            "test_id": t,
            "suite": "share",
            "score": 1,
            "target": "default",
            # Every fifth answer fails, so the verdicts are not all alike.
            "output": [{"role": "assistant", "content": f"{'Sum' if i % 5 == 0 else 'Total'}: {i}"}],
            "execution_status": "ok",
            "scores": [],
        }
        for i, t in enumerate(ids)
    ]
    results = root / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    printed = _cli(db, "import", str(results), "--eval", str(eval_file), "--json").stdout
    return log, json.loads(printed)["run_id"]


def _ran(log: Path) -> int:
    count = len(log.read_text().splitlines()) if log.exists() else 0
    log.unlink(missing_ok=True)
    return count


def _replay(db: str, run: str, *, tests: str | None = None) -> tuple[str, int]:
    """A replay of ``run`` at concurrency 2, as the CLI makes it: its run id and the tests the worker graded."""
    store = EventStore(make_engine(db))
    executor = LocalExecutor()
    try:
        outcome = replay_run(store, run, ReplayOptions(tests=tests), concurrency=2, executor=executor)
    finally:
        store.close()
    return outcome.run_id, executor.shared


def _graded(db: str, run: str) -> tuple[dict[str, float], dict[tuple[str, str], tuple[float, str]]]:
    """Per test its score, per (test, grader) its score and verdict: every test once, and the store verified."""
    store = EventStore(make_engine(db))
    try:
        results = store.query("results", run_id=run)
        assert len(results) == len({r["test_id"] for r in results}) == TESTS, "a test missing or appended twice"
        scores = {r["test_id"]: r["score"] for r in results}
        verdicts = {
            (v["test_id"], v["grader"]): (v["score"], v["verdict"]) for v in store.query("verdicts", run_id=run)
        }
        assert store.verify().ok
        return scores, verdicts
    finally:
        store.close()


def test_an_unchanged_replay_grades_two_thirds_of_the_rest_in_a_forked_worker_exactly_as_here(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    log, imported = _imported(sqlite_url, tmp_path)

    first, shared = _replay(sqlite_url, imported)
    assert _ran(log) == 3 * TESTS
    assert shared == 0  # its first tests ran processes: all of it graded here

    again, shared = _replay(sqlite_url, imported)
    assert _ran(log) == 0
    rest = TESTS - forked_share.FIRST
    assert shared == rest - rest // 3

    scores, verdicts = _graded(sqlite_url, again)
    assert (scores, verdicts) == _graded(sqlite_url, first)
    assert len(verdicts) == 3 * TESTS
    assert sorted(scores.values()).count(0.0) == TESTS // 5


def test_a_test_of_the_workers_share_that_must_run_a_process_is_handed_back_and_run_here(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    log, imported = _imported(sqlite_url, tmp_path)
    partial, _ = _replay(sqlite_url, imported, tests="t0*")  # t000..t099 graded, t100..t129 carried over
    assert _ran(log) == 3 * 100

    whole, shared = _replay(sqlite_url, imported)
    # The worker's share is t054..t129: it reused t054..t099 and handed back t100..t129, which ran here.
    assert shared == 46
    assert _ran(log) == 3 * 30
    scores, verdicts = _graded(sqlite_url, whole)
    assert len(verdicts) == 3 * TESTS
    assert {k: v for k, v in verdicts.items() if k[0] < "t100"} == {
        k: v for k, v in _graded(sqlite_url, partial)[1].items() if k[0] < "t100"
    }
    assert all(scores[f"t{i:03d}"] == (0.0 if i % 5 == 0 else 1.0) for i in range(TESTS))


def test_a_worker_that_dies_leaves_its_share_to_the_replay(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    log, imported = _imported(sqlite_url, tmp_path)
    first, _ = _replay(sqlite_url, imported)
    _ran(log)

    def dies(*_args: object) -> None:  # runs in the forked worker
        os._exit(3)

    monkeypatch.setattr(forked_share, "_worker", dies)
    again, shared = _replay(sqlite_url, imported)
    assert shared == 0
    assert _ran(log) == 0  # the replay graded the worker's share itself, still reusing every execution
    assert _graded(sqlite_url, again) == _graded(sqlite_url, first)
