"""Where a command writes a file the user named (``export -o``, ``compare --html``, ``replay --html``):
only a new or a regular file, never over a symbolic link, a device or a FIFO, in a folder that exists
and can be written, checked before the command does any work."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import click


def unwritable(path: Path) -> str | None:
    """Why a command could not write ``path`` (None when it can): a symbolic link, a device, a FIFO or a
    folder there, or no folder it could be written in. Checked before any work: exit 2 means nothing
    was done, so a replay must not regrade (and store) a run only to find its report cannot be written."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:  # a file where a folder of the path should be, a folder we may not search
        return exc.strerror or str(exc)
    if info is not None and stat.S_ISLNK(info.st_mode):
        return "a symbolic link; write to a new or a regular file"
    if info is not None and stat.S_ISDIR(info.st_mode):
        return "a folder; give the file's name in it"
    if info is not None and not stat.S_ISREG(info.st_mode):
        return "not a regular file; write to a new or a regular file"
    folder = path.parent
    if not folder.is_dir():
        return f"the folder {folder} does not exist; create it or write elsewhere"
    # The file is written beside itself first (replacing), or opened there: the folder must take it.
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable; write elsewhere"
    return None


@contextmanager
def replacing(path: Path) -> Iterator[IO[str]]:
    """A temporary file beside ``path`` that replaces it only when the writing finished: a failed export
    never leaves half a file (or destroys the previous one).

    Only a regular file (or nothing) is replaced (:func:`unwritable`, asked again here: the path may have
    changed since the command checked it), since a rename would put a file where a link or a device
    stood (run as root, over a device node)."""
    problem = unwritable(path)
    if problem is not None:
        raise OSError(errno.EEXIST, problem, str(path))
    from evalstore.replay.regular_files import new_file_mode

    try:
        info: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        info = None
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


def output_option(*names: str, help: str) -> Callable[[Callable], Callable]:
    """The option naming a file a command writes (``-o/--output``, ``--html``), checked by
    :func:`writable_file` before the command runs."""
    return click.option(*names, type=click.Path(dir_okay=False, path_type=Path), callback=writable_file, help=help)


def writable_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """A click callback for a file a command writes (``--html``, ``-o``): :func:`unwritable` is bad usage,
    refused before anything is read or written."""
    if value is not None and str(value) != "-":
        problem = unwritable(value)
        if problem is not None:
            raise click.BadParameter(f"{value}: {problem}")
    return value
