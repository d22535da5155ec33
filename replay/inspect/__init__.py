"""Inspect AI logs (``.eval`` and ``.json``, inspect-ai 0.3.x): imported as runs, exported back.

Logs are read and written with ``inspect_ai`` itself, an optional extra (``pip install
'evalstore[inspect]'``); nothing here imports it until a log is read or written (:func:`inspect_log_api`).
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from evalstore.replay.errors import ReplayError

if TYPE_CHECKING:
    from evalstore.store.events import TranscriptRecorded

SOURCE_FORMATS = ("inspect-eval", "inspect-json")
"""``RunStarted.source_format`` of a run imported from an Inspect log, by the log's format."""

MISSING = "Inspect AI logs need the inspect_ai package: pip install 'evalstore[inspect]'"


def inspect_log_api() -> ModuleType:
    """``inspect_ai.log``, or one line saying how to install it."""
    try:
        import inspect_ai.log as log
    except ImportError:
        raise ReplayError(MISSING) from None
    return log


def graded_despite_error(transcript: TranscriptRecorded) -> bool:
    """Whether a replay grades this result although its sample errored: an Inspect sample (the import
    keeps it whole, ``source_record_sha256``). ``inspect score`` scores every sample of a log, an errored
    one from what it kept (its messages up to the error and its output, usually empty); a replay does
    as Inspect does, its graders given the error too (``TranscriptInfo.error``)."""
    return transcript.source_record_sha256 is not None
