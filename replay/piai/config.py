"""A direct-API target's fields read as AgentV 4.42.4's ``targets.ts`` reads them (``resolveAnthropicConfig``,
``resolveGeminiConfig``): the key only as a ``${{ VAR }}`` reference, the model, temperature, output ceiling,
thinking budget and ``withRetry``'s fields, and the model looked up in pi-ai's table. The same rules for an
agent target (``targets/``) and a judge (``grading/judge/``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from evalstore.replay.piai.models import MODELS, PiModel
from evalstore.replay.piai.wire import LlmConfig, Retry
from evalstore.replay.targetsfile.loader import ENV_REFERENCE

FALLBACK_MAX_TOKENS = 16_384
"""pi-ai's fallback descriptor for a model its table lacks (``resolvePiModel``)."""


class Written(Protocol):
    """A target as written: its name, its fields (``${{ VAR }}`` references intact), and the error naming it."""

    @property
    def name(self) -> str: ...
    @property
    def fields(self) -> dict[str, Any]: ...
    def fail(self, reason: str) -> Exception: ...


def resolve_config(
    spec: Written,
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
    pi_model = model_entry(spec, config, provider, model)
    temperature = _number(spec, config.get("temperature"), f"{name} temperature")
    max_tokens = _number(spec, config.get("max_output_tokens"), f"{name} max output tokens")
    return LlmConfig(
        api_key=api_key,
        model=model,
        pi_model=pi_model,
        temperature=temperature,
        max_output_tokens=None if max_tokens is None else int(max_tokens),
        thinking_budget=_number(spec, config.get("thinking_budget"), f"{name} thinking budget"),
        retry=retry_policy(spec, config),
    )


def _text(
    spec: Written, key: str, config: dict[str, Any], description: str, *, literal: bool, optional: bool = False
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


def _number(spec: Written, value: Any, description: str) -> float | None:
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


def retry_policy(spec: Written, config: Mapping[str, Any]) -> Retry:
    """``resolveRetryConfig``: ``withRetry``'s policy from the target's ``max_retries`` and ``retry_*`` fields."""
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


def model_entry(spec: Written, config: dict[str, Any], provider: str, model: str) -> PiModel:
    """``resolvePiModel``: the model's entry in pi-ai's table, its base URL the target's ``base_url`` (or
    ``endpoint``) when given; a model the table lacks needs one."""
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
    return pi_model
