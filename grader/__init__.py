"""Write a code grader in Python without handling the stdin/stdout protocol yourself.

    from evalstore.grader import CodeGraderInput, code_grader

    @code_grader
    def grade(payload: CodeGraderInput):
        return "42" in (payload.output or "")

Run as a script (``python grade.py``, or ``command: [python, grade.py]`` in an eval file), the decorator
reads the JSON payload from stdin into a :class:`CodeGraderInput`, calls the function, and prints the
result as the protocol's JSON (``{"score", "assertions", "details"}``). The function may return a
:class:`Result`, a dict in the protocol's shape, a number (the score, clamped to 0..1) or a bool
(1 or 0). An exception (or a payload that is not JSON) ends the process with exit code 1 and a message
on stderr, which evalstore and AgentV record as an execution error, not as a score of 0.

Imported from anything other than ``__main__`` (a test, another module), the decorator runs nothing:
the function stays callable, and ``grade.main(stdin_text)`` runs the whole protocol in-process.

:func:`target_client` reaches the grader's judge target through the proxy evalstore starts for a code
grader configured with ``target: {max_calls: N}``.

This module uses the standard library only: importing it loads neither the store, SQLAlchemy nor
pydantic, so a grader starts fast.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = [
    "Assertion",
    "CodeGraderInput",
    "GraderError",
    "Message",
    "Result",
    "TargetClient",
    "TargetError",
    "TargetResponse",
    "TraceSummary",
    "code_grader",
    "parse_input",
    "target_client",
    "to_protocol",
]


class GraderError(Exception):
    """The grader could not produce a result (bad payload, bad return value)."""


@dataclass(frozen=True)
class Message:
    """One message of the conversation: ``role`` (system/user/assistant/tool) and ``content``, which is
    a string or a list of content blocks (``{"type": "text"|"image"|"file", ...}``)."""

    role: str
    content: Any = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The message exactly as sent."""

    @property
    def text(self) -> str:
        """The message's text: the string content, or its text blocks joined by newlines. A text block
        holds its text as ``text`` (a transcript's content) or ``value`` (an eval file's content segment,
        as AgentV writes ``expected_output: [{type: text, value: ...}]``): both are read."""
        if isinstance(self.content, str):
            return self.content
        if isinstance(self.content, list):
            return "\n".join(
                _block_text(block) for block in self.content if isinstance(block, dict) and block.get("type") == "text"
            )
        return ""

    @classmethod
    def from_dict(cls, data: Any) -> Message:
        if not isinstance(data, dict):
            return cls(role="user", content=data, raw={"content": data})
        calls = data.get("tool_calls")
        return cls(
            role=str(data.get("role", "")),
            content=data.get("content"),
            tool_calls=[c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else [],
            raw=data,
        )


@dataclass(frozen=True)
class TraceSummary:
    """Lightweight execution metrics."""

    event_count: int = 0
    """Total tool invocations."""
    tool_calls: dict[str, int] = field(default_factory=dict)
    """Invocations per tool name."""
    error_count: int = 0
    """Failed tool calls."""
    llm_call_count: int = 0
    """Assistant messages."""
    tool_durations: dict[str, list[float]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any) -> TraceSummary | None:
        if not isinstance(data, dict):
            return None
        return cls(
            event_count=_int(data.get("event_count")),
            tool_calls={str(k): _int(v) for k, v in (data.get("tool_calls") or {}).items()},
            error_count=_int(data.get("error_count")),
            llm_call_count=_int(data.get("llm_call_count")),
            tool_durations=dict(data.get("tool_durations") or {}),
        )


@dataclass(frozen=True)
class CodeGraderInput:
    """The stdin payload of a code grader (AgentV's wire format, snake_case keys), typed.

    Every field of AgentV's code-grader contract is here; ``raw`` holds the payload as received, so
    keys added later are never out of reach.
    """

    input: list[Message] = field(default_factory=list)
    """The full resolved input messages the target was sent."""
    output: str | None = None
    """The final answer as text (after preprocessing); None when it was too large and sent as ``output_path``."""
    answer: str | None = None
    """Deprecated alias of ``output``."""
    messages: list[Message] = field(default_factory=list)
    """The transcript: input and everything the target said, with tool calls."""
    expected_output: list[Message] = field(default_factory=list)
    """Reference answer messages."""
    output_path: str | None = None
    """A temporary file holding the final answer as a JSON string, when ``output`` is omitted."""
    input_files: list[str] = field(default_factory=list)
    """Paths of input files referenced in the eval."""
    criteria: str = ""
    """What a good answer does, as written in the eval."""
    trace: dict[str, Any] | None = None
    """AgentV's ``Trace`` read model: the summary's counts, ``messages`` (the input, then the agent's output),
    ``events`` (each message, tool call, tool result and the final response, in order), ``token_usage``,
    ``cost_usd``, ``duration_ms``, ``start_time``, ``end_time``, ``metadata`` (provenance)."""
    trace_summary: TraceSummary | None = None
    token_usage: dict[str, Any] | None = None
    """``{"input": N, "output": N, ...}``"""
    cost_usd: float | None = None
    duration_ms: float | None = None
    start_time: str | None = None
    """ISO timestamp of the first event."""
    end_time: str | None = None
    """ISO timestamp of the last event."""
    file_changes: str | None = None
    """Unified diff of the workspace against its state before the agent ran (when a workspace is configured)."""
    workspace_path: str | None = None
    """The agent's workspace as it was when it finished (during a replay: a private copy of its snapshot)."""
    metadata: dict[str, Any] | None = None
    """The test's metadata, suite metadata merged in."""
    config: dict[str, Any] | None = None
    """The grader's ``config`` from the eval file."""
    files: list[dict[str, Any]] = field(default_factory=list)
    """evalstore's addition: every file the agent produced, as ``{path, media_type, local_path, sha256}``,
    copied to a private temporary folder (``local_path``)."""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def output_text(self) -> str:
        """The final answer, read from ``output_path`` when it was too large to send inline."""
        if self.output is not None:
            return self.output
        if self.output_path:
            with open(self.output_path, encoding="utf-8") as handle:
                value = json.load(handle)
            return value if isinstance(value, str) else json.dumps(value)
        return self.answer or ""


def parse_input(data: Any) -> CodeGraderInput:
    """A decoded stdin payload as a :class:`CodeGraderInput` (unknown keys stay in ``raw``)."""
    if not isinstance(data, dict):
        raise GraderError(f"the grader payload must be a JSON object, not {type(data).__name__}")
    return CodeGraderInput(
        input=_messages(data.get("input")),
        output=_opt_str(data.get("output")),
        answer=_opt_str(data.get("answer")),
        messages=_messages(data.get("messages")),
        expected_output=_messages(data.get("expected_output")),
        output_path=_opt_str(data.get("output_path")),
        input_files=[str(p) for p in data.get("input_files") or []],
        criteria=str(data.get("criteria") or ""),
        trace=data.get("trace") if isinstance(data.get("trace"), dict) else None,
        trace_summary=TraceSummary.from_dict(data.get("trace_summary")),
        token_usage=data.get("token_usage") if isinstance(data.get("token_usage"), dict) else None,
        cost_usd=_opt_float(data.get("cost_usd")),
        duration_ms=_opt_float(data.get("duration_ms")),
        start_time=_opt_str(data.get("start_time")),
        end_time=_opt_str(data.get("end_time")),
        file_changes=_opt_str(data.get("file_changes")),
        workspace_path=_opt_str(data.get("workspace_path")),
        metadata=data.get("metadata") if isinstance(data.get("metadata"), dict) else None,
        config=data.get("config") if isinstance(data.get("config"), dict) else None,
        files=[f for f in data.get("files") or [] if isinstance(f, dict)],
        raw=data,
    )


@dataclass
class Assertion:
    """One checked statement: AgentV's ``{text, passed, evidence}``."""

    text: str
    passed: bool
    evidence: str | None = None


@dataclass
class Result:
    """What a grader returns. ``score`` None means: the share of passed assertions (0 without any)."""

    score: float | None = None
    assertions: list[Assertion] = field(default_factory=list)
    details: dict[str, Any] | None = None

    def check(self, text: str, passed: bool, evidence: str | None = None) -> bool:
        """Add an assertion; returns ``passed`` so it reads inline: ``if r.check(...)``."""
        self.assertions.append(Assertion(text, bool(passed), evidence))
        return bool(passed)


def to_protocol(value: Any) -> dict[str, Any]:
    """A grader function's return value as the protocol's JSON object."""
    if isinstance(value, bool):
        return {"score": 1.0 if value else 0.0, "assertions": []}
    if isinstance(value, (int, float)):
        if not math.isfinite(float(value)):
            raise GraderError(f"the grader returned a score that is not a finite number: {value!r}")
        return {"score": min(1.0, max(0.0, float(value))), "assertions": []}
    if isinstance(value, Result):
        value = {
            "score": value.score,
            "assertions": [
                {k: v for k, v in vars(a).items() if not (k == "evidence" and v is None)} for a in value.assertions
            ],
            "details": value.details,
        }
    if isinstance(value, dict):
        return _dict_result(value)
    raise GraderError(f"the grader returned {type(value).__name__}; return a Result, a dict, a number or a bool")


def _dict_result(value: dict[str, Any]) -> dict[str, Any]:
    assertions = []
    for item in value.get("assertions") or []:
        if isinstance(item, Assertion):
            item = vars(item)
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise GraderError(f"an assertion must be {{text, passed, evidence?}}, got {item!r}")
        entry: dict[str, Any] = {"text": item["text"], "passed": bool(item.get("passed"))}
        if item.get("evidence") is not None:
            entry["evidence"] = item["evidence"]
        assertions.append(entry)
    score = value.get("score")
    if score is None:
        score = sum(a["passed"] for a in assertions) / len(assertions) if assertions else 0.0
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(float(score)):
        raise GraderError(f"score must be a finite number, got {score!r}")
    out: dict[str, Any] = {"score": min(1.0, max(0.0, float(score))), "assertions": assertions}
    if value.get("details") is not None:
        out["details"] = value["details"]
    return out


GraderFunction = Callable[[CodeGraderInput], Any]


def _run(fn: GraderFunction, stdin: str, stdout: TextIO) -> None:
    try:
        data = json.loads(stdin)
    except json.JSONDecodeError as exc:
        raise GraderError(f"stdin is not JSON ({exc.msg} at line {exc.lineno})") from None
    result = to_protocol(fn(parse_input(data)))
    stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
    stdout.flush()


def code_grader(fn: GraderFunction) -> GraderFunction:
    """Make ``fn`` a code grader: run as a script, it reads stdin, calls ``fn`` and prints the result.

    Errors end the process with exit code 1 and one line on stderr (``EVALSTORE_GRADER_DEBUG=1`` adds
    the traceback). ``fn.main(stdin_text)`` runs the protocol in-process and returns the JSON object.
    """

    def main(stdin_text: str) -> dict[str, Any]:
        data = json.loads(stdin_text)
        return to_protocol(fn(parse_input(data)))

    fn.main = main  # type: ignore[attr-defined]
    if fn.__module__ == "__main__":
        try:
            _run(fn, sys.stdin.read(), sys.stdout)
        except Exception as exc:
            if os.environ.get("EVALSTORE_GRADER_DEBUG"):
                import traceback

                traceback.print_exc()
            name = getattr(fn, "__name__", "grader")
            kind = "" if isinstance(exc, GraderError) else f"{type(exc).__name__}: "
            sys.stderr.write(f"code grader {name} failed: {kind}{exc}\n")
            sys.stderr.flush()
            raise SystemExit(1) from None
        raise SystemExit(0)
    return fn


# --- target access ------------------------------------------------------------------------------


class TargetError(Exception):
    """The proxy refused or failed a call (call limit reached, target error, bad token); ``status`` is the
    proxy's HTTP status (429: past ``max_calls``), None when it could not be reached."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class TargetResponse:
    """The judge target's reply: ``raw_text`` is the model's text (the proxy's ``rawText``); ``usage`` its
    token counts (``tokenUsage``: ``{input, output, cached?}``); ``raw`` the proxy's whole answer."""

    raw_text: str
    model: str | None = None
    usage: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


class TargetClient:
    """Calls the grader's judge target through the target proxy (HTTP on 127.0.0.1), in the protocol of
    AgentV's ``createTargetClient``: ``POST /invoke`` with ``{question, systemPrompt}``, ``GET /info``."""

    def __init__(self, url: str, token: str, *, timeout: float = 300.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def invoke(
        self,
        question: str | None = None,
        *,
        system_prompt: str | None = None,
        messages: Sequence[dict[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        target: str | None = None,
    ) -> TargetResponse:
        """One call: ``question`` (a user message) with an optional ``system_prompt``, or ``messages``;
        ``target`` names another judge target than the grader's (one of :meth:`info`'s ``availableTargets``)."""
        request = _request(question, system_prompt, messages, temperature, max_tokens, target)
        return self._post(request)

    def info(self) -> dict[str, Any]:
        """``GET /info``: ``{targetName, maxCalls, callCount, availableTargets}``."""
        return self._send("/info", None)

    def invoke_batch(self, requests: Sequence[dict[str, Any]], *, concurrency: int = 4) -> list[TargetResponse]:
        """Several calls in parallel (each its own ``POST /invoke``), each a dict of :meth:`invoke`'s arguments
        (``system_prompt`` or ``systemPrompt``); replies in the same order. Any call that fails raises."""
        bodies = [
            _request(
                r.get("question"),
                r.get("system_prompt", r.get("systemPrompt")),
                r.get("messages"),
                r.get("temperature"),
                r.get("max_tokens"),
                r.get("target"),
            )
            for r in requests
        ]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(bodies) or 1))) as pool:
            return list(pool.map(self._post, bodies))

    def _post(self, body: dict[str, Any]) -> TargetResponse:
        reply = self._send("/invoke", body)
        text = reply.get("rawText", reply.get("raw_text"))
        return TargetResponse(
            raw_text=str(text or ""),
            model=reply.get("model"),
            usage=reply.get("tokenUsage"),
            raw=reply,
        )

    def _send(self, path: str, body: dict[str, Any] | None) -> Any:
        """``POST path`` with ``body``, or ``GET path`` without one: the JSON answer."""
        import urllib.error  # here, not at the top: a grader that never calls a target starts faster
        import urllib.request

        request = urllib.request.Request(
            f"{self.url}{path}",
            data=json.dumps(body).encode("utf-8") if body is not None else None,
            method="POST" if body is not None else "GET",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", errors="replace")
            try:
                parsed = json.loads(detail)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
                detail = parsed["error"]
            raise TargetError(f"target proxy refused the call (HTTP {exc.code}): {detail}", exc.code) from None
        except urllib.error.URLError as exc:
            raise TargetError(f"target proxy at {self.url} not reachable: {exc.reason}") from None


def target_client() -> TargetClient | None:
    """The client for this grader's target proxy, or None when the grader has no ``target:`` configured
    (``AGENTV_TARGET_PROXY_URL`` / ``AGENTV_TARGET_PROXY_TOKEN`` unset)."""
    url = os.environ.get("AGENTV_TARGET_PROXY_URL")
    token = os.environ.get("AGENTV_TARGET_PROXY_TOKEN")
    if not url or not token:
        return None
    return TargetClient(url, token)


def _request(
    question: str | None,
    system_prompt: str | None,
    messages: Sequence[dict[str, Any]] | None,
    temperature: float | None,
    max_tokens: int | None,
    target: str | None = None,
) -> dict[str, Any]:
    if messages is None and question is None:
        raise TargetError("invoke needs a question or messages")
    body: dict[str, Any] = {}
    if messages is not None:
        body["messages"] = [dict(m) for m in messages]
    else:
        body["question"] = question
    if system_prompt is not None:
        body["systemPrompt"] = system_prompt
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if target is not None:
        body["target"] = target
    return body


# --- small readers ------------------------------------------------------------------------------


def _messages(value: Any) -> list[Message]:
    if value is None:
        return []
    if isinstance(value, str):
        return [Message(role="user", content=value, raw={"role": "user", "content": value})]
    if isinstance(value, dict):
        return [Message.from_dict(value)]
    return [Message.from_dict(m) for m in value] if isinstance(value, list) else []


def _block_text(block: dict[str, Any]) -> str:
    text = block.get("text")
    if text is None:
        text = block.get("value")
    return "" if text is None else str(text)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _opt_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
