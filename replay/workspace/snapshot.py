"""Workspace snapshots: the finished workspace as a manifest of content-addressed blobs, and back.

:func:`take_snapshot` walks a workspace without following symlinks (a link is stored as a link, its
target as written), leaves out what ``exclude`` names, and stops storing files at the limits, marking
the snapshot partial and naming what it left out. File bytes go through ``put_blob``, so a template's
files, identical in every test, are stored once. :func:`materialize` writes a snapshot into a folder.

The agent's workspace is its output, so a ``mask`` (the answer's, ``TargetOutcome.output_mask``) is applied
to what is kept of it: every file's bytes, text or not (an entry's size and digest are the masked bytes'),
and the paths and link targets it names.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from evalstore.replay.evalfile.specs import SnapshotSpec
from evalstore.replay.targetsfile.redaction import SecretMask
from evalstore.store.events import WorkspaceEntry, WorkspaceSnapshotted

MAX_OMITTED_LISTED = 100


def excluded(rel: str, patterns: list[str]) -> bool:
    """A pattern without ``/`` matches any path component; with one, the path from the root (a trailing
    ``/`` meaning: the folder and everything under it)."""
    parts = PurePosixPath(rel).parts
    for pattern in patterns:
        if "/" not in pattern.rstrip("/"):
            name = pattern.rstrip("/")
            if any(fnmatch.fnmatchcase(part, name) for part in parts):
                return True
        elif pattern.endswith("/"):
            prefix = pattern.rstrip("/")
            if fnmatch.fnmatchcase(rel, prefix) or fnmatch.fnmatchcase(rel, prefix + "/*"):
                return True
        elif fnmatch.fnmatchcase(rel, pattern.lstrip("/")):
            return True
    return False


@dataclass
class _Walk:
    spec: SnapshotSpec
    put_blob: Callable[[bytes], str]
    entries: list[WorkspaceEntry]
    omitted: list[str]
    mask: SecretMask | None = None
    files: int = 0
    total: int = 0

    def shown(self, text: str) -> str:
        """A path or link target as it is kept."""
        return self.mask.text(text) if self.mask else text

    def omit(self, rel: str, reason: str) -> None:
        self.omitted.append(f"{self.shown(rel)}: {reason}")


def take_snapshot(
    workspace: Path,
    spec: SnapshotSpec,
    put_blob: Callable[[bytes], str],
    *,
    test_id: str,
    target: str | None,
    attempt: int = 1,
    mask: SecretMask | None = None,
) -> WorkspaceSnapshotted:
    root = Path(workspace)
    walk = _Walk(spec, put_blob, [], [], mask)
    if root.is_dir():
        _walk(root, "", walk)
    return WorkspaceSnapshotted(
        test_id=test_id,
        target=target,
        attempt=attempt,
        root=str(root),
        entries=walk.entries,
        file_count=walk.files,
        total_bytes=walk.total,
        partial=bool(walk.omitted),
        omitted=walk.omitted[:MAX_OMITTED_LISTED],
        omitted_count=len(walk.omitted),
        exclude=list(spec.exclude),
        limits={"max_bytes": spec.max_bytes, "max_files": spec.max_files, "max_file_bytes": spec.max_file_bytes},
    )


def _walk(folder: Path, prefix: str, walk: _Walk) -> None:
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        walk.omit(prefix or ".", f"cannot list ({exc.strerror})")
        return
    if not names and prefix:
        walk.entries.append(WorkspaceEntry(path=walk.shown(prefix), kind="dir", mode=_mode(folder)))
        return
    for name in names:
        rel = f"{prefix}/{name}" if prefix else name
        if excluded(rel, walk.spec.exclude):
            continue
        path = folder / name
        try:
            info = path.lstat()
        except OSError as exc:
            walk.omit(rel, f"cannot read ({exc.strerror})")
            continue
        if stat.S_ISLNK(info.st_mode):
            walk.entries.append(
                WorkspaceEntry(path=walk.shown(rel), kind="symlink", target=walk.shown(os.readlink(path)))
            )
        elif stat.S_ISDIR(info.st_mode):
            _walk(path, rel, walk)
        elif stat.S_ISREG(info.st_mode):
            _file(path, rel, info, walk)
        else:
            walk.omit(rel, "not a regular file, folder or symlink")


def _file(path: Path, rel: str, info: os.stat_result, walk: _Walk) -> None:
    spec = walk.spec
    if walk.files >= spec.max_files:
        walk.omit(rel, f"over max_files ({spec.max_files})")
        return
    if info.st_size > spec.max_file_bytes:
        walk.omit(rel, f"{info.st_size} bytes, over max_file_bytes ({spec.max_file_bytes})")
        return
    if walk.total + info.st_size > spec.max_bytes:
        walk.omit(rel, f"{info.st_size} bytes would pass max_bytes ({spec.max_bytes})")
        return
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        walk.omit(rel, f"cannot read ({exc.strerror})")
        return
    if walk.mask:
        data = walk.mask.data(data)
    walk.files += 1
    walk.total += len(data)
    walk.entries.append(
        WorkspaceEntry(
            path=walk.shown(rel), mode=stat.S_IMODE(info.st_mode), size=len(data), sha256=walk.put_blob(data)
        )
    )


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None


class SnapshotUnusable(Exception):
    """The snapshot cannot stand in for the workspace: partial, or a blob is gone."""


def materialize(snapshot: WorkspaceSnapshotted, get_blob: Callable[[str], bytes], dest: Path) -> None:
    """Write the snapshot's files, folders and links under ``dest`` (which exists). A path that would
    land outside ``dest`` (``..``, absolute) is refused: the manifest comes from the store, not from us."""
    dest = Path(dest)
    base = dest.resolve()
    for entry in snapshot.entries:
        rel = PurePosixPath(entry.path)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise SnapshotUnusable(f"snapshot path {entry.path!r} is not inside the workspace")
        target = dest.joinpath(*rel.parts)
        if not target.parent.resolve().is_relative_to(base):
            raise SnapshotUnusable(f"snapshot path {entry.path!r} passes through a link out of the workspace")
        target.parent.mkdir(parents=True, exist_ok=True)
        if entry.kind == "dir":
            target.mkdir(exist_ok=True)
        elif entry.kind == "symlink":
            os.symlink(entry.target or "", target)
        else:
            if entry.sha256 is None:
                raise SnapshotUnusable(f"snapshot file {entry.path!r} has no digest")
            target.write_bytes(get_blob(entry.sha256))
            if entry.mode is not None:
                os.chmod(target, entry.mode & 0o777)
