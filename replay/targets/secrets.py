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
from evalstore.replay.targetsfile.loader import interpolate, references
from evalstore.replay.targetsfile.redaction import REDACTED, looks_secret, redact, reference_values, target_mask

__all__ = ["REDACTED", "looks_secret", "redact", "reference_values", "resolve", "target_mask", "unresolve"]


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


def unresolve(text: str, config: Mapping[str, Any], *, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with the value of every variable ``config`` refers to put back as its ``${{ NAME }}``
    reference: the configured form, for messages that were built from the resolved config or that
    echo it (a URL, a command line, an agent's stderr)."""
    return target_mask(config, environ=environ).text(text)
