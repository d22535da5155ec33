"""Fixtures for the end-to-end tests: the scripted judge, and one recorded run shared by the replay tests.

Recording costs a few agent processes, so the run that most replay, compare and audit tests start from
is recorded once per session; each test gets its own copy of the SQLite file (``recorded_db``), so
what one test writes never shows in another. Tests that change files on disk record their own run.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentv_examples import agentv_environment, corpus, model_server  # noqa: F401 (AgentV's example suites)
from e2e_helpers import JUDGE_KEY_ENV, JUDGE_KEY_VALUE, Recorded, judge_script, make_suite, record
from judge_server import JudgeServer


@pytest.fixture(scope="session")
def judge() -> Iterator[JudgeServer]:
    server = JudgeServer(judge_script).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The judge's API key in the environment, as a user would export it."""
    monkeypatch.setenv(JUDGE_KEY_ENV, JUDGE_KEY_VALUE)
    return {JUDGE_KEY_ENV: JUDGE_KEY_VALUE}


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory, judge: JudgeServer) -> Recorded:
    """The example suite recorded once, with the LLM grader on the judge; the agent's workspace deleted."""
    root = tmp_path_factory.mktemp("recorded")
    suite = make_suite(root / "suite", judge_url=judge.base_url)
    db_file = root / "store.db"
    first = len(judge.requests)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(JUDGE_KEY_ENV, JUDGE_KEY_VALUE)
        output = record(f"sqlite:///{db_file}", suite)
    shutil.rmtree(suite.root / "workspaces")
    return Recorded(suite, db_file, output["run_id"], output, judge.requests[first:])


@pytest.fixture
def recorded_db(recorded: Recorded, tmp_path: Path) -> str:
    """A private copy of the recorded store (the database file and its WAL, if any)."""
    for part in recorded.db_file.parent.glob(recorded.db_file.name + "*"):
        shutil.copy(part, tmp_path / part.name)
    return f"sqlite:///{tmp_path / recorded.db_file.name}"
