"""What AgentV 4.42.4's direct-API providers share (``llm-providers.ts``: ``invokePiAi`` over pi-ai), for the
``anthropic`` and ``gemini`` targets: the target's fields read as ``targets.ts`` reads them, the chat prompt
made into pi-ai's context (one system prompt, user and assistant turns), the retry policy (``withRetry``),
a server-sent-event reader, and the reply made into a :class:`TargetOutcome`.

Each vendor module (``anthropic.py``, ``gemini.py``) only builds its request and reads its stream.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec, TargetStatus
from evalstore.replay.targets.chat_prompt import chat_prompt
from evalstore.replay.targets.pi_models import MODELS, PiModel
from evalstore.replay.targetsfile.loader import ENV_REFERENCE

DEFAULT_TIMEOUT_SECONDS = 600.0
"""The Anthropic SDK's own default request timeout (AgentV sets none)."""
ERROR_BODY_CHARS = 500
# pi-ai's fallback descriptor for a model its table lacks (``resolvePiModel``).
FALLBACK_MAX_TOKENS = 16_384


@dataclass(frozen=True)
class Retry:
    """``withRetry``'s policy, from the target's ``max_retries`` and ``retry_*`` fields."""

    max_retries: int = 3
    initial_delay_ms: float = 1000.0
    max_delay_ms: float = 60_000.0
    backoff_factor: float = 2.0
    status_codes: tuple[int, ...] = (500, 408, 429, 502, 503, 504)

    def delay(self, attempt: int) -> float:
        """Seconds before the next try: exponential, capped, with AgentV's ±25% jitter."""
        base = min(self.max_delay_ms, self.initial_delay_ms * self.backoff_factor**attempt)
        return base * (0.75 + random.random() * 0.5) / 1000.0


@dataclass(frozen=True)
class LlmConfig:
    """A direct-API target's fields, resolved as AgentV resolves them."""

    api_key: str = field(repr=False)
    model: str
    pi_model: PiModel
    temperature: float | None = None
    max_output_tokens: int | None = None
    thinking_budget: float | None = None
    retry: Retry = Retry()


def resolve_config(
    spec: TargetSpec,
    config: dict[str, Any],
    *,
    provider: str,
    key_label: str,
    model_label: str,
    default_model: str | None = None,
) -> LlmConfig:
    """``resolveAnthropicConfig``/``resolveGeminiConfig``: the key only as a ``${{ VAR }}`` reference, the
    model (``model``, ``deployment`` or ``variant``) required unless the provider has a default (the
    Anthropic model only as a reference too, as AgentV reads it), and the model looked up in pi-ai's
    table (``resolvePiModel``).

    ``base_url`` (or ``endpoint``) is evalstore's: AgentV always calls pi-ai's base URL for the model; a
    gateway or a local server needs it named. The labels name the key and the model in messages as AgentV
    names them."""
    name = spec.name
    api_key = _text(spec, "api_key", config, f"{name} {key_label}", literal=False)
    if not api_key:
        raise spec.fail(f"{name} {key_label} is required")
    model_key = next((k for k in ("model", "deployment", "variant") if spec.fields.get(k) is not None), "model")
    model = _text(
        spec,
        model_key,
        config,
        f"{name} {model_label}",
        literal=default_model is not None,
        optional=bool(default_model),
    )
    model = model or default_model
    if not model:
        raise spec.fail(f"{name} {model_label} is required")
    base_url = config.get("base_url", config.get("endpoint"))
    if base_url is not None and (not isinstance(base_url, str) or not base_url.strip()):
        raise spec.fail("`base_url` must be a non-empty URL")
    known = MODELS[provider].get(model)
    if known is None and base_url is None:
        raise spec.fail(
            f"pi-ai adapter cannot resolve a baseUrl for provider '{provider}' / model '{model}'. "
            "Use a model id pi-ai recognizes, or give the target `base_url:` (evalstore's field)"
        )
    pi_model = known or PiModel(str(base_url), False, FALLBACK_MAX_TOKENS, (0.0, 0.0, 0.0, 0.0))
    if base_url is not None:
        pi_model = pi_model._replace(base_url=str(base_url).strip().rstrip("/"))
    temperature = _number(spec, config.get("temperature"), f"{name} temperature")
    max_tokens = _number(spec, config.get("max_output_tokens"), f"{name} max output tokens")
    return LlmConfig(
        api_key=api_key,
        model=model,
        pi_model=pi_model,
        temperature=temperature,
        max_output_tokens=None if max_tokens is None else int(max_tokens),
        thinking_budget=_number(spec, config.get("thinking_budget"), f"{name} thinking budget"),
        retry=_retry(spec, config),
    )


def _text(
    spec: TargetSpec, key: str, config: dict[str, Any], description: str, *, literal: bool, optional: bool = False
) -> str | None:
    """``resolveOptionalString``: a ``${{ VAR }}`` reference gives the variable's value (empty: an error, or
    unset when ``optional``); a literal is trimmed, and refused unless ``literal``."""
    written = spec.fields.get(key)
    if written is None:
        return None
    if not isinstance(written, str):
        raise spec.fail(f"{description} must be a string")
    if not written.strip():
        return None
    match = ENV_REFERENCE.fullmatch(written.strip())
    if match:
        value = str(config.get(key, ""))
        if not value.strip():
            if optional:
                return None
            raise spec.fail(f"Environment variable '{match.group(1)}' required for {description} is empty")
        return value
    if not literal:
        raise spec.fail(
            f"{description} must use ${{{{ VARIABLE_NAME }}}} syntax for environment variables "
            "(AgentV 4.42.4 refuses a literal value here)"
        )
    return written.strip()


def _number(spec: TargetSpec, value: Any, description: str) -> float | None:
    """``resolveOptionalNumber``: a number or a numeric string; empty is unset."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise spec.fail(f"{description} must be a number")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float(value) if any(c in value for c in ".eE") else int(value)
        except ValueError:
            pass
    raise spec.fail(f"{description} must be a number")


def _retry(spec: TargetSpec, config: dict[str, Any]) -> Retry:
    name = spec.name
    out = Retry()
    retries = _number(spec, config.get("max_retries"), f"{name} max retries")
    initial = _number(spec, config.get("retry_initial_delay_ms"), f"{name} retry initial delay")
    most = _number(spec, config.get("retry_max_delay_ms"), f"{name} retry max delay")
    factor = _number(spec, config.get("retry_backoff_factor"), f"{name} retry backoff factor")
    codes = config.get("retry_status_codes")
    if codes is not None and codes != []:
        if not isinstance(codes, list) or not all(
            isinstance(c, (int, float)) and not isinstance(c, bool) for c in codes
        ):
            raise spec.fail(f"{name} retry status codes must be an array of numbers")
        out = Retry(status_codes=tuple(int(c) for c in codes))
    return Retry(
        max_retries=int(retries) if retries is not None else out.max_retries,
        initial_delay_ms=float(initial) if initial is not None else out.initial_delay_ms,
        max_delay_ms=float(most) if most is not None else out.max_delay_ms,
        backoff_factor=float(factor) if factor is not None else out.backoff_factor,
        status_codes=out.status_codes,
    )


# -- the prompt -----------------------------------------------------------------------------------


def pi_context(request: RunRequest) -> tuple[str | None, list[dict[str, str]]]:
    """The test's chat prompt (``chat_prompt.py``) as pi-ai's context (``chatPromptToPiContext``): system
    turns joined by a blank line into the one system prompt, user and assistant turns kept."""
    system: list[str] = []
    turns: list[dict[str, str]] = []
    for message in chat_prompt(request.test.input, str(request.eval_dir)):
        role, content = message["role"], message["content"]
        if role == "system":
            system.append(content)
        elif role in ("user", "assistant"):
            turns.append({"role": role, "content": content})
        else:
            raise request.spec.fail(f"pi-ai adapter received unsupported message role '{role}'.")
    return ("\n\n".join(system) if system else None), turns


def without_lone_surrogates(text: str) -> str:
    """pi-ai's ``sanitizeSurrogates``: unpaired UTF-16 surrogates removed before sending."""
    return "".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF)


# -- the exchange ---------------------------------------------------------------------------------


class CallFailed(Exception):
    """One call that did not give an answer; ``status`` when the server gave one (decides the retry)."""

    def __init__(self, message: str, status: int | None = None, *, network: bool = False, timeout: bool = False):
        super().__init__(message)
        self.status = status
        self.network = network
        self.timeout = timeout


@dataclass
class Reply:
    """What a vendor's stream said, in pi-ai's terms."""

    text: str = ""
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    stop: str = "stop"


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str | None, str]]:
    """``(event, data)`` of each server-sent event (the fields pi-ai's and the SDKs' readers use)."""
    event: str | None = None
    data: list[str] = []
    for line in lines:
        if line == "":
            if event is not None or data:
                yield event, "\n".join(data)
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if event is not None or data:
        yield event, "\n".join(data)


def streamed(
    request: RunRequest,
    cfg: LlmConfig,
    build_request: Callable[[LlmConfig, str | None, list[dict[str, str]]], tuple[str, dict[str, str], Any]],
    read_stream: Callable[[Iterator[str]], Reply],
) -> TargetOutcome:
    """One streamed POST of a vendor's API (anthropic, gemini), sent and retried as pi-ai does: the body
    as ``JSON.stringify`` writes it, a non-2xx status or a transport error a failure."""
    system, turns = pi_context(request)
    url, headers, body = build_request(cfg, system, turns)
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def send(http: httpx.Client) -> Reply:
        try:
            with http.stream("POST", url, headers=headers, content=payload) as response:
                if not 200 <= response.status_code < 300:
                    raise failure(response)
                return read_stream(response.iter_lines())
        except httpx.HTTPError as exc:
            raise transport_failure(exc) from None

    return call(request.spec, cfg, request, send)


def call(
    spec: TargetSpec,
    cfg: LlmConfig,
    request: RunRequest,
    send: Callable[[httpx.Client], Reply],
) -> TargetOutcome:
    """Call the vendor through ``send`` under AgentV's retry policy, and the reply as a target outcome:
    the text of the last answer, ``{input, output, cached?}`` usage, and pi-ai's cost from the model's
    prices (none when they are unknown)."""
    timeout = request.timeout or DEFAULT_TIMEOUT_SECONDS
    started_wall = datetime.now(UTC)
    started = time.monotonic()
    attempt = 0
    with httpx.Client(timeout=timeout) as http:
        while True:
            try:
                reply = send(http)
                break
            except CallFailed as exc:
                retry = cfg.retry
                retryable = (
                    exc.status not in (401, 403)
                    and (exc.status in retry.status_codes if exc.status is not None else exc.network)
                    and attempt < retry.max_retries
                )
                if not retryable:
                    status: TargetStatus = "timeout" if exc.timeout else "error"
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    return TargetOutcome(messages=[], status=status, error=f"target '{spec.name}'{tries}: {exc}")
                time.sleep(cfg.retry.delay(attempt))
                attempt += 1
    duration_ms = round((time.monotonic() - started) * 1000)
    usage: dict[str, Any] = {"input": reply.input, "output": reply.output}
    if reply.cache_read > 0:
        usage["cached"] = reply.cache_read
    # pi-ai's calculateCost, term by term in its order (the float sum AgentV reports).
    price = cfg.pi_model.cost
    parts = (reply.input, reply.output, reply.cache_read, reply.cache_write)
    cost = 0.0
    for rate, tokens in zip(price, parts, strict=True):
        cost += (rate / 1_000_000) * tokens
    from evalstore.replay.content import Message

    return TargetOutcome(
        messages=[Message(role="assistant", content=reply.text)],
        output_text=reply.text,
        token_usage=usage,
        cost_usd=cost if cost > 0 else None,
        duration_ms=duration_ms,
        start_time=_iso(started_wall),
        end_time=_iso(datetime.now(UTC)),
    )


def failure(response: httpx.Response) -> CallFailed:
    """A non-2xx answer as pi-ai reports it (``HTTP <status> <body>``)."""
    body = response.read().decode("utf-8", errors="replace").strip()[:ERROR_BODY_CHARS]
    return CallFailed(f"pi-ai call failed: HTTP {response.status_code} {body}".rstrip(), response.status_code)


def transport_failure(exc: httpx.HTTPError) -> CallFailed:
    if isinstance(exc, httpx.TimeoutException):
        # AgentV's retry does not recognise the SDKs' "Request timed out." as a network error.
        return CallFailed(f"pi-ai call failed: timed out ({type(exc).__name__})", timeout=True)
    return CallFailed(f"pi-ai call failed: {type(exc).__name__}: {exc}", network=True)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
