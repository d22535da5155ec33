"""The cap on a reply body read from a judge or a batch API, ``EVALSTORE_MAX_REPLY_BYTES``: apart from
``bounded_http.py``, which reads under it, so a judge pool checks the setting before any call without loading
httpx. And the one rule for a byte cap a variable sets (:func:`byte_cap`), an import's file caps' too."""

from __future__ import annotations

import os
from collections.abc import Mapping

from evalstore.replay.errors import ReplayError

MAX_REPLY_BYTES_ENV = "EVALSTORE_MAX_REPLY_BYTES"
DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024
"""The largest reply body read from a judge (or a batch API's answer to a call): a chat completion holding a
verdict is kilobytes, and the longest a model may write (its output-token limit, at most a few hundred thousand
tokens) is a few MiB; past this a reply is refused rather than held in memory (a 200 MB reply took 2.26 GB)."""


def max_reply_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The cap on one reply body: ``EVALSTORE_MAX_REPLY_BYTES`` (bytes), else :data:`DEFAULT_MAX_REPLY_BYTES`."""
    return byte_cap(MAX_REPLY_BYTES_ENV, DEFAULT_MAX_REPLY_BYTES, "the largest reply to read from a judge", environ)


def byte_cap(variable: str, default: int, largest: str, environ: Mapping[str, str] | None = None) -> int:
    """A cap in bytes a variable may set (a positive integer), else ``default``; a bad value is an error
    that says what the cap is (``largest``: "the largest file to import")."""
    raw = (os.environ if environ is None else environ).get(variable)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value <= 0:
        raise ReplayError(f"{variable}={raw!r}: give {largest}, in bytes (a positive integer)")
    return value
