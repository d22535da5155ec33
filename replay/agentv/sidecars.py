"""Finding and loading the per-test files of a run directory.

Rule: a sidecar the index row (or result.json) names is required, and a missing one is a bad row naming
the file; a sidecar found only by AgentV's conventional layout is optional.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from evalstore.replay.agentv.grading import Grading, parse_grading
from evalstore.replay.agentv.records import ImportedFile
from evalstore.replay.agentv.rows import RowError, media_type_for
from evalstore.replay.agentv.transcripts import read_normalized_transcript, read_trace, read_transcript_jsonl
from evalstore.replay.agentv.wire import read_json
from evalstore.replay.errors import ImportFormatError


@lru_cache(maxsize=64)
def real_folder(folder: Path) -> Path:
    """A run folder resolved once per import, not once per sidecar (every test names the same few)."""
    return folder.resolve()


def pick(key: str, ref: Any, base: Path, conventional: Path | None = None) -> Path | None:
    """The sidecar a row names under ``key`` (must exist, inside ``base``), else the conventional file if present."""
    if isinstance(ref, str) and ref:
        path = base / ref
        if not path.resolve().is_relative_to(real_folder(base)):
            raise RowError(f"{key} {ref!r} points outside {base}; refusing to read it")
        if not path.is_file():
            raise RowError(f"{key} {ref!r} names a file that does not exist: {path}")
        return path
    if conventional is not None and conventional.is_file():
        return conventional
    return None


def as_file(path: Path, root: Path, role: str = "sidecar") -> ImportedFile:
    try:
        shown = path.relative_to(root).as_posix()
    except ValueError:
        shown = str(path)
    return ImportedFile(path=shown, resolved=path.resolve(), media_type=media_type_for(path.name), role=role)  # type: ignore[arg-type]


def load_json(path: Path) -> Any:
    try:
        return read_json(path)
    except ImportFormatError as exc:
        raise RowError(str(exc)) from exc


def load_grading(path: Path) -> Grading:
    try:
        return parse_grading(load_json(path))
    except ValueError as exc:
        if isinstance(exc, RowError):
            raise
        raise RowError(f"{path}: {exc}") from exc


def load_text(path: Path) -> str:
    # Bytes decoded as they are: read_text would turn the CRLFs of an answer into LFs.
    return path.read_bytes().decode("utf-8", errors="replace")


def load_messages(path: Path, test_id: str | None, target: str | None = None) -> list[dict[str, Any]] | None:
    """Messages from any transcript sidecar, chosen by its name (``ForeignTranscript`` when a JSONL
    transcript is another target's)."""
    try:
        if path.name.endswith(".jsonl"):
            return read_transcript_jsonl(path, test_id, target)
        if path.name == "trace.json":
            return read_trace(path)
        return read_normalized_transcript(path)
    except ImportFormatError as exc:
        raise RowError(str(exc)) from exc
