"""Secrets in target configs: ``${{ ENV_NAME }}`` references, kept as references in the store.

A target config is stored exactly as written, with :func:`redact` applied: references stay, literal
values under keys that look secret are replaced. References are resolved from the environment only
at the moment a target is executed (:func:`resolve`), and the resolved config never leaves the
process that runs the target.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..errors import TargetConfigError
from ..targetsfile import REDACTED, interpolate, looks_secret, redact, references

__all__ = ["REDACTED", "looks_secret", "redact", "resolve"]


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
