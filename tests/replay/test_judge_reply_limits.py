"""A judge's reply is read within the judge's timeout, connect to last byte, and up to a cap: a judge that
drips a byte at a time is cut at its timeout, one that sends a huge body is refused without it being read
(``replay/bounded_http.py``); the batch APIs' calls alike."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx
import pytest
from judge_server import JudgeServer, drip, freeform, huge_body

from evalstore.replay.bounded_http import has_deadlines
from evalstore.replay.errors import ReplayError
from evalstore.replay.grading.judge import JudgeClient, JudgePool, JudgeTarget, RetryPolicy
from evalstore.replay.grading.judge.batch_apis import BatchAPIError, _Calls
from evalstore.replay.reply_cap import DEFAULT_MAX_REPLY_BYTES, MAX_REPLY_BYTES_ENV
from evalstore.replay.targetsfile.loader import load_targets_file

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
MIB = 1024 * 1024


def openai_judge(server: JudgeServer, timeout: float) -> JudgeTarget:
    return JudgeTarget("judge", "openai-compatible", server.base_url, "m", timeout=timeout)


def anthropic_pool(server: JudgeServer, folder: Path, timeout: float, **kwargs) -> JudgePool:
    """A judge on the ``anthropic`` provider (pi-ai's streamed request) on the test server."""
    path = folder / "targets.yaml"
    root = server.base_url.removesuffix("/v1")
    path.write_text(
        "targets:\n  - name: judge\n    provider: anthropic\n"
        f"    base_url: {root}\n    model: ${{{{ JUDGE_MODEL }}}}\n    api_key: ${{{{ JUDGE_KEY }}}}\n"
        f"    timeout_seconds: {timeout}\n",
        encoding="utf-8",
    )
    env = {**os.environ, "JUDGE_KEY": "k", "JUDGE_MODEL": "claude-haiku-4-5"}
    return JudgePool.from_targets_file(load_targets_file(path), default="judge", env=env, **kwargs)


def ask(pool: JudgePool, target: JudgeTarget | None = None) -> tuple[list, float]:
    judge = (target or pool.targets.get("judge") or pool.target()).resolve(pool.env)
    start = time.monotonic()
    exchanges = pool.client.complete(judge, MESSAGES)
    return exchanges, time.monotonic() - start


@pytest.mark.parametrize("provider", ["openai-compatible", "anthropic"])
def test_a_dripping_judge_is_cut_at_its_timeout_and_retried(judge_server: JudgeServer, tmp_path: Path, provider: str):
    """Headers at once, then a byte every 0.1 s for 30 s: httpx's read timeout never fires; the deadline does."""
    judge_server.script(drip(0.1), freeform(1.0))
    retry = RetryPolicy(max_retries=1, backoff=0.01)
    if provider == "anthropic":
        pool = anthropic_pool(judge_server, tmp_path, 0.5, retry=retry)
    else:
        pool = JudgePool({"judge": openai_judge(judge_server, 0.5)}, default="judge", retry=retry)
    with pool:
        exchanges, took = ask(pool)
    assert took < 5.0
    assert [e.outcome for e in exchanges] == ["timeout", "ok"]
    assert exchanges[0].error.startswith("timed out after 0.5s")
    assert exchanges[0].latency_ms < 1500


def test_the_deadline_holds_between_chunks_on_any_transport(judge_server: JudgeServer):
    """A client given a plain transport (no deadline on each read) still stops within one read of it."""
    judge_server.script(drip(0.1))
    client = JudgeClient(httpx.Client(), threading.BoundedSemaphore(1), RetryPolicy(max_retries=0))
    start = time.monotonic()
    [exchange] = client.complete(openai_judge(judge_server, 0.5).resolve({}), MESSAGES)
    assert time.monotonic() - start < 2.0
    assert exchange.outcome == "timeout" and exchange.error.startswith("timed out after 0.5s")


def test_the_pool_s_transport_bounds_every_network_wait(monkeypatch: pytest.MonkeyPatch):
    """Where httpx moved what ``deadline_client`` sets, this fails instead of the deadline quietly
    holding only between chunks."""
    pool = JudgePool({"judge": JudgeTarget("judge", "openai-compatible", "http://127.0.0.1:9/v1", "m")})
    with pool:
        assert has_deadlines(pool.client._http._transport)


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "until-close"])
@pytest.mark.parametrize("provider", ["openai-compatible", "anthropic"])
def test_a_huge_reply_is_refused_unread_and_not_retried(
    judge_server: JudgeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: bool, provider: str
):
    monkeypatch.setenv(MAX_REPLY_BYTES_ENV, str(MIB))
    judge_server.script(huge_body(1024 * MIB, declared=declared), freeform(1.0))
    retry = RetryPolicy(max_retries=2, backoff=0.01)
    if provider == "anthropic":
        pool = anthropic_pool(judge_server, tmp_path, 30.0, retry=retry)
    else:
        pool = JudgePool({"judge": openai_judge(judge_server, 30.0)}, default="judge", retry=retry)
    with pool:
        exchanges, took = ask(pool)
    assert took < 10.0
    [exchange] = exchanges  # the same request would get the same reply
    assert (exchange.outcome, exchange.status, exchange.body) == ("error", 200, None)
    assert exchange.error.startswith("HTTP 200 from judge 'judge': the reply ")
    assert f"more than the {MIB} bytes read ({MAX_REPLY_BYTES_ENV} raises the cap)" in exchange.error
    assert len(judge_server.requests) == 1
    time.sleep(0.2)
    assert judge_server.body_bytes_sent < 64 * MIB  # the client hung up; a declared size was not even read


def test_the_cap_s_setting_is_checked_before_any_call():
    target = JudgeTarget("judge", "openai-compatible", "http://127.0.0.1:9/v1", "m")
    with pytest.raises(ReplayError, match=rf"{MAX_REPLY_BYTES_ENV}='lots': give the largest reply"):
        JudgePool({"judge": target}, env={MAX_REPLY_BYTES_ENV: "lots"})
    assert JudgePool({"judge": target}, env={}).max_reply == DEFAULT_MAX_REPLY_BYTES == 16 * MIB


def test_a_batch_api_call_is_cut_at_its_deadline_and_its_answer_capped(
    judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("evalstore.replay.grading.judge.batch_apis.CALL_TIMEOUT", 0.5)
    monkeypatch.setenv(MAX_REPLY_BYTES_ENV, str(MIB))
    judge = openai_judge(judge_server, 2.0).resolve({})
    url = judge_server.base_url + "/chat/completions"
    with httpx.Client() as http:
        calls = _Calls(http, judge, {})
        judge_server.script(drip(0.1))
        start = time.monotonic()
        with pytest.raises(BatchAPIError, match=r"judge target 'judge': reading a batch timed out after 0.5s"):
            calls.json("POST", url, "reading a batch", json={"messages": MESSAGES})
        assert time.monotonic() - start < 2.0
        judge_server.script(huge_body(1024 * MIB))
        with pytest.raises(BatchAPIError, match=r"reading a batch: the reply declares 1073741824 bytes, more than"):
            calls.json("POST", url, "reading a batch", json={"messages": MESSAGES})


def test_a_judge_behind_a_proxy_is_reached_through_it_within_the_deadline(
    judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
):
    """Giving httpx a transport of its own turns its proxies off: every judge call ignored ``HTTPS_PROXY``,
    and a user behind one could reach no judge. The client keeps httpx's proxies from the environment, and
    the proxy's connections wait within the deadline too (the test server answers as the proxy would)."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", judge_server.base_url.removesuffix("/v1"))
    behind = JudgeTarget("judge", "openai-compatible", "http://judge.invalid/v1", "m", timeout=0.5)
    judge_server.script(freeform(0.75), drip(0.1))
    pool = JudgePool({"judge": behind}, default="judge", retry=RetryPolicy(max_retries=0))
    with pool:
        assert all(has_deadlines(t) for t in pool.client._http._mounts.values() if t is not None)
        [answered], _ = ask(pool)
        [dripped], took = ask(pool)
    assert answered.outcome == "ok"
    assert judge_server.requests[0].path == "http://judge.invalid/v1/chat/completions"
    assert dripped.outcome == "timeout" and took < 2.0


def test_a_proxy_variable_that_is_no_url_is_named(monkeypatch: pytest.MonkeyPatch):
    """Keeping httpx's proxies, a bad ``HTTP_PROXY`` now reaches every client: its error names the variables
    to look at, instead of httpx's bare ``Invalid port``."""
    from evalstore.replay.bounded_http import deadline_client

    monkeypatch.setenv("HTTP_PROXY", "::garbage")
    with pytest.raises(httpx.InvalidURL, match=r"proxy the environment names \(HTTPS_PROXY, HTTP_PROXY, ALL_PROXY\)"):
        deadline_client()
