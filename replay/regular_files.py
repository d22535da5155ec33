"""Reading a file a user named, only when it is a regular file.

A FIFO named as an eval file, a labels file or a bundle's part would block the command for ever waiting
for a writer, and a device such as ``/dev/zero`` would never end: both are refused before anything is
read, with an ``OSError`` whose message says so (callers turn it into their one-line error).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def read_regular(path: str | Path, *, follow_symlinks: bool = True, max_bytes: int | None = None) -> bytes:
    """The bytes of ``path``, which must be a regular file (``follow_symlinks=False``: and not a symlink).
    ``max_bytes``: refused when larger (its size is read before its bytes)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)  # opening a FIFO must not wait for a writer
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise OSError(exc.errno, "a symbolic link, not a regular file", str(path)) from None
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if max_bytes is not None and info.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"larger than {max_bytes} bytes", str(path))
        return handle.read()


def new_file_mode() -> int:
    """The mode a file created now gets (``0o666`` less the umask): for one written to a temporary file first,
    which ``mkstemp`` makes ``0600``, so that it reads as any other file its user writes would."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask
