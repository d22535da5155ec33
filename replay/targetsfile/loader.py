"""AgentV's ``.agentv/targets.yaml``: named targets with ``${{ ENV }}`` references.

The file is read as written and kept that way: references stay unresolved in everything this module
returns, so a target configuration can be stored (``RunStarted.target``) without leaking a secret.
Values are resolved only at call time, through :func:`interpolate`, from the environment the caller
passes in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
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
    """The provider as written; ``""`` for an entry that only delegates (``use_target``), and possibly a
    ``${{ NAME }}`` reference until :meth:`TargetsFile.select` or :meth:`TargetsFile.delegate` resolves it."""
    fields: dict[str, Any]
    """Every provider field except ``name``, ``provider``, ``grader_target`` and ``use_target``."""
    grader_target: str | None = None
    """The target that grades this one's outputs (``grader_target``, alias ``judge_target``)."""
    source: str = ""
    """``FILE:LINE`` where the entry starts, for error messages."""
    use_target: str | None = None
    """The target this name stands for (AgentV's delegation): a name, or one ``${{ NAME }}`` reference."""

    def redacted(self) -> dict[str, Any]:
        """The entry as written, for storage: references kept, literal secret values replaced."""
        from evalstore.replay.targetsfile.redaction import redact  # redaction builds on this module's reference syntax

        out: dict[str, Any] = {"name": self.name, "provider": self.provider}
        if self.grader_target is not None:
            out["grader_target"] = self.grader_target
        out.update(redact(self.fields))
        return out


USE_TARGET_REFERENCE = re.compile(r"^\$\{\{\s*([A-Za-z0-9_]+)\s*\}\}$")
"""A ``use_target`` (or ``provider``) naming its value by one environment variable (AgentV's
``USE_TARGET_ENV_PATTERN``: the whole value, case-insensitive)."""
SELECT_DEPTH = 5
"""How many ``use_target`` steps ``agentv eval`` follows from the run target it picks."""
DELEGATE_DEPTH = 10
"""How many steps AgentV's runtime follows from a grader target's name before it gives up."""


_AGENT_OPTIONAL = ("binary", "command", "cwd", "executable", "log_dir", "log_directory", "model")
_PI_OPTIONAL = (
    *_AGENT_OPTIONAL,
    "api_key",
    "base_url",
    "endpoint",
    "pi_model",
    "pi_thinking",
    "pi_tools",
    "subprovider",
    "thinking",
    "tools",
)
_OPTIONAL_REFERENCES: dict[tuple[str, ...], tuple[str, ...]] = {
    ("openai",): ("endpoint", "base_url", "api_format"),
    ("azure", "azure-openai"): ("version", "api_version"),
    ("gemini", "google", "google-gemini"): ("model", "deployment", "variant"),
    ("codex", "codex-cli"): (*_AGENT_OPTIONAL, "model_reasoning_effort"),
    ("copilot-sdk", "copilot_sdk"): ("cli_path", "cli_url", "cwd", "github_token", "log_dir", "log_directory", "model"),
    ("copilot", "copilot-cli", "claude", "claude-code", "claude-cli", "claude-sdk", "cc-mirror"): _AGENT_OPTIONAL,
    ("pi", "pi-coding-agent"): tuple(f for f in _PI_OPTIONAL if f not in ("binary", "command", "executable")),
    ("pi-cli",): _PI_OPTIONAL,
    ("replay",): ("eval_path", "suite", "variant"),
    ("copilot-log",): ("cwd", "session_dir", "session_id", "session_state_dir"),
    ("vscode", "vscode-insiders"): ("executable", "subagent_root"),
    ("cli",): ("cwd",),
}
OPTIONAL_REFERENCES = {kind: fields for kinds, fields in _OPTIONAL_REFERENCES.items() for kind in kinds}
"""Per provider, the fields AgentV 4.42.4 reads with ``optionalEnv`` (``targets.ts``): written as one
``${{ NAME }}`` reference to a variable that is unset or empty, the field is absent (a default applies), not
an error. Every other reference must be set."""

AGENTV_PROVIDERS = frozenset(
    {
        *("openai", "openrouter", "azure", "azure-openai", "anthropic", "gemini", "google", "google-gemini"),
        *("codex", "codex-cli", "copilot-sdk", "copilot_sdk", "copilot", "copilot-cli", "copilot-log"),
        *("pi", "pi-coding-agent", "pi-cli", "cc-mirror", "claude", "claude-code", "claude-cli", "claude-sdk"),
        *("mock", "vscode", "vscode-insiders", "agentv", "cli", "replay"),
    }
)
"""Every provider spelling AgentV 4.42.4's ``resolveTargetDefinition`` (``targets.ts``) has a case for,
lower-cased as it compares them. Any other provider is a custom one (``.agentv/providers/NAME.ts``), which
it resolves to its cli provider (``resolveDiscoveredProviderConfig``)."""


def runs_in_eval_folder(provider: str) -> bool:
    """Whether AgentV 4.42.4 runs a target of ``provider`` with its cli provider's working folder: ``cwd``
    relative to the eval file's folder, and that folder when ``cwd`` is not set (``normalizeCliTargetInput``,
    ``resolveDiscoveredProviderConfig``), unless the test runs in a workspace. It does so for ``cli`` and for
    a custom provider; its other agent providers take a relative ``cwd`` from where AgentV runs
    (``path.resolve``) and have no such default."""
    kind = provider.strip().lower()
    return kind == "cli" or kind not in AGENTV_PROVIDERS


def without_unset_optionals(provider: str, fields: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """``fields`` less the optional ones (:data:`OPTIONAL_REFERENCES`) whose reference is unset or empty here;
    a cli ``healthcheck``'s ``cwd`` likewise."""

    def unset(value: Any) -> bool:
        match = USE_TARGET_REFERENCE.match(value.strip()) if isinstance(value, str) else None
        return match is not None and not (env.get(match.group(1)) or "").strip()

    optional = OPTIONAL_REFERENCES.get(provider.strip().lower(), ())
    out = {k: v for k, v in fields.items() if not (k in optional and unset(v))}
    check = out.get("healthcheck")
    if provider.strip().lower() == "cli" and isinstance(check, dict) and unset(check.get("cwd")):
        out["healthcheck"] = {k: v for k, v in check.items() if k != "cwd"}
    return out


@dataclass(frozen=True)
class TargetsFile:
    path: str
    targets: dict[str, TargetEntry] = field(default_factory=dict)
    agentv_notes: dict[str, list[str]] = field(default_factory=dict)
    """Per target, what AgentV 4.42.4 would refuse or leave unresolved in it (``agentv_syntax.py``): warnings."""

    @property
    def warnings(self) -> list[str]:
        return [note for notes in self.agentv_notes.values() for note in notes]

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

    def select(self, name: str, env: Mapping[str, str]) -> TargetEntry:
        """The target ``agentv eval`` runs when asked for ``name``: its ``use_target`` chain followed
        (at most :data:`SELECT_DEPTH` steps; a reference to an unset or empty variable ends the chain, as
        AgentV's ``resolveUseTarget``), its provider resolved. Raises :class:`TargetsFileError` for a
        name not defined, a step naming no target, or a chain that ends on an entry with no provider."""
        current = self.get(name)
        for _ in range(SELECT_DEPTH):
            raw = (current.use_target or "").strip()
            if not raw:
                break
            reference = USE_TARGET_REFERENCE.match(raw)
            resolved = (env.get(reference.group(1)) or "" if reference else raw).strip()
            if not resolved:
                break
            if resolved not in self.targets:
                raise TargetsFileError(
                    f"{current.source}: target {current.name!r}: use_target {raw!r} names {resolved!r}, which is not "
                    f"defined in {self.path} (targets defined: {', '.join(self.targets)})"
                )
            current = self.targets[resolved]
        return self._concrete(current, asked=name, env=env)

    def delegate(self, name: str, env: Mapping[str, str]) -> TargetEntry | None:
        """The target AgentV's runtime resolves a grader target's ``name`` to (``resolveDelegatedTargetDefinition``):
        None when the file does not define ``name``; its ``use_target`` chain followed (at most
        :data:`DELEGATE_DEPTH` steps), where an unset or empty variable, a name not defined or a cycle is an
        error; its provider resolved."""
        current = self.targets.get(name)
        if current is None:
            return None
        visited = [current.name]
        for _ in range(DELEGATE_DEPTH):
            raw = (current.use_target or "").strip()
            if not raw:
                return self._concrete(current, asked=name, env=env)
            reference = USE_TARGET_REFERENCE.match(raw)
            resolved = (env.get(reference.group(1)) or "" if reference else raw).strip()
            where = f"{current.source}: target {current.name!r}: use_target {raw!r}"
            if not resolved:
                if reference:
                    raise TargetsFileError(
                        f"{where}: environment variable {reference.group(1)} is not set; set it to the name of a "
                        "target of this file"
                    )
                raise TargetsFileError(f"{where} is empty; name a target of this file")
            if resolved not in self.targets:
                raise TargetsFileError(f"{where} names {resolved!r}, which is not defined in {self.path}")
            if resolved in visited:
                raise TargetsFileError(f"{where}: circular use_target: {' -> '.join([*visited, resolved])}")
            current = self.targets[resolved]
            visited.append(resolved)
        raise TargetsFileError(
            f"{self.path}: target {name!r}: more than {DELEGATE_DEPTH} use_target steps; look for a delegation loop"
        )

    def _concrete(self, entry: TargetEntry, *, asked: str, env: Mapping[str, str]) -> TargetEntry:
        """``entry`` with its provider resolved (AgentV reads ``provider`` through its ``${{ NAME }}`` syntax too)."""
        chain = "" if entry.name == asked else f" (target {asked!r} resolves to it)"
        if not entry.provider:
            reference = USE_TARGET_REFERENCE.match((entry.use_target or "").strip())
            why = (
                f"use_target {entry.use_target!r} names no target: environment variable {reference.group(1)} is not "
                "set; set it to the name of a target of this file"
                if reference
                else "it has no provider"
            )
            raise TargetsFileError(f"{entry.source}: target {entry.name!r}{chain}: {why}")
        provider = entry.provider
        reference = USE_TARGET_REFERENCE.match(provider)
        if reference is not None:
            provider = (env.get(reference.group(1)) or "").strip()
            if not provider:
                raise TargetsFileError(
                    f"{entry.source}: target {entry.name!r}{chain}: environment variable {reference.group(1)} "
                    "(its provider) is not set"
                )
        return replace(entry, provider=provider, fields=without_unset_optionals(provider, entry.fields, env))


TARGET_KEYS = frozenset({"name", "provider", "use_target"})
"""Keys of a targets file's entry, one of which an eval file's top level never lists under ``targets``."""


def is_targets_document(data: Any) -> bool:
    """Whether parsed YAML is a targets file by what it holds, wherever it lies: a mapping with no ``tests``
    (an eval's) whose top-level ``targets`` is a list with an entry that is a mapping with a ``name``,
    ``provider`` or ``use_target``, the shape of AgentV's ``targets.yaml`` (one with an entry in error
    too, so that the targets loader, not the eval parser, says what is wrong). An eval file holds no such
    list (its targets are names, under ``execution``)."""
    if not isinstance(data, dict) or "tests" in data or not isinstance(data.get("targets"), list):
        return False
    return any(isinstance(entry, dict) and entry.keys() & TARGET_KEYS for entry in data["targets"])


def load_targets_file(path: str | Path) -> TargetsFile:
    """Parse a targets file; raises :class:`TargetsFileError` naming the file, line and field at fault.

    What AgentV's loader checks is checked here (``readTargetDefinitions``): every entry a mapping with a
    name, and a provider unless it delegates (``use_target``). A ``grader_target`` naming no target of the
    file is no error: AgentV resolves it when a grader needs a judge, and fails then.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TargetsFileError(f"{path}: cannot read targets file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise TargetsFileError(f"{path}: not a targets file: not UTF-8 text (byte {exc.start})") from None
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

    from evalstore.replay.targetsfile.agentv_syntax import agentv_notes  # builds on this module's reference syntax

    item_lines = _item_lines(root)
    field_lines = _field_lines(root)
    targets: dict[str, TargetEntry] = {}
    notes: dict[str, list[str]] = {}
    for index, raw in enumerate(data["targets"]):
        where = f"{path}:{item_lines[index] if index < len(item_lines) else 1}"
        if not isinstance(raw, dict):
            raise TargetsFileError(f"{where}: targets[{index}] must be a mapping with name and provider")
        name = raw.get("name")
        provider = raw.get("provider")
        use_target = raw.get("use_target")
        if not isinstance(name, str) or not name.strip():
            raise TargetsFileError(f"{where}: targets[{index}]: field 'name' is required (a string)")
        if use_target is not None and not isinstance(use_target, str):
            raise TargetsFileError(f"{where}: target {name!r}: field 'use_target' must be a target name")
        delegates = bool(use_target and use_target.strip())
        if not delegates and (not isinstance(provider, str) or not provider.strip()):
            raise TargetsFileError(
                f"{where}: target {name!r}: field 'provider' is required (a string), or 'use_target' naming "
                "the target it stands for"
            )
        if provider is not None and not isinstance(provider, str):
            raise TargetsFileError(f"{where}: target {name!r}: field 'provider' must be a string")
        if name in targets:
            raise TargetsFileError(f"{where}: target {name!r} is defined twice; target names must be unique")
        grader = raw.get("grader_target", raw.get("judge_target"))
        if grader is not None and not isinstance(grader, str):
            raise TargetsFileError(f"{where}: target {name!r}: field 'grader_target' must be a target name")
        fields = {
            k: v for k, v in raw.items() if k not in ("name", "provider", "grader_target", "judge_target", "use_target")
        }
        targets[name] = TargetEntry(
            name,
            (provider or "").strip(),
            fields,
            grader,
            where,
            use_target.strip() if use_target and delegates else None,
        )
        lines = field_lines[index] if index < len(field_lines) else {}
        if found := agentv_notes(str(path), name, provider or "", fields, lines):
            notes[name] = found
    return TargetsFile(str(path), targets, notes)


TARGET_FILE_CANDIDATES = ("targets.yaml", "targets.yml", ".agentv/targets.yaml", ".agentv/targets.yml")
"""What ``agentv eval`` looks for in each folder it searches, in order."""


def repo_root(start: str | Path) -> Path:
    """The folder ``agentv eval`` takes for the repository root: the nearest one holding ``.git`` from
    ``start`` (the working directory) up, else ``start`` itself (``findRepoRoot``)."""
    start = Path(start).resolve()
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


def explicit_targets_file(path: str | Path) -> Path:
    """A targets file named on the command line: the file, or a folder holding one of the candidates."""
    given = Path(path).resolve()
    if given.is_file():
        return given
    for candidate in TARGET_FILE_CANDIDATES:
        if (given / candidate).is_file():
            return given / candidate
    raise TargetsFileError(f"{given}: no targets file there (looked for {', '.join(TARGET_FILE_CANDIDATES)})")


def find_targets_file(eval_file: str | Path, *, cwd: str | Path | None = None) -> Path | None:
    """The targets file ``agentv eval`` uses for ``eval_file`` (``discoverTargetsFile``): each folder from the
    eval file's up to the repository root (:func:`repo_root` of ``cwd``; every folder up to the filesystem
    root when the eval is outside it, then the repository root), then ``cwd``; in each, the first of
    :data:`TARGET_FILE_CANDIDATES` that exists."""
    here = Path(cwd if cwd is not None else Path.cwd()).resolve()
    boundary = repo_root(here)
    directories: list[Path] = []
    current = Path(eval_file).resolve().parent
    for directory in (current, *current.parents):
        directories.append(directory)
        if directory == boundary:
            break
    for extra in (boundary, here):
        if extra not in directories:
            directories.append(extra)
    for directory in directories:
        for candidate in TARGET_FILE_CANDIDATES:
            if (directory / candidate).is_file():
                return directory / candidate
    return None


def run_targets_file(eval_file: str | Path | None, given: str | Path | None = None) -> Path | None:
    """The targets file of a recorded run graded with ``eval_file``, as a replay and an import take it:
    ``given`` (``--targets``, or the one the run recorded), else the one ``agentv eval`` finds for the eval
    (:func:`find_targets_file`), else the one AgentV bundled beside a test's copy of its eval in a run
    folder (``task/targets.yaml``): the targets the run used, when no targets file lies above."""
    if given:
        return Path(given)
    if not eval_file:
        return None
    found = find_targets_file(eval_file)
    if found is not None:
        return found
    beside = Path(eval_file).parent / "targets.yaml"
    return beside if Path(eval_file).name == "EVAL.yaml" and beside.is_file() else None


def _items(root: yaml.Node | None) -> list[yaml.Node]:
    """The nodes of the top-level ``targets`` sequence."""
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "targets" and isinstance(value, yaml.SequenceNode):
            return list(value.value)
    return []


def _item_lines(root: yaml.Node | None) -> list[int]:
    """1-based start line of each item of the top-level ``targets`` sequence."""
    return [item.start_mark.line + 1 for item in _items(root)]


def _field_lines(root: yaml.Node | None) -> list[dict[str, int]]:
    """Per item of ``targets``, the 1-based line of each value inside it, by path (``healthcheck.url``, ``args[0]``)."""

    def walk(node: yaml.Node, prefix: str, out: dict[str, int]) -> dict[str, int]:
        if prefix:
            out[prefix] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = str(key.value)
                walk(value, f"{prefix}.{name}" if prefix else name, out)
        elif isinstance(node, yaml.SequenceNode):
            for i, value in enumerate(node.value):
                walk(value, f"{prefix}[{i}]", out)
        return out

    return [walk(item, "", {}) for item in _items(root)]
