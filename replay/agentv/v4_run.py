"""AgentV 4.x run directory: ``index.jsonl`` plus ``<suite>/<test>/{grading.json,timing.json,outputs/...}``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalstore.replay.agentv.grading import finite_number
from evalstore.replay.agentv.jsonl import iter_built
from evalstore.replay.agentv.records import ImportedFile, ImportedTest, ImportSource, SkippedLine
from evalstore.replay.agentv.rows import Sidecars, attempt_of, build_test, eval_hints, unique_paths
from evalstore.replay.agentv.sidecars import as_file, load_grading, load_json, load_messages, load_text, pick
from evalstore.replay.agentv.transcripts import ForeignTranscript
from evalstore.replay.agentv.wire import first_json_row, read_json, tree_sha256
from evalstore.replay.errors import ImportFormatError

FORMAT = "agentv-v4-run"
INDEX = "index.jsonl"
_UNSAFE = re.compile(r'[/\\:*?"<>|]')


def test_dir_of(root: Path, row: dict[str, Any]) -> Path:
    """Where a test's sidecars live: ``artifact_dir``, else beside grading.json, else ``<suite>/<test_id>``."""
    for key in ("artifact_dir", "grading_path"):
        ref = row.get(key)
        if isinstance(ref, str):
            return root / ref if key == "artifact_dir" else (root / ref).parent
    suite = _UNSAFE.sub("_", str(row.get("suite") or "default"))
    return root / suite / _UNSAFE.sub("_", str(row.get("test_id")))


def _timing_fallbacks(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        return {}
    out: dict[str, Any] = {}
    if finite_number(doc.get("duration_ms")) is not None:
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
        if found.messages is None:
            found.messages = load_messages(trace, row.get("test_id"))

    answer = pick("answer_path", row.get("answer_path"), root, outputs / "answer.md")
    copies = {pick(key, row.get(key), root) for key in ("output_path", "response_path")} - {None, answer}
    files.extend(as_file(copy, root) for copy in sorted(p for p in copies if p is not None))
    if answer is not None:
        found.answer_text = load_text(answer)
        files.insert(0, as_file(answer, root, "answer"))
    found.files = files
    return found


def _iter_tests(root: Path, index: Path, skip_bad: bool) -> Iterator[ImportedTest | SkippedLine]:
    return iter_built(
        index,
        skip_bad,
        lambda source, row: [build_test(row, source=source, attempt=attempt_of(row), sidecars=sidecars_for(root, row))],
    )


def read_v4_run(path: Path) -> ImportSource:
    root = path.parent if path.is_file() else path
    index = root / INDEX
    if not index.is_file():
        raise ImportFormatError(f"{root}: not an AgentV 4 run directory (no {INDEX})")
    first = first_json_row(index)
    benchmark = root / "benchmark.json"
    hints = eval_hints(first, root)
    if benchmark.is_file():
        doc = read_json(benchmark)
        metadata = (doc.get("metadata") if isinstance(doc, dict) else None) or {}
        if isinstance(metadata.get("eval_file"), str):
            hints.insert(0, Path(metadata["eval_file"]))
    suite = first.get("suite") if first else None
    return ImportSource(
        format=FORMAT,
        root=root,
        suite=suite if isinstance(suite, str) else None,
        eval_path_hints=unique_paths(hints),
        source_digest=tree_sha256(root),
        _iterate=lambda skip_bad: _iter_tests(root, index, skip_bad),
    )
