"""What AgentV 4.42.4's direct-API providers share (``llm-providers.ts``: ``invokePiAi`` over pi-ai), for the
``anthropic`` and ``gemini`` targets, each run with its ``replay/piai`` module: the chat prompt made into
pi-ai's context (one system prompt, user and assistant turns), the call under the retry policy
(``withRetry``), and the reply made into a :class:`TargetOutcome`. The target's fields (``piai/config.py``)
and each vendor's request and stream (``piai/anthropic.py``, ``piai/gemini.py``) are the judge's too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from evalstore.replay.bounded_http import Deadline, ReplyTooLarge, checked, current, deadline, deadline_client
from evalstore.replay.piai import sdk_retry
from evalstore.replay.piai.wire import CallFailed, LlmConfig, Reply, encode
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec, TargetStatus
from evalstore.replay.targets.chat_prompt import chat_prompt

DEFAULT_TIMEOUT_SECONDS = sdk_retry.TIMEOUT_SECONDS
"""The Anthropic SDK's own default request timeout (AgentV sets none; Google's client has none)."""
MAX_STREAM_BYTES = 64 * 1024 * 1024
"""Cap on a streamed answer's events: a cli agent's answer is capped at 50 MB, and the events that carry
one add their framing."""
ERROR_BODY_CHARS = 500


def run(vendor: ModuleType, request: RunRequest) -> TargetOutcome:
    """The ``anthropic`` or ``gemini`` target (``vendor``: its ``replay/piai`` module) asked one test."""
    cfg = vendor.config(request.spec, request.config)
    return streamed(request, cfg, vendor.build_request, vendor.read_stream, getattr(vendor, "SDK_RETRIES", False))


def validate(vendor: ModuleType, spec: TargetSpec, config: dict[str, Any], eval_dir: Path) -> None:
    """The target's fields checked as AgentV resolves them (``resolveAnthropicConfig``/``resolveGeminiConfig``)."""
    vendor.config(spec, config)


# -- the prompt -----------------------------------------------------------------------------------


def pi_context(request: RunRequest) -> tuple[str | None, list[dict[str, str]]]:
    """The test's chat prompt (``chat_prompt.py``) as pi-ai's context (``chatPromptToPiContext``): system
    turns joined by a blank line into the one system prompt, user and assistant turns kept."""
    system: list[str] = []
    turns: list[dict[str, str]] = []
    for message in chat_prompt(request.test.input, str(request.eval_dir)):
        role, content = message["role"], message["content"]
        if role == "system":
            system.append(content)
        elif role in ("user", "assistant"):
            turns.append({"role": role, "content": content})
        else:
            raise request.spec.fail(f"pi-ai adapter received unsupported message role '{role}'.")
    return ("\n\n".join(system) if system else None), turns


# -- the exchange ---------------------------------------------------------------------------------


def streamed(
    request: RunRequest,
    cfg: LlmConfig,
    build_request: Callable[[LlmConfig, str | None, list[dict[str, str]]], tuple[str, dict[str, str], Any]],
    read_stream: Callable[[Iterator[str]], Reply],
    sdk_retries: bool = False,
) -> TargetOutcome:
    """One streamed POST of a vendor's API (anthropic, gemini), sent and retried as pi-ai does: the body
    as ``JSON.stringify`` writes it, a non-2xx status or a transport error a failure. ``sdk_retries``: the
    vendor's SDK retries each request itself (Anthropic's; ``piai.sdk_retry``)."""
    system, turns = pi_context(request)
    url, headers, body = build_request(cfg, system, turns)
    payload = encode(body)

    def send(http: httpx.Client) -> Reply:
        try:
            with http.stream("POST", url, headers=headers, content=payload) as response:
                if not 200 <= response.status_code < 300:
                    raise failure(response)
                checked(response, current() or Deadline(request.timeout or DEFAULT_TIMEOUT_SECONDS), MAX_STREAM_BYTES)
                return read_stream(response.iter_lines())
        except httpx.HTTPError as exc:
            raise transport_failure(exc) from None
        except ReplyTooLarge as exc:
            raise CallFailed(f"pi-ai call failed: {exc}") from None

    return call(request.spec, cfg, request, send, sdk_retries)


def call(
    spec: TargetSpec,
    cfg: LlmConfig,
    request: RunRequest,
    send: Callable[[httpx.Client], Reply],
    sdk_retries: bool = False,
) -> TargetOutcome:
    """Call the vendor through ``send`` under AgentV's retry policy, and the reply as a target outcome:
    the text of the last answer, ``{input, output, cached?}`` usage, and pi-ai's cost from the model's
    prices (none when they are unknown)."""
    timeout = request.timeout or DEFAULT_TIMEOUT_SECONDS
    started_wall = datetime.now(UTC)
    started = time.monotonic()
    attempt = 0
    requests = 0

    def counted(http: httpx.Client) -> Reply:
        nonlocal requests
        requests += 1
        return send(http)

    # The timeout bounds each attempt whole, connect to last byte (``bounded_http``): httpx's own starts
    # again with every byte, and a server dripping its stream would hold the test for ever.
    with deadline_client(timeout=timeout) as http:
        while True:
            try:
                reply = _sent(http, counted, timeout, sdk_retries)
                break
            except CallFailed as exc:
                if not cfg.retry.retries(attempt, exc.status, exc.network):
                    status: TargetStatus = "timeout" if exc.timeout else "error"
                    tries = f" after {requests} requests" if requests > 1 else ""
                    return TargetOutcome(messages=[], status=status, error=f"target '{spec.name}'{tries}: {exc}")
                time.sleep(cfg.retry.delay(attempt))
                attempt += 1
    duration_ms = round((time.monotonic() - started) * 1000)
    usage: dict[str, Any] = {"input": reply.input, "output": reply.output}
    if reply.cache_read > 0:
        usage["cached"] = reply.cache_read
    # pi-ai's calculateCost, term by term in its order (the float sum AgentV reports).
    price = cfg.pi_model.cost
    parts = (reply.input, reply.output, reply.cache_read, reply.cache_write)
    cost = 0.0
    for rate, tokens in zip(price, parts, strict=True):
        cost += (rate / 1_000_000) * tokens
    from evalstore.replay.content import Message

    return TargetOutcome(
        messages=[Message(role="assistant", content=reply.text)],
        output_text=reply.text,
        token_usage=usage,
        cost_usd=cost if cost > 0 else None,
        duration_ms=duration_ms,
        start_time=_iso(started_wall),
        end_time=_iso(datetime.now(UTC)),
    )


def _sent(http: httpx.Client, send: Callable[[httpx.Client], Reply], timeout: float, sdk_retries: bool) -> Reply:
    """One request, each within ``timeout``; with ``sdk_retries``, sent again as the vendor's SDK sends it
    (``piai.sdk_retry``). A transport error the SDK gave up on is its "Connection error.", which AgentV's
    ``withRetry`` does not take for a network error: it is not retried there."""
    retried = 0
    while True:
        try:
            with deadline(timeout):
                return send(http)
        except CallFailed as exc:
            if not sdk_retries:
                raise
            unanswered = exc.network or exc.timeout  # else a refusal, or a stream pi-ai refused (not the SDK's)
            pause = sdk_retry.again(retried, exc.status, exc.headers) if unanswered or exc.status is not None else None
            if pause is None:
                exc.network = False
                raise
            time.sleep(pause)
            retried += 1


def failure(response: httpx.Response) -> CallFailed:
    """A non-2xx answer as pi-ai reports it (``HTTP <status> <body>``)."""
    body = response.read().decode("utf-8", errors="replace").strip()[:ERROR_BODY_CHARS]
    headers = {
        k: response.headers[k] for k in ("retry-after", "retry-after-ms", "x-should-retry") if k in response.headers
    }
    return CallFailed(
        f"pi-ai call failed: HTTP {response.status_code} {body}".rstrip(), response.status_code, headers=headers
    )


def transport_failure(exc: httpx.HTTPError) -> CallFailed:
    if isinstance(exc, httpx.TimeoutException):
        # AgentV's retry does not recognise the SDKs' "Request timed out." as a network error.
        return CallFailed(f"pi-ai call failed: timed out ({type(exc).__name__})", timeout=True)
    return CallFailed(f"pi-ai call failed: {type(exc).__name__}: {exc}", network=True)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
