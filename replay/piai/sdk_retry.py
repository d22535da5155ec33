"""The retry of the vendor SDKs pi-ai calls through, under AgentV's own (``withRetry``): the OpenAI SDK 6.26.0
(pi-ai's ``openai-completions``, AgentV's ``openai``, ``openrouter`` and ``azure`` targets) and the Anthropic
SDK 0.91.1 (``anthropic``) retry every request themselves (``client.js`` ``makeRequest``), and AgentV 4.42.4
passes pi-ai no ``maxRetries`` nor ``timeoutMs``, so their defaults hold: two retries, ten minutes a request.
(pi-ai's Google client is made with no ``retryOptions``: it does not retry, and has no timeout.)

A request the SDK retries: one that got no answer (a dropped connection, a timeout), and an answer whose
``x-should-retry`` says ``true``, or, when it says nothing, HTTP 408, 409, 429 or 5xx. It waits what the
answer asks (``retry-after-ms``, else ``retry-after`` in seconds or as a date), else 0.5 s, then 1 s
(doubling, at most 8 s), less up to a quarter (``calculateDefaultRetryTimeoutMillis``). So one HTTP 500 to
an ``openai`` target of AgentV's defaults is 3 requests, each of ``withRetry``'s 4 attempts 3 more
(tests/fixtures/agentv-target-parity).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

MAX_RETRIES = 2
"""``maxRetries``' default in both SDKs: a request is sent at most three times."""
TIMEOUT_SECONDS = 600.0
"""``timeout``'s default in both SDKs (``DEFAULT_TIMEOUT``, 10 minutes), retried as a dropped connection is."""
_NODE_MAX_TIMER_MS = 2**31 - 1
"""Node runs a ``setTimeout`` longer than this at once (``TimeoutOverflowWarning``)."""


def retries(status: int | None, headers: Mapping[str, str]) -> bool:
    """Whether the SDK sends a failed request again (``shouldRetry``); ``status`` None: no answer came.
    ``headers``: the answer's, names lower-cased."""
    if status is None:
        return True
    should = headers.get("x-should-retry")
    if should in ("true", "false"):
        return should == "true"
    return status in (408, 409, 429) or status >= 500


def again(retried: int, status: int | None, headers: Mapping[str, str]) -> float | None:
    """Seconds the SDK waits before sending a failed request again after ``retried`` retries, or None when it
    does not send it again (:func:`retries`, :data:`MAX_RETRIES`)."""
    if retried >= MAX_RETRIES or not retries(status, headers):
        return None
    return wait(retried, headers)


def wait(retried: int, headers: Mapping[str, str]) -> float:
    """Seconds the SDK waits before its retry number ``retried + 1`` (``retryRequest``): what the answer
    asks, else its exponential backoff with jitter."""
    millis: float | None = None
    asked = headers.get("retry-after-ms")
    if asked:
        millis = _parse_float(asked)
    after = headers.get("retry-after")
    if after and not millis:
        seconds = _parse_float(after)
        millis = seconds * 1000.0 if seconds is not None else _until(after)
    if millis is None:
        return min(0.5 * 2**retried, 8.0) * (1 - random.random() * 0.25)
    if millis != millis or millis > _NODE_MAX_TIMER_MS:  # NaN, or past Node's timer: at once
        return 0.0
    return max(0.0, millis) / 1000.0


def _parse_float(text: str) -> float | None:
    """JavaScript's ``parseFloat``: the leading number of the text, else None (``NaN``)."""
    match = re.match(r"\s*[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)", text)
    return float(match[0].replace("Infinity", "inf")) if match else None


def _until(date: str) -> float:
    """``Date.parse(date) - Date.now()`` in milliseconds; NaN when the date does not parse."""
    try:
        when = parsedate_to_datetime(date)
    except (TypeError, ValueError):
        return float("nan")
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - datetime.now(UTC)).total_seconds() * 1000.0
