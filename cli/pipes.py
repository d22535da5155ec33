"""A closed stdout (``evalstore compare A B --fail-on-regression any | head -1``) must not change the
exit code: once the reader goes away, further output is dropped and the command finishes, so its exit
code still says what the command found. Standard library only (``--help`` imports this)."""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


class PipeSafeStdout:
    """Wraps the process's stdout; the first ``BrokenPipeError`` points fd 1 at /dev/null and drops the rest."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def _gone(self) -> None:
        self.reader_gone = True
        try:  # Python's final flush at exit must not fail on the closed pipe either
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._gone()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """Install the wrapper on ``sys.stdout`` (once; only over a real file descriptor). A stdout (or
    stderr) closed before the start (``evalstore runs >&-``), which Python gives as None, is the reader
    gone from the first line: the output goes to /dev/null."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 (open for the process's life)
    stream = sys.stdout
    if isinstance(stream, PipeSafeStdout):
        return
    try:
        stream.fileno()
    except (OSError, ValueError, AttributeError):
        return  # an in-memory stream (tests' CliRunner): nothing can break
    sys.stdout = PipeSafeStdout(stream)
