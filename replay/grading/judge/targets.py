"""Judge targets: where an LLM grader sends its requests.

A :class:`JudgeTarget` holds configuration only, with ``${{ ENV }}`` references unresolved and the API
key as the *name* of the environment variable that holds it. :meth:`JudgeTarget.resolve` turns it into
a :class:`ResolvedJudge` (URL, headers, model, parameters) at call time; that object is never stored.

OpenAI, OpenRouter, OpenAI-compatible servers and Azure are asked in Chat Completions; ``anthropic`` and
``gemini`` (``google``, ``google-gemini``) as AgentV 4.42.4 asks them through pi-ai (``replay/piai/``): the
fields read as its ``targets.ts`` reads them, the request its provider sends for an LLM grader's
``invoke({question, systemPrompt})``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from evalstore.replay.errors import JudgeConfigError, JudgeProviderError, ReplayError
from evalstore.replay.targetsfile.loader import ENV_REFERENCE, TargetEntry, interpolate, is_reference
from evalstore.replay.targetsfile.redaction import looks_secret, redact

OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
AZURE_DEFAULT_API_VERSION = "2024-12-01-preview"
DEFAULT_TIMEOUT = 60.0

# Provider kinds a judge can be; each speaks OpenAI Chat Completions.
_OPENAI_LIKE = {
    "openai": OPENAI_BASE_URL,
    "openai-compatible": None,
    "openai_compatible": None,
    "openrouter": OPENROUTER_BASE_URL,
}
PI_VENDORS = {"anthropic": "anthropic", "gemini": "gemini", "google": "gemini", "google-gemini": "gemini"}
"""Providers a judge asks as AgentV does through pi-ai, to their module under ``replay/piai/``."""
CHAT_COMPLETIONS_PROVIDERS = (*_OPENAI_LIKE, "azure")
"""Providers a judge (and the ``openai`` target) asks in Chat Completions."""
JUDGE_PROVIDERS = (*CHAT_COMPLETIONS_PROVIDERS, *PI_VENDORS)
# What a pi-ai request body holds besides its parameters (the prompt, the model, streaming).
_PROMPT_FIELDS = {"model", "messages", "system", "stream", "contents", "systemInstruction"}


def pi_vendor(provider: str) -> Any:
    """The ``replay/piai`` module of a provider a judge asks through pi-ai (imported when first used)."""
    import importlib

    return importlib.import_module(f"evalstore.replay.piai.{PI_VENDORS[provider]}")


@dataclass(frozen=True)
class ResolvedJudge:
    """A judge target ready to call: references resolved. Holds the key; never stored or logged."""

    target: str
    url: str
    model: str
    parameters: dict[str, Any]
    """Sent in the request body beside model and messages; recorded and part of the cache key."""
    timeout: float
    headers: dict[str, str] = field(repr=False)
    provider: str = "openai"
    llm: Any = field(default=None, repr=False)
    """For a provider asked through pi-ai: its ``piai.wire.LlmConfig`` (the key within), from which each
    request is built; None for Chat Completions."""

    @property
    def cache_endpoint(self) -> str:
        """The endpoint as the judge cache keys it: the same model's replies from another endpoint (Ollama
        and vLLM, two deployments, a proxy) are another judge's. Scheme, host, port and path only: a query
        or a user part may hold a key."""
        parts = urlsplit(self.url)
        try:
            port = f":{parts.port}" if parts.port else ""
        except ValueError:  # not a number: the request itself will say so
            port = ""
        return f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}"

    @property
    def cache_provider(self) -> str | None:
        """The provider as the judge cache keys it: a pi-ai provider's requests differ from Chat Completions'
        for the same messages; Chat Completions' keys stay as they always were (None)."""
        return self.provider if self.llm is not None else None


@dataclass(frozen=True)
class JudgeTarget:
    name: str
    provider: str
    """``openai``, ``azure``, ``openai-compatible`` (or ``openrouter``)."""
    base_url: str
    """Chat Completions base URL (``…/v1``); for azure the resource endpoint."""
    model: str
    """Model name; for azure the deployment name."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key; None sends no credentials."""
    api_version: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float = DEFAULT_TIMEOUT
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Further request-body parameters (``top_p``, ``seed``, ``response_format``…)."""
    fields: Mapping[str, Any] = field(default_factory=dict)
    """A pi-ai provider's target fields as written (read at call time as AgentV reads them)."""
    source: str | None = None
    """The targets file the target came from, for messages."""

    def with_model(self, model: str | None) -> JudgeTarget:
        return self if not model else replace(self, model=model)

    def redacted(self) -> dict[str, Any]:
        """What may be stored: configuration with references unresolved and no key."""
        out: dict[str, Any] = {
            "name": self.name,
            "provider": self.provider,
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "timeout": self.timeout,
        }
        if self.api_version is not None:
            out["api_version"] = self.api_version
        if self.extra:
            out["extra"] = dict(self.extra)
        # The one redaction rule: a literal key in base_url (``?key=...``) or in extra parameters is not stored.
        return redact(out)

    def parameters(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        params.update(self.extra)
        return params

    def resolve(self, env: Mapping[str, str], *, require_key: bool = True) -> ResolvedJudge:
        """``require_key=False`` resolves without credentials when the key variable is unset: enough to
        look a reply up in the judge cache, never to send a request."""
        where = f"judge target {self.name!r}"
        if self.provider in PI_VENDORS:
            return self._resolve_pi(env, require_key=require_key)
        try:
            base_url = str(interpolate(self.base_url, env, where=f"{where}: base_url")).rstrip("/")
            model = str(interpolate(self.model, env, where=f"{where}: model"))
            parameters = interpolate(self.parameters(), env, where=f"{where}: parameters")
            api_version = interpolate(self.api_version, env, where=f"{where}: api_version")
        except ReplayError as exc:
            raise JudgeConfigError(str(exc)) from None
        if not base_url:
            raise JudgeConfigError(f"{where}: no base URL; set base_url (or endpoint for azure)")
        if not model:
            raise JudgeConfigError(f"{where}: no model; set model (or the CLI judge model override)")
        headers = {"Content-Type": "application/json"}
        key = None
        if self.api_key_env:
            key = env.get(self.api_key_env)
            if not key and require_key:
                raise JudgeConfigError(f"{where}: environment variable {self.api_key_env} (the API key) is not set")
        if self.provider == "azure":
            url = (
                f"{base_url}/openai/deployments/{model}/chat/completions"
                f"?api-version={api_version or AZURE_DEFAULT_API_VERSION}"
            )
            if key:
                headers["api-key"] = key
        else:
            url = f"{base_url}/chat/completions"
            if key:
                headers["Authorization"] = f"Bearer {key}"
        return ResolvedJudge(self.name, url, model, parameters, self.timeout, headers)

    def _resolve_pi(self, env: Mapping[str, str], *, require_key: bool) -> ResolvedJudge:
        """The request AgentV's provider sends, built from the target's fields (``piai.config``): a model
        named on the command line or a grader's temperature in place of the target's."""
        from evalstore.replay.piai.config import model_entry

        vendor = pi_vendor(self.provider)
        where = f"judge target {self.name!r}"
        keyless = bool(self.api_key_env) and not env.get(self.api_key_env or "")
        if keyless and require_key:
            raise JudgeConfigError(f"{where}: environment variable {self.api_key_env} (the API key) is not set")
        if keyless:  # never sent: a judge without its key is only asked of its cache
            env = {**env, str(self.api_key_env): "-"}
        written = _Written(self.name, dict(self.fields), self.source)
        try:
            resolved = interpolate(dict(self.fields), env, where=where)
        except ReplayError as exc:
            raise JudgeConfigError(str(exc)) from None
        llm = vendor.config(written, resolved)
        if self.model and self.model != _written_model(self.fields) and self.model != llm.model:
            llm = replace(llm, model=self.model, pi_model=model_entry(written, resolved, vendor.PROVIDER, self.model))
        if self.temperature is not None:
            llm = replace(llm, temperature=self.temperature)
        url, headers, body = vendor.build_request(llm, None, [])
        if keyless:
            headers = {k: v for k, v in headers.items() if not looks_secret(k)}
        parameters = {k: v for k, v in body.items() if k not in _PROMPT_FIELDS}
        return ResolvedJudge(self.name, url, llm.model, parameters, self.timeout, headers, self.provider, llm)

    @classmethod
    def from_entry(cls, entry: TargetEntry) -> JudgeTarget:
        """A judge from a targets-file entry; raises :class:`JudgeConfigError` for non-LLM providers."""
        where = f"{entry.source}: target {entry.name!r}"
        provider = entry.provider.lower()
        if provider not in JUDGE_PROVIDERS:
            raise JudgeProviderError(
                f"{where}: provider {entry.provider!r} cannot grade; a judge needs one of {', '.join(JUDGE_PROVIDERS)}"
            )
        f = entry.fields
        if provider in PI_VENDORS:
            # Read as AgentV reads them when the judge is called (``_resolve_pi``); the key's variable named.
            key = f.get("api_key")
            match = ENV_REFERENCE.fullmatch(key.strip()) if isinstance(key, str) else None
            return cls(
                name=entry.name,
                provider=provider,
                base_url=str(f.get("base_url") or f.get("endpoint") or ""),
                model=str(_written_model(f) or ""),
                api_key_env=match.group(1) if match else None,
                timeout=_number(f.get("timeout", f.get("timeout_seconds")), float, where, "timeout") or DEFAULT_TIMEOUT,
                fields=dict(f),
                source=entry.source,
            )
        api_key_env = f.get("api_key_env")
        api_key = f.get("api_key")
        if api_key is not None:
            if not is_reference(api_key):
                raise JudgeConfigError(
                    f"{where}: field 'api_key' holds a literal key; put the key in an environment "
                    "variable and write api_key: ${{ NAME }}"
                )
            api_key_env = ENV_REFERENCE.fullmatch(str(api_key).strip()).group(1)  # type: ignore[union-attr]
        if provider == "azure":
            base_url = f.get("endpoint") or f.get("base_url") or f.get("resource_name")
            model = f.get("deployment") or f.get("deployment_name") or f.get("model")
            api_version = f.get("api_version") or f.get("version")
            if not base_url:
                raise JudgeConfigError(f"{where}: azure needs 'endpoint' (https://NAME.openai.azure.com)")
            if not model:
                raise JudgeConfigError(f"{where}: azure needs 'deployment' (or 'model')")
        else:
            base_url = f.get("base_url") or f.get("endpoint") or _OPENAI_LIKE[provider]
            model = f.get("model")
            api_version = None
            if not base_url:
                raise JudgeConfigError(f"{where}: field 'base_url' is required for {entry.provider}")
            if not model:
                raise JudgeConfigError(f"{where}: field 'model' is required")
        extra = f.get("extra_params", f.get("parameters", {})) or {}
        if not isinstance(extra, Mapping):
            raise JudgeConfigError(f"{where}: field 'extra_params' must be a mapping of request parameters")
        return cls(
            name=entry.name,
            provider=provider,
            base_url=str(base_url),
            model=str(model),
            api_key_env=api_key_env,
            api_version=None if api_version is None else str(api_version),
            temperature=_number(f.get("temperature"), float, where, "temperature"),
            max_tokens=_number(f.get("max_tokens", f.get("max_output_tokens")), int, where, "max_tokens"),
            timeout=_number(f.get("timeout", f.get("timeout_seconds")), float, where, "timeout") or DEFAULT_TIMEOUT,
            extra=dict(extra),
        )


def _number(value: Any, kind: type, where: str, name: str) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        raise JudgeConfigError(f"{where}: field {name!r} must be a number, not {value!r}")
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise JudgeConfigError(f"{where}: field {name!r} must be a number, not {value!r}") from None


def _written_model(fields: Mapping[str, Any]) -> Any:
    """The model a pi-ai target names, as written (``model``, ``deployment`` or ``variant``, as AgentV reads them)."""
    return next((fields[k] for k in ("model", "deployment", "variant") if fields.get(k) is not None), None)


@dataclass(frozen=True)
class _Written:
    """A judge's target as ``piai.config`` reads it: its errors are judge configuration errors."""

    name: str
    fields: dict[str, Any]
    source: str | None

    def fail(self, reason: str) -> JudgeConfigError:
        where = f"{self.source}: " if self.source else ""
        return JudgeConfigError(f"{where}target '{self.name}': {reason}")
