"""The ``anthropic`` and ``gemini`` targets against a fake of each vendor's HTTP API on 127.0.0.1
(``tests/vendor_server.py``): the request equals, byte for byte, the one AgentV 4.42.4's own provider sent
to the same server (``tests/fixtures/agentv-vendor-requests``, written by its ``capture.py``), and the
answer, usage and cost equal AgentV's ``ProviderResponse``; errors, retries and bad configuration."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vendor_server import VendorReply, VendorServer

from evalstore.replay.content import Message
from evalstore.replay.errors import TargetConfigError
from evalstore.replay.evalfile.specs import EvalTest
from evalstore.replay.targets import check_target, run_target

CAPTURED = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "agentv-vendor-requests" / "requests.json").read_text("utf-8")
)
KEYS = {"anthropic": "sk-ant-fake-key", "gemini": "AIza-fake-key"}


@pytest.fixture
def vendor() -> Iterator[VendorServer]:
    with VendorServer() as server:
        yield server


def target(provider: str, server: VendorServer, **fields: Any) -> dict[str, Any]:
    base = server.url if provider == "anthropic" else server.url + "/v1beta"
    return {
        "name": "t",
        "provider": provider,
        "api_key": "${{ EVALSTORE_TEST_VENDOR_KEY }}",
        "base_url": base,
        **fields,
    }


def a_test(messages: list[dict[str, Any]]) -> EvalTest:
    return EvalTest(id="t1", input=[Message.model_validate(m) for m in messages])


@pytest.mark.parametrize("scenario", CAPTURED["scenarios"], ids=lambda s: s["name"])
def test_the_request_and_the_answer_are_agentvs(scenario, vendor, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EVALSTORE_TEST_VENDOR_KEY", KEYS[scenario["provider"]])
    for name, value in scenario["env"].items():
        monkeypatch.setenv(name, value)
    vendor.script(VendorReply(text=CAPTURED["reply"]["text"], usage=CAPTURED["reply"]["usage"]))
    outcome = run_target(
        target(scenario["provider"], vendor, **scenario["target"]),
        a_test(scenario["input"]),
        workspace=tmp_path / "ws",
        eval_dir=tmp_path,
    )
    assert outcome.status == "ok", outcome.error
    [request] = vendor.requests
    expected = scenario["request"]
    assert request.path == expected["path"]
    assert request.raw.decode("utf-8") == expected["body"]
    sent = {k: v for k, v in request.headers.items() if k in expected["headers"] or k.startswith(("x-", "anthropic"))}
    assert sent == expected["headers"]
    response = scenario["response"]
    assert [m.model_dump(exclude_none=True) for m in outcome.messages] == response["output"]
    assert outcome.output_text == response["output"][-1]["content"]
    assert outcome.token_usage == response["tokenUsage"]
    assert outcome.cost_usd == response["costUsd"]
    assert outcome.duration_ms is not None and outcome.start_time and outcome.end_time


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_a_streamed_answer_is_joined_and_an_unknown_model_has_no_price(provider, vendor, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EVALSTORE_TEST_VENDOR_KEY", "k")
    monkeypatch.setenv("EVALSTORE_TEST_MODEL", "unknown-model")  # not in pi-ai's table: its fallback descriptor
    vendor.script(VendorReply(chunks=("one ", "two ", "three"), usage={"input": 5, "output": 3}))
    outcome = run_target(
        target(provider, vendor, model="${{ EVALSTORE_TEST_MODEL }}"),
        a_test([{"role": "user", "content": "count"}]),
        workspace=tmp_path / "ws",
        eval_dir=tmp_path,
    )
    assert outcome.status == "ok", outcome.error
    assert outcome.output_text == "one two three"
    assert outcome.token_usage == {"input": 5, "output": 3}
    assert outcome.cost_usd is None
    if provider == "anthropic":
        assert vendor.requests[0].body["max_tokens"] == 16384 // 3


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_retryable_statuses_are_retried_and_others_are_not(provider, vendor, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EVALSTORE_TEST_VENDOR_KEY", "k")
    monkeypatch.setenv("EVALSTORE_TEST_MODEL", "claude-haiku-4-5")
    fields = {"model": "${{ EVALSTORE_TEST_MODEL }}", "retry_initial_delay_ms": 1, "max_retries": 2}
    vendor.script(VendorReply(status=503), VendorReply(status=429), VendorReply(text="finally"))
    outcome = run_target(
        target(provider, vendor, **fields),
        a_test([{"role": "user", "content": "q"}]),
        workspace=tmp_path,
        eval_dir=tmp_path,
    )
    assert outcome.status == "ok" and outcome.output_text == "finally"
    assert len(vendor.requests) == 3  # Anthropic's SDK retried both; for Gemini, AgentV's withRetry did

    vendor.requests.clear()
    vendor.script(VendorReply(status=401, body=b'{"error":{"message":"bad key"}}'), VendorReply(text="never"))
    outcome = run_target(
        target(provider, vendor, **fields),
        a_test([{"role": "user", "content": "q"}]),
        workspace=tmp_path,
        eval_dir=tmp_path,
    )
    assert outcome.status == "error" and len(vendor.requests) == 1
    assert outcome.error == 'target \'t\': pi-ai call failed: HTTP 401 {"error":{"message":"bad key"}}'

    vendor.requests.clear()
    vendor.script(VendorReply(status=500))
    outcome = run_target(
        target(provider, vendor, **fields),
        a_test([{"role": "user", "content": "q"}]),
        workspace=tmp_path,
        eval_dir=tmp_path,
    )
    # withRetry's three attempts (max_retries: 2); Anthropic's SDK sends each three times (pi-ai's Google client
    # does not retry).
    sent = 9 if provider == "anthropic" else 3
    assert outcome.status == "error" and len(vendor.requests) == sent
    assert outcome.error is not None and outcome.error.startswith(
        f"target 't' after {sent} requests: pi-ai call failed: HTTP 500"
    )


@pytest.mark.parametrize(("provider", "stop"), [("anthropic", "refusal"), ("gemini", "SAFETY")])
def test_a_refused_answer_is_an_error(provider, stop, vendor, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EVALSTORE_TEST_VENDOR_KEY", "k")
    monkeypatch.setenv("EVALSTORE_TEST_MODEL", "claude-haiku-4-5")
    vendor.script(VendorReply(stop=stop))
    outcome = run_target(
        target(provider, vendor, model="${{ EVALSTORE_TEST_MODEL }}"),
        a_test([{"role": "user", "content": "q"}]),
        workspace=tmp_path,
        eval_dir=tmp_path,
    )
    assert outcome.status == "error" and outcome.error == "target 't': pi-ai call failed: An unknown error occurred"


def test_the_key_never_reaches_the_stored_error(vendor, tmp_path, monkeypatch) -> None:
    secret = "sk-ant-api03-canary-abcdefghijklmnop"
    monkeypatch.setenv("EVALSTORE_TEST_VENDOR_KEY", secret)
    monkeypatch.setenv("EVALSTORE_TEST_MODEL", "claude-haiku-4-5")
    vendor.script(VendorReply(status=400, body=f'{{"error":"bad key {secret}"}}'.encode()))
    outcome = run_target(
        target("anthropic", vendor, model="${{ EVALSTORE_TEST_MODEL }}"),
        a_test([{"role": "user", "content": "q"}]),
        workspace=tmp_path,
        eval_dir=tmp_path,
    )
    assert outcome.status == "error" and secret not in (outcome.error or "")
    assert "${{ EVALSTORE_TEST_VENDOR_KEY }}" in (outcome.error or "")


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"provider": "anthropic", "api_key": "sk-ant-literal", "model": "${{ M }}"}, "t Anthropic api key must use"),
        ({"provider": "anthropic", "api_key": "${{ K }}"}, "t Anthropic model is required"),
        ({"provider": "anthropic", "api_key": "${{ K }}", "model": "claude-haiku-4-5"}, "t Anthropic model must use"),
        (
            {"provider": "anthropic", "api_key": "${{ K }}", "model": "${{ M }}"},
            "pi-ai adapter cannot resolve a baseUrl",
        ),
        (
            {"provider": "anthropic", "api_key": "${{ EMPTY }}", "model": "${{ M }}"},
            "'EMPTY' required for t Anthropic api key is empty",
        ),
        ({"provider": "gemini", "model": "gemini-2.5-flash"}, "t Google API key is required"),
        ({"provider": "google", "api_key": "${{ K }}", "temperature": "warm"}, "t temperature must be a number"),
    ],
)
def test_bad_configuration_is_refused_before_the_run(fields, reason, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("K", "key")
    monkeypatch.setenv("M", "not-a-pi-ai-model")
    monkeypatch.setenv("EMPTY", "")
    with pytest.raises(TargetConfigError) as info:
        check_target({"name": "t", **fields}, eval_dir=tmp_path)
    assert reason in str(info.value) and "\n" not in str(info.value)


def test_gemini_defaults_its_model_and_pi_ais_base_url(tmp_path, monkeypatch) -> None:
    from evalstore.replay.piai import gemini

    monkeypatch.setenv("K", "key")
    spec = check_target({"name": "t", "provider": "google-gemini", "api_key": "${{ K }}"}, eval_dir=tmp_path)
    cfg = gemini.config(spec, {"api_key": "key"})
    url, _, _ = gemini.build_request(cfg, None, [{"role": "user", "content": "q"}])
    assert (
        url == "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_an_endpoint_that_drips_its_stream_is_cut_at_the_timeout(provider, tmp_path, monkeypatch) -> None:
    """Headers, then a byte every 0.1 s for a minute: each read gets one, so httpx's own timeout never
    fires; the target's timeout bounds the call whole."""
    import socket
    import threading
    import time

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
            for _ in range(600):
                if stop.wait(0.1):
                    return
                try:
                    conn.sendall(b":\n")
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    monkeypatch.setenv("EVALSTORE_TEST_VENDOR_KEY", "k")
    monkeypatch.setenv("EVALSTORE_TEST_MODEL", "claude-haiku-4-5" if provider == "anthropic" else "gemini-2.5-flash")
    fields = {"name": "t", "provider": provider, "api_key": "${{ EVALSTORE_TEST_VENDOR_KEY }}"}
    fields["model"] = "${{ EVALSTORE_TEST_MODEL }}"
    fields["base_url"] = url if provider == "anthropic" else url + "/v1beta"
    started = time.monotonic()
    try:
        outcome = run_target(
            fields, a_test([{"role": "user", "content": "q"}]), workspace=tmp_path, eval_dir=tmp_path, timeout=1.0
        )
    finally:
        stop.set()
        listener.close()
    assert outcome.status == "timeout", outcome.error
    assert time.monotonic() - started < 15
