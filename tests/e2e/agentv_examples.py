"""AgentV 4.42.4's own example suites run by the real AgentV (tests/fixtures/agentv-example-runs), for the
tests that hold evalstore to them: the corpus copied outside the checkout, the local model server that
answered AgentV, and which work each suite waits for (``PENDING``: xfail marks that turn red when it lands).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import fixture_module
from fixture_paths import FIXTURES_DIR
from judge_server import JudgeServer

RUNS = FIXTURES_DIR / "agentv-example-runs"
CORPUS = FIXTURES_DIR / "agentv-examples-4.42.4"


regenerate = fixture_module("agentv_example_regenerate", RUNS / "regenerate.py")
answers = fixture_module("agentv_example_answers", RUNS / "answers.py")
SUITES: dict[str, tuple[str, str]] = regenerate.SUITES


def rows(suite: str) -> list[dict[str, Any]]:
    index = RUNS / "runs" / suite / "index.jsonl"
    return [json.loads(line) for line in index.read_text("utf-8").splitlines() if line.strip()]


def logged(suite: str) -> list[dict[str, Any]]:
    """Every request AgentV's run of the suite sent the model server, in order (``body`` as sent)."""
    log = RUNS / "logs" / f"{suite}.jsonl"
    return [json.loads(line) for line in log.read_text("utf-8").splitlines() if line.strip()]


def expected_scores(row: dict[str, Any]) -> list[tuple[str, float]]:
    """AgentV's per-grader scores of a row; a test graded by its implicit llm-grader alone (no
    ``assertions``) has no ``scores`` entry, and its one grader's score is the test's."""
    if row.get("scores"):
        return [(s["name"], float(s["score"])) for s in row["scores"]]
    return [("", float(row["score"]))]


def xfail(*pending: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason="; ".join(pending))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example corpus copied outside the checkout (the examples' `uv run` must find no pyproject
    above them), as its own repository root: AgentV names eval files relative to it."""
    copy = tmp_path_factory.mktemp("agentv") / "repo"
    shutil.copytree(CORPUS, copy)
    # A repository root, as AgentV's checkout (and regenerate.py's copy) is: `agentv eval` looks for the
    # targets file from the eval file's folder up to there, so the root `.agentv/targets.yaml` is found.
    (copy / ".git").mkdir()
    return copy


@pytest.fixture(scope="module")
def model_server() -> Iterator[JudgeServer]:
    """The server AgentV ran against, answering the same function of the request."""
    server = JudgeServer().start()
    server.respond_with(lambda request: answers.answer(request.body))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def agentv_environment(model_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> JudgeServer:
    """The environment AgentV ran in: the root targets file's chains on the model server."""
    for name, value in regenerate.environment(model_server.base_url, os.environ.get("PATH", "")).items():
        monkeypatch.setenv(name, value)
    return model_server


def messages_sent(bodies: list[Any], corpus: Path | None = None) -> list[str]:
    """Each request's messages as canonical JSON, the corpus copy's folder written as the folder AgentV ran
    in (AgentV names some files by absolute path: an expected file's ``resolvedPath``)."""
    out = []
    for body in bodies:
        text = json.dumps(body.get("messages") if isinstance(body, dict) else None, sort_keys=True)
        if corpus is not None:
            text = text.replace(json.dumps(str(corpus))[1:-1], json.dumps(str(regenerate.WORK))[1:-1])
        out.append(text)
    return out


def judge_targets(folder: Path) -> Path:
    """A targets file naming the repository-root file's `openai` target as it is written there (for
    naming the judge with --targets/--judge-target where the root file itself cannot be read yet)."""
    path = folder / "judge-targets.yaml"
    path.write_text(
        "targets:\n  - name: openai\n    provider: openai\n    endpoint: ${{ OPENAI_ENDPOINT }}\n"
        "    api_key: ${{ OPENAI_API_KEY }}\n    model: ${{ OPENAI_MODEL }}\n",
        encoding="utf-8",
    )
    return path
