"""Anthropic's Messages API as pi-ai's ``anthropic-messages`` stream (``@anthropic-ai/sdk``) speaks it for AgentV
4.42.4: ``POST {base}/v1/messages`` with ``x-api-key``, ``anthropic-version: 2023-06-01``, the
interleaved-thinking beta (except on models that think adaptively), and a streamed body: ``model``,
``messages`` (the last user turn a text block marked ``cache_control: ephemeral``), ``max_tokens`` (the
target's ``max_output_tokens``, else a third of the model's ceiling), ``stream: true``, ``system`` (one cached
text block), ``temperature`` unless thinking is on, and ``thinking`` (``thinking_budget``, reasoning models
only). The reply is read from its server-sent events: text blocks joined, usage from ``message_start`` and
``message_delta``.
"""

from __future__ import annotations

import json
from typing import Any

from evalstore.replay.piai.config import Written, resolve_config
from evalstore.replay.piai.wire import CallFailed, LlmConfig, Reply, sse_events, without_lone_surrogates

API_VERSION = "2023-06-01"
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
CACHE_CONTROL = {"type": "ephemeral"}
# pi-ai's mapStopReason: what ends the answer in an error.
_ERROR_STOPS = {"refusal", "sensitive"}
_STOPS = {"end_turn", "max_tokens", "tool_use", "pause_turn", "stop_sequence", *_ERROR_STOPS}


PROVIDER = "anthropic"
SDK_RETRIES = True
"""pi-ai calls through the Anthropic SDK, which retries each request itself (``piai.sdk_retry``)."""
"""pi-ai's name of the provider (its model table's key)."""


def config(spec: Written, resolved: dict[str, Any]) -> LlmConfig:
    """The target's fields as AgentV reads them for this provider (``resolveAnthropicConfig``)."""
    return resolve_config(
        spec, resolved, provider=PROVIDER, key_label="Anthropic api key", model_label="Anthropic model"
    )


def adaptive_thinking(model: str) -> bool:
    """pi-ai's ``supportsAdaptiveThinking`` (Opus 4.6+, Sonnet 4.6)."""
    return any(tag in model for tag in ("opus-4-6", "opus-4.6", "opus-4-7", "opus-4.7", "sonnet-4-6", "sonnet-4.6"))


def build_request(
    cfg: LlmConfig, system: str | None, turns: list[dict[str, str]]
) -> tuple[str, dict[str, str], dict[str, Any]]:
    """URL, headers and body as pi-ai's ``createClient`` and ``buildParams`` make them (an API key, not
    an OAuth token; no tools)."""
    headers = {
        "x-api-key": cfg.api_key,
        "anthropic-version": API_VERSION,
        "accept": "application/json",
        "anthropic-dangerous-direct-browser-access": "true",
        "content-type": "application/json",
    }
    if not adaptive_thinking(cfg.model):
        headers["anthropic-beta"] = INTERLEAVED_THINKING_BETA
    thinking = cfg.thinking_budget is not None
    body: dict[str, Any] = {
        "model": cfg.model,
        "messages": _messages(turns),
        # ``options.maxTokens || (model.maxTokens / 3) | 0``
        "max_tokens": cfg.max_output_tokens or cfg.pi_model.max_tokens // 3,
        "stream": True,
    }
    if system:
        body["system"] = [{"type": "text", "text": without_lone_surrogates(system), "cache_control": CACHE_CONTROL}]
    if cfg.temperature is not None and not thinking:
        body["temperature"] = cfg.temperature
    if thinking and cfg.pi_model.reasoning:
        if adaptive_thinking(cfg.model):
            body["thinking"] = {"type": "adaptive", "display": "summarized"}
        else:
            body["thinking"] = {
                "type": "enabled",
                "budget_tokens": cfg.thinking_budget or 1024,
                "display": "summarized",
            }
    return cfg.pi_model.base_url + "/v1/messages", headers, body


def _messages(turns: list[dict[str, str]]) -> list[dict[str, Any]]:
    """pi-ai's ``convertMessages`` for text turns: a blank user turn or assistant text is left out; the
    last message, when the user's, becomes a text block carrying the cache marker."""
    out: list[dict[str, Any]] = []
    for turn in turns:
        text = without_lone_surrogates(turn["content"])
        if not text.strip():
            continue
        if turn["role"] == "user":
            out.append({"role": "user", "content": text})
        else:
            out.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
    if out and out[-1]["role"] == "user":
        out[-1]["content"] = [{"type": "text", "text": out[-1]["content"], "cache_control": CACHE_CONTROL}]
    return out


_MESSAGE_EVENTS = {
    "message_start",
    "message_delta",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
}


def read_stream(lines: Any) -> Reply:
    """The answer from Anthropic's events as pi-ai reads them: text blocks (by index) joined in order,
    thinking left out; usage from ``message_start``, updated by ``message_delta`` where it says."""
    reply = Reply()
    blocks: dict[int, list[str]] = {}
    order: list[int] = []
    started = stopped = False
    for event, data in sse_events(lines):
        if event == "error":
            raise CallFailed(f"pi-ai call failed: {data}")
        if event not in _MESSAGE_EVENTS:
            continue
        try:
            item = json.loads(data)
        except json.JSONDecodeError as exc:
            raise CallFailed(f"pi-ai call failed: Could not parse Anthropic SSE event {event}: {exc}") from None
        kind = item.get("type")
        if kind == "message_start":
            started = True
            usage = (item.get("message") or {}).get("usage") or {}
            reply.input = usage.get("input_tokens") or 0
            reply.output = usage.get("output_tokens") or 0
            reply.cache_read = usage.get("cache_read_input_tokens") or 0
            reply.cache_write = usage.get("cache_creation_input_tokens") or 0
        elif kind == "message_stop":
            stopped = True
        elif kind == "content_block_start" and (item.get("content_block") or {}).get("type") == "text":
            blocks[item["index"]] = [(item.get("content_block") or {}).get("text") or ""]
            order.append(item["index"])
        elif kind == "content_block_delta":
            delta = item.get("delta") or {}
            if delta.get("type") == "text_delta" and item.get("index") in blocks:
                blocks[item["index"]].append(delta.get("text") or "")
        elif kind == "message_delta":
            stop = (item.get("delta") or {}).get("stop_reason")
            if stop:
                if stop not in _STOPS:
                    raise CallFailed(f"pi-ai call failed: Unhandled stop reason: {stop}")
                reply.stop = "error" if stop in _ERROR_STOPS else "stop"
            usage = item.get("usage") or {}
            reply.input = usage["input_tokens"] if usage.get("input_tokens") is not None else reply.input
            reply.output = usage["output_tokens"] if usage.get("output_tokens") is not None else reply.output
            if usage.get("cache_read_input_tokens") is not None:
                reply.cache_read = usage["cache_read_input_tokens"]
            if usage.get("cache_creation_input_tokens") is not None:
                reply.cache_write = usage["cache_creation_input_tokens"]
    if started and not stopped:
        raise CallFailed("pi-ai call failed: Anthropic stream ended before message_stop")
    if reply.stop == "error":
        raise CallFailed("pi-ai call failed: An unknown error occurred")
    reply.text = "".join("".join(blocks[i]) for i in order)
    return reply
