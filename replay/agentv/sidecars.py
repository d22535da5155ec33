"""Finding and loading the per-test files of a run directory.

Rule: a sidecar the index row (or result.json) names is required, and a missing one is a bad row naming
the file; a sidecar found only by AgentV's conventional layout is optional. Either is read only inside
the run folder, symlinks followed: a row naming a sidecar or an ``artifact_dir`` outside it is a bad row,
and a conventional file that leads outside (a symlink, a suite named ``..``) is not there.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalstore.replay.agentv.grading import Grading, finite_number, parse_grading
from evalstore.replay.agentv.records import ImportedFile
from evalstore.replay.agentv.rows import RowError, Sidecars, media_type_for
from evalstore.replay.agentv.transcripts import (
    ForeignTranscript,
    read_normalized_transcript,
    read_trace,
    read_transcript_jsonl,
)
from evalstore.replay.agentv.wire import read_json
from evalstore.replay.errors import ImportFormatError


@lru_cache(maxsize=4096)
def real_path(path: Path) -> Path:
    """A path resolved, symlinks followed, once per import (``import_results`` clears this): every test
    names the same run folder, and each sidecar is checked and then recorded (resolving each time was 18
    calls a test, a fifth of the import of a 300-test run, bench/agentv_peer.py)."""
    return path.resolve()


def inside(path: Path, folder: Path) -> bool:
    return real_path(path).is_relative_to(real_path(folder))


def within(path: Path, folder: Path, what: str) -> Path:
    """``path``, which a row names as ``what`` and which must lie inside ``folder``: else a bad row."""
    if "\x00" in str(path):  # no file has such a name; the OS would refuse it with a ValueError
        raise RowError(f"{what} holds a NUL byte, which no path can")
    if not inside(path, folder):
        raise RowError(f"{what} points outside {folder}; refusing to read it")
    return path


class MissingSidecar(RowError):
    """A row names a sidecar file that is not there."""


def pick(key: str, ref: Any, base: Path, conventional: Path | None = None) -> Path | None:
    """The sidecar a row names under ``key`` (must exist, inside ``base``), else the conventional file if
    present inside ``base``."""
    if isinstance(ref, str) and ref:
        path = within(base / ref, base, f"{key} {ref!r}")
        if path.exists() and not path.is_file():  # a folder, a FIFO, a device
            raise RowError(f"{key} {ref!r} names {path}, which is not a regular file")
        if not path.is_file():
            raise MissingSidecar(f"{key} {ref!r} names a file that does not exist: {path}")
        return path
    if conventional is not None and conventional.is_file() and inside(conventional, base):
        return conventional
    return None


def as_file(path: Path, root: Path, role: str = "sidecar") -> ImportedFile:
    try:
        shown = path.relative_to(root).as_posix()
    except ValueError:
        shown = str(path)
    return ImportedFile(path=shown, resolved=real_path(path), media_type=media_type_for(path.name), role=role)  # type: ignore[arg-type]


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


# --- a result's sidecars, as a v4 run directory lays them out ----------------------------------------

_UNSAFE = re.compile(r'[/\\:*?"<>|]')


def test_dir_of(root: Path, row: dict[str, Any]) -> Path:
    """Where a test's sidecars live: ``artifact_dir``, else beside grading.json, else ``<suite>/<test_id>``."""
    for key in ("artifact_dir", "grading_path"):
        ref = row.get(key)
        if isinstance(ref, str):
            return within(root / ref, root, f"artifact_dir {ref!r}") if key == "artifact_dir" else (root / ref).parent
    suite = _UNSAFE.sub("_", str(row.get("suite") or "default"))
    return root / suite / _UNSAFE.sub("_", str(row.get("test_id")))


def _timing_fallbacks(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        return {}
    out: dict[str, Any] = {}
    # timing.json sums the row's own duration and usage, writing 0 where the target reported none (its
    # row then has no duration_ms, and AgentV's latency grader found "No duration data"): 0 is not one.
    if finite_number(doc.get("duration_ms")):
        out["duration_ms"] = float(doc["duration_ms"])
    usage = doc.get("token_usage")
    # AgentV writes timing.json's usage as zeros when the target reported none (its row then has no
    # token_usage, and its graders get null): zeros there are not a usage.
    if isinstance(usage, dict) and any(v for v in usage.values()):
        out["token_usage"] = usage
    return out


def sidecars_for(root: Path, row: dict[str, Any]) -> Sidecars:
    test_dir = test_dir_of(root, row)
    outputs = test_dir / "outputs"
    found = Sidecars(file_bases=[outputs, test_dir, root])
    files: list[ImportedFile] = []

    transcript = pick("transcript_path", row.get("transcript_path"), root, outputs / "transcript.jsonl")
    target = row.get("target") if isinstance(row.get("target"), str) else None
    try:
        messages = load_messages(transcript, row.get("test_id"), target) if transcript is not None else None
    except ForeignTranscript as exc:
        # Another target's run overwrote this folder: none of its files are this result's.
        found.warnings.append(
            f"{row.get('test_id')}@{target}: {exc} in {test_dir.relative_to(root).as_posix()}/ (AgentV wrote every "
            "target of the test to that folder); its answer, transcript, grading and timing files were left out"
        )
        return found

    grading = pick("grading_path", row.get("grading_path"), root, test_dir / "grading.json")
    if grading is not None:
        found.grading = load_grading(grading)
        files.append(as_file(grading, root))
    timing = pick("timing_path", row.get("timing_path"), root, test_dir / "timing.json")
    if timing is not None:
        found.fallbacks = _timing_fallbacks(load_json(timing))
        files.append(as_file(timing, root))

    trace = pick("trace_path", row.get("trace_path"), root, outputs / "trace.json")
    if transcript is not None:
        files.append(as_file(transcript, root))
        found.messages = messages
    if trace is not None:
        files.append(as_file(trace, root))
        # trace.json's transcript events are the provider's messages as AgentV graded them; transcript.jsonl
        # is projected from the trace's spans and gives every tool call a start, an end, a duration and a
        # status the agent never reported (a call without timings gets its message's), which a
        # tool-trajectory latency check or a trace summary would then read.
        from_trace = load_messages(trace, row.get("test_id"))
        if from_trace or found.messages is None:
            found.messages = from_trace

    answer = pick("answer_path", row.get("answer_path"), root, outputs / "answer.md")
    copies = {pick(key, row.get(key), root) for key in ("output_path", "response_path")} - {None, answer}
    files.extend(as_file(copy, root) for copy in sorted(p for p in copies if p is not None))
    if answer is not None:
        found.answer_text = load_text(answer)
        files.insert(0, as_file(answer, root, "answer"))
    found.files = files
    return found
