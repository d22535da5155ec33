"""An ``openai`` agent target asks its endpoint as AgentV 4.42.4 does, request for request
(tests/fixtures/agentv-target-parity: its README says how AgentV's runs were made).

AgentV's provider retries a failed request in two layers, and ``agentv eval`` retries the failed call: the
OpenAI SDK pi-ai calls through sends a request up to three times (any 5xx, 408, 409, 429, a dropped
connection, as ``x-should-retry`` says), AgentV's ``withRetry`` repeats that up to ``max_retries`` more times
for its status codes (500, 408, 429, 502, 503, 504), and ``--max-retries`` calls the target again. And it
reads no ``timeout_seconds`` for the target. evalstore once made a third of the requests (no SDK layer) and
timed the slow answer out; each run here is the installed console script in a real subprocess, against the
same stub AgentV ran against, a real server on 127.0.0.1 counting what it is sent.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import evalstore
from fixture_paths import FIXTURES_DIR

PARITY = FIXTURES_DIR / "agentv-target-parity"


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, Path, dict[str, str]]]:
    """The project copied as a repository root, the stub serving it, its request log and the environment."""
    folder = tmp_path / "project"
    shutil.copytree(PARITY / "project", folder, ignore=shutil.ignore_patterns("runs"))
    (folder / ".git").mkdir()
    log = tmp_path / "requests.jsonl"
    server = subprocess.Popen([sys.executable, str(PARITY / "serve.py"), str(log)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        yield folder, log, {"PARITY_ENDPOINT": url, "PARITY_KEY": "sk-local", "PARITY_MODEL": "parity-model"}
    finally:
        server.kill()
        server.wait()


def requests(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text("utf-8").splitlines()]


def agentv_rows(run: str) -> dict[str, dict[str, Any]]:
    lines = (PARITY / "project" / "runs" / run / "index.jsonl").read_text("utf-8").splitlines()
    return {r["test_id"]: r for r in map(json.loads, lines)}


def test_every_failure_is_asked_again_as_agentv_asks_it_and_timeout_seconds_is_not_read(
    tmp_path: Path, project: tuple[Path, Path, dict[str, str]]
) -> None:
    folder, log, env = project
    db = f"sqlite:///{tmp_path / 'store.db'}"
    ran = evalstore(db, "run", "evals/counts.eval.yaml", "--workers", "9", "--json", cwd=folder, env=env)
    assert ran.returncode == 1, ran.stderr
    # As many requests per test as AgentV sent: 3 x 2 x 3 for a 500 or a 429 (the SDK, withRetry with the
    # target's max_retries: 1, --max-retries' default 2), 3 x 1 x 3 for a 501 or a dropped connection (only
    # the SDK retries them), 1 x 2 x 3 for a 500 that says x-should-retry: false, 5 for a 503 four times.
    sent = Counter(r["scenario"] for r in requests(log))
    assert sent == Counter(r["scenario"] for r in requests(PARITY / "logs" / "counts-requests.jsonl"))
    assert sent["s500"] == 18 and sent["sdrop"] == 9
    # And the same outcome: `sslow` answers after 2 s, over the target's timeout_seconds: 1, which AgentV
    # does not read for an openai target (evalstore warns of the field, and does not read it either).
    results = {r["test_id"]: r for r in json.loads(ran.stdout)["results"]}
    for test, row in agentv_rows("counts").items():
        assert results[test]["status"] == row["execution_status"], test
        if row.get("error", "").startswith("pi-ai call failed: HTTP"):
            assert results[test]["error"].endswith(row["error"]), test
    assert "field 'timeout_seconds'" in ran.stderr
    assert "judge 'fast'" not in ran.stderr


def test_the_waits_between_requests_are_agentvs(tmp_path: Path, project: tuple[Path, Path, dict[str, str]]) -> None:
    """With nothing to say how long to wait: the SDK's 0.5 s and 1 s (less up to a quarter), withRetry's 1 s
    (give or take a quarter), as AgentV waited (its requests' times in the fixture)."""
    folder, log, env = project
    db = f"sqlite:///{tmp_path / 'store.db'}"
    ran = evalstore(db, "run", "evals/shape.eval.yaml", "--max-retries", "0", cwd=folder, env=env)
    assert ran.returncode == 1, ran.stderr
    bounds = [(0.375, 0.5), (0.75, 1.0), (0.75, 1.25), (0.375, 0.5), (0.75, 1.0)]
    for sent in (requests(PARITY / "logs" / "shape-requests.jsonl"), requests(log)):
        times = [r["t"] for r in sent]
        gaps = [b - a for a, b in pairwise(times)]
        assert len(gaps) == len(bounds), sent
        for gap, (low, high) in zip(gaps, bounds, strict=True):
            assert low - 0.02 <= gap <= high + 0.5, gaps  # the machine may be busy: never early, a little late
