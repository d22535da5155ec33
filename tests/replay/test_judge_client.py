"""The judge client and pool over real HTTP: retry rules, providers' URLs and headers, configuration."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest
from judge_server import JudgeServer, Reply, dropped, freeform, rate_limited, server_error

from evalstore.replay.errors import JudgeConfigError
from evalstore.replay.grading.judge import JudgeClient, JudgePool, JudgeTarget, RetryPolicy
from evalstore.replay.grading.judge.client import _retry_after
from evalstore.replay.targetsfile.loader import load_targets_file

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


def client(retries: int = 2, sleeps: list[float] | None = None) -> tuple[JudgeClient, httpx.Client]:
    http = httpx.Client()
    record = sleeps.append if sleeps is not None else (lambda _s: None)
    return JudgeClient(http, threading.BoundedSemaphore(4), RetryPolicy(max_retries=retries, backoff=0.5), record), http


def judge(server: JudgeServer, **fields) -> JudgeTarget:
    values = {"name": "j", "provider": "openai-compatible", "base_url": server.base_url, "model": "m", "timeout": 2.0}
    values.update(fields)
    return JudgeTarget(**values)


def test_retry_after_accepts_seconds_and_http_dates():
    assert _retry_after("3") == 3.0
    assert _retry_after("0.5") == 0.5
    assert _retry_after(None) is None and _retry_after("soon") is None
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 28 <= _retry_after(when) <= 30


def test_backoff_grows_and_retry_after_wins_but_is_capped(judge_server: JudgeServer):
    judge_server.script(server_error(), server_error(), rate_limited("120"), freeform(1.0))
    sleeps: list[float] = []
    c, http = client(retries=3, sleeps=sleeps)
    with http:
        exchanges = c.complete(judge(judge_server).resolve({}), MESSAGES)
    assert [e.outcome for e in exchanges] == ["error", "error", "error", "ok"]
    assert 0.375 <= sleeps[0] <= 0.5 and 0.75 <= sleeps[1] <= 1.0  # 0.5 s, then doubled, with jitter
    assert sleeps[2] == RetryPolicy().max_delay  # Retry-After: 120 capped at 30 s
    assert exchanges[-1].content == '{"score": 1.0, "assertions": []}'


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_are_not_retried(judge_server: JudgeServer, status: int):
    judge_server.script(Reply(status=status, body=b'{"error":"no"}'), freeform(1.0))
    c, http = client()
    with http:
        exchanges = c.complete(judge(judge_server).resolve({}), MESSAGES)
    assert [(e.outcome, e.status) for e in exchanges] == [("error", status)]
    assert len(judge_server.requests) == 1


def test_a_dropped_connection_is_retried(judge_server: JudgeServer):
    judge_server.script(dropped(), freeform(0.5))
    c, http = client()
    with http:
        exchanges = c.complete(judge(judge_server).resolve({}), MESSAGES)
    assert [e.outcome for e in exchanges] == ["error", "ok"]
    assert exchanges[0].status is None and exchanges[0].error.startswith("connection failed")


def test_request_body_carries_model_messages_and_parameters(judge_server: JudgeServer):
    target = judge(
        judge_server, temperature=0.2, max_tokens=64, extra={"seed": 7, "response_format": {"type": "json_object"}}
    )
    c, http = client()
    with http:
        c.complete(target.resolve({}), MESSAGES)
    body = judge_server.requests[0].body
    assert body == {
        "model": "m",
        "messages": MESSAGES,
        "temperature": 0.2,
        "max_tokens": 64,
        "seed": 7,
        "response_format": {"type": "json_object"},
    }
    assert "authorization" not in judge_server.requests[0].headers  # no api_key_env: no credentials


def test_azure_uses_the_deployment_url_api_version_and_api_key_header(judge_server: JudgeServer, tmp_path: Path):
    root = judge_server.base_url.removesuffix("/v1")
    targets = tmp_path / "targets.yaml"
    targets.write_text(
        "targets:\n"
        "  - name: az\n"
        "    provider: azure\n"
        "    endpoint: ${{ AZ_ENDPOINT }}\n"
        "    api_key: ${{ AZ_KEY }}\n"
        "    deployment: gpt-4o-judge\n"
        "    version: 2024-10-21\n",
        encoding="utf-8",
    )
    env = {"AZ_ENDPOINT": root, "AZ_KEY": "azure-secret"}
    with JudgePool.from_targets_file(load_targets_file(targets), env=env) as pool:
        resolved = pool.resolve(pool.target(grader_target="az"))
        pool.client.complete(resolved, MESSAGES)
    (request,) = judge_server.requests
    assert request.path == "/openai/deployments/gpt-4o-judge/chat/completions?api-version=2024-10-21"
    assert request.headers["api-key"] == "azure-secret" and "authorization" not in request.headers
    assert pool.targets["az"].redacted()["base_url"] == "${{ AZ_ENDPOINT }}"


def test_openai_provider_defaults_to_the_public_endpoint(tmp_path: Path):
    targets = tmp_path / "targets.yaml"
    targets.write_text(
        "targets:\n  - name: gpt\n    provider: openai\n    model: gpt-4.1-mini\n    api_key: ${{ OPENAI_API_KEY }}\n",
        encoding="utf-8",
    )
    target = JudgeTarget.from_entry(load_targets_file(targets).get("gpt"))
    resolved = target.resolve({"OPENAI_API_KEY": "k"})
    assert resolved.url == "https://api.openai.com/v1/chat/completions"
    assert resolved.headers["Authorization"] == "Bearer k"
    assert target.api_key_env == "OPENAI_API_KEY"


def test_from_entry_refuses_literal_keys_and_providers_that_cannot_grade(tmp_path: Path):
    targets = tmp_path / "targets.yaml"
    targets.write_text(
        "targets:\n"
        "  - name: literal\n    provider: openai\n    model: m\n    api_key: sk-live-123\n"
        "  - name: agent\n    provider: codex\n",
        encoding="utf-8",
    )
    loaded = load_targets_file(targets)
    with pytest.raises(
        JudgeConfigError, match=r"targets.yaml:2: target 'literal': field 'api_key' holds a literal key"
    ):
        JudgeTarget.from_entry(loaded.get("literal"))
    with pytest.raises(JudgeConfigError, match=r"provider 'codex' cannot grade"):
        JudgeTarget.from_entry(loaded.get("agent"))


def test_pool_uses_the_run_targets_grader_target(judge_server: JudgeServer, tmp_path: Path):
    targets = tmp_path / "targets.yaml"
    targets.write_text(
        "targets:\n"
        "  - name: agent\n    provider: codex\n    grader_target: judge-a\n"
        "  - name: judge-a\n    provider: openai-compatible\n    base_url: ${{ JUDGE_URL }}\n    model: model-a\n"
        "  - name: judge-b\n    provider: openai-compatible\n    base_url: ${{ JUDGE_URL }}\n    model: model-b\n",
        encoding="utf-8",
    )
    with JudgePool.from_targets_file(load_targets_file(targets), env={"JUDGE_URL": judge_server.base_url}) as pool:
        assert pool.target(run_target="agent").name == "judge-a"
        assert pool.target(run_target="agent", grader_target="judge-b").name == "judge-b"
        assert pool.target(run_target="agent", grader_target="judge-b", override_target="judge-a").name == "judge-a"
        with pytest.raises(JudgeConfigError, match="no judge target chosen"):
            pool.target(run_target="unknown")


def test_from_env_configures_the_quickstart_judge(judge_server: JudgeServer):
    env = {
        "EVALSTORE_JUDGE_BASE_URL": judge_server.base_url,
        "EVALSTORE_JUDGE_MODEL": "quick-model",
        "EVALSTORE_JUDGE_API_KEY_ENV": "QUICK_KEY",
        "EVALSTORE_JUDGE_CONCURRENCY": "3",
        "QUICK_KEY": "quick-secret",
    }
    with JudgePool.from_env(env) as pool:
        assert pool.concurrency == 3
        target = pool.target()
        assert (target.name, target.model, target.api_key_env) == ("judge", "quick-model", "QUICK_KEY")
        pool.client.complete(pool.resolve(target), MESSAGES)
    assert judge_server.requests[0].headers["authorization"] == "Bearer quick-secret"
    assert "quick-secret" not in str(target.redacted())

    with JudgePool.from_env({}) as empty:
        assert empty.targets == {}
        with pytest.raises(JudgeConfigError, match="EVALSTORE_JUDGE_BASE_URL"):
            empty.target()
    with pytest.raises(JudgeConfigError, match="EVALSTORE_JUDGE_CONCURRENCY must be a number"):
        JudgePool.from_env({"EVALSTORE_JUDGE_CONCURRENCY": "many"})


def test_a_literal_key_in_a_judge_url_or_parameters_is_not_in_what_is_stored() -> None:
    target = JudgeTarget(
        name="j",
        provider="openai-compatible",
        model="m",
        base_url="https://gw.example/v1?api_key=sk-live-URLKEY0123456789abcdef",
        extra={"seed": 7, "metadata": {"token": "tok-literal-ABCDEF0123456789abcdef"}},
    )
    stored = str(target.redacted())
    assert "sk-live-URLKEY0123456789abcdef" not in stored and "tok-literal-ABCDEF0123456789abcdef" not in stored
    assert target.redacted()["model"] == "m" and target.redacted()["extra"]["seed"] == 7
    assert target.base_url.endswith("abcdef")  # the request itself still uses the real URL


def test_a_pool_makes_its_http_client_on_the_first_judge_call_only() -> None:
    # A replay of code graders, or one whose judge replies are all reused, never calls a judge: building
    # httpx and its HTTP transport (httpcore; 0.1-0.2 s together) wait until a call needs them.
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from evalstore.replay.grading.judge.pool import JudgePool\n"
        "pool = JudgePool.from_env({})\n"
        "pool.close()\n"
        "print('httpx' in sys.modules, 'httpcore' in sys.modules)\n"
        "pool = JudgePool.from_env({})\n"
        "assert pool.client is pool.client\n"
        "pool.close()\n"
        "print('httpx' in sys.modules, 'httpcore' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "True", "True"]
