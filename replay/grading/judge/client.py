"""The Chat Completions client: one request, retried on the failures that are worth retrying.

Retried: HTTP 429 (waiting as long as ``Retry-After`` asks, within a cap), 408 and 5xx, timeouts and
dropped connections, up to ``RetryPolicy.max_retries`` times with exponential backoff. Not retried:
other 4xx (a bad key or a bad request will not get better). Every HTTP exchange is returned as a
:class:`Exchange` so the caller can record each one; nothing here raises for a failed call.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import httpx

from evalstore.replay.grading.judge.targets import ResolvedJudge
from evalstore.replay.targetsfile.redaction import SecretMask


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
    ) -> None:
        """Every exchange is masked before it is returned; ``references`` (variable name to value) are
        shown as their ``${{ NAME }}`` reference (the openai target's), every other credential form as
        ``REDACTED``."""
        self._http = http
        self._references = dict(references or {})
        self._limit = limit
        self._retry = retry
        self._sleep = sleep

    def complete(self, judge: ResolvedJudge, messages: list[dict[str, Any]]) -> list[Exchange]:
        """Every exchange made for this request; it succeeded iff the last one is ``ok``."""
        payload = {"model": judge.model, "messages": messages, **judge.parameters}
        exchanges: list[Exchange] = []
        mask = exchange_mask(judge, self._references)
        for retry in range(self._retry.max_retries + 1):
            if retry:
                self._sleep(self._delay(retry, exchanges[-1].retry_after))
            exchange = _masked(self._send(judge, payload), mask)
            exchanges.append(exchange)
            if exchange.outcome == "ok" or not self._retryable(exchange):
                break
        return exchanges

    def _delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._retry.max_delay)
        backoff = self._retry.backoff * (2 ** (retry - 1))
        return min(self._retry.max_delay, backoff * random.uniform(0.75, 1.0))

    @staticmethod
    def _retryable(exchange: Exchange) -> bool:
        if exchange.status is None:
            return True  # timeout or dropped connection
        return exchange.status in (408, 429) or exchange.status >= 500

    def _send(self, judge: ResolvedJudge, payload: dict[str, Any]) -> Exchange:
        with self._limit:
            start = time.perf_counter()
            try:
                response = self._http.post(judge.url, json=payload, headers=judge.headers, timeout=judge.timeout)
            except httpx.TimeoutException as exc:
                error = f"timed out after {judge.timeout:g}s ({type(exc).__name__})"
                return Exchange("timeout", _ms(start), error=error)
            except httpx.TransportError as exc:
                return Exchange("error", _ms(start), error=f"connection failed: {type(exc).__name__}: {exc}")
            latency = _ms(start)
        body = response.content
        if response.status_code != 200:
            return Exchange(
                "error",
                latency,
                status=response.status_code,
                body=body,
                error=f"HTTP {response.status_code} from judge {judge.target!r}",
                retry_after=_retry_after(response.headers.get("Retry-After")),
            )
        content, usage = _read_reply(body)
        return Exchange("ok", latency, status=200, body=body, content=content, usage=usage)


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
