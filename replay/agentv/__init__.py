"""Reading AgentV result files into neutral records, and writing AgentV/CSV/JSON exports.

The names below are imported on first use: ``evalstore export`` loads ``agentv.export`` without the
readers (their parsing and checking modules are most of this package's import time)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalstore.lazy import lazy_getattr

# name -> module that defines it; one table, so __all__ and __getattr__ cannot disagree
_EXPORTS: dict[str, str] = {
    "FORMATS": "evalstore.replay.agentv.detect",
    "detect_format": "evalstore.replay.agentv.detect",
    "read_results": "evalstore.replay.agentv.detect",
    "bad_line": "evalstore.replay.agentv.jsonl",
    "ImportedFile": "evalstore.replay.agentv.records",
    "ImportedTest": "evalstore.replay.agentv.records",
    "ImportedVerdict": "evalstore.replay.agentv.records",
    "ImportSource": "evalstore.replay.agentv.records",
    "SkippedLine": "evalstore.replay.agentv.records",
}

__all__ = [
    "FORMATS",
    "ImportSource",
    "ImportedFile",
    "ImportedTest",
    "ImportedVerdict",
    "SkippedLine",
    "bad_line",
    "detect_format",
    "read_results",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports on demand
    from evalstore.replay.agentv.detect import FORMATS, detect_format, read_results
    from evalstore.replay.agentv.jsonl import bad_line
    from evalstore.replay.agentv.records import ImportedFile, ImportedTest, ImportedVerdict, ImportSource, SkippedLine
