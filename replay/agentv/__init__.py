"""Reading AgentV result files into neutral records, and writing AgentV/CSV/JSON exports."""

from evalstore.replay.agentv.detect import FORMATS, detect_format, read_results
from evalstore.replay.agentv.jsonl import bad_line
from evalstore.replay.agentv.records import ImportedFile, ImportedTest, ImportedVerdict, ImportSource, SkippedLine

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
