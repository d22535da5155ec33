"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, for tests and the benchmark; it speaks
Anthropic's Messages API too (``POST /v1/messages``, answered in Anthropic's server-sent events, and the
Message Batches stand-in below), for judges on the ``anthropic`` provider.

A test scripts what the judge answers: a list of replies consumed one per request (the last one is
repeated when the list runs out), or a function of the request. Replies can be delayed, can fail (429
with ``Retry-After``, 500, a body that is not JSON, content with no JSON in it) or can hang until the
client gives up. Every request received is kept, so tests can check the rendered prompts byte for
byte and assert that a cache hit sent nothing.

``tests/conftest.py`` registers this module as a pytest plugin, so tests just ask for the
``judge_server`` fixture; ``bench/judge_throughput.py`` imports ``JudgeServer`` directly.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from evalstore.store.codec import sha256_hex
from evalstore.store.errors import BlobNotFound
from evalstore.store.events import DomainEvent, GraderCalled, PreprocessingRecorded

DEFAULT_USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
HANG_LIMIT = 30.0
"""A hung request gives up after this long even if the server is never stopped."""


@dataclass
class Reply:
    """What the server answers to one request."""

    content: str | None = None
    """The assistant message content, wrapped in a Chat Completions body."""
    status: int = 200
    body: bytes | None = None
    """A raw body sent as is (overrides ``content``)."""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering (on top of the server's latency)."""
    hang: bool = False
    """Never answer: hold the connection until the client times out or the server stops."""
    drop: bool = False
    """Close the connection without answering."""
    drip: float = 0.0
    """Send HTTP 200 headers at once, then one byte of body every ``drip`` seconds (for ``HANG_LIMIT``)."""
    huge: int = 0
    """Send HTTP 200 and a body of this many bytes, a MiB at a time, as fast as the client reads it."""
    declared: bool = True
    """Whether a ``huge`` body's size is in ``Content-Length`` (else it ends when the connection closes)."""
    usage: dict[str, Any] | None = field(default_factory=lambda: dict(DEFAULT_USAGE))


@dataclass
class Request:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    raw: bytes
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's messages, an Anthropic message's content blocks as their text."""
        if not isinstance(self.body, dict):
            return []
        return [
            {**m, "content": _text(m["content"])} if isinstance(m.get("content"), list) else m
            for m in self.body.get("messages", [])
        ]

    @property
    def system(self) -> str:
        return next((m["content"] for m in self.messages if m.get("role") == "system"), "")

    @property
    def user(self) -> str:
        return next((m["content"] for m in self.messages if m.get("role") == "user"), "")


Script = list["Reply | str"] | Callable[[Request], "Reply | str"]


# -- reply builders ------------------------------------------------------------------------------


def as_json(value: Any) -> Reply:
    return Reply(content=json.dumps(value))


def freeform(score: float, assertions: Iterable[tuple[str, bool]] = (), details: Any = None) -> Reply:
    body: dict[str, Any] = {
        "score": score,
        "assertions": [{"text": t, "passed": p, "evidence": f"evidence for {t}"} for t, p in assertions],
    }
    if details is not None:
        body["details"] = details
    return as_json(body)


def rubric(checks: Mapping[str, bool], overall: str = "overall reasoning") -> Reply:
    return as_json(
        {
            "checks": [{"id": i, "satisfied": s, "reasoning": f"reasoning for {i}"} for i, s in checks.items()],
            "overall_reasoning": overall,
        }
    )


def score_ranges(scores: Mapping[str, int], overall: str = "overall reasoning") -> Reply:
    return as_json(
        {
            "checks": [{"id": i, "score": s, "reasoning": f"reasoning for {i}"} for i, s in scores.items()],
            "overall_reasoning": overall,
        }
    )


def rate_limited(retry_after: str = "1") -> Reply:
    return Reply(status=429, body=b'{"error":{"message":"rate limited"}}', headers={"Retry-After": retry_after})


def server_error(status: int = 500) -> Reply:
    return Reply(status=status, body=b'{"error":{"message":"internal error"}}')


def malformed_body() -> Reply:
    return Reply(body=b"{this is not json")


def hang() -> Reply:
    return Reply(hang=True)


def dropped() -> Reply:
    return Reply(drop=True)


def drip(interval: float = 0.1) -> Reply:
    """Headers at once, then a space every ``interval`` seconds: never done, never silent for long."""
    return Reply(drip=interval)


def huge_body(size: int, *, declared: bool = True) -> Reply:
    """A body of ``size`` spaces; ``declared=False`` sends no ``Content-Length`` (the body ends at close)."""
    return Reply(huge=size, declared=declared)


def by_content(rules: Iterable[tuple[str, Reply | str]], default: Reply | str) -> Callable[[Request], Reply | str]:
    """A script that answers by what the user message contains: the first rule whose text occurs."""
    rules = list(rules)

    def answer(request: Request) -> Reply | str:
        for needle, reply in rules:
            if needle in request.user:
                return reply
        return default

    return answer


def completion_body(content: str, model: str, usage: dict[str, Any] | None) -> bytes:
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body).encode("utf-8")


def stream_body(content: str, model: str, usage: dict[str, Any] | None) -> bytes:
    """A Chat Completions answer as server-sent events: the content, the finish reason, the usage, DONE."""
    base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk", "created": 0, "model": model}
    chunks: list[dict[str, Any]] = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    if usage is not None:
        chunks.append({**base, "choices": [], "usage": usage})
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode("utf-8") + b"data: [DONE]\n\n"


# -- the server ----------------------------------------------------------------------------------


@dataclass
class Batch:
    """A batch the stand-in batch APIs hold (OpenAI and Azure: ``/files`` + ``/batches``; Anthropic:
    ``/messages/batches``): in progress while the server's ``hold_batches`` is set, answered (each item by
    the server's script, as a direct request would be) when first read after that."""

    id: str
    api: str
    """``openai`` (Azure's too) or ``anthropic``."""
    items: list[tuple[str, Request]]
    """(custom_id, the item's request as a Chat Completions request)."""
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
    size: int = 0
    """Bytes of the batch's requests: the input file (OpenAI), the request body (Anthropic)."""
    failed: str | None = None
    """Why the whole batch failed (OpenAI's ``failed``, no results file), else None."""
    done: bool = False
    expired: bool = False
    results: list[dict[str, Any]] = field(default_factory=list)


class JudgeServer:
    def __init__(self, script: Script | None = None, latency: float = 0.0, log_path: Path | None = None) -> None:
        self.latency = latency
        self.log_path = log_path
        """When set, every request received and the content answered are appended here as JSON lines."""
        self.requests: list[Request] = []
        """Chat Completions requests sent one at a time (a batch's items are in ``batches``)."""
        self.batches: list[Batch] = []
        """Every batch created, in order."""
        self.files: dict[str, bytes] = {}
        self.hold_batches = threading.Event()
        """While set, every batch stays in progress (a test kills its driver meanwhile)."""
        self.fail_item: Callable[[Request], str | None] = lambda request: None
        """Per batch item: an error code to fail it with (``server_error``), or None to answer it."""
        self.expire_items: Callable[[Request], bool] = lambda request: False
        """Per batch item: True to leave it unanswered, the batch ending ``expired``."""
        self.batch_polls = 0
        self.hold_creates = threading.Event()
        """While set, a batch is created but the answer to its creation waits (its driver is killed meanwhile:
        the provider holds a batch the driver never heard of)."""
        self.fail_creates = 0
        """Batch creations to refuse (HTTP 500) before creating anything, counted down."""
        self.create_status = 500
        """The HTTP status a refused creation answers (429: a provider's quota)."""
        self.fail_batches: str | None = None
        """When set, every batch ends ``failed`` with this reason and no results (OpenAI's queue limit:
        "Enqueued token limit reached")."""
        self.max_batch_requests: int | None = None
        self.max_batch_bytes: int | None = None
        """A batch above these is refused (HTTP 400), as the providers refuse theirs."""
        self.body_bytes_sent = 0
        """Bytes of ``drip`` and ``huge`` bodies written so far (what a client that refused one let through)."""
        self.in_flight = 0
        self.max_in_flight = 0
        """The most requests the server was ever handling at once."""
        self._script: Script = script if script is not None else [freeform(1.0)]
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "start() the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def script(self, *replies: Reply | str) -> None:
        """Answer the next requests with these replies, in order; the last one repeats."""
        with self._lock:
            self._script = list(replies)

    def respond_with(self, answer: Callable[[Request], Reply | str]) -> None:
        with self._lock:
            self._script = answer

    def start(self) -> JudgeServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms stall

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                status, payload, kind = server._batch_get(path, parse_qs(query))
                self._send_plain(status, payload, kind)

            def _send_plain(self, status: int, payload: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?", 1)[0]
                if path.endswith(("/files", "/batches")):
                    status, payload = server._batch_post(path, self.headers.get("Content-Type", ""), raw)
                    deadline = time.monotonic() + HANG_LIMIT
                    while path.endswith("/batches") and server.hold_creates.is_set() and time.monotonic() < deadline:
                        server._stopping.wait(0.02)
                    self._send_plain(status, payload)
                    return
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                anthropic = path.endswith("/messages") and isinstance(body, dict)
                seen = anthropic_as_chat(body) if anthropic else body
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, raw, seen)
                reply = server._next(request)
                try:
                    if reply.drip or reply.huge:
                        self._stream(reply)
                    elif anthropic and reply.status == 200 and reply.body is None and not (reply.hang or reply.drop):
                        payload = anthropic_events(reply.content or "", str(body.get("model", "")))
                        self._send_plain(200, payload, "text/event-stream")
                    else:
                        self._answer(reply, body)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _stream(self, reply: Reply) -> None:
                """A ``drip`` or ``huge`` body, until it is all sent, the client goes or the server stops."""
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if reply.huge and reply.declared:
                    self.send_header("Content-Length", str(reply.huge))
                else:
                    self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                left = reply.huge if reply.huge else int(HANG_LIMIT / reply.drip)
                piece = b" " * (1024 * 1024 if reply.huge else 1)
                try:
                    while left > 0 and not server._stopping.is_set():
                        self.wfile.write(piece[:left])
                        self.wfile.flush()
                        with server._lock:
                            server.body_bytes_sent += min(len(piece), left)
                        left -= len(piece)
                        if reply.drip:
                            server._stopping.wait(reply.drip)
                except OSError:  # the client closed the connection: what a refusal does
                    pass

            def _answer(self, reply: Reply, body: Any) -> None:
                content_type = "application/json"
                wait = server.latency + reply.delay
                if wait:
                    time.sleep(wait)
                if reply.hang:
                    server._stopping.wait(HANG_LIMIT)
                if reply.hang or reply.drop:
                    self.close_connection = True
                    return
                streamed = isinstance(body, dict) and body.get("stream") is True and reply.status == 200
                if reply.body is None and streamed:  # AgentV's client streams (server-sent events)
                    model = str(body.get("model", ""))
                    payload = stream_body(reply.content or "", model, reply.usage)
                    content_type = "text/event-stream"
                elif reply.body is not None:
                    payload = reply.body
                else:
                    model = body.get("model", "") if isinstance(body, dict) else ""
                    payload = completion_body(reply.content or "", model, reply.usage)
                self.send_response(reply.status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        httpd.request_queue_size = 256  # the benchmark opens dozens of connections at once
        httpd.server_bind()
        httpd.server_activate()
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the batch APIs ---------------------------------------------------------------------------

    def _refused(self, requests: int, size: int) -> tuple[int, bytes] | None:
        if self.fail_creates:
            self.fail_creates -= 1
            body = {"error": {"message": "batch creation failed", "type": "server_error"}}
            return self.create_status, json.dumps(body).encode()
        over = (self.max_batch_requests is not None and requests > self.max_batch_requests) or (
            self.max_batch_bytes is not None and size > self.max_batch_bytes
        )
        if over:
            message = f"a batch of {requests} requests, {size} bytes: above this API's maxima"
            return 400, json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
        return None

    def _batch_post(self, path: str, content_type: str, raw: bytes) -> tuple[int, bytes]:
        with self._lock:
            if path.endswith("/messages/batches"):  # Anthropic: the requests inline
                body = json.loads(raw)
                refused = self._refused(len(body["requests"]), len(raw))
                if refused:
                    return refused
                items = []
                for entry in body["requests"]:
                    params = dict(entry["params"])
                    messages = (
                        [{"role": "system", "content": params.pop("system")}] if "system" in params else []
                    ) + list(params.pop("messages"))
                    chat = {**params, "messages": messages}
                    items.append((entry["custom_id"], Request(path, {}, json.dumps(chat).encode(), chat)))
                batch = Batch(f"msgbatch_{uuid.uuid4().hex[:12]}", "anthropic", items, size=len(raw))
                self.batches.append(batch)
                return 200, json.dumps(self._anthropic_view(batch)).encode()
            if path.endswith("/files"):
                data = _multipart_file(content_type, raw)
                file_id = f"file-{uuid.uuid4().hex[:12]}"
                self.files[file_id] = data
                return 200, json.dumps({"id": file_id, "object": "file", "purpose": "batch"}).encode()
            body = json.loads(raw)
            data = self.files[body["input_file_id"]]
            lines = [json.loads(line) for line in data.decode().splitlines() if line]
            refused = self._refused(len(lines), len(data))
            if refused:
                return refused
            items = [
                (line["custom_id"], Request(line["url"], {}, json.dumps(line["body"]).encode(), line["body"]))
                for line in lines
            ]
            batch = Batch(
                f"batch_{uuid.uuid4().hex[:12]}",
                "openai",
                items,
                input_file_id=body["input_file_id"],
                metadata=dict(body.get("metadata") or {}),
                size=len(data),
            )
            self.batches.append(batch)
            return 200, json.dumps(self._openai_view(batch)).encode()

    def _batch_get(self, path: str, query: dict[str, list[str]]) -> tuple[int, bytes, str]:
        with self._lock:
            parts = path.rstrip("/").split("/")
            if parts[-1] == "batches":
                return 200, json.dumps(self._listing(parts[-2] == "messages", query)).encode(), "application/json"
            if len(parts) >= 2 and parts[-1] == "content" and parts[-3] == "files":
                return 200, self.files[parts[-2]], "application/jsonl"
            if parts[-1] == "results":
                batch = self._batch(parts[-2])
                return 200, "".join(json.dumps(r) + "\n" for r in batch.results).encode(), "application/jsonl"
            batch = self._batch(parts[-1])
            self.batch_polls += 1
            if not self.hold_batches.is_set() and not batch.done:
                self._finish(batch)
            view = self._anthropic_view(batch) if batch.api == "anthropic" else self._openai_view(batch)
            return 200, json.dumps(view).encode(), "application/json"

    def _batch(self, batch_id: str) -> Batch:
        return next(b for b in self.batches if b.id == batch_id)

    def _finish(self, batch: Batch) -> None:
        """Answer every item by the script, as direct requests are answered (under the lock)."""
        if self.fail_batches is not None:
            batch.failed, batch.done = self.fail_batches, True
            return
        outputs, errors = [], []
        for custom_id, request in batch.items:
            if self.expire_items(request):
                batch.expired = True
                errors.append(
                    {"custom_id": custom_id, "response": None, "error": {"code": "batch_expired", "message": "expired"}}
                )
                batch.results.append({"custom_id": custom_id, "result": {"type": "expired"}})
                continue
            code = self.fail_item(request)
            if code is not None:
                errors.append({"custom_id": custom_id, "response": None, "error": {"code": code, "message": "failed"}})
                error = {"type": "error", "error": {"type": code, "message": "failed"}}
                batch.results.append({"custom_id": custom_id, "result": {"type": "errored", "error": error}})
                continue
            reply = self._script(request) if callable(self._script) else self._script[0]
            reply = Reply(content=reply) if isinstance(reply, str) else reply
            model = str(request.body.get("model", ""))
            body = json.loads(completion_body(reply.content or "", model, reply.usage))
            outputs.append(
                {"id": f"req-{custom_id[:8]}", "custom_id": custom_id, "response": {"status_code": 200, "body": body}}
            )
            message = {
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": reply.content or ""}],
                "stop_reason": "end_turn",
                "usage": dict(ANTHROPIC_USAGE),
            }
            batch.results.append({"custom_id": custom_id, "result": {"type": "succeeded", "message": message}})
        batch.output_file_id = f"file-{uuid.uuid4().hex[:12]}"
        self.files[batch.output_file_id] = "".join(json.dumps(o) + "\n" for o in outputs).encode()
        if errors:
            batch.error_file_id = f"file-{uuid.uuid4().hex[:12]}"
            self.files[batch.error_file_id] = "".join(json.dumps(e) + "\n" for e in errors).encode()
        batch.done = True

    def _listing(self, anthropic: bool, query: dict[str, list[str]]) -> dict[str, Any]:
        """A page of the batches, newest first, as OpenAI (``limit``, ``after``) or Anthropic (``limit``,
        ``after_id``) lists them."""
        api = "anthropic" if anthropic else "openai"
        newest = [b for b in reversed(self.batches) if b.api == api]
        after = (query.get("after_id" if anthropic else "after") or [None])[0]
        if after is not None:
            newest = newest[[b.id for b in newest].index(after) + 1 :]
        limit = int((query.get("limit") or ["20"])[0])
        page, more = newest[:limit], len(newest) > limit
        view = self._anthropic_view if anthropic else self._openai_view
        listing: dict[str, Any] = {"data": [view(b) for b in page], "has_more": more}
        if anthropic:
            listing.update(first_id=page[0].id if page else None, last_id=page[-1].id if page else None)
        else:
            listing.update(object="list", first_id=page[0].id if page else None, last_id=page[-1].id if page else None)
        return listing

    def _openai_view(self, batch: Batch) -> dict[str, Any]:
        status = ("expired" if batch.expired else "completed") if batch.done else "in_progress"
        failed = {"errors": {"data": [{"message": batch.failed}]}} if batch.failed else {}
        return {
            **failed,
            "id": batch.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": "failed" if batch.failed else status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "request_counts": {"total": len(batch.items)},
            "metadata": batch.metadata or None,
            "created_at": int(batch.created_at),
        }

    def _anthropic_view(self, batch: Batch) -> dict[str, Any]:
        view: dict[str, Any] = {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if batch.done else "in_progress",
            "results_url": None,
            "created_at": datetime.fromtimestamp(batch.created_at, UTC).isoformat().replace("+00:00", "Z"),
            "request_counts": (
                {"processing": 0, "succeeded": len(batch.results), "errored": 0, "canceled": 0, "expired": 0}
                if batch.done
                else {"processing": len(batch.items), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
            ),
        }
        if batch.done:
            assert self._httpd is not None
            view["results_url"] = (
                f"http://127.0.0.1:{self._httpd.server_address[1]}/v1/messages/batches/{batch.id}/results"
            )
        return view

    def batch_items(self) -> list[Request]:
        """Every request sent in a batch, in order."""
        return [request for batch in self.batches for _, request in batch.items]

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if callable(self._script):
                reply = self._script(request)
            elif len(self._script) > 1:
                reply = self._script.pop(0)
            else:
                reply = self._script[0]
            reply = Reply(content=reply) if isinstance(reply, str) else reply
            if self.log_path is not None:
                entry = {"n": len(self.requests), "path": request.path, "body": request.body, "reply": reply.content}
                with self.log_path.open("a", encoding="utf-8") as log:
                    log.write(json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n")
        return reply


ANTHROPIC_USAGE = {"input_tokens": 100, "output_tokens": 20}
"""What an Anthropic reply of the server counts, streamed or in a batch alike."""


def _text(content: Any) -> str:
    """An Anthropic content (a string or text blocks) as its text."""
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content)


def anthropic_as_chat(params: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic request's parameters seen as a Chat Completions request (``system`` a leading system
    message, content blocks as their text), so scripts and tests read every judge's requests alike."""
    params = dict(params)
    system = [{"role": "system", "content": _text(params.pop("system"))}] if "system" in params else []
    messages = [{"role": m["role"], "content": _text(m.get("content", ""))} for m in params.pop("messages", [])]
    return {**params, "messages": system + messages}


def anthropic_events(content: str, model: str) -> bytes:
    """``content`` as Anthropic's Messages API streams it."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": ANTHROPIC_USAGE["input_tokens"], "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": content}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": ANTHROPIC_USAGE["output_tokens"]},
        },
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode("utf-8")


def _multipart_file(content_type: str, raw: bytes) -> bytes:
    """The bytes of the ``file`` part of a multipart/form-data body (an OpenAI file upload)."""
    boundary = content_type.split("boundary=", 1)[1].strip('"').encode()
    for part in raw.split(b"--" + boundary):
        head, _, body = part.partition(b"\r\n\r\n")
        if b'name="file"' in head:
            return body[: -len(b"\r\n")] if body.endswith(b"\r\n") else body
    raise ValueError("no file part in the upload")


@pytest.fixture
def judge_server() -> Iterable[JudgeServer]:
    server = JudgeServer().start()
    try:
        yield server
    finally:
        server.stop()


# -- a minimal recorder, until evalstore.replay.recording.MemoryRecorder is available -----------------------


class ListRecorder:
    """Keeps events and blobs in lists; implements ``evalstore.replay.grading.graders.base.Recorder``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, DomainEvent]] = []
        self.blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put_blob(self, data: bytes) -> str:
        digest = sha256_hex(data)
        with self._lock:
            self.blobs.setdefault(digest, data)
        return digest

    def get_blob(self, sha256: str) -> bytes:
        try:
            return self.blobs[sha256]
        except KeyError:
            raise BlobNotFound(sha256) from None

    def record(self, event: DomainEvent) -> str:
        event_id = str(uuid.uuid4())
        with self._lock:
            self.events.append((event_id, event))
        return event_id

    def find_conversion(self, fingerprint: str) -> tuple[str, PreprocessingRecorded] | None:
        return None

    def find_process_call(self, cache_key: str) -> tuple[str, GraderCalled] | None:
        return None

    def find_judge_call(self, cache_key: str) -> tuple[str, GraderCalled] | None:
        with self._lock:
            for event_id, event in self.events:
                if (
                    isinstance(event, GraderCalled)
                    and event.call == "judge"
                    and event.outcome == "ok"
                    and event.cache_key == cache_key
                ):
                    return event_id, event
        return None


def make_recorder() -> Any:
    """The product's in-memory recorder when it exists, else :class:`ListRecorder`."""
    try:
        from evalstore.replay.recording import MemoryRecorder
    except ImportError:
        return ListRecorder()
    return MemoryRecorder()
