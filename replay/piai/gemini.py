"""Google's Generative Language API as pi-ai's ``google-generative-ai`` stream (``@google/genai``) speaks it for
AgentV 4.42.4: ``POST {base}/models/{model}:streamGenerateContent?alt=sse`` with ``x-goog-api-key`` and the
body ``contents`` (user and ``model`` turns of text parts), ``systemInstruction`` (the system prompt as a user
content) and ``generationConfig`` (``temperature``, ``maxOutputTokens`` when set; empty otherwise). The
reply's chunks are read as pi-ai reads them: text parts that are not thoughts joined, usage from the last
``usageMetadata``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from evalstore.replay.piai.config import Written, resolve_config
from evalstore.replay.piai.wire import CallFailed, LlmConfig, Reply, sse_events, without_lone_surrogates

DEFAULT_MODEL = "gemini-2.5-flash"
# pi-ai's mapStopReason: every finish reason but these ends the answer in an error.
_OK_FINISH = {"STOP", "MAX_TOKENS"}


PROVIDER = "google"
"""pi-ai's name of the provider (its model table's key)."""


def config(spec: Written, resolved: dict[str, Any]) -> LlmConfig:
    """The target's fields as AgentV reads them for this provider (``resolveGeminiConfig``)."""
    return resolve_config(
        spec,
        resolved,
        provider=PROVIDER,
        key_label="Google API key",
        model_label="Gemini model",
        default_model=DEFAULT_MODEL,
    )


def build_request(
    cfg: LlmConfig, system: str | None, turns: list[dict[str, str]]
) -> tuple[str, dict[str, str], dict[str, Any]]:
    """URL, headers and body as pi-ai's ``buildParams`` and the genai SDK put them on the wire."""
    headers = {"accept": "*/*", "content-type": "application/json", "x-goog-api-key": cfg.api_key}
    body: dict[str, Any] = {
        "contents": [
            {
                "parts": [{"text": without_lone_surrogates(t["content"])}],
                "role": "user" if t["role"] == "user" else "model",
            }
            for t in turns
            # An assistant's blank text is skipped (pi-ai's convertMessages); a user's is sent.
            if t["role"] == "user" or t["content"].strip()
        ],
    }
    if system:
        body["systemInstruction"] = {"parts": [{"text": without_lone_surrogates(system)}], "role": "user"}
    generation: dict[str, Any] = {}
    if cfg.temperature is not None:
        generation["temperature"] = cfg.temperature
    if cfg.max_output_tokens is not None:
        generation["maxOutputTokens"] = cfg.max_output_tokens
    body["generationConfig"] = generation
    url = f"{cfg.pi_model.base_url}/models/{quote(cfg.model, safe='')}:streamGenerateContent?alt=sse"
    return url, headers, body


def read_stream(lines: Any) -> Reply:
    """pi-ai's reading of the chunks: the first candidate's text parts (thoughts left out) joined, the
    finish reason, and usage from ``usageMetadata`` (cached tokens counted apart from input, thoughts
    with output)."""
    reply = Reply()
    text: list[str] = []
    for _event, data in sse_events(lines):
        if not data.strip():
            continue
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError as exc:
            raise CallFailed(f"pi-ai call failed: {exc}") from None
        if not isinstance(chunk, dict):
            continue
        if isinstance(chunk.get("error"), dict):
            raise CallFailed(f"pi-ai call failed: {json.dumps(chunk['error'])}")
        candidate = (chunk.get("candidates") or [None])[0] or {}
        for part in (candidate.get("content") or {}).get("parts") or []:
            if isinstance(part, dict) and isinstance(part.get("text"), str) and part.get("thought") is not True:
                text.append(part["text"])
        finish = candidate.get("finishReason")
        if finish:
            reply.stop = "stop" if finish in _OK_FINISH else "error"
        usage = chunk.get("usageMetadata")
        if isinstance(usage, dict):
            cached = usage.get("cachedContentTokenCount") or 0
            reply.input = (usage.get("promptTokenCount") or 0) - cached
            reply.output = (usage.get("candidatesTokenCount") or 0) + (usage.get("thoughtsTokenCount") or 0)
            reply.cache_read = cached
            reply.cache_write = 0
    if reply.stop == "error":
        raise CallFailed("pi-ai call failed: An unknown error occurred")
    reply.text = "".join(text)
    return reply
