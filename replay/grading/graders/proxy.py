"""The target proxy of a code grader: ``target: {max_calls: N}`` lets a grader script call an LLM.

For one grader run, :class:`TargetProxy` listens on 127.0.0.1 (a free port) and hands the script
``AGENTV_TARGET_PROXY_URL`` and ``AGENTV_TARGET_PROXY_TOKEN``. ``POST /invoke`` with the bearer token and
``{question | messages, system_prompt?}`` forwards to the grader's judge target through the run's judge
pool (its retries and concurrency limit) and answers ``{raw_text, model, usage}``. Call N+1 is refused
(HTTP 429). Every call goes through the judge cache and is recorded as a ``grader_called`` event of the
code grader (request, reply, model, digests), exactly like an LLM grader's judge call: a replay whose
requests are unchanged reuses the recorded replies and calls nothing. The judge target's configured
model and parameters apply (a request's own ``temperature``/``max_tokens`` are not forwarded).
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from evalstore.replay.errors import ReplayError
from evalstore.replay.evalfile.specs import CodeGraderSpec
from evalstore.replay.grading.graders.base import GradingContext

MAX_REQUEST_BYTES = 5_000_000


class ProxyUnavailable(ReplayError):
    """No judge target for the grader's proxy."""


class TargetProxy:
    """A context manager: the proxy runs inside the ``with`` block; ``env`` is what the grader gets."""

    def __init__(self, ctx: GradingContext, spec: CodeGraderSpec) -> None:
        self.ctx = ctx
        self.spec = spec
        self.max_calls = spec.target_max_calls or 0
        self.token = secrets.token_urlsafe(32)
        self.calls = 0
        self.refused = 0
        self.call_event_ids: list[str] = []
        self.cache_hits = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._judge, self._client, self._cache_only = self._resolve()

    def _resolve(self):  # type: ignore[no-untyped-def]
        pool = self.ctx.judges
        if pool is None:
            raise ProxyUnavailable("no judge is configured for its target proxy")
        judge, unavailable = pool.resolve_or_cache_only(pool.for_grader(self.ctx, self.spec.target))
        return judge, pool.client, unavailable is not None

    @property
    def env(self) -> dict[str, str]:
        assert self._server is not None
        port = int(self._server.server_address[1])
        return {"AGENTV_TARGET_PROXY_URL": f"http://127.0.0.1:{port}", "AGENTV_TARGET_PROXY_TOKEN": self.token}

    def __enter__(self) -> TargetProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                status, body = proxy.handle(self.path, self.headers.get("Authorization", ""), self._body())
                data = json.dumps(body).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes | None:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_REQUEST_BYTES:
                    return None
                return self.rfile.read(length)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="evalstore-target-proxy", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- one request ---------------------------------------------------------------------------

    def handle(self, path: str, authorization: str, raw: bytes | None) -> tuple[int, dict[str, Any]]:
        if not hmac.compare_digest(authorization.encode(), f"Bearer {self.token}".encode()):
            return 401, {"error": "missing or wrong bearer token (AGENTV_TARGET_PROXY_TOKEN)"}
        if path.rstrip("/") != "/invoke":
            return 404, {"error": f"no such endpoint {path}; POST /invoke"}
        if raw is None:
            return 413, {"error": f"request over {MAX_REQUEST_BYTES} bytes"}
        try:
            request = json.loads(raw)
            messages = _messages(request)
        except (ValueError, TypeError) as exc:
            return 400, {"error": f"bad request: {exc}"}
        with self._lock:
            if self.calls >= self.max_calls:
                self.refused += 1
                return 429, {
                    "error": f"target call limit reached: this grader may make {self.max_calls} call(s) "
                    f"(target: {{max_calls: {self.max_calls}}}); call {self.calls + self.refused} refused"
                }
            self.calls += 1
        return self._forward(messages)

    def _forward(self, messages: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        from evalstore.replay.grading.judge.calls import JudgeCall

        call = JudgeCall(
            self.ctx,
            self.spec.name,
            self._judge,
            self._client,
            cache_only=self._cache_only,
            grader_type=self.spec.type,
            batchable=False,
        )
        outcome = call.run(messages, lambda reply: reply)  # type: ignore[arg-type,return-value]
        with self._lock:
            self.call_event_ids += outcome.call_event_ids
            self.cache_hits += int(outcome.cache_hit)
        if outcome.result is None:
            reason = outcome.error or ("the target cannot be called (no key) and no recorded reply matches")
            return 502, {"error": f"target {self._judge.target} failed: {reason}"}
        return 200, {"raw_text": outcome.result, "model": self._judge.model, "cache_hit": outcome.cache_hit}


def _messages(request: Any) -> list[dict[str, Any]]:
    if not isinstance(request, dict):
        raise TypeError("expected a JSON object {question | messages, system_prompt?}")
    system = request.get("system_prompt", request.get("systemPrompt"))
    messages: list[dict[str, Any]] = []
    if system is not None:
        if not isinstance(system, str):
            raise TypeError("system_prompt must be a string")
        messages.append({"role": "system", "content": system})
    if request.get("messages") is not None:
        given = request["messages"]
        if not isinstance(given, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in given
        ):
            raise TypeError("messages must be a list of {role, content}")
        messages += [{"role": m["role"], "content": m.get("content")} for m in given]
    elif isinstance(request.get("question"), str):
        messages.append({"role": "user", "content": request["question"]})
    else:
        raise TypeError("give `question` (a string) or `messages`")
    return messages
