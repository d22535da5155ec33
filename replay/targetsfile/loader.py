"""AgentV's ``.agentv/targets.yaml``: named targets with ``${{ ENV }}`` references.

The file is read as written and kept that way: references stay unresolved in everything this module
returns, so a target configuration can be stored (``RunStarted.target``) without leaking a secret.
Values are resolved only at call time, through :func:`interpolate`, from the environment the caller
passes in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evalstore.replay.errors import EvalFileError, TargetsFileError
from evalstore.replay.evalfile.source import Yaml12Loader, check_expansion

ENV_REFERENCE = re.compile(r"\$\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
"""``${{ NAME }}``: a reference to an environment variable (AgentV's interpolation syntax)."""


def references(value: Any) -> list[str]:
    """Names of the environment variables a value (or any string inside it) refers to, in order."""
    if isinstance(value, str):
        return ENV_REFERENCE.findall(value)
    if isinstance(value, Mapping):
        return [name for item in value.values() for name in references(item)]
    if isinstance(value, list):
        return [name for item in value for name in references(item)]
    return []


def interpolate(value: Any, env: Mapping[str, str], *, where: str) -> Any:
    """``value`` with every ``${{ NAME }}`` replaced from ``env``; ``where`` names the field for errors."""
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in env:
                raise TargetsFileError(
                    f"{where}: environment variable {name} is not set; export it or change the reference"
                )
            return env[name]

        return ENV_REFERENCE.sub(substitute, value)
    if isinstance(value, Mapping):
        return {k: interpolate(v, env, where=f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, where=f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def is_reference(value: Any) -> bool:
    """True when the whole value is one ``${{ NAME }}`` reference."""
    return isinstance(value, str) and ENV_REFERENCE.fullmatch(value.strip()) is not None


@dataclass(frozen=True)
class TargetEntry:
    """One target as written in the file (references unresolved)."""

    name: str
    provider: str
    fields: dict[str, Any]
    """Every provider field except ``name``, ``provider`` and ``grader_target``."""
    grader_target: str | None = None
    """The target that grades this one's outputs (``grader_target``, alias ``judge_target``)."""
    source: str = ""
    """``FILE:LINE`` where the entry starts, for error messages."""

    def redacted(self) -> dict[str, Any]:
        """The entry as written, for storage: references kept, literal secret values replaced."""
        from evalstore.replay.targetsfile.redaction import redact  # redaction builds on this module's reference syntax

        out: dict[str, Any] = {"name": self.name, "provider": self.provider}
        if self.grader_target is not None:
            out["grader_target"] = self.grader_target
        out.update(redact(self.fields))
        return out


@dataclass(frozen=True)
class TargetsFile:
    path: str
    targets: dict[str, TargetEntry] = field(default_factory=dict)

    def get(self, name: str) -> TargetEntry:
        try:
            return self.targets[name]
        except KeyError:
            known = ", ".join(sorted(self.targets)) or "none"
            raise TargetsFileError(f"{self.path}: no target named {name!r} (targets defined: {known})") from None

    def grader_target_for(self, name: str | None) -> str | None:
        """The judge configured for target ``name`` (its ``grader_target``), if any."""
        if name is None or name not in self.targets:
            return None
        return self.targets[name].grader_target


def load_targets_file(path: str | Path) -> TargetsFile:
    """Parse a targets file; raises :class:`TargetsFileError` naming the file, line and field at fault."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TargetsFileError(f"{path}: cannot read targets file ({exc.strerror})") from None
    try:
        root = yaml.compose(text)
        if root is not None:  # an alias bomb is refused before it is built
            check_expansion(root, str(path))
        data = yaml.load(text, Loader=Yaml12Loader)
    except EvalFileError as exc:
        raise TargetsFileError(str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise TargetsFileError(f"{path}{line}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict) or not isinstance(data.get("targets"), list):
        raise TargetsFileError(f"{path}:1: expected a mapping with a 'targets:' list")

    item_lines = _item_lines(root)
    targets: dict[str, TargetEntry] = {}
    for index, raw in enumerate(data["targets"]):
        where = f"{path}:{item_lines[index] if index < len(item_lines) else 1}"
        if not isinstance(raw, dict):
            raise TargetsFileError(f"{where}: targets[{index}] must be a mapping with name and provider")
        name = raw.get("name")
        provider = raw.get("provider")
        if not isinstance(name, str) or not name.strip():
            raise TargetsFileError(f"{where}: targets[{index}]: field 'name' is required (a string)")
        if not isinstance(provider, str) or not provider.strip():
            raise TargetsFileError(f"{where}: target {name!r}: field 'provider' is required (a string)")
        if name in targets:
            raise TargetsFileError(f"{where}: target {name!r} is defined twice; target names must be unique")
        grader = raw.get("grader_target", raw.get("judge_target"))
        if grader is not None and not isinstance(grader, str):
            raise TargetsFileError(f"{where}: target {name!r}: field 'grader_target' must be a target name")
        fields = {k: v for k, v in raw.items() if k not in ("name", "provider", "grader_target", "judge_target")}
        targets[name] = TargetEntry(name, provider.strip(), fields, grader, where)

    for entry in targets.values():
        if entry.grader_target is not None and entry.grader_target not in targets:
            raise TargetsFileError(
                f"{entry.source}: target {entry.name!r}: grader_target {entry.grader_target!r} is not "
                f"defined in this file"
            )
    return TargetsFile(str(path), targets)


def find_targets_file(start: str | Path) -> Path | None:
    """The nearest ``.agentv/targets.yaml`` (or ``.yml``) in ``start`` or any directory above it."""
    here = Path(start).resolve()
    if here.is_file():
        here = here.parent
    for directory in (here, *here.parents):
        for name in ("targets.yaml", "targets.yml"):
            candidate = directory / ".agentv" / name
            if candidate.is_file():
                return candidate
    return None


def _item_lines(root: yaml.Node | None) -> list[int]:
    """1-based start line of each item of the top-level ``targets`` sequence."""
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "targets" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []
