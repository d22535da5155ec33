"""Secrets in target configs: ``${{ ENV_NAME }}`` references, kept as references in the store.

A target config is stored exactly as written, with :func:`redact` applied: references stay, literal
values under keys that look secret are replaced. References are resolved from the environment only
at the moment a target is executed (:func:`resolve`), and the resolved config never leaves the
process that runs the target: a message about the target (an error, the agent's stderr) passes
through :func:`unresolve` first, so it shows the reference where the resolved value would stand.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from evalstore.replay.errors import TargetConfigError
from evalstore.replay.jsontext import strings_in
from evalstore.replay.targetsfile.loader import interpolate, references
from evalstore.replay.targetsfile.redaction import REDACTED, URL, SecretMask, literal_secrets, looks_secret, redact

__all__ = ["REDACTED", "looks_secret", "redact", "resolve", "target_mask", "unresolve"]


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


def target_mask(
    config: Mapping[str, Any],
    resolved: Any = None,
    *,
    secrets_only: bool = False,
    environ: Mapping[str, str] | None = None,
) -> SecretMask:
    """The one redaction rule (``targetsfile.redaction.SecretMask``) for what a target exchange leaves:
    the value of every variable ``config`` refers to shown as its ``${{ NAME }}`` reference, and the
    user info of every URL in the ``resolved`` config (password, ``user:password``, its base64 HTTP
    Basic form) shown as ``REDACTED``.

    ``secrets_only`` (for the agent's answer, which a plain ``${{ GREETING }}`` may rightly be part of)
    keeps to variables that look secret by their name or the key they stand under. A literal secret
    written in ``config`` (what the stored config shows as ``REDACTED``) is ``REDACTED`` wherever echoed."""
    values = reference_values(config, secrets_only=secrets_only, environ=environ)
    return SecretMask.of(
        references=values,
        urls=[url for text in strings_in(resolved) for url in URL.findall(text)],
        literals=literal_secrets(config),
    )


def reference_values(
    config: Mapping[str, Any], *, secrets_only: bool = False, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Variable name to value for each set variable ``config`` refers to (see :func:`target_mask`)."""
    env = os.environ if environ is None else environ
    names = _secret_references(dict(config)) if secrets_only else references(dict(config))
    return {name: env[name] for name in names if env.get(name)}


def unresolve(text: str, config: Mapping[str, Any], *, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with the value of every variable ``config`` refers to put back as its ``${{ NAME }}``
    reference: the configured form, for messages that were built from the resolved config or that
    echo it (a URL, a command line, an agent's stderr)."""
    return target_mask(config, environ=environ).text(text)


def _secret_references(value: Any, secret: bool = False) -> list[str]:
    if isinstance(value, str):
        return [name for name in references(value) if secret or looks_secret(name)]
    if isinstance(value, Mapping):
        return [name for k, v in value.items() for name in _secret_references(v, secret or looks_secret(str(k)))]
    if isinstance(value, (list, tuple)):
        return [name for item in value for name in _secret_references(item, secret)]
    return []
