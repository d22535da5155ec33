"""What the vendors' requests and replies share in pi-ai: the target fields a request is built from
(:class:`LlmConfig`, AgentV's ``withRetry`` policy), the reply as pi-ai reads it (:class:`Reply`), a call that
gave none (:class:`CallFailed`), server-sent events, and pi-ai's removal of lone surrogates."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from evalstore.replay.piai.models import PiModel

DEFAULT_SYSTEM_PROMPT = "You are a careful assistant. Follow all provided instructions and do not fabricate results."
"""``llm-providers.ts``' ``DEFAULT_SYSTEM_PROMPT``: sent when a request has no system prompt of its own."""


@dataclass(frozen=True)
class Retry:
    """``withRetry``'s policy, from the target's ``max_retries`` and ``retry_*`` fields."""

    max_retries: int = 3
    initial_delay_ms: float = 1000.0
    max_delay_ms: float = 60_000.0
    backoff_factor: float = 2.0
    status_codes: tuple[int, ...] = (500, 408, 429, 502, 503, 504)

    def retries(self, attempt: int, status: int | None, network: bool = False) -> bool:
        """Whether ``withRetry`` tries a failed call again after ``attempt`` retries (``isRetryableError``): an HTTP
        status of its codes (never 401 or 403), or with no status a network error it knows (``network``; the
        vendor SDKs' own "Connection error." after their retries is none)."""
        if attempt >= self.max_retries or status in (401, 403):
            return False
        return status in self.status_codes if status is not None else network

    def delay(self, attempt: int) -> float:
        """Seconds before the next try: exponential, capped, with AgentV's ±25% jitter."""
        base = min(self.max_delay_ms, self.initial_delay_ms * self.backoff_factor**attempt)
        return base * (0.75 + random.random() * 0.5) / 1000.0


@dataclass(frozen=True)
class LlmConfig:
    """A direct-API target's fields, resolved as AgentV resolves them."""

    api_key: str = field(repr=False)
    model: str
    pi_model: PiModel
    temperature: float | None = None
    max_output_tokens: int | None = None
    thinking_budget: float | None = None
    retry: Retry = Retry()


def encode(body: Any) -> bytes:
    """A request body as pi-ai's SDKs send it: ``JSON.stringify`` (no spaces, characters as they are)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def without_lone_surrogates(text: str) -> str:
    """pi-ai's ``sanitizeSurrogates``: unpaired UTF-16 surrogates removed before sending."""
    return "".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF)


class CallFailed(Exception):
    """One call that did not give an answer; ``status`` when the server gave one (decides the retry)."""

    def __init__(
        self,
        message: str,
        status: int | None = None,
        *,
        network: bool = False,
        timeout: bool = False,
        headers: Mapping[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.network = network
        self.timeout = timeout
        self.headers = dict(headers or {})
        """The refusal's headers an SDK reads to retry it (``piai.sdk_retry``), names lower-cased."""


@dataclass
class Reply:
    """What a vendor's stream said, in pi-ai's terms."""

    text: str = ""
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    stop: str = "stop"


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str | None, str]]:
    """``(event, data)`` of each server-sent event (the fields pi-ai's and the SDKs' readers use)."""
    event: str | None = None
    data: list[str] = []
    for line in lines:
        if line == "":
            if event is not None or data:
                yield event, "\n".join(data)
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if event is not None or data:
        yield event, "\n".join(data)
