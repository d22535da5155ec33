"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, for tests and the benchmark.

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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

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
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

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


class JudgeServer:
    def __init__(self, script: Script | None = None, latency: float = 0.0, log_path: Path | None = None) -> None:
        self.latency = latency
        self.log_path = log_path
        """When set, every request received and the content answered are appended here as JSON lines."""
        self.requests: list[Request] = []
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

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, raw, body)
                reply = server._next(request)
                try:
                    self._answer(reply, body)
                finally:
                    with server._lock:
                        server.in_flight -= 1

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
