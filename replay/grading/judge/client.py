"""The judge client: one request, retried on the failures that are worth retrying. Chat Completions for most
judges; for a provider AgentV asks through pi-ai (``anthropic``, ``gemini``), the streamed request pi-ai
sends (``replay/piai/``), its reply read as pi-ai reads it.

Each request runs under the judge's ``timeout`` as a deadline for the whole exchange, connect to last byte (a
judge sending a byte a second is cut there), and its reply is read up to ``EVALSTORE_MAX_REPLY_BYTES``
(``replay/bounded_http.py``): a longer one is an error, the reply not kept.

Retried: HTTP 429 (waiting as long as ``Retry-After`` asks, within a cap), 408 and 5xx, timeouts and
dropped connections, up to ``RetryPolicy.max_retries`` times with exponential backoff. Not retried:
other 4xx (a bad key or a bad request will not get better), and a reply too large (the same request would
get it again). Every HTTP exchange is returned as a
:class:`Exchange` so the caller can record each one; nothing here raises for a failed call.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Any, Literal

import httpx

from evalstore.replay.bounded_http import ReplyTooLarge, checked, deadline, read_bounded
from evalstore.replay.grading.judge.targets import ResolvedJudge, pi_vendor
from evalstore.replay.piai.wire import DEFAULT_SYSTEM_PROMPT, encode
from evalstore.replay.reply_cap import max_reply_bytes
from evalstore.replay.targetsfile.redaction import SecretMask

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    """Retries after the first request; 3 means at most 4 requests per call."""
    backoff: float = 0.5
    """Delay before the first retry, doubled for each further one (with jitter)."""
    max_delay: float = 30.0
    """Cap on any single wait, ``Retry-After`` included."""


@dataclass(frozen=True)
class Exchange:
    """One HTTP request to the judge and what came back."""

    outcome: Literal["ok", "error", "timeout"]
    """``ok``: HTTP 200 received (its body may still be unusable); else the transport or HTTP failure."""
    latency_ms: float
    status: int | None = None
    body: bytes | None = None
    content: str | None = None
    """The assistant message content, when the body is a Chat Completions response."""
    usage: dict[str, Any] | None = None
    error: str | None = None
    retry_after: float | None = None
    retry_headers: Mapping[str, str] = field(default_factory=dict)
    """A refusal's headers that say whether and when to ask again (``Retry-After``, ``retry-after-ms``,
    ``x-should-retry``), names lower-cased: what the vendors' SDKs read (``piai.sdk_retry``)."""


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _read_reply(body: bytes) -> tuple[str | None, dict[str, Any] | None]:
    """(assistant content, usage) from a Chat Completions body; (None, None) if it is not one."""
    try:
        data = json.loads(body)
    except ValueError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None, usage
    return (content if isinstance(content, str) else None), usage


class JudgeClient:
    """Sends Chat Completions requests through one shared ``httpx.Client`` under a concurrency limit."""

    def __init__(
        self,
        http: httpx.Client,
        limit: threading.BoundedSemaphore,
        retry: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] = time.sleep,
        *,
        references: Mapping[str, str] | None = None,
        max_reply: int | None = None,
    ) -> None:
        """Every exchange is masked before it is returned; ``references`` (variable name to value) are
        shown as their ``${{ NAME }}`` reference (the openai target's), every other credential form as
        ``REDACTED``. ``max_reply``: the largest reply body read (default ``EVALSTORE_MAX_REPLY_BYTES``'s)."""
        self._http = http
        self._max_reply = max_reply_bytes() if max_reply is None else max_reply
        self._references = dict(references or {})
        self._limit = limit
        self._retry = retry
        self._sleep = sleep

    def complete(self, judge: ResolvedJudge, messages: list[dict[str, Any]]) -> list[Exchange]:
        """Every exchange made for this request; it succeeded iff the last one is ``ok``."""
        send = self._sender(judge, messages)
        exchanges: list[Exchange] = []
        for retry in range(self._retry.max_retries + 1):
            if retry:
                if exchanges[-1].outcome == "timeout":
                    # Each such attempt waited the whole timeout: say so, or a hung judge is minutes of silence.
                    _log.warning(
                        "judge %r: %s; trying again (%d of %d)",
                        judge.target,
                        exchanges[-1].error,
                        retry + 1,
                        self._retry.max_retries + 1,
                    )
                self._sleep(self._delay(retry, exchanges[-1].retry_after))
            exchange = send()
            exchanges.append(exchange)
            if exchange.outcome == "ok" or not self._retryable(exchange):
                break
        return exchanges

    def exchange(self, judge: ResolvedJudge, messages: list[dict[str, Any]]) -> Exchange:
        """One request, not retried: for a caller that retries as someone else does (the ``openai`` target,
        as AgentV's provider and its SDK do)."""
        return self._sender(judge, messages)()

    def _sender(self, judge: ResolvedJudge, messages: list[dict[str, Any]]) -> Callable[[], Exchange]:
        """Sends the request once and returns what came back, masked."""
        send: Callable[[], Exchange]
        if judge.llm is not None:
            url, headers, body = pi_request(judge, messages)
            send = partial(self._send_streamed, judge, url, headers, encode(body))
        else:
            send = partial(self._send, judge, {"model": judge.model, "messages": messages, **judge.parameters})
        mask = exchange_mask(judge, self._references)
        return lambda: _masked(send(), mask)

    def _delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._retry.max_delay)
        backoff = self._retry.backoff * (2 ** (retry - 1))
        return min(self._retry.max_delay, backoff * random.uniform(0.75, 1.0))

    @staticmethod
    def _retryable(exchange: Exchange) -> bool:
        if exchange.outcome == "error" and exchange.status == 200:
            return False  # a reply that came whole but too large, or a stream pi-ai refused
        if exchange.status is None:
            return True  # timeout or dropped connection
        return exchange.status in (408, 429) or exchange.status >= 500

    def _send(self, judge: ResolvedJudge, payload: dict[str, Any]) -> Exchange:
        with self._limit:
            start = time.perf_counter()
            try:
                with (
                    deadline(judge.timeout) as limit,
                    self._http.stream(
                        "POST", judge.url, json=payload, headers=judge.headers, timeout=judge.timeout
                    ) as response,
                ):
                    try:
                        body = read_bounded(response, limit, self._max_reply)
                    except ReplyTooLarge as exc:
                        return _too_large(judge, response.status_code, exc, start)
            except httpx.TransportError as exc:
                return _unreached(judge, exc, start)
            latency = _ms(start)
        if response.status_code != 200:
            return _refused(judge, response, latency, body)
        content, usage = _read_reply(body)
        return Exchange("ok", latency, status=200, body=body, content=content, usage=usage)

    def _send_streamed(self, judge: ResolvedJudge, url: str, headers: dict[str, str], payload: bytes) -> Exchange:
        """One streamed request as pi-ai sends it; the reply's text and usage as pi-ai reads them."""
        from evalstore.replay.piai.wire import CallFailed

        vendor = pi_vendor(judge.provider)
        received: list[str] = []
        cap = self._max_reply

        def lines(response: httpx.Response) -> Iterator[str]:
            size = 0
            for line in response.iter_lines():
                size += len(line) + 1  # decoded text: a small compressed body may inflate past the cap
                if size > cap:
                    raise ReplyTooLarge(cap)
                received.append(line)
                yield line

        with self._limit:
            start = time.perf_counter()
            try:
                with (
                    deadline(judge.timeout) as limit,
                    self._http.stream("POST", url, headers=headers, content=payload, timeout=judge.timeout) as response,
                ):
                    try:
                        if response.status_code != 200:
                            return _refused(judge, response, _ms(start), read_bounded(response, limit, cap))
                        checked(response, limit, cap)
                        reply = vendor.read_stream(lines(response))
                    except ReplyTooLarge as exc:
                        return _too_large(judge, response.status_code, exc, start)
                    except CallFailed as exc:
                        body = "\n".join(received).encode("utf-8")
                        return Exchange("error", _ms(start), status=200, body=body, error=str(exc))
            except httpx.TransportError as exc:
                return _unreached(judge, exc, start)
            latency = _ms(start)
        body = "\n".join(received).encode("utf-8")
        return Exchange("ok", latency, 200, body, reply.text, chat_usage(reply.input, reply.output))


def _unreached(judge: ResolvedJudge, exc: httpx.TransportError, start: float) -> Exchange:
    """A request that got no reply: a timeout (``httpx.TimeoutException`` is a ``TransportError``) or a
    connection that failed or dropped."""
    if isinstance(exc, httpx.TimeoutException):
        return Exchange("timeout", _ms(start), error=f"timed out after {judge.timeout:g}s ({type(exc).__name__})")
    return Exchange("error", _ms(start), error=f"connection failed: {type(exc).__name__}: {exc}")


def _too_large(judge: ResolvedJudge, status: int, exc: ReplyTooLarge, start: float) -> Exchange:
    """A reply past the cap: an error, without its body (reading it whole is what the cap prevents)."""
    return Exchange("error", _ms(start), status=status, error=f"HTTP {status} from judge {judge.target!r}: {exc}")


def _refused(judge: ResolvedJudge, response: httpx.Response, latency: float, body: bytes) -> Exchange:
    """A reply other than 200, with the wait it asks for (``Retry-After``)."""
    return Exchange(
        "error",
        latency,
        status=response.status_code,
        body=body,
        error=f"HTTP {response.status_code} from judge {judge.target!r}",
        retry_after=_retry_after(response.headers.get("Retry-After")),
        retry_headers={
            name: response.headers[name]
            for name in ("retry-after", "retry-after-ms", "x-should-retry")
            if name in response.headers
        },
    )


def pi_request(judge: ResolvedJudge, messages: list[dict[str, Any]]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """URL, headers and body AgentV's provider sends for an LLM grader's ``invoke({question: userPrompt,
    systemPrompt})`` (``buildChatPrompt``: the system prompt trimmed, else AgentV's default; the question
    trimmed; then ``chatPromptToPiContext``)."""
    from evalstore.replay.jstext import js_trim

    system = js_trim("\n\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system"))
    turns = [
        {"role": "user" if m.get("role") == "user" else "assistant", "content": js_trim(str(m.get("content", "")))}
        for m in messages
        if m.get("role") != "system"
    ]
    return pi_vendor(judge.provider).build_request(judge.llm, system or DEFAULT_SYSTEM_PROMPT, turns)


def chat_usage(prompt: int, completion: int) -> dict[str, int]:
    """A reply's usage counted as a Chat Completions usage is, as evalstore records every judge's."""
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def exchange_mask(judge: ResolvedJudge, references: Mapping[str, str] | None = None) -> SecretMask:
    """Every form of the credentials a request to ``judge`` carries, as an echo could show them (the
    one rule, ``targetsfile.redaction.SecretMask``): its credential headers and the URL's user info."""
    return SecretMask.of(references=references, headers=judge.headers, urls=[judge.url])


def _masked(exchange: Exchange, mask: SecretMask) -> Exchange:
    """The exchange as it may be kept: a judge that echoes the request's credentials (in a 401 body,
    in its reply) has them replaced, in the body, the content and the error alike."""
    if not mask:
        return exchange
    return replace(
        exchange,
        body=mask.data(exchange.body) if exchange.body is not None else None,
        content=mask.text(exchange.content) if exchange.content is not None else None,
        error=mask.text(exchange.error) if exchange.error is not None else None,
    )


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)
