"""A fake of Anthropic's Messages API and Google's Generative Language API on 127.0.0.1, for the
``anthropic`` and ``gemini`` targets (``tests/judge_server.py`` is the OpenAI-compatible one).

``POST /v1/messages`` answers with Anthropic's server-sent events (``message_start``, a text block in
deltas, ``message_delta`` with the stop reason and usage, ``message_stop``); ``POST
/v1beta/models/MODEL:streamGenerateContent?alt=sse`` with Gemini's ``data:`` chunks (text parts, then the
finish reason and ``usageMetadata``). A test scripts the replies (text, usage, a status with a body, a
stop reason) one per request, the last repeating, and reads every request back: path, headers, raw body.

``tests/fixtures/agentv-vendor-requests/capture.py`` points AgentV's own providers at this server, so the
requests it records are AgentV's.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class VendorReply:
    text: str = "Hello world"
    chunks: tuple[str, ...] = ()
    """The text in the pieces it streams in (default: two halves of ``text``)."""
    usage: dict[str, int] = field(default_factory=lambda: {"input": 11, "output": 7, "cache_read": 3})
    stop: str | None = None
    """Anthropic's stop reason (``end_turn``) or Gemini's finish reason (``STOP``) when None."""
    status: int = 200
    body: bytes | None = None
    """An error body sent with ``status``."""


@dataclass
class VendorRequest:
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw)


def _pieces(reply: VendorReply) -> tuple[str, ...]:
    if reply.chunks:
        return reply.chunks
    half = len(reply.text) // 2
    return (reply.text[:half], reply.text[half:])


def anthropic_stream(reply: VendorReply) -> bytes:
    usage = reply.usage
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": "fake",
                    "content": [],
                    "stop_reason": None,
                    "usage": {
                        "input_tokens": usage.get("input", 0),
                        "output_tokens": 1,
                        "cache_read_input_tokens": usage.get("cache_read", 0),
                    },
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
    ]
    events += [
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}})
        for p in _pieces(reply)
    ]
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.stop or "end_turn"},
                "usage": {"output_tokens": usage.get("output", 0)},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def gemini_stream(reply: VendorReply) -> bytes:
    usage = reply.usage
    pieces = _pieces(reply)
    chunks: list[dict[str, Any]] = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": p}]}}], "responseId": "r1"}
        for p in pieces[:-1]
    ]
    chunks.append(
        {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": pieces[-1]}]}, "finishReason": reply.stop or "STOP"}
            ],
            "usageMetadata": {
                "promptTokenCount": usage.get("input", 0) + usage.get("cache_read", 0),
                "candidatesTokenCount": usage.get("output", 0),
                "totalTokenCount": usage.get("input", 0) + usage.get("cache_read", 0) + usage.get("output", 0),
                "cachedContentTokenCount": usage.get("cache_read", 0),
            },
        }
    )
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks).encode()


class VendorServer:
    def __init__(self) -> None:
        self.requests: list[VendorRequest] = []
        self._script: list[VendorReply] = [VendorReply()]
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: Anthropic's base URL; Gemini's is this plus ``/v1beta``."""
        assert self._httpd is not None, "start() the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def script(self, *replies: VendorReply) -> None:
        with self._lock:
            self._script = list(replies)

    def _next(self, request: VendorRequest) -> VendorReply:
        with self._lock:
            self.requests.append(request)
            return self._script.pop(0) if len(self._script) > 1 else self._script[0]

    def start(self) -> VendorServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = VendorRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
                reply = server._next(request)
                if reply.status != 200:
                    payload, kind = reply.body or b'{"error":{"message":"failed"}}', "application/json"
                elif self.path.startswith("/v1/messages"):
                    payload, kind = anthropic_stream(reply), "text/event-stream"
                elif ":streamGenerateContent" in self.path:
                    payload, kind = gemini_stream(reply), "text/event-stream"
                else:
                    payload, kind = b'{"error":{"message":"no such endpoint"}}', "application/json"
                    reply = VendorReply(status=404)
                self.send_response(reply.status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> VendorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def vendor_server() -> Iterable[VendorServer]:
    with VendorServer() as server:
        yield server
