"""The ``openai`` provider: an OpenAI-compatible Chat Completions endpoint as the target.

The endpoint, model, key and parameters are read exactly as for a judge (``evalstore.replay.grading.judge.targets``),
and each request goes through the judge's client; a failed one is asked again as AgentV 4.42.4's provider asks
it (its ``withRetry`` around the OpenAI SDK's own retry), with no timeout but the SDK's ten minutes a request.
``azure``, ``openrouter`` and ``openai-compatible`` work too.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from evalstore.replay.agentv.wire import agentv_token_usage
from evalstore.replay.bounded_http import deadline_client
from evalstore.replay.content import Message, chat_prompt, question_text, system_message
from evalstore.replay.errors import JudgeConfigError, TargetConfigError
from evalstore.replay.grading.conversation import as_text
from evalstore.replay.grading.judge.client import Exchange, JudgeClient
from evalstore.replay.grading.judge.targets import CHAT_COMPLETIONS_PROVIDERS, JudgeTarget
from evalstore.replay.jsontext import loads, stringify
from evalstore.replay.jstext import js_json_parses, js_trim, js_truthy
from evalstore.replay.piai import sdk_retry
from evalstore.replay.piai.config import retry_policy
from evalstore.replay.piai.wire import DEFAULT_SYSTEM_PROMPT, Retry
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec, TargetStatus
from evalstore.replay.targets.secrets import reference_values
from evalstore.replay.targetsfile.loader import TargetEntry

PROVIDERS = CHAT_COMPLETIONS_PROVIDERS
_log = logging.getLogger(__name__)
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
    # AgentV 4.42.4 reads no timeout for these targets (``resolveOpenAIConfig``): each request waits as the
    # OpenAI SDK does, ten minutes, unless the command line's --timeout says otherwise. ``timeout_seconds``
    # is not read (``agentv_syntax`` warns of it).
    resolved = replace(_resolved(spec), timeout=request.timeout or sdk_retry.TIMEOUT_SECONDS)
    policy = retry_policy(spec, request.config)
    messages = chat_messages(request)
    # The transport the judge's pool uses: each network wait within the time the request has left.
    with deadline_client(timeout=resolved.timeout) as http:
        client = JudgeClient(
            http,
            threading.BoundedSemaphore(1),
            references=reference_values(spec.fields, secrets_only=True),
        )
        exchanges = _asked(lambda: client.exchange(resolved, messages), policy, spec.name, request.attempt)
    return _outcome(spec.name, exchanges)


def _asked(send: Callable[[], Exchange], policy: Retry, target: str, call: int) -> list[Exchange]:
    """Every request of one call of the target, retried as AgentV's provider retries it: ``withRetry``
    (``policy``: the target's ``max_retries`` and ``retry_*`` fields) around the OpenAI SDK's own retry
    (``piai.sdk_retry``). ``withRetry`` retries an error whose HTTP status is one of its codes (not 401 or
    403); the SDK's errors with no status ("Connection error.", "Request timed out.") are not the network
    errors it knows, so only the SDK retries those. ``call``: which call of the target this is (from 0)."""
    exchanges: list[Exchange] = []
    attempt = 0
    while True:
        retried = 0
        while True:
            exchange = send()
            exchanges.append(exchange)
            if _answered(exchange):
                break
            pause = sdk_retry.again(retried, exchange.status, exchange.retry_headers)
            if pause is None:
                break
            if exchange.outcome == "timeout":
                # Each such request waited the whole timeout: say so, or a hung endpoint is minutes of silence.
                _log.warning(
                    "target %r (call %d): request %d %s; trying again",
                    target,
                    call + 1,
                    len(exchanges),
                    exchange.error,
                )
            time.sleep(pause)
            retried += 1
        if _answered(exchange) or not policy.retries(attempt, exchange.status):
            return exchanges
        time.sleep(policy.delay(attempt))
        attempt += 1


def _answered(exchange: Exchange) -> bool:
    """An answer (HTTP 200, usable or not): neither the SDK nor ``withRetry`` asks again."""
    return exchange.outcome == "ok" or exchange.status == 200


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
    attempts = f" after {len(exchanges)} requests" if len(exchanges) > 1 else ""
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
