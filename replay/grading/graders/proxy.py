"""The target proxy of a code grader: ``target: {max_calls: N}`` lets a grader script call an LLM.

For one grader run, :class:`TargetProxy` listens on 127.0.0.1 (a free port) and hands the script
``AGENTV_TARGET_PROXY_URL`` and ``AGENTV_TARGET_PROXY_TOKEN``. It speaks the protocol of AgentV 4.42.4's
``createTargetProxy`` (packages/core/src/runtime/target-proxy.ts), which its SDK's ``createTargetClient``
(packages/sdk/src/target-client.ts) calls, status codes and field names included:

- every request needs ``Authorization: Bearer TOKEN`` (else 401 ``{"error": "Unauthorized"}``); ``OPTIONS``
  answers 204; any other method or path 404 ``{"error": "Not found"}``; every answer carries AgentV's CORS
  headers;
- ``GET /info``: ``{targetName, maxCalls, callCount, availableTargets}``;
- ``POST /invoke`` ``{question, systemPrompt?, evalCaseId?, attempt?, target?}``: ``{output, rawText,
  tokenUsage}`` (``output`` the reply as one assistant message); 429 once ``max_calls`` calls were made
  (checked before the body is read), 400 without a non-empty ``question`` or for a ``target`` that is not a
  judge, 500 when the body is not JSON or the target failed;
- ``POST /invokeBatch`` ``{requests: [...]}``: ``{responses: [...]}``, the requests made one after another,
  each answered as ``/invoke`` answers or, when it cannot be made, ``{output: [], rawText: "Error: ..."}``;
  429 for a batch that would go past ``max_calls`` (none of it is made), 400 without a ``requests`` array.

evalstore's own earlier spellings still work where AgentV has none: ``/invoke`` also takes ``messages``
(a list of ``{role, content}``, used when there is no ``question``) and ``system_prompt``, and its answer
also carries ``raw_text``, ``model`` and ``cache_hit`` (graders written from evalstore's earlier docs read
``raw_text``). AgentV's ``evalCaseId`` and ``attempt`` change nothing a chat model is sent; a request's
``target`` names another judge target (one of ``availableTargets``).

Each call forwards to the judge target through the run's judge pool (its retries and concurrency limit),
through the judge cache, and is recorded as a ``grader_called`` event of the code grader (request, reply,
model, usage, digests), exactly like an LLM grader's judge call, a batch's calls each as one: a replay whose
requests are unchanged reuses the recorded replies (their ``tokenUsage`` too) and calls nothing. ``/info``
calls nothing and answers from the configuration and the count. The judge target's configured model and
parameters apply (a request's own ``temperature``/``max_tokens`` are not forwarded). A judge from a targets
file is sent what AgentV's provider sends (``buildChatPrompt``: the system prompt trimmed, else AgentV's
default; the question trimmed): ``judge.client.pi_request``.

AgentV 4.42.4 itself never starts this proxy: ``CodeGrader`` starts it only when ``context.judgeProvider``
is set, and nothing in 4.42.4 sets it, so there such a grader gets no ``AGENTV_TARGET_PROXY_URL``.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from evalstore.replay.errors import NoJudgeError, ReplayError
from evalstore.replay.evalfile.specs import CodeGraderSpec
from evalstore.replay.grading.graders.base import GradingContext

if TYPE_CHECKING:
    from evalstore.replay.grading.judge.targets import ResolvedJudge

MAX_REQUEST_BYTES = 5_000_000
CORS_HEADERS = (
    ("Access-Control-Allow-Origin", "*"),
    ("Access-Control-Allow-Methods", "GET, POST, OPTIONS"),
    ("Access-Control-Allow-Headers", "Content-Type, Authorization"),
)
"""What AgentV's proxy sets on every answer."""
MISSING_QUESTION = "Missing required field: question"


class ProxyUnavailable(ReplayError):
    """No judge target for the grader's proxy."""


class _Missing(ValueError):
    """A request without the field AgentV requires (answered 400 with AgentV's words)."""


class _Judge:
    """One judge target the proxy forwards to: resolved, and whether only recorded replies can be used."""

    def __init__(self, resolved: ResolvedJudge, cache_only: bool) -> None:
        self.resolved = resolved
        self.cache_only = cache_only


class TargetProxy:
    """A context manager: the proxy runs inside the ``with`` block; ``env`` is what the grader gets."""

    def __init__(self, ctx: GradingContext, spec: CodeGraderSpec) -> None:
        self.ctx = ctx
        self.spec = spec
        self.max_calls = spec.target_max_calls or 0
        self.token = secrets.token_hex(32)  # AgentV: randomBytes(32).toString("hex")
        self.calls = 0
        self.refused = 0
        self.call_event_ids: list[str] = []
        self.cache_hits = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._judge, self._client, self._cache_only = self._resolve()
        self._judges: dict[str, _Judge] = {self._judge.target: _Judge(self._judge, self._cache_only)}
        self._available: list[str] | None = None

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

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def do_OPTIONS(self) -> None:
                self._answer("OPTIONS")

            def do_PUT(self) -> None:
                self._answer("PUT")

            def do_DELETE(self) -> None:
                self._answer("DELETE")

            def do_PATCH(self) -> None:
                self._answer("PATCH")

            def _answer(self, method: str) -> None:
                authorization = self.headers.get("Authorization", "")
                body = self._body if method == "POST" else (lambda: b"")
                status, answer = proxy.handle(method, self.path, authorization, body)
                self.send_response(status)
                for name, value in CORS_HEADERS:
                    self.send_header(name, value)
                if answer is None:  # OPTIONS: 204, no body
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = json.dumps(answer, ensure_ascii=False).encode("utf-8")
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

    def handle(self, method: str, path: str, authorization: str, body: Any = b"") -> tuple[int, dict[str, Any] | None]:
        """One HTTP request, routed as AgentV's proxy routes it: the status and the JSON answer (None: no body).
        ``body`` is the request's bytes, or a function reading them (read only where AgentV reads them: a
        call past the limit is refused first); None, or a function returning None, for one too large."""
        if method == "OPTIONS":
            return 204, None
        if not hmac.compare_digest(authorization.encode(), f"Bearer {self.token}".encode()):
            return 401, {"error": "Unauthorized"}
        read = body if callable(body) else (lambda: body)
        if method == "GET" and path == "/info":
            return 200, self.info()
        if method == "POST" and path == "/invoke":
            return self._invoke(read)
        if method == "POST" and path == "/invokeBatch":
            return self._invoke_batch(read)
        return 404, {"error": "Not found"}

    def info(self) -> dict[str, Any]:
        """``GET /info``: AgentV's ``TargetInfo``."""
        with self._lock:
            count = self.calls
        return {
            "targetName": self._judge.target,
            "maxCalls": self.max_calls,
            "callCount": count,
            "availableTargets": self.available_targets(),
        }

    def available_targets(self) -> list[str]:
        """The targets a request's ``target`` may name: the grader's judge first, then every other target the
        run's judges come from that can grade (AgentV lists the run target and every target of the file; an
        agent target is no judge here, so it is not offered)."""
        if self._available is None:
            pool = self.ctx.judges
            others = [n for n in pool.judges() if n != self._judge.target] if pool is not None else []
            self._available = [self._judge.target, *others]
        return self._available

    def _invoke(self, read: Any) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if self.calls >= self.max_calls:
                self.refused += 1
                return 429, {"error": f"Max calls exceeded (limit: {self.max_calls})"}
        raw = read()
        if raw is None:
            return 413, {"error": f"request over {MAX_REQUEST_BYTES} bytes"}
        try:
            request = json.loads(raw)
        except ValueError as exc:  # AgentV: JSON.parse throws inside its try: 500
            return 500, {"error": f"request body is not JSON: {exc}"}
        if request is None:
            return 500, {"error": "Cannot read properties of null (reading 'question')"}
        try:
            messages = _messages(request)
        except _Missing as exc:
            return 400, {"error": str(exc)}
        except TypeError as exc:
            return 400, {"error": f"bad request: {exc}"}
        judge, unknown = self._target(request.get("target"))
        if judge is None:
            return 400, {"error": unknown}
        with self._lock:
            if self.calls >= self.max_calls:  # another request took the last call meanwhile
                self.refused += 1
                return 429, {"error": f"Max calls exceeded (limit: {self.max_calls})"}
            self.calls += 1
        reply, error = self._forward(judge, messages)
        if reply is None:
            return 500, {"error": error}
        cache_hit = reply.pop("_cache_hit")
        # evalstore's earlier answer, kept after AgentV's: graders written from its earlier docs read raw_text.
        return 200, {**reply, "raw_text": reply["rawText"], "model": judge.resolved.model, "cache_hit": cache_hit}

    def _invoke_batch(self, read: Any) -> tuple[int, dict[str, Any]]:
        raw = read()
        if raw is None:
            return 413, {"error": f"request over {MAX_REQUEST_BYTES} bytes"}
        try:
            body = json.loads(raw)
        except ValueError as exc:
            return 500, {"error": f"request body is not JSON: {exc}"}
        if body is None:
            return 500, {"error": "Cannot destructure property 'requests' of null"}
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list):
            return 400, {"error": "Missing required field: requests (array)"}
        with self._lock:
            if self.calls + len(requests) > self.max_calls:
                self.refused += len(requests)
                return 429, {
                    "error": f"Batch would exceed max calls (current: {self.calls}, batch: {len(requests)}, "
                    f"limit: {self.max_calls})"
                }
        responses: list[dict[str, Any]] = []
        for request in requests:
            try:
                messages = _messages(request)
            except _Missing as exc:
                responses.append(_failed(str(exc)))
                continue
            except TypeError as exc:
                responses.append(_failed(f"bad request: {exc}"))
                continue
            judge, unknown = self._target(request.get("target"))
            if judge is None:
                responses.append(_failed(str(unknown)))
                continue
            with self._lock:
                if self.calls >= self.max_calls:  # a concurrent /invoke took a call the batch was counted for
                    self.refused += 1
                    responses.append(_failed(f"Max calls exceeded (limit: {self.max_calls})"))
                    continue
                self.calls += 1
            reply, error = self._forward(judge, messages)
            if reply is None:
                responses.append(_failed(str(error)))
            else:
                reply.pop("_cache_hit")
                responses.append(reply)
        return 200, {"responses": responses}

    def _target(self, name: Any) -> tuple[_Judge | None, str | None]:
        """The judge a request's ``target`` names (absent or null: the grader's), or None and why not (AgentV's
        words for a target it does not know)."""
        if name is None or name == self._judge.target:
            return self._judges[self._judge.target], None
        unknown = f"Unknown target '{name}'. Available: {', '.join(self.available_targets())}"
        if not isinstance(name, str) or name not in self.available_targets():
            return None, unknown
        with self._lock:
            known = self._judges.get(name)
        if known is not None:
            return known, None
        pool = self.ctx.judges
        assert pool is not None
        try:
            resolved, unavailable = pool.resolve_or_cache_only(pool.named(name))
        except NoJudgeError:
            return None, unknown
        except ReplayError as exc:
            return None, f"target '{name}' cannot be used: {exc}"
        judge = _Judge(resolved, unavailable is not None)
        with self._lock:
            self._judges.setdefault(name, judge)
        return judge, None

    def _forward(self, judge: _Judge, messages: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str | None]:
        """One call of ``judge``, through the judge cache and recorded: AgentV's ``{output, rawText,
        tokenUsage}`` (and whether the reply was reused, under ``_cache_hit``), or None and why it failed."""
        from evalstore.replay.agentv.wire import agentv_token_usage
        from evalstore.replay.grading.judge.calls import JudgeCall

        call = JudgeCall(
            self.ctx,
            self.spec.name,
            judge.resolved,
            self._client,
            cache_only=judge.cache_only,
            grader_type=self.spec.type,
            batchable=False,
        )
        outcome = call.run(messages, lambda reply: reply)  # type: ignore[arg-type,return-value]
        with self._lock:
            self.call_event_ids += outcome.call_event_ids
            self.cache_hits += int(outcome.cache_hit)
        if outcome.result is None:
            reason = outcome.error or "the target cannot be called (no key) and no recorded reply matches"
            return None, f"target {judge.resolved.target} failed: {reason}"
        text = str(outcome.result)
        reply: dict[str, Any] = {"output": [{"role": "assistant", "content": text}], "rawText": text}
        usage = agentv_token_usage(outcome.usage)
        if usage is not None:  # JSON.stringify leaves an undefined tokenUsage out
            reply["tokenUsage"] = usage
        reply["_cache_hit"] = outcome.cache_hit
        return reply, None


def _failed(error: str) -> dict[str, Any]:
    """A batch request that could not be made, as AgentV answers it."""
    return {"output": [], "rawText": f"Error: {error}"}


def _messages(request: Any) -> list[dict[str, Any]]:
    """The chat messages of one request: AgentV's ``{question, systemPrompt?}`` (a system message only when
    one is given: a targets-file judge is sent AgentV's default then, as AgentV's provider sends it), else
    evalstore's ``messages``; ``system_prompt`` is evalstore's spelling of ``systemPrompt``."""
    if not isinstance(request, dict):
        raise _Missing(MISSING_QUESTION)
    question = request.get("question")
    system = request.get("systemPrompt")
    if system is None:
        system = request.get("system_prompt")
    messages: list[dict[str, Any]] = []
    if system is not None:
        if not isinstance(system, str):
            raise TypeError("systemPrompt must be a string")
        messages.append({"role": "system", "content": system})
    if isinstance(question, str) and question:
        messages.append({"role": "user", "content": question})
    elif request.get("messages") is not None:
        given = request["messages"]
        if not isinstance(given, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in given
        ):
            raise TypeError("messages must be a list of {role, content}")
        messages += [{"role": m["role"], "content": m.get("content")} for m in given]
    else:
        raise _Missing(MISSING_QUESTION)
    return messages
