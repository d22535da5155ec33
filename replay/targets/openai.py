"""The ``openai`` provider: an OpenAI-compatible Chat Completions endpoint as the target.

The endpoint, model, key and parameters are read exactly as for a judge (``evalstore.replay.grading.judge.targets``),
and the request goes through the judge's client with its retries, so a target and a judge configured
the same way behave the same way. ``azure``, ``openrouter`` and ``openai-compatible`` work too.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import replace
from typing import Any

from evalstore.replay.agentv.wire import agentv_token_usage
from evalstore.replay.bounded_http import deadline_client
from evalstore.replay.content import Message, chat_prompt, question_text, system_message
from evalstore.replay.errors import JudgeConfigError, TargetConfigError
from evalstore.replay.grading.conversation import as_text
from evalstore.replay.grading.judge.client import Exchange, JudgeClient, RetryPolicy
from evalstore.replay.grading.judge.targets import CHAT_COMPLETIONS_PROVIDERS, JudgeTarget
from evalstore.replay.jsontext import loads, stringify
from evalstore.replay.jstext import js_json_parses, js_trim, js_truthy
from evalstore.replay.piai.wire import DEFAULT_SYSTEM_PROMPT
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec, TargetStatus, positive_seconds
from evalstore.replay.targets.secrets import reference_values
from evalstore.replay.targetsfile.loader import TargetEntry

PROVIDERS = CHAT_COMPLETIONS_PROVIDERS
ERROR_BODY_CHARS = 500


def validate(spec: TargetSpec, config: dict[str, Any], eval_dir: Any) -> None:
    """Endpoint, model and key all resolvable (raises TargetConfigError), checked before any test runs."""
    _resolved(spec)


def _resolved(spec: TargetSpec) -> Any:
    # The unresolved fields go to JudgeTarget, which keeps the key as the name of its variable and
    # resolves it itself; ``resolve`` in base has already proven every reference is set.
    fields = {k: v for k, v in spec.fields.items() if k not in ("name", "provider")}
    entry = TargetEntry(spec.name, spec.provider, fields, None, spec.source or "")
    try:
        return JudgeTarget.from_entry(entry).resolve(os.environ)
    except JudgeConfigError as exc:
        message = str(exc)
        raise (
            TargetConfigError(message) if spec.source and message.startswith(spec.source) else spec.fail(message)
        ) from None


def run(request: RunRequest) -> TargetOutcome:
    spec = request.spec
    resolved = _resolved(spec)
    timeout = request.timeout or positive_seconds(spec, spec.fields.get("timeout_seconds"), "timeout_seconds")
    if timeout:
        resolved = replace(resolved, timeout=timeout)

    retries = spec.fields.get("max_retries", RetryPolicy.max_retries)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise spec.fail(f"`max_retries` must be a whole number >= 0, got {retries!r}")

    messages = chat_messages(request)
    # The transport the judge's pool uses: each network wait within the time the request has left.
    with deadline_client(timeout=resolved.timeout) as http:
        client = JudgeClient(
            http,
            threading.BoundedSemaphore(1),
            RetryPolicy(max_retries=retries),
            references=reference_values(spec.fields, secrets_only=True),
        )
        exchanges = client.complete(resolved, messages)
    return _outcome(spec.name, exchanges)


def chat_messages(request: RunRequest) -> list[dict[str, Any]]:
    """The test's input as AgentV 4.42.4 sends it to a model target, byte for byte: its chat prompt
    (:func:`~evalstore.replay.content.chat_prompt`), else the system message and the flat question; a turn of
    a conversation, the history as it stands (each content as text). The default system prompt when there is
    no system message (``buildChatPrompt``)."""
    base_dir = str(request.eval_dir)
    messages = request.test.input
    if request.test.mode == "conversation":
        return _as_sent([{"role": m.role, "content": as_text(m.content), "name": m.name} for m in messages])
    chat = chat_prompt(messages, base_dir)
    if chat is None:
        system = system_message(messages, base_dir)
        return _as_sent(
            [
                {"role": "system", "content": js_trim(system) if system and js_trim(system) else DEFAULT_SYSTEM_PROMPT},
                {"role": "user", "content": js_trim(question_text(messages, base_dir))},
            ]
        )
    return _as_sent(chat)


def _as_sent(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A chat prompt as pi-ai sends it: the default system prompt when it has no system message (the
    test's system message would be one), every system message first as one joined by blank lines, a tool
    message as an assistant one naming it."""
    if not any(m["role"] == "system" for m in chat):
        chat = [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT}, *chat]
    out = [{"role": "system", "content": "\n\n".join(m["content"] for m in chat if m["role"] == "system")}]
    for m in chat:
        if m["role"] in ("tool", "function"):
            out.append({"role": "assistant", "content": f"@[{m.get('name') or 'Tool'}]: {m['content']}"})
        elif m["role"] != "system":
            out.append({"role": m["role"], "content": m["content"]})
    return out


def refusal(status: int, body: bytes) -> str:
    """An error reply in AgentV's words: pi-ai's (``piErrorFromResult``: ``HTTP <status> <rest>`` when the
    message is a status and one line, else the message) of the OpenAI SDK's message, which pi-ai keeps
    (``APIError.makeMessage`` of ``makeStatusError(status, JSON.parse(body), body if not JSON)``): a JSON
    body's ``error.message``, else its ``error`` as JSON, else a body that is not JSON as it is, else
    ``status code (no body)``. So ``{"error": {"message": "..."}}`` is that message (tests/fixtures/
    agentv-newuser4's `outage` and `chat` runs), not the JSON."""
    text = body.decode("utf-8", errors="replace")
    parsed = loads(text) if js_json_parses(text) else None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if js_truthy(message):
        msg = message if isinstance(message, str) else stringify(message).decode("utf-8")
    elif js_truthy(error):
        msg = stringify(error).decode("utf-8")
    else:
        msg = "" if js_truthy(parsed) else text
    raw = f"{status} {msg[:ERROR_BODY_CHARS]}" if msg else f"{status} status code (no body)"
    # JavaScript's /^(\d{3})\b\s*(.*)$/: `.` stops at a line break and `$` is the very end.
    match = re.fullmatch(r"(\d{3})\b\s*(.*)", raw)
    if match is None:
        return f"pi-ai call failed: {raw}"
    return f"pi-ai call failed: HTTP {match[1]} {match[2] or raw}"


def _outcome(target: str, exchanges: list[Exchange]) -> TargetOutcome:
    last = exchanges[-1]
    attempts = f" after {len(exchanges)} attempts" if len(exchanges) > 1 else ""
    if last.outcome != "ok":
        # An HTTP refusal in pi-ai's words, as the vendors' targets give it (the judge's client words it
        # as the judge's, and this endpoint is the target's).
        body = last.body.decode("utf-8", errors="replace").strip()[:ERROR_BODY_CHARS] if last.body else ""
        if last.status is not None:
            detail = refusal(last.status, last.body or b"")
        else:
            detail = (last.error or "request failed") + (f": {body}" if body else "")
        status: TargetStatus = "timeout" if last.outcome == "timeout" else "error"
        return TargetOutcome(messages=[], status=status, error=f"target '{target}'{attempts}: {detail}")
    if last.content is None:
        return TargetOutcome(
            messages=[],
            status="error",
            error=f"target '{target}': the reply has no choices[0].message.content",
        )
    return TargetOutcome(
        messages=[Message(role="assistant", content=last.content)],
        output_text=last.content,
        token_usage=agentv_token_usage(last.usage),
    )
