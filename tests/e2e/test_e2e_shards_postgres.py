"""``replay --shard K/N`` on PostgreSQL: three processes, one replay run, the same verdicts as one process."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from e2e_helpers import (
    EVALSTORE,
    SUBPROCESS_TIMEOUT,
    cli,
    make_suite,
    ok_json,
    record,
    results_by_test,
    runs,
    verdict_signature,
)

CASES = [
    (f"{letter}-{q.lower()}", f"Write the {q} revenue report as revenue.xlsx and summary.html.")
    for letter, q in zip("abcdefg", ["Q1", "Q2", "Q3", "Q1", "Q2", "Q3", "Q1"])
]


def test_three_shard_processes_make_the_same_replay_as_one(postgres_url: str, tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "suite", cases=CASES)
    parent = record(postgres_url, suite)["run_id"]
    swap = ("--eval", str(suite.eval_v2))

    single = ok_json(cli(postgres_url, "replay", parent, *swap, "--json"), 0, 1)["run_id"]

    procs = [
        subprocess.Popen(
            [str(EVALSTORE), "--db", postgres_url, "replay", parent, *swap, "--shard", f"{k}/3", "--json"],
            cwd=tmp_path,
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in (1, 2, 3)
    ]
    outputs = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=SUBPROCESS_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        assert proc.returncode in (0, 1), stderr  # 1: a regraded test below the threshold
        outputs.append(json.loads(stdout))

    (shard_run,) = {o["run_id"] for o in outputs}  # every shard wrote into the same run
    assert shard_run != single
    replays = [r for r in runs(postgres_url) if r["kind"] == "replay"]
    assert sorted(r["run_id"] for r in replays) == sorted([single, shard_run])
    sharded = next(r for r in replays if r["run_id"] == shard_run)
    assert sharded["parent_run_id"] == parent and sharded["status"] == "completed" and sharded["tests"] == len(CASES)

    assert verdict_signature(postgres_url, shard_run) == verdict_signature(postgres_url, single)
    assert {t: r["score"] for t, r in results_by_test(postgres_url, shard_run).items()} == {
        t: r["score"] for t, r in results_by_test(postgres_url, single).items()
    }
    # The swap took effect: v2's workbook grader only checks the Total row.
    assert {r["graders"]["workbook"] for r in results_by_test(postgres_url, shard_run).values()} == {1.0}
    assert ok_json(cli(postgres_url, "verify", "--json"))["ok"] is True
