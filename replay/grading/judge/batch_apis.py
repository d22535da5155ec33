"""The providers' batch APIs, as ``replay --batch`` uses them: submit requests, ask how the batch is doing,
read its results as the :class:`Exchange` a direct request would have given.

- OpenAI (``/v1/files`` with ``purpose=batch``, then ``/v1/batches`` over ``/v1/chat/completions``; results
  and errors as JSONL files) and Azure OpenAI (the same under ``{endpoint}/openai/...?api-version=``, each
  line's ``model`` the deployment).
- Anthropic Message Batches (``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}`` until
  ``processing_status`` is ``ended``, then its ``results_url``, JSONL), each request the body a direct
  request sends (AgentV's, through pi-ai) but for ``stream``; a reply's text blocks are its content, its
  usage counted as a direct request's.

Each request's ``custom_id`` is its judge cache key, so a result finds its request without anything kept
beside the batch. Every HTTP call has a deadline for its whole exchange (``CALL_TIMEOUT``; an upload or a
results file ``TRANSFER_TIMEOUT``) and a cap on its answer (``EVALSTORE_MAX_REPLY_BYTES``; a results file
``MAX_RESULTS_BYTES``, read a line at a time); an error is a :class:`BatchAPIError` naming the call.

A batch is submitted under an intent id recorded before it (``batches.py``), and :meth:`BatchAPI.find`
looks for a batch of that intent: OpenAI and Azure keep it in the batch's ``metadata``; Anthropic's
batches have no metadata, so a batch there is one created since the intent with as many requests (its
results answer only the requests whose ``custom_id`` is ours: a cache key names one request exactly).
Each API says how much one batch may hold (``max_requests``, ``max_bytes``, the providers' published
maxima); ``batches.py`` splits what is larger.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import httpx

from evalstore.replay.bounded_http import Deadline, ReplyTooLarge, bounded, checked, deadline, read_bounded
from evalstore.replay.errors import JudgeConfigError, ServiceError
from evalstore.replay.grading.judge.client import Exchange, chat_usage, exchange_mask, pi_request
from evalstore.replay.grading.judge.targets import AZURE_DEFAULT_API_VERSION, JudgeTarget, ResolvedJudge
from evalstore.replay.reply_cap import max_reply_bytes
from evalstore.replay.targetsfile.loader import interpolate
from evalstore.replay.targetsfile.redaction import SecretMask

ANTHROPIC_BASE_URL = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_MAX_TOKENS = 4096
"""Anthropic requires ``max_tokens``; a judge target that sets none gets this."""
COMPLETION_WINDOW = "24h"
CALL_TIMEOUT = 120.0
"""Seconds for one call to a batch API, the whole exchange (and for each network operation of a transfer)."""
TRANSFER_TIMEOUT = 3600.0
"""Seconds for an upload of a batch's requests or a download of its results, the whole exchange: up to 200 MB
(the providers' maxima per batch) at as little as 60 KB/s. A server sending a byte at a time is cut there."""
MAX_RESULTS_BYTES = 4 * 1024 * 1024 * 1024
"""The largest results file read: a full batch (100,000 replies at Anthropic) of judge replies of up to 40 KB
each; past this the download is refused rather than let grow without end."""
ERROR_CHARS = 300
"""The start of an error's body kept in its message."""
INTENT_KEY = "evalstore_intent"
"""The batch ``metadata`` key holding the intent id it was submitted under (OpenAI and Azure)."""
CLOCK_SKEW = 3600.0
"""Seconds a provider's clock may lag ours: a batch created this long before its intent may still be it."""
LIST_PAGE = 100

State = Literal["in_progress", "completed", "failed", "expired", "cancelled"]
"""Where a batch is: still running, or ended (``completed`` with results; the others with what finished)."""

_OPENAI_STATES: dict[str, State] = {
    "validating": "in_progress",
    "in_progress": "in_progress",
    "finalizing": "in_progress",
    "cancelling": "in_progress",
    "completed": "completed",
    "failed": "failed",
    "expired": "expired",
    "cancelled": "cancelled",
}


class BatchAPIError(ServiceError):
    """A batch API refused or failed a call (the replay stops; ``--resume`` picks the batch up again)."""


@dataclass(frozen=True)
class Submitted:
    batch_id: str
    input_file_id: str | None = None


@dataclass(frozen=True)
class Status:
    state: State
    detail: str = ""
    """What the provider says when a batch ended without results (its errors), for the message."""


class BatchAPI(Protocol):
    provider: str
    max_requests: int
    """The most requests the provider takes in one batch."""
    max_bytes: int
    """The most bytes one batch's requests may take (OpenAI's input file, Anthropic's request body)."""
    marks: bool
    """Whether a batch keeps the intent id it was submitted under (then :meth:`find` finds that one only)."""

    def size(self, key: str, messages: list[dict[str, Any]]) -> int:
        """Bytes one request takes in a batch (what counts against ``max_bytes``)."""
        ...

    def submit(self, requests: Mapping[str, list[dict[str, Any]]], intent_id: str) -> Submitted:
        """Submit one request per cache key (its rendered messages), marked with ``intent_id`` where the
        provider keeps marks."""
        ...

    def find(self, intent_id: str, requests: int, since: float) -> list[str]:
        """The batches that may be the one submitted under ``intent_id`` (of ``requests`` requests, created
        at ``since`` or later): the one that is where the provider keeps marks, else every candidate."""
        ...

    def status(self, batch_id: str) -> Status: ...

    def results(self, batch_id: str) -> dict[str, Exchange | str]:
        """Per cache key: the reply as an exchange, or why that request got none (failed, expired)."""
        ...


def batch_api(target: JudgeTarget, judge: ResolvedJudge, env: Mapping[str, str], http: httpx.Client) -> BatchAPI:
    """The batch API of a judge target's provider."""
    if target.provider == "azure":
        return OpenAIBatches(target, judge, env, http, azure=True)
    if target.provider == "anthropic":
        return AnthropicBatches(target, judge, env, http)
    if target.provider in ("openai", "openai-compatible", "openai_compatible"):
        return OpenAIBatches(target, judge, env, http, azure=False)
    raise JudgeConfigError(
        f"judge target {target.name!r}: provider {target.provider!r} has no batch API evalstore knows"
    )


class _Calls:
    """HTTP calls to one batch API: each call's whole exchange within a deadline and its answer within a cap
    (``replay/bounded_http.py``), a failure one :class:`BatchAPIError`, every body masked for the request's
    credentials before it is read."""

    def __init__(self, http: httpx.Client, judge: ResolvedJudge, headers: dict[str, str]) -> None:
        self.http = http
        self.judge = judge
        self.headers = headers
        self.mask = exchange_mask(judge)
        self.max_reply = max_reply_bytes()

    @contextmanager
    def _response(
        self, method: str, url: str, what: str, within: float, **kwargs: Any
    ) -> Iterator[tuple[httpx.Response, Deadline]]:
        where = f"judge target {self.judge.target!r}: {what}"
        try:
            with (
                deadline(within) as limit,
                self.http.stream(method, url, headers=self.headers, timeout=CALL_TIMEOUT, **kwargs) as response,
            ):
                if response.status_code >= 400:
                    head = _head(response, limit, ERROR_CHARS).decode("utf-8", errors="replace")
                    body = self.mask.text(head) if self.mask else head
                    raise BatchAPIError(f"{where}: HTTP {response.status_code}: {body}")
                yield response, limit
        except httpx.TimeoutException:
            raise BatchAPIError(f"{where} timed out after {within:g}s") from None
        except httpx.HTTPError as exc:
            raise BatchAPIError(f"{where} failed: {type(exc).__name__}") from None
        except ReplyTooLarge as exc:
            raise BatchAPIError(f"{where}: {exc}") from None

    def json(self, method: str, url: str, what: str, *, within: float | None = None, **kwargs: Any) -> dict[str, Any]:
        with self._response(method, url, what, within or CALL_TIMEOUT, **kwargs) as (response, limit):
            raw = read_bounded(response, limit, self.max_reply)
        try:
            data = json.loads(raw)
        except ValueError:
            raise BatchAPIError(f"judge target {self.judge.target!r}: {what}: the answer is not JSON") from None
        if not isinstance(data, dict):
            raise BatchAPIError(f"judge target {self.judge.target!r}: {what}: the answer is not a JSON object")
        return data

    def lines(self, url: str, what: str) -> list[dict[str, Any]]:
        """A results file's lines, parsed as they come (never the whole file in memory as text)."""
        out = []
        with self._response("GET", url, what, TRANSFER_TIMEOUT) as (response, limit):
            checked(response, limit, MAX_RESULTS_BYTES)
            for line in response.iter_lines():
                if line.strip():
                    try:
                        out.append(json.loads(self.mask.text(line) if self.mask else line))
                    except ValueError:
                        raise BatchAPIError(f"judge target {self.judge.target!r}: {what}: a line is not JSON") from None
        return out


def _head(response: httpx.Response, limit: Deadline, size: int) -> bytes:
    """The first ``size`` bytes of an error's body, for its message; the rest is not read."""
    head = b""
    for chunk in bounded(response, limit, sys.maxsize):  # whatever it declares: only the start is read
        head += chunk
        if len(head) >= size:
            break
    return head[:size]


class OpenAIBatches:
    """OpenAI's Batch API over Chat Completions, or Azure OpenAI's (``azure=True``)."""

    marks = True
    max_requests = 50_000
    max_bytes = 200_000_000
    """OpenAI's maxima per batch (50,000 requests, a 200 MB input file); Azure's global batches take as many
    bytes and more requests, so its lower bound is OpenAI's."""

    def __init__(
        self, target: JudgeTarget, judge: ResolvedJudge, env: Mapping[str, str], http: httpx.Client, *, azure: bool
    ) -> None:
        self.provider = "azure" if azure else "openai"
        self.judge = judge
        base = str(interpolate(target.base_url, env, where=f"judge target {target.name!r}: base_url")).rstrip("/")
        if azure:
            version = interpolate(target.api_version, env, where="api_version") or AZURE_DEFAULT_API_VERSION
            self._url = lambda path: f"{base}/openai{path}?api-version={version}"
            self._endpoint = "/chat/completions"
        else:
            self._url = lambda path: f"{base}{path}"
            self._endpoint = "/v1/chat/completions"
        headers = {k: v for k, v in judge.headers.items() if k.lower() != "content-type"}
        self._calls = _Calls(http, judge, headers)

    def _line(self, key: str, messages: list[dict[str, Any]]) -> bytes:
        body = {"model": self.judge.model, **self.judge.parameters, "messages": messages}
        line = {"custom_id": key, "method": "POST", "url": self._endpoint, "body": body}
        return (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")

    def size(self, key: str, messages: list[dict[str, Any]]) -> int:
        return len(self._line(key, messages))

    def submit(self, requests: Mapping[str, list[dict[str, Any]]], intent_id: str) -> Submitted:
        jsonl = b"".join(self._line(key, messages) for key, messages in requests.items())
        uploaded = self._calls.json(
            "POST",
            self._url("/files"),
            "uploading the batch's requests",
            within=TRANSFER_TIMEOUT,
            data={"purpose": "batch"},
            files={"file": ("evalstore-batch.jsonl", jsonl, "application/jsonl")},
        )
        file_id = uploaded.get("id")
        if not isinstance(file_id, str):
            raise BatchAPIError(f"judge target {self.judge.target!r}: the file upload answered no id")
        created = self._calls.json(
            "POST",
            self._url("/batches"),
            "creating the batch",
            json={
                "input_file_id": file_id,
                "endpoint": self._endpoint,
                "completion_window": COMPLETION_WINDOW,
                "metadata": {INTENT_KEY: intent_id},
            },
        )
        batch_id = created.get("id")
        if not isinstance(batch_id, str):
            raise BatchAPIError(f"judge target {self.judge.target!r}: creating the batch answered no id")
        return Submitted(batch_id, file_id)

    def _batch(self, batch_id: str) -> dict[str, Any]:
        return self._calls.json("GET", self._url(f"/batches/{batch_id}"), f"reading batch {batch_id}")

    def find(self, intent_id: str, requests: int, since: float) -> list[str]:
        # Listed newest first: read back to the intent's time, no further (an account may hold thousands).
        after: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": LIST_PAGE, **({"after": after} if after else {})}
            url = str(httpx.URL(self._url("/batches")).copy_merge_params(params))  # Azure's api-version kept
            page = self._calls.json("GET", url, "listing batches")
            data = [b for b in page.get("data") or [] if isinstance(b, dict)]
            for batch in data:
                marks: dict[str, Any] = batch["metadata"] if isinstance(batch.get("metadata"), dict) else {}
                if marks.get(INTENT_KEY) == intent_id and isinstance(batch.get("id"), str):
                    return [batch["id"]]
            created = [float(b["created_at"]) for b in data if isinstance(b.get("created_at"), (int, float))]
            if not page.get("has_more") or not data or (created and min(created) < since - CLOCK_SKEW):
                return []
            after = str(data[-1].get("id"))

    def status(self, batch_id: str) -> Status:
        batch = self._batch(batch_id)
        state = _OPENAI_STATES.get(str(batch.get("status")), "in_progress")
        errors = (batch.get("errors") or {}).get("data") if isinstance(batch.get("errors"), dict) else None
        detail = "; ".join(str(e.get("message", e)) for e in errors or [] if isinstance(e, dict))
        return Status(state, detail)

    def results(self, batch_id: str) -> dict[str, Exchange | str]:
        batch = self._batch(batch_id)
        out: dict[str, Exchange | str] = {}
        for field in ("output_file_id", "error_file_id"):
            file_id = batch.get(field)
            if not isinstance(file_id, str) or not file_id:
                continue
            for line in self._calls.lines(
                self._url(f"/files/{file_id}/content"), f"reading batch {batch_id}'s results"
            ):
                key = line.get("custom_id")
                if isinstance(key, str):
                    out[key] = _openai_item(line, self.judge.target)
        return out


def _openai_item(line: dict[str, Any], target: str) -> Exchange | str:
    response = line.get("response") if isinstance(line.get("response"), dict) else None
    error = line.get("error")
    if response is not None and response.get("status_code") == 200 and isinstance(response.get("body"), dict):
        body = response["body"]
        raw = json.dumps(body, ensure_ascii=False).encode("utf-8")
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
        try:
            content = body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        return Exchange("ok", 0.0, 200, raw, content if isinstance(content, str) else None, usage)
    if isinstance(error, dict):
        return f"{error.get('code') or 'error'}: {error.get('message') or ''}".strip()
    status = response.get("status_code") if response else None
    return f"HTTP {status} from judge {target!r} in the batch" if status else "no reply in the batch"


class AnthropicBatches:
    """Anthropic's Message Batches: for a judge read from a targets file, each request's ``params`` the body a
    direct request of the judge sends (``client.pi_request``: AgentV's, through pi-ai) but for ``stream``, so a
    batch's verdicts are a direct replay's, sent to its base URL with its headers; for a judge built by hand,
    its system messages as ``system``, the rest ``messages``."""

    provider = "anthropic"
    marks = False
    max_requests = 100_000
    max_bytes = 256_000_000
    """Anthropic's maxima per message batch: 100,000 requests, 256 MB."""

    def __init__(self, target: JudgeTarget, judge: ResolvedJudge, env: Mapping[str, str], http: httpx.Client) -> None:
        self.judge = judge
        if judge.llm is not None:
            self._base = judge.llm.pi_model.base_url.rstrip("/") + "/v1"
            _, headers, _ = pi_request(judge, [])
            self._calls = _Calls(http, judge, {k: v for k, v in headers.items() if k not in ("content-type", "accept")})
            return
        base = target.base_url or ANTHROPIC_BASE_URL
        self._base = str(interpolate(base, env, where=f"judge target {target.name!r}: base_url")).rstrip("/")
        key = env.get(target.api_key_env) if target.api_key_env else None
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
        self._calls = _Calls(http, judge, headers)
        self._calls.mask = SecretMask.of(headers=headers, urls=[self._base])

    def params(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if self.judge.llm is not None:
            _, _, body = pi_request(self.judge, messages)
            return {k: v for k, v in body.items() if k != "stream"}
        system = "\n\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        params: dict[str, Any] = {k: v for k, v in self.judge.parameters.items() if k != "max_tokens"}
        params.update(
            model=self.judge.model,
            max_tokens=self.judge.parameters.get("max_tokens") or ANTHROPIC_MAX_TOKENS,
            messages=[
                {"role": m["role"], "content": m.get("content", "")} for m in messages if m.get("role") != "system"
            ],
        )
        if system:
            params["system"] = system
        return params

    def size(self, key: str, messages: list[dict[str, Any]]) -> int:
        return len(json.dumps({"custom_id": key, "params": self.params(messages)}, ensure_ascii=False).encode()) + 1

    def submit(self, requests: Mapping[str, list[dict[str, Any]]], intent_id: str) -> Submitted:
        # Message batches keep no metadata: ``find`` knows this batch by its time and size.
        created = self._calls.json(
            "POST",
            f"{self._base}/messages/batches",
            "creating the message batch",
            json={"requests": [{"custom_id": key, "params": self.params(m)} for key, m in requests.items()]},
        )
        batch_id = created.get("id")
        if not isinstance(batch_id, str):
            raise BatchAPIError(f"judge target {self.judge.target!r}: creating the message batch answered no id")
        return Submitted(batch_id)

    def _batch(self, batch_id: str) -> dict[str, Any]:
        return self._calls.json("GET", f"{self._base}/messages/batches/{batch_id}", f"reading batch {batch_id}")

    def status(self, batch_id: str) -> Status:
        batch = self._batch(batch_id)
        return Status("completed" if batch.get("processing_status") == "ended" else "in_progress")

    def find(self, intent_id: str, requests: int, since: float) -> list[str]:
        found: list[str] = []
        after: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": LIST_PAGE, **({"after_id": after} if after else {})}
            url = f"{self._base}/messages/batches"
            page = self._calls.json("GET", url, "listing batches", params=params)
            data = [b for b in page.get("data") or [] if isinstance(b, dict)]
            older = False
            for batch in data:
                created = _epoch(batch.get("created_at"))
                if created is not None and created < since - CLOCK_SKEW:
                    older = True
                    continue
                counts: dict[str, Any] = (
                    batch["request_counts"] if isinstance(batch.get("request_counts"), dict) else {}
                )
                total = sum(v for v in counts.values() if isinstance(v, int))
                if total == requests and isinstance(batch.get("id"), str):
                    found.append(batch["id"])
            if older or not page.get("has_more") or not data:
                return found
            after = str(page.get("last_id") or data[-1].get("id"))

    def results(self, batch_id: str) -> dict[str, Exchange | str]:
        batch = self._batch(batch_id)
        url = batch.get("results_url")
        if not isinstance(url, str) or not url:
            raise BatchAPIError(f"judge target {self.judge.target!r}: batch {batch_id} has no results_url")
        out: dict[str, Exchange | str] = {}
        for line in self._calls.lines(url, f"reading batch {batch_id}'s results"):
            key = line.get("custom_id")
            if isinstance(key, str):
                out[key] = _anthropic_item(line)
        return out


def _epoch(value: Any) -> float | None:
    """An RFC 3339 time (Anthropic's ``created_at``) as seconds since the epoch; None when it is not one."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _anthropic_item(line: dict[str, Any]) -> Exchange | str:
    result: dict[str, Any] = line["result"] if isinstance(line.get("result"), dict) else {}
    kind = result.get("type")
    message = result.get("message")
    if kind == "succeeded" and isinstance(message, dict):
        blocks: list[Any] = message["content"] if isinstance(message.get("content"), list) else []
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        usage = message.get("usage") if isinstance(message.get("usage"), dict) else None
        if usage is not None:  # counted as a direct request's usage is
            usage = chat_usage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0))
        raw = json.dumps(message, ensure_ascii=False).encode("utf-8")
        return Exchange("ok", 0.0, 200, raw, text, usage)
    error: dict[str, Any] = result["error"] if isinstance(result.get("error"), dict) else {}
    inner: dict[str, Any] = error["error"] if isinstance(error.get("error"), dict) else error
    return f"{kind or 'errored'}: {inner.get('message') or inner.get('type') or ''}".strip().rstrip(":")
