"""Where a command writes a file the user named (``export -o``, ``compare --html``): only a new or a
regular file, never over a symbolic link, a device or a FIFO."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import click


@contextmanager
def replacing(path: Path) -> Iterator[IO[str]]:
    """A temporary file beside ``path`` that replaces it only when the writing finished: a failed export
    never leaves half a file (or destroys the previous one).

    Only a regular file (or nothing) is replaced: a symbolic link, a device (``/dev/full``), a FIFO or a
    folder at ``path`` is refused before anything is written, since a rename would put a file where it
    stood (run as root, over a device node)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise OSError(errno.EEXIST, f"{what}; write to a new or a regular file", str(path))
    from evalstore.replay.regular_files import new_file_mode

    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:  # name the file the user gave, not our temporary one
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            # mkstemp makes 0600: give the mode the file had, or any new file gets.
            os.fchmod(fh.fileno(), stat.S_IMODE(info.st_mode) if info is not None else new_file_mode())
            yield fh
        try:
            os.replace(tmp, path)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def regular_or_new(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """A click callback for a file a command writes through (``compare --html``): a path that is a symbolic
    link, a device or a FIFO is bad usage, refused before anything is read or written."""
    if value is not None:
        try:
            info = os.lstat(value)
        except OSError:
            return value  # nothing there yet (or not reachable: opening it will say why)
        if stat.S_ISLNK(info.st_mode):
            raise click.BadParameter(f"{value}: a symbolic link; write to a new or a regular file")
        if not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode):
            raise click.BadParameter(f"{value}: not a regular file; write to a new or a regular file")
    return value
