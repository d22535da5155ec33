"""How a ``cli`` target's fields are written: AgentV's spellings of each field, and the placeholders its
``command`` template is filled with (``targets/cli.py`` fills them; ``validate`` checks how they are
written, without loading any target code)."""

from __future__ import annotations

import re
from typing import Any

PLACEHOLDER = re.compile(r"\{([A-Z_]+)\}")

FILLED = frozenset({"PROMPT", "PROMPT_FILE", "OUTPUT_FILE", "EVAL_ID", "ATTEMPT", "FILES"})
"""The placeholders a command is filled with."""

# AgentV (targets.ts) accepts snake_case and camelCase spellings of each cli field; first one set wins.
ALIASES = {
    "command": ("command", "command_template", "commandTemplate"),
    "timeout_seconds": ("timeout_seconds", "timeoutSeconds"),
    "files_format": ("files_format", "filesFormat", "attachments_format", "attachmentsFormat"),
    "keep_temp_files": ("keep_temp_files", "keepTempFiles", "keep_output_files", "keepOutputFiles"),
    "output_file": ("output_file", "outputFile"),
}


def field_value(config: dict[str, Any], key: str) -> Any:
    """The value of a cli field under any of its AgentV spellings."""
    for name in ALIASES.get(key, (key,)):
        if config.get(name) is not None:
            return config[name]
    return None


def quoted_placeholders(command: str) -> list[str]:
    """The placeholders a command string writes inside quotes (``--prompt "{PROMPT}"``). Each is filled
    already quoted for the shell, so inside quotes its own quotes are characters of the value, and inside
    double quotes the shell still expands what it holds: a prompt with ``$(...)`` in it is run. AgentV
    fills such a template the same way; written bare (``--prompt {PROMPT}``) the value is one word, as it
    is inside a ``$(...)`` (quoting starts again there)."""
    found: list[str] = []
    contexts: list[str] = []  # open quotes and $( ... ), innermost last
    i = 0
    while i < len(command):
        char, inner = command[i], contexts[-1] if contexts else None
        if char == "\\" and inner != "'":
            i += 2
            continue
        if inner != "'" and command.startswith("$(", i):
            contexts.append("(")
            i += 2
            continue
        if inner == "(" and char == ")":
            contexts.pop()
        elif inner in (None, "(") and char in "'\"":
            contexts.append(char)
        elif char == inner:
            contexts.pop()
        elif inner in ("'", '"') and char == "{":
            match = PLACEHOLDER.match(command, i)
            if match and match.group(1) in FILLED:
                found.append(match.group(0))
        i += 1
    return found
