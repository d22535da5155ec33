"""Capture the files an agent named in its reply, so graders can be re-run on the exact bytes later.

A relative path is found as AgentV finds it (``agentv-formats.md`` §3.3): in the test's workspace, else
in the target's configured ``cwd``, else in the process's cwd. An agent's file block is untrusted input:
it may name anything on the machine. Only regular files inside the test's workspace or the target's
configured ``cwd`` are read; everything else is recorded as ``refused`` with a reason, and a path that
does not exist as ``missing``. Containment is checked on the fully resolved path, so ``..`` segments,
absolute paths and symlinks that lead out of those folders are all caught by the same test.

A captured file is the agent's output as much as its answer, so its bytes pass the answer's mask
(``TargetOutcome.output_mask``) before they are kept: its digest and size are those of the masked bytes,
the bytes the store holds and graders read.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlparse

from evalstore.replay.content import FileBlock, Message
from evalstore.replay.targetsfile.redaction import SecretMask

DEFAULT_MAX_FILE_BYTES = 200 * 1024 * 1024

CaptureStatus = Literal["stored", "missing", "refused"]


@dataclass(frozen=True)
class CapturedFile:
    """One distinct path an agent named, and what evalstore could take of it."""

    path: str
    """The path exactly as the agent gave it."""
    media_type: str | None
    status: CaptureStatus
    sha256: str | None = None
    """Of the bytes as stored (masked), as ``size`` is."""
    size: int | None = None
    data: bytes | None = field(default=None, repr=False)
    """The bytes, masked, for the blob store; only when ``status == "stored"``."""
    reason: str | None = None


@dataclass
class CapturedOutput:
    messages: list[Message]
    """The messages given, copied, with every file block annotated (``sha256``/``status``/``reason``)."""
    files: list[CapturedFile]
    """One entry per distinct path, in order of first appearance."""


def capture_files(
    messages: list[Message],
    workspace: Path,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    agent_cwd: Path | None = None,
    mask: SecretMask | None = None,
) -> CapturedOutput:
    """Read the files named by file blocks in ``messages`` from ``workspace``, else ``agent_cwd``.

    ``agent_cwd`` is the target's configured ``cwd:`` (where the agent ran when that was not the
    workspace): a relative path not in the workspace is looked up there, then in the process's cwd,
    and read only if it resolves inside the workspace or ``agent_cwd``. ``mask`` (the answer's) masks
    every file's bytes, text or not (``SecretMask.data``); ``max_file_bytes`` applies to the file as read.
    """
    root = Path(workspace).resolve()
    roots = [root]
    if agent_cwd is not None and Path(agent_cwd).resolve() != root:
        roots.append(Path(agent_cwd).resolve())
    copied = [m.model_copy(deep=True) for m in messages]
    by_path: dict[str, CapturedFile] = {}
    for message in copied:
        if not isinstance(message.content, list):
            continue
        for block in message.content:
            if not isinstance(block, FileBlock):
                continue
            captured = by_path.get(block.path)
            if captured is None:
                captured = _capture_one(block, roots, max_file_bytes, mask)
                by_path[block.path] = captured
            block.sha256 = captured.sha256
            block.status = captured.status
            block.reason = captured.reason
    return CapturedOutput(messages=copied, files=list(by_path.values()))


def _capture_one(block: FileBlock, roots: list[Path], max_bytes: int, mask: SecretMask | None) -> CapturedFile:
    media_type = block.media_type or mimetypes.guess_type(block.path)[0]

    def refused(reason: str) -> CapturedFile:
        return CapturedFile(path=block.path, media_type=media_type, status="refused", reason=reason)

    local, problem = _local_path(block.path)
    if local is None:
        return refused(problem)
    where = "the test workspace" if len(roots) == 1 else "the test workspace and the target's cwd"
    if local.is_absolute():
        candidate = local
    else:  # AgentV's order: the workspace, the target's cwd, the process's cwd; the first that exists
        candidates = [r / local for r in roots] + [Path.cwd() / local]
        candidate = next((c for c in candidates if os.path.lexists(c)), candidates[0])
    try:
        resolved = candidate.resolve()
    except (OSError, RuntimeError) as exc:  # symlink loops, unreadable components
        return refused(f"path cannot be resolved: {exc}")
    if not any(resolved.is_relative_to(r) for r in roots):
        return refused(f"path resolves outside {where}")
    try:
        info = resolved.stat()
    except FileNotFoundError:
        return CapturedFile(path=block.path, media_type=media_type, status="missing", reason=f"no such file in {where}")
    except OSError as exc:
        return refused(f"cannot stat: {exc.strerror or exc}")
    if not stat.S_ISREG(info.st_mode):
        return refused("not a regular file")
    if info.st_size > max_bytes:
        return refused(f"file is {info.st_size} bytes, over the {max_bytes}-byte capture limit")
    try:
        data = _read_regular(resolved, max_bytes)
    except _Refused as exc:
        return refused(str(exc))
    except OSError as exc:
        return refused(f"cannot read: {exc.strerror or exc}")
    if mask:
        data = mask.data(data)
    return CapturedFile(
        path=block.path,
        media_type=media_type,
        status="stored",
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        data=data,
    )


class _Refused(Exception):
    pass


def _read_regular(path: Path, max_bytes: int) -> bytes:
    """Read a file, re-checking on the open descriptor that it is still a regular file within the cap.

    ``O_NOFOLLOW`` refuses a last component swapped for a symlink after the containment check.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _Refused("not a regular file")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise _Refused(f"file grew over the {max_bytes}-byte capture limit while being read")
    return data


def _local_path(raw: str) -> tuple[Path | None, str]:
    """The filesystem path a block names, or None and why it cannot name one."""
    if not raw or not raw.strip():
        return None, "empty path"
    if "\x00" in raw:
        return None, "path contains a NUL byte"
    if "://" in raw:
        parsed = urlparse(raw)
        if parsed.scheme != "file":
            return None, f"remote path ({parsed.scheme}://) is not supported"
        if parsed.netloc not in ("", "localhost"):
            return None, f"file URL names another host ({parsed.netloc})"
        return Path(unquote(parsed.path)), ""
    return Path(raw), ""
