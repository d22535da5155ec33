"""``file_changes``: a unified diff (git's format) of the workspace against its state before the agent ran.

AgentV commits a git baseline in the workspace and runs ``git diff --submodule=diff``. evalstore compares
two in-memory states of the folder instead (:func:`folder_state` before the agent, after it), so the
workspace never gains a ``.git`` the agent could see, nothing depends on git being installed, and changes
inside nested repositories are seen like any other file (their ``.git`` folders are left out). The
output has git's shape: ``diff --git``, ``new file mode``/``deleted file mode``, ``---``/``+++`` and hunks
with three lines of context; binary files are one ``Binary files ... differ`` line.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from evalstore.replay.evalfile.specs import SnapshotSpec
from evalstore.replay.workspace.snapshot import take_snapshot

FolderState = dict[str, tuple[int, bytes | str]]
"""path -> (mode, bytes of a file or the target of a symlink)."""


def folder_state(folder: Path, spec: SnapshotSpec) -> FolderState:
    """Every file's mode and bytes (within the snapshot limits and excludes), kept in memory."""
    contents: dict[str, bytes] = {}

    def keep(data: bytes) -> str:
        from evalstore.store.codec import sha256_hex

        digest = sha256_hex(data)
        contents[digest] = data
        return digest

    snap = take_snapshot(folder, spec, keep, test_id="", target=None)
    state: FolderState = {}
    for entry in snap.entries:
        if entry.kind == "file" and entry.sha256:
            state[entry.path] = (entry.mode or 0o644, contents[entry.sha256])
        elif entry.kind == "symlink":
            state[entry.path] = (0o120000, entry.target or "")
    return state


def _git_mode(mode: int) -> str:
    if mode == 0o120000:
        return "120000"
    return "100755" if mode & 0o111 else "100644"


def _lines(data: bytes | str) -> list[str] | None:
    if isinstance(data, str):
        return [data]
    if b"\0" in data[:8000]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.splitlines(keepends=True)


def unified_diff(before: FolderState, after: FolderState) -> str:
    """The diff from ``before`` to ``after``, files in path order; empty when nothing changed."""
    out: list[str] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        a, b = f"a/{path}", f"b/{path}"
        out.append(f"diff --git {a} {b}\n")
        if old is None:
            out.append(f"new file mode {_git_mode(new[0])}\n")  # type: ignore[index]
        elif new is None:
            out.append(f"deleted file mode {_git_mode(old[0])}\n")
        elif _git_mode(old[0]) != _git_mode(new[0]):
            out.append(f"old mode {_git_mode(old[0])}\nnew mode {_git_mode(new[0])}\n")
            if old[1] == new[1]:
                continue
        old_lines = _lines(old[1]) if old else []
        new_lines = _lines(new[1]) if new else []
        if old_lines is None or new_lines is None:
            out.append(f"Binary files {a if old else '/dev/null'} and {b if new else '/dev/null'} differ\n")
            continue
        hunks = list(
            difflib.unified_diff(
                old_lines, new_lines, fromfile=a if old else "/dev/null", tofile=b if new else "/dev/null", n=3
            )
        )
        for line in hunks:
            if line.endswith("\n"):
                out.append(line)
            else:
                out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out).rstrip("\n")
