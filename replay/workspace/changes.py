"""``file_changes``: a unified diff (git's format) of the workspace against its state before the agent ran.

AgentV commits a git baseline in the workspace and runs ``git diff --submodule=diff``. evalstore compares
two in-memory states of the folder instead (:func:`folder_state` before the agent, after it), so the
workspace never gains a ``.git`` the agent could see, nothing depends on git being installed, and changes
inside nested repositories are seen like any other file (their ``.git`` folders are left out). The
output is byte-identical to AgentV's for the same edits (checked against AgentV 4.42.4's runs in
tests/fixtures/agentv-real/hook-logs): ``diff --git``, ``new file mode``/``deleted file mode``, ``index``
lines with git's blob ids, ``---``/``+++``, hunks with three lines of context and git's function context;
binary files are one ``Binary files ... differ`` line. Hunks come from difflib, not git's Myers diff, so an
edit with several equally short diffs may be split differently than git would split it, and only exact
renames are detected (git also pairs a moved file that was edited, at 50% similarity or more).
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


def _blob_id(data: bytes | str) -> str:
    """git's abbreviated blob id (as in a fresh repository: 7 hex digits)."""
    import hashlib

    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha1(b"blob %d\0" % len(raw) + raw, usedforsecurity=False).hexdigest()[:7]


def _func_name(lines: list[str], start: int) -> str:
    """git's default hunk-header context: the nearest line before ``start`` that begins with a letter,
    ``_`` or ``$``, cut to 80 bytes, trailing whitespace dropped."""
    for i in range(start - 1, -1, -1):
        line = lines[i]
        if line[:1].isascii() and (line[:1].isalpha() or line[:1] in "_$"):
            raw = line.rstrip("\n").encode("utf-8")[:80].decode("utf-8", errors="ignore")
            return raw.rstrip()
    return ""


def _range(start: int, length: int) -> str:
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def _hunks(old: list[str], new: list[str]) -> list[str]:
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for group in matcher.get_grouped_opcodes(3):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        func = _func_name(old, i1)
        out.append(f"@@ -{_range(i1, i2 - i1)} +{_range(j1, j2 - j1)} @@{' ' + func if func else ''}\n")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out.extend(" " + line for line in old[a1:a2])
                continue
            out.extend("-" + line for line in old[a1:a2])
            out.extend("+" + line for line in new[b1:b2])
    return [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out]


def _exact_renames(before: FolderState, after: FolderState) -> dict[str, str]:
    """git's exact rename detection (on by default since git 2.9): a regular file gone from one path whose
    bytes appear at a new path. new path -> old path. Renames with edits (git's similarity below 100%) are
    shown as a deletion and a new file."""
    gone: dict[bytes | str, list[str]] = {}
    for path in sorted(set(before) - set(after)):
        mode, data = before[path]
        if mode != 0o120000:
            gone.setdefault(data, []).append(path)
    renamed: dict[str, str] = {}
    for path in sorted(set(after) - set(before)):
        mode, data = after[path]
        if mode != 0o120000 and gone.get(data):
            renamed[path] = gone[data].pop(0)
    return renamed


def unified_diff(before: FolderState, after: FolderState) -> str:
    """The diff from ``before`` to ``after`` as ``git diff`` prints it (``index`` lines with git's blob ids,
    hunk headers with git's default function context), files in path order, trimmed as AgentV trims it;
    empty when nothing changed."""
    out: list[str] = []
    renamed = _exact_renames(before, after)
    sources = set(renamed.values())
    for path in sorted(set(before) | set(after)):
        if path in sources:
            continue
        old, new = before.get(path), after.get(path)
        if path in renamed:
            src = renamed[path]
            old = before[src]
            out.append(f"diff --git a/{src} b/{path}\n")
            if _git_mode(old[0]) != _git_mode(new[0]):  # type: ignore[index]
                out.append(f"old mode {_git_mode(old[0])}\nnew mode {_git_mode(new[0])}\n")  # type: ignore[index]
            out.append(f"similarity index 100%\nrename from {src}\nrename to {path}\n")
            continue
        if old == new:
            continue
        a, b = f"a/{path}", f"b/{path}"
        out.append(f"diff --git {a} {b}\n")
        old_id = _blob_id(old[1]) if old else "0000000"
        new_id = _blob_id(new[1]) if new else "0000000"
        if old is None:
            out.append(f"new file mode {_git_mode(new[0])}\nindex {old_id}..{new_id}\n")  # type: ignore[index]
        elif new is None:
            out.append(f"deleted file mode {_git_mode(old[0])}\nindex {old_id}..{new_id}\n")
        elif _git_mode(old[0]) != _git_mode(new[0]):
            out.append(f"old mode {_git_mode(old[0])}\nnew mode {_git_mode(new[0])}\n")
            if old[1] == new[1]:
                continue
            out.append(f"index {old_id}..{new_id}\n")
        else:
            out.append(f"index {old_id}..{new_id} {_git_mode(new[0])}\n")
        old_lines = _lines(old[1]) if old else []
        new_lines = _lines(new[1]) if new else []
        if old_lines is None or new_lines is None:
            out.append(f"Binary files {a if old else '/dev/null'} and {b if new else '/dev/null'} differ\n")
            continue
        if not old_lines and not new_lines:
            continue  # an empty file made or removed: git prints no ---/+++ lines
        out.append(f"--- {a if old else '/dev/null'}\n+++ {b if new else '/dev/null'}\n")
        out.extend(_hunks(old_lines, new_lines))
    return "".join(out).strip()


SESSION_FILE_MAX_BYTES = 512 * 1024
"""AgentV's ``SNAPSHOT_MAX_FILE_BYTES``: a larger session file is left out."""
_SESSION_SKIPPED = frozenset({".git", "node_modules", ".agentv", "__pycache__"})


def session_artifacts(files: Path) -> str | None:
    """AgentV 4.42.4's ``captureSessionArtifacts`` (workspace/file-changes.ts): every text file under ``files``
    (a Copilot session's ``files/``, where the agent may save what it made instead of the workspace) as a
    synthetic new-file diff, in the order AgentV walks the folder (names sorted, depth first; ``.git``,
    ``node_modules``, ``.agentv``, ``__pycache__`` skipped; files over 512 KB, or holding a NUL once decoded,
    left out). None when the folder is missing or holds no such file. A symlink is followed only to a file
    inside ``files`` (AgentV follows it anywhere; evalstore reads no file outside the folders it is given)."""
    try:
        root = files.resolve(strict=True)
    except OSError:
        return None
    parts: list[str] = []

    def walk(folder: Path) -> None:
        try:
            names = sorted(p.name for p in folder.iterdir())
        except OSError:
            return
        for name in names:
            if name in _SESSION_SKIPPED:
                continue
            path = folder / name
            try:
                real = path.resolve(strict=True)
            except OSError:
                continue
            if real != root and root not in real.parents:
                continue
            if real.is_dir():
                walk(path)
            elif real.is_file():
                try:
                    if real.stat().st_size > SESSION_FILE_MAX_BYTES:
                        continue
                    text = real.read_bytes().decode("utf-8", errors="replace")
                except OSError:
                    continue
                if "\0" not in text:
                    parts.append(new_file_diff(path.relative_to(files).as_posix(), text))

    walk(files)
    return "\n".join(parts) if parts else None


def new_file_diff(path: str, content: str) -> str:
    """AgentV's ``generateNewFileDiff``: a created file as a synthetic unified diff (no index line, one hunk)."""
    lines = (content[:-1] if content.endswith("\n") else content).split("\n")
    return "\n".join(
        [
            f"diff --git a/{path} b/{path}",
            "new file mode 100644",
            "--- /dev/null",
            f"+++ b/{path}",
            f"@@ -0,0 +1,{len(lines)} @@",
            "\n".join(f"+{line}" for line in lines),
        ]
    )


def with_session_changes(workspace: str | None, session: str | None) -> str | None:
    """The run's ``file_changes``: the workspace's, then what the provider reported (orchestrator.ts:2004)."""
    if not session:
        return workspace
    return f"{workspace}\n{session}" if workspace else session
