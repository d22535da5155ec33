"""Where AgentV 4.42.4 reads a targets file more strictly than evalstore does.

AgentV resolves a field's ``${{ NAME }}`` only when it is the whole value (``resolveOptionalString``:
``/^\\$\\{\\{\\s*([A-Z0-9_]+)\\s*\\}\\}$/i`` on the trimmed string); written inside a longer value (``sh
${{ DIR }}/agent.sh``) it is passed on as written, where evalstore substitutes it. And some fields take no
literal at all (``allowLiteral: false``): ``api_key: sk-...`` or ``model: gpt-4o`` on an openai target stops
AgentV with "... must use ${{ VARIABLE_NAME }} syntax". evalstore keeps its reading (an embedded reference is
what the user meant; a literal model is no secret, and a literal key is redacted before storage) and says,
for each such field, what AgentV would do, so a file meant for both can be fixed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from evalstore.replay.targetsfile.loader import ENV_REFERENCE, is_reference

_KEY = ("api_key",)
_MODEL = ("model", "deployment", "variant")
_LLM = (_KEY, _MODEL)
_REFERENCE_ONLY: dict[tuple[str, ...], tuple[tuple[str, ...], ...]] = {
    ("openai", "openrouter", "anthropic"): _LLM,
    ("azure", "azure-openai"): (("endpoint", "resource"), _KEY, ("deployment", "model")),
    ("gemini", "google", "google-gemini"): (_KEY,),
    ("copilot-sdk", "copilot_sdk"): (("github_token",), _KEY, ("bearer_token",)),
    ("copilot", "copilot-cli"): (_KEY, ("bearer_token",)),
    ("pi", "pi-coding-agent", "pi-cli"): (_KEY,),
}
REFERENCE_ONLY = {kind: fields for kinds, fields in _REFERENCE_ONLY.items() for kind in kinds}
"""Per provider, the fields AgentV 4.42.4 reads with ``allowLiteral: false`` (``targets.ts``), each as its
spellings in the order AgentV tries them (the first one set is read). A cli target's ``healthcheck.url`` too."""


UNTIMED = frozenset({"openai", "openrouter", "azure", "azure-openai", "anthropic", "gemini", "google", "google-gemini"})
"""Providers whose target AgentV 4.42.4 gives no timeout (``resolveOpenAIConfig`` and its kin read no
``timeout_seconds``): a request waits as the vendor's SDK has it (``piai.sdk_retry``)."""


def agentv_notes(path: str, name: str, provider: str, fields: Mapping[str, Any], lines: Mapping[str, int]) -> list[str]:
    """For one target as written, a warning for each field AgentV 4.42.4 would refuse or pass on unresolved,
    naming the file, the field's line and the field. ``lines``: field path -> line (``a.b``, ``a[0]``)."""
    notes: list[str] = []
    refused: set[str] = set()
    for spellings in REFERENCE_ONLY.get(provider.strip().lower(), ()):
        key = next((k for k in spellings if fields.get(k) is not None), None)
        if key is not None:
            refused.add(key)
    check = fields.get("healthcheck")
    if provider.strip().lower() == "cli" and isinstance(check, Mapping) and check.get("url") is not None:
        refused.add("healthcheck.url")
    if provider.strip().lower() in UNTIMED and fields.get("timeout_seconds") is not None:
        notes.append(
            f"{path}:{lines.get('timeout_seconds', 1)}: target {name!r}: field 'timeout_seconds': AgentV 4.42.4 does "
            f"not read it for provider {provider.strip().lower()}, and evalstore's agent does not either (each "
            "request waits as the vendor's SDK does, up to 10 minutes); only a judge's calls are bounded by it"
        )
    for field, value in _strings(fields):
        where = f"{path}:{lines.get(field, lines.get(field.split('.')[0].split('[')[0], 1))}: target {name!r}: field '{field}'"
        if field in refused and not is_reference(value):
            notes.append(
                f"{where}: AgentV 4.42.4 refuses a value here that is not one ${{{{ VARIABLE_NAME }}}} reference "
                '("must use ${{ VARIABLE_NAME }} syntax"); evalstore takes it as written'
            )
        elif ENV_REFERENCE.search(value) and not is_reference(value):
            notes.append(
                f"{where}: AgentV 4.42.4 resolves ${{{{ NAME }}}} only when it is the whole value and passes this "
                "one on as written (a shell then fails with 'Bad substitution'); evalstore substitutes it"
            )
    return notes


def _strings(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Every string inside a target's fields, with its path (``healthcheck.url``, ``args[0]``)."""
    if isinstance(value, str):
        yield prefix, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{prefix}[{i}]")
