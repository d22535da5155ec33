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

from .errors import TargetsFileError

ENV_REFERENCE = re.compile(r"\$\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
"""``${{ NAME }}``: a reference to an environment variable (AgentV's interpolation syntax)."""

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
    """The config with ``${{ ENV }}`` references intact and literal secrets replaced: the whole value
    under a secret-looking key, and a secret-looking token inside any other string (see
    :func:`_redact_text`), so ``command: agent --api-key sk-...`` is stored without the key."""
    return {k: _redact_value(v, looks_secret(k)) for k, v in config.items()}


def _redact_value(value: Any, secret: bool) -> Any:
    if isinstance(value, Mapping):
        return {k: _redact_value(v, secret or looks_secret(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return _redact_list(value, secret)
    if not secret or value is None or value == "" or isinstance(value, bool):
        return _redact_text(value) if isinstance(value, str) else value
    if isinstance(value, str) and ENV_REFERENCE.search(value) and _AUTH_SCHEME.match(ENV_REFERENCE.sub("", value)):
        return value
    return REDACTED


def _redact_list(items: list[Any] | tuple[Any, ...], secret: bool) -> list[Any]:
    # An argv list splits ``--api-key VALUE`` over two items: the item after a secret-looking flag is
    # the secret, whatever it looks like.
    out: list[Any] = []
    after_secret_flag = False
    for item in items:
        if after_secret_flag and isinstance(item, str) and _is_literal(item):
            out.append(REDACTED)
        else:
            out.append(_redact_value(item, secret))
        after_secret_flag = isinstance(item, str) and _is_secret_flag(item)
    return out


# Tokens that are secrets by their shape alone, wherever they stand: provider key prefixes (OpenAI and
# Anthropic ``sk-``, Stripe, GitHub, GitLab, Slack, Hugging Face, AWS access key ids, Google API keys),
# JWTs, and long random-looking runs (upper case, lower case and digits all present, 32+ characters:
# hex digests, UUIDs, model names and paths lack one of these or the length).
_SECRET_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"(?:sk|pk|rk)[-_][A-Za-z0-9_-]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{32,}"
    r")(?![A-Za-z0-9_-])"
)
# A value given by name: ``--api-key VALUE``, ``--token=VALUE``, ``OPENAI_API_KEY=VALUE``,
# ``?token=VALUE&``, ``Authorization: Bearer VALUE``, ``Bearer VALUE``, ``https://user:VALUE@host``. The value ends
# at white space, a quote, ``&`` or ``#`` unless it is quoted; after a space it does not start with ``-``
# (that is the next flag).
_NAMED_VALUE = re.compile(
    r"(?P<lead>(?P<flag>(?<![\w-])--?[A-Za-z][\w.-]*)(?:\s*=\s*|\s+(?!-))"
    r"|(?P<name>(?<![\w-])[A-Za-z_][\w.-]*)\s*(?:=|:(?!//))\s*(?:(?:[Bb]earer|[Bb]asic|[Tt]oken)\s+)?"
    r"|(?P<scheme>\b(?:[Bb]earer|[Bb]asic))\s+"
    r"|(?P<userinfo>://[^/\s:@]+:))"
    r"""(?P<value>'[^']*'|"[^"]*"|[^\s'"&#]+)"""
    r"(?(userinfo)(?=@))"
)
_TEMPLATE_PLACEHOLDER = re.compile(r"""^['"]?\{[A-Z_]+\}['"]?$""")


def _redact_text(text: str) -> str:
    """``text`` with secret-looking tokens replaced; ``${{ NAME }}`` references are left as written."""
    # Split so that no rule can reach into a reference: an odd part is a reference, kept whole.
    parts = re.split(r"(\$\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}\})", text)
    for i in range(0, len(parts), 2):
        parts[i] = _SECRET_TOKEN.sub(REDACTED, _redact_named_values(parts[i]))
    return "".join(parts)


def _redact_named_values(text: str) -> str:
    out: list[str] = []
    pos = 0
    while (match := _NAMED_VALUE.search(text, pos)) is not None:
        key = match.group("flag") or match.group("name")
        secret = match.group("scheme") or match.group("userinfo") or (key is not None and looks_secret(key))
        # A bare scheme word (``Authorization: Bearer ${{ TOKEN }}``) is not the secret; what follows is.
        if secret and _is_literal(match.group("value")) and not _AUTH_SCHEME.match(match.group("value")):
            out += [text[pos : match.start("value")], REDACTED]
            pos = match.end("value")
        else:
            # Only the lead is passed over: a value that is not a secret may hold a pair that is
            # (``sh -c 'agent --token abc'``).
            out.append(text[pos : match.end("lead")])
            pos = match.end("lead")
    out.append(text[pos:])
    return "".join(out)


def _is_secret_flag(arg: str) -> bool:
    return re.fullmatch(r"--?[A-Za-z][\w.-]*", arg) is not None and looks_secret(arg)


def _is_literal(value: str) -> bool:
    """A value that is neither a reference nor a ``{PLACEHOLDER}`` of the command template."""
    return (
        bool(value)
        and not ENV_REFERENCE.search(value)
        and _TEMPLATE_PLACEHOLDER.match(value) is None
        and value != REDACTED
    )


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
            raise TargetsFileError(
                f"{self.path}: no target named {name!r} (targets defined: {known})"
            ) from None

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
        data = yaml.safe_load(text)
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
        fields = {
            k: v for k, v in raw.items() if k not in ("name", "provider", "grader_target", "judge_target")
        }
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
