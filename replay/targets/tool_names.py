"""AgentV 4.42.4's canonical tool names (``normalize-tool-call.ts``): a provider's own name for reading,
writing, editing, running a command or using a skill mapped to ``Read``, ``Write``, ``Edit``, ``Bash``,
``Skill``, so ``tool-trajectory`` and ``skill-trigger`` name tools the same way whatever agent ran.
Names not in the table pass through unchanged."""

from __future__ import annotations

from typing import Any

_COPILOT_NAMES = {
    "Skill": "Skill",
    "skill": "Skill",
    "Read File": "Read",
    "readFile": "Read",
    "Read": "Read",
    "readTextFile": "Read",
    "writeTextFile": "Write",
    "Write File": "Write",
    "editFile": "Edit",
    "Edit File": "Edit",
    "runTerminalCommand": "Bash",
}
_CLAUDE_NAMES = {name: name for name in ("Skill", "Read", "Write", "Edit", "Bash")}
_PI_NAMES = {"read": "Read", "bash": "Bash"}

NAMES: dict[str, dict[str, str]] = {
    "claude": _CLAUDE_NAMES,
    "claude-cli": _CLAUDE_NAMES,
    "claude-sdk": _CLAUDE_NAMES,
    "copilot-cli": _COPILOT_NAMES,
    "copilot-sdk": _COPILOT_NAMES,
    "copilot-log": _COPILOT_NAMES,
    "vscode": _COPILOT_NAMES,
    "vscode-insiders": _COPILOT_NAMES,
    "codex": {"command_execution": "Bash", "file_change": "Edit"},
    "pi-coding-agent": _PI_NAMES,
    "pi-cli": _PI_NAMES,
}
# (prefix, canonical name, whether the rest of the name is the skill)
_COPILOT_PREFIXES = (("Using skill: ", "Skill", True), ("Viewing ", "Read", False))
PREFIXES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "copilot-cli": _COPILOT_PREFIXES,
    "copilot-sdk": _COPILOT_PREFIXES,
    "copilot-log": _COPILOT_PREFIXES,
    "vscode": _COPILOT_PREFIXES,
    "vscode-insiders": _COPILOT_PREFIXES,
    "codex": (("mcp:", "Skill", True),),
}


def normalize(kind: str, call: dict[str, Any]) -> dict[str, Any]:
    """``normalizeToolCall(kind, call)``: ``call`` (``{tool, input, ...}``) with its canonical name and, for
    a read, ``input.file_path`` from ``path``/``filePath``."""
    name = call["tool"]
    canonical = NAMES.get(kind, {}).get(name)
    if canonical is not None:
        return _inputs(canonical, {**call, "tool": canonical})
    for prefix, target, skill_in_name in PREFIXES.get(kind, ()):
        if name.startswith(prefix):
            rest = name[len(prefix) :]
            updated = {**call, "tool": target}
            if skill_in_name and rest:
                existing = call.get("input")
                updated["input"] = {**(existing if isinstance(existing, dict) else {}), "skill": rest}
            return _inputs(target, updated)
    return call


def _inputs(canonical: str, call: dict[str, Any]) -> dict[str, Any]:
    # JavaScript's ``!== undefined``: a key present with null counts as set.
    given = call.get("input")
    if canonical != "Read" or not isinstance(given, dict) or "file_path" in given:
        return call
    if "path" in given:
        return {**call, "input": {**given, "file_path": given["path"]}}
    if "filePath" in given:
        return {**call, "input": {**given, "file_path": given["filePath"]}}
    return call
