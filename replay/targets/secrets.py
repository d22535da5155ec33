"""Secrets in target configs: ``${{ ENV_NAME }}`` references, kept as references in the store.

A target config is stored exactly as written, with :func:`redact` applied: references stay, literal
values under keys that look secret are replaced. References are resolved from the environment only
at the moment a target is executed (:func:`resolve`), and the resolved config never leaves the
process that runs the target.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from ..errors import TargetConfigError
from ..targetsfile import ENV_REFERENCE as ENV_REF
from ..targetsfile import interpolate, references

REDACTED = "***redacted***"

# A key looks secret when its last word is one of these (``api_key``, ``X-Api-Key``, ``authToken``,
# ``client_secret``), or when any word is one of the unambiguous ones. Judging by the last word keeps
# ``max_tokens`` and ``token_usage`` out.
_SECRET_LAST_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "authorization", "auth",
     "credential", "credentials", "cookie", "signature"}
)
_SECRET_ANY_WORDS = frozenset({"password", "passwd", "secret", "authorization", "apikey", "credentials"})
_WORD_SPLIT = re.compile(r"[_\-.\s]+|(?<=[a-z0-9])(?=[A-Z])")
# What may stand beside a reference in a secret value without being a secret itself.
_AUTH_SCHEME = re.compile(r"^\s*(?:bearer|basic|token)?\s*$", re.IGNORECASE)


def looks_secret(key: str) -> bool:
    words = [w.lower() for w in _WORD_SPLIT.split(str(key)) if w]
    if not words:
        return False
    return words[-1] in _SECRET_LAST_WORDS or any(w in _SECRET_ANY_WORDS for w in words)


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config with ``${{ ENV }}`` references intact and literal secret values replaced."""
    return {k: _redact_value(v, looks_secret(k)) for k, v in config.items()}


def _redact_value(value: Any, secret: bool) -> Any:
    if isinstance(value, Mapping):
        return {k: _redact_value(v, secret or looks_secret(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_value(v, secret) for v in value]
    if not secret or value is None or value == "" or isinstance(value, bool):
        return value
    if isinstance(value, str) and ENV_REF.search(value) and _AUTH_SCHEME.match(ENV_REF.sub("", value)):
        return value
    return REDACTED


def resolve(
    config: Mapping[str, Any],
    *,
    target: str,
    source: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A copy of ``config`` with every ``${{ NAME }}`` replaced by the environment variable's value.

    Raises :class:`TargetConfigError` naming the variable, the target and its targets file when a
    variable is not set.
    """
    env = os.environ if environ is None else environ
    for name in dict.fromkeys(references(dict(config))):
        if name not in env:
            where = f"{source}: " if source else ""
            raise TargetConfigError(
                f"{where}target '{target}': environment variable {name} is not set "
                f"(referenced as ${{{{ {name} }}}}); export it before running the target"
            )
    return dict(interpolate(dict(config), env, where=f"target '{target}'"))
