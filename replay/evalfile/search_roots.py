"""Where a file named in an eval file is looked for, and how it is found.

Every reference an eval file makes (tests file, ``file://`` prompt, grader script, converter script,
input file) resolves through the same ordered list of directories, AgentV's search roots:

1. the eval file's directory;
2. each parent directory, up to and including the project root;
3. the project root (if it is not an ancestor of the eval file);
4. the current working directory.

The project root is ``project_root`` when given, else the repository root as AgentV 4.42.4 finds it
(``findRepoRoot``: the nearest folder holding ``.git``, from the eval file's folder up, as ``agentv
validate`` and ``eval prompt`` look; ``eval run`` looks from its working directory, the same folder when
run inside the repository), else the filesystem root (so a loose eval file still finds files in any of
its parents, as AgentV does when no repository root is known). A ``.agentv`` folder marks nothing:
AgentV's rule never stops at one, and it leaves one (``.agentv/cache.json``, its last run's folder) in
every folder it runs from, which would otherwise end the search below the repository's own files. Paths are made absolute without
resolving symlinks, as AgentV's ``path.resolve`` does, so recorded paths match what the user wrote.

Existence is asked of a :class:`FileResolver`: :class:`DiskResolver` reads the filesystem, and
:class:`SnapshotResolver` answers from bytes captured when a run started, so a stored eval snapshot
resolves to the same absolute paths without the files being on disk.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from evalstore.replay.errors import ReferenceNotFoundError
from evalstore.replay.regular_files import read_regular

REPOSITORY_MARKER = ".git"
"""What marks the project root: AgentV's repository root (``findRepoRoot``), never ``.agentv``."""
FILE_SCHEME = "file://"


class FileResolver(Protocol):
    """Answers whether a candidate path holds a file, and what its bytes are; and, for tests given as a
    folder or a glob, which folders and files there are."""

    def is_file(self, path: Path) -> bool: ...

    def read_bytes(self, path: Path) -> bytes: ...

    def is_dir(self, path: Path) -> bool: ...

    def subfolders(self, folder: Path) -> list[str]:
        """Names of the folders directly in ``folder``, sorted."""
        ...

    def glob(self, pattern: str) -> list[Path]:
        """Files an absolute glob (``*``, ``?``, ``**``, ``{a,b}``) matches, sorted."""
        ...


class DiskResolver:
    """Files as they are on disk now."""

    def is_file(self, path: Path) -> bool:
        return path.is_file()

    def read_bytes(self, path: Path) -> bytes:
        return read_regular(path)  # a FIFO named as an eval or prompt file would block for ever

    def is_dir(self, path: Path) -> bool:
        return path.is_dir()

    def subfolders(self, folder: Path) -> list[str]:
        try:
            with os.scandir(folder) as entries:
                return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            return []

    def glob(self, pattern: str) -> list[Path]:
        found = {
            Path(p)
            for expanded in expand_braces(pattern)
            for p in glob.glob(expanded, recursive=True)
            if os.path.isfile(p)
        }
        return sorted(found)


class SnapshotResolver:
    """Files as captured in a snapshot: absolute path -> bytes.

    With ``fallback`` set, paths the snapshot does not hold are asked of the fallback (e.g. the disk),
    which lets a replay take a newer file on purpose; without it, only snapshotted files exist.
    """

    def __init__(self, files: Mapping[str, bytes], fallback: FileResolver | None = None) -> None:
        self._files = {os.path.normpath(k): v for k, v in files.items()}
        self._fallback = fallback

    def is_file(self, path: Path) -> bool:
        if os.path.normpath(path) in self._files:
            return True
        return self._fallback is not None and self._fallback.is_file(path)

    def read_bytes(self, path: Path) -> bytes:
        key = os.path.normpath(path)
        if key in self._files:
            return self._files[key]
        if self._fallback is None:
            raise FileNotFoundError(str(path))
        return self._fallback.read_bytes(path)

    def is_dir(self, path: Path) -> bool:
        prefix = os.path.join(os.path.normpath(path), "")
        if any(key.startswith(prefix) for key in self._files):
            return True
        return self._fallback is not None and self._fallback.is_dir(path)

    def subfolders(self, folder: Path) -> list[str]:
        prefix = os.path.join(os.path.normpath(folder), "")
        names = {key[len(prefix) :].split(os.sep)[0] for key in self._files if key.startswith(prefix)}
        names = {n for n in names if os.path.join(prefix, n) not in self._files}  # files directly in it are not folders
        if self._fallback is not None:
            names.update(self._fallback.subfolders(folder))
        return sorted(names)

    def glob(self, pattern: str) -> list[Path]:
        regexes = [re.compile(_glob_regex(p)) for p in expand_braces(os.path.normpath(pattern))]
        found = {Path(key) for key in self._files if any(r.fullmatch(key) for r in regexes)}
        if self._fallback is not None:
            found.update(self._fallback.glob(pattern))
        return sorted(found)


_BRACES = re.compile(r"\{([^{}]*)\}")


def expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` as ``abd`` and ``acd``, as fast-glob expands braces (nested ones from the inside out)."""
    match = _BRACES.search(pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [expanded for choice in match.group(1).split(",") for expanded in expand_braces(head + choice + tail)]


def _glob_regex(pattern: str) -> str:
    """A glob as a regular expression over paths: ``**/`` any folders, ``*`` and ``?`` within one name."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += r"(?:[^/]+/)*"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return out


def absolute(path: str | Path) -> Path:
    """Absolute and normalized (``..`` folded), symlinks left alone."""
    return Path(os.path.normpath(os.path.abspath(path)))


def find_project_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` holding ``.git`` (AgentV's ``findRepoRoot``), or None."""
    current = absolute(start)
    while True:
        if (current / REPOSITORY_MARKER).exists():
            return current
        if current.parent == current:
            return None
        current = current.parent


def build_search_roots(eval_path: str | Path, project_root: Path | None = None, cwd: Path | None = None) -> list[str]:
    """The ordered, de-duplicated search roots for an eval file (see the module docstring)."""
    eval_dir = absolute(eval_path).parent
    root = absolute(project_root) if project_root is not None else find_project_root(eval_dir)
    if root is None:
        root = Path(eval_dir.anchor)
    roots: list[str] = []

    def add(directory: Path) -> None:
        text = str(directory)
        if text not in roots:
            roots.append(text)

    current = eval_dir
    while True:
        add(current)
        if current == root or current.parent == current:
            break
        current = current.parent
    add(root)
    add(absolute(cwd if cwd is not None else Path.cwd()))
    return roots


def strip_file_scheme(ref: str) -> str:
    return ref[len(FILE_SCHEME) :] if ref.startswith(FILE_SCHEME) else ref


def candidate_paths(ref: str, search_roots: list[str]) -> list[Path]:
    """Where ``ref`` may live, in search order: itself if absolute, else under each root."""
    ref = strip_file_scheme(ref)
    if os.path.isabs(ref):
        return [absolute(ref)]
    seen: list[Path] = []
    for root in search_roots:
        candidate = absolute(os.path.join(root, ref))
        if candidate not in seen:
            seen.append(candidate)
    return seen


def find_reference(ref: str, search_roots: list[str], resolver: FileResolver | None = None) -> Path | None:
    """The first candidate holding a file, or None."""
    resolver = resolver or DiskResolver()
    for candidate in candidate_paths(ref, search_roots):
        if resolver.is_file(candidate):
            return candidate
    return None


def resolve_reference(ref: str, search_roots: list[str], resolver: FileResolver | None = None) -> Path:
    """The absolute path of the file ``ref`` names (``file://`` accepted); raises
    :class:`ReferenceNotFoundError` listing every place looked, or naming the folder found there instead."""
    resolver = resolver or DiskResolver()
    found = find_reference(ref, search_roots, resolver)
    if found is None:
        candidates = candidate_paths(ref, search_roots)
        folder = next((str(p) for p in candidates if resolver.is_dir(p)), None)
        raise ReferenceNotFoundError(ref, [str(p) for p in candidates], folder)
    return found
