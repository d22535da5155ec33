"""Getting the bytes of a file block, and private temporary copies of them for child processes.

A file block's path comes from a transcript, i.e. from the agent: it is untrusted. Bytes come from the
blob store when evalstore captured them (``sha256``); otherwise, during live grading, from the
workspace, and only from inside it: ``..`` escapes, absolute paths elsewhere and symlinks pointing out
are refused. Copies for converters and code graders go to a private temporary directory under a name
evalstore chooses (only the original basename is kept, for the extension), so nothing a transcript says
can make evalstore write anywhere else either.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import unquote, urlparse

from evalstore.replay.content import FileBlock
from evalstore.replay.errors import UnsafePathError
from evalstore.replay.grading.graders.base import Recorder
from evalstore.store.codec import sha256_hex
from evalstore.store.errors import BlobNotFound

REMOTE_NOT_SUPPORTED = "remote file paths are not supported"
MAX_FILE_BYTES = 100_000_000
"""Workspace files larger than this are not read (captured files were size-checked when stored)."""
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass
class LoadedFile:
    """The bytes of a file block, or why there are none."""

    data: bytes | None
    reason: str | None = None

    @property
    def sha256(self) -> str | None:
        return sha256_hex(self.data) if self.data is not None else None


def is_remote(path: str) -> bool:
    return bool(_SCHEME.match(path)) and not path.lower().startswith("file://")


def resolve_in_workspace(workspace: str, path: str) -> Path:
    """The real path ``path`` names, if it lies inside ``workspace``; else :class:`UnsafePathError`.

    Relative paths resolve against the workspace; ``file://`` URLs and absolute paths are accepted only
    when they point inside it. Symlinks are resolved before the containment check.
    """
    if path.lower().startswith("file://"):
        path = unquote(urlparse(path).path)
    root = Path(workspace).resolve()
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    real = candidate.resolve()
    if not real.is_relative_to(root):
        raise UnsafePathError(f"file path {path!r} is outside the workspace {str(root)!r}; refused")
    return real


def load_file(block: FileBlock, recorder: Recorder, workspace: str | None) -> LoadedFile:
    """The block's bytes: the captured blob if there is one, else the workspace file (guarded)."""
    if block.sha256:
        try:
            return LoadedFile(recorder.get_blob(block.sha256))
        except BlobNotFound:
            return LoadedFile(None, f"captured bytes {block.sha256[:12]}... are not in the store")
    if block.status in ("missing", "refused"):
        return LoadedFile(None, f"file was {block.status} when captured: {block.reason or 'no reason given'}")
    if is_remote(block.path):
        return LoadedFile(None, REMOTE_NOT_SUPPORTED)
    if not workspace:
        return LoadedFile(None, "file was not captured and no workspace is known to read it from")
    try:
        real = resolve_in_workspace(workspace, block.path)
    except UnsafePathError as exc:
        return LoadedFile(None, str(exc))
    try:
        if not real.exists():
            return LoadedFile(None, f"file not found: {block.path}")
        if not real.is_file():  # a FIFO or device would block or never end
            return LoadedFile(None, f"not a regular file: {block.path}")
        size = real.stat().st_size
        if size > MAX_FILE_BYTES:
            return LoadedFile(None, f"file is {size} bytes, over the {MAX_FILE_BYTES}-byte limit")
        return LoadedFile(real.read_bytes())
    except OSError as exc:
        return LoadedFile(None, f"cannot read {block.path}: {exc.strerror or exc}")


def safe_basename(path: str, default: str = "file") -> str:
    """The last path component, fit to be a file name in our own directory."""
    name = re.split(r"[\\/]", path.rstrip("/\\"))[-1] if path else ""
    name = name.replace("\x00", "")
    return name if name not in ("", ".", "..") else default


class PrivateTempDir:
    """A temporary directory only this user can read, removed on exit.

    Created on first use of :attr:`path`: most grades have no file to copy, and creating and removing
    an empty directory per code-grader call was a measurable part of a replay (bench/replay.py).
    """

    def __init__(self, prefix: str = "evalstore-") -> None:
        self._prefix = prefix
        self._path: Path | None = None
        self._entered = False
        self._count = 0

    def __enter__(self) -> PrivateTempDir:
        self._entered = True
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._entered = False
        if self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
            self._path = None

    @property
    def path(self) -> Path:
        if not self._entered:
            raise RuntimeError("PrivateTempDir used outside its with-block")
        if self._path is None:
            self._path = Path(tempfile.mkdtemp(prefix=self._prefix))  # mode 0700
        return self._path

    @property
    def created(self) -> Path | None:
        """The directory if something created it, without creating it."""
        return self._path

    def write(self, original_path: str, data: bytes) -> Path:
        """A copy of ``data`` under its original basename, in a subdirectory of its own."""
        self._count += 1
        slot = self.path / f"f{self._count}"
        slot.mkdir()
        target = slot / safe_basename(original_path)
        target.write_bytes(data)
        return target


@dataclass
class MaterializedFile:
    """A file block as a code grader sees it (the ``files`` entries of its stdin payload)."""

    original_path: str
    media_type: str | None
    path: str | None = None
    sha256: str | None = None
    error: str | None = None

    def payload(self) -> dict[str, str | None]:
        entry: dict[str, str | None] = {
            "path": self.path,
            "original_path": self.original_path,
            "media_type": self.media_type,
            "sha256": self.sha256,
        }
        if self.error is not None:
            entry["error"] = self.error
        return entry


def materialize_files(
    blocks: list[FileBlock], recorder: Recorder, workspace: str | None, tmp: PrivateTempDir
) -> list[MaterializedFile]:
    """Raw copies of ``blocks`` in ``tmp``; a block without bytes keeps ``path=None`` and an error."""
    files = []
    for block in blocks:
        loaded = load_file(block, recorder, workspace)
        if loaded.data is None:
            files.append(MaterializedFile(block.path, block.media_type, error=loaded.reason))
            continue
        copy = tmp.write(block.path, loaded.data)
        files.append(MaterializedFile(block.path, block.media_type, path=str(copy), sha256=loaded.sha256))
    return files
