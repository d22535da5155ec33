"""Plain AgentV results JSONL (one ``EvaluationResult`` row a line, snake_case or legacy camelCase).

Streams line by line: a 1 GB file is never held in memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from evalstore.replay.agentv.records import ImportedTest, ImportSource, SkippedLine, Span
from evalstore.replay.agentv.rows import NOT_A_RESULT, RowError, Sidecars, attempt_of, build_test, eval_hints
from evalstore.replay.agentv.sidecars import MissingSidecar, sidecars_for
from evalstore.replay.agentv.wire import (
    file_sha256,
    first_json_row,
    is_legacy_camel_row,
    iter_json_lines,
    normalise_legacy_row,
    tree_sha256,
)
from evalstore.replay.errors import ImportFormatError
from evalstore.store.events import SourceRef

FORMAT = "results-jsonl"
TRANSCRIPT_SCHEMA = "agentv.transcript.v1"


def bad_line(source: SourceRef, reason: str, skip_bad: bool) -> SkippedLine:
    """A SkippedLine under ``--skip-bad``; otherwise the one-line error that stops the import."""
    if not skip_bad:
        hint = "" if NOT_A_RESULT in reason else " (fix it, or import with --skip-bad to leave it out)"
        raise ImportFormatError(f"{source.location}: {reason}{hint}")
    return SkippedLine(source=source, reason=reason)


def iter_rows(
    path: Path, skip_bad: bool, span: Span | None = None
) -> Iterator[tuple[SourceRef, dict[str, Any]] | SkippedLine]:
    """Each row (of ``span``'s lines only, with one) as snake_case with its source line; unreadable lines
    raise or come back as SkippedLine."""
    for number, row, error in iter_json_lines(path, span):
        source = SourceRef(file=str(path), line=number)
        if row is None:
            yield bad_line(source, error or "unreadable line", skip_bad)
            continue
        if is_legacy_camel_row(row):
            try:
                row = normalise_legacy_row(row)
            except ValueError as exc:
                yield bad_line(source, str(exc), skip_bad)
                continue
        yield source, row


def iter_built(
    path: Path,
    skip_bad: bool,
    build: Callable[[SourceRef, dict[str, Any]], Iterable[ImportedTest]],
    span: Span | None = None,
) -> Iterator[ImportedTest | SkippedLine]:
    """Every test ``build`` makes of each row of ``path`` (of ``span``'s lines); a row it rejects is a bad line."""
    for item in iter_rows(path, skip_bad, span):
        if isinstance(item, SkippedLine):
            yield item
            continue
        source, row = item
        try:
            tests = list(build(source, row))
        except RowError as exc:
            yield bad_line(source, str(exc), skip_bad)
            continue
        yield from tests


SIDECAR_FILES = (
    "grading_path",
    "timing_path",
    "transcript_path",
    "trace_path",
    "answer_path",
    "output_path",
    "response_path",
)
SIDECAR_KEYS = ("artifact_dir", *SIDECAR_FILES)
"""Row fields of a v4 index naming the result's folder and files, relative to its run directory."""


def _sidecars(folder: Path, row: dict[str, Any]) -> Sidecars:
    """A row copied out of a v4 run's index names its answer, transcript and grading files relative to the
    run directory: they are read when the file still sits there (an index copied or renamed beside the
    original). Moved elsewhere, they are not found, and the result says so: without them it has no answer
    to regrade."""
    if not any(isinstance(row.get(key), str) and row[key] for key in SIDECAR_KEYS):
        return Sidecars(file_bases=[folder])
    try:
        return sidecars_for(folder, row)
    except MissingSidecar as exc:
        found = Sidecars(file_bases=[folder])
        target = f"@{row['target']}" if isinstance(row.get("target"), str) else ""
        found.warnings.append(
            f"{row.get('test_id')}{target}: {exc}; its answer, transcript and grading files were not imported "
            "(import the AgentV run directory the row came from, or keep the file in it)"
        )
        return found


def _digest(path: Path, first: dict[str, Any] | None) -> str:
    """The file's digest; for an index whose files are still beside it, the digest of the whole folder too
    (its sidecars are part of what is imported, as for a v4 run directory), so the same rows beside other
    files are another source."""
    named = [first.get(key) for key in SIDECAR_FILES] if first else []
    if not any(isinstance(ref, str) and ref and (path.parent / ref).is_file() for ref in named):
        return file_sha256(path)
    return hashlib.sha256(f"{path.name}\0{tree_sha256(path.parent)}".encode()).hexdigest()


def _iter_tests(path: Path, skip_bad: bool, span: Span | None) -> Iterator[ImportedTest | SkippedLine]:
    folder = path.parent
    return iter_built(
        path,
        skip_bad,
        lambda source, row: [build_test(row, source=source, attempt=attempt_of(row), sidecars=_sidecars(folder, row))],
        span,
    )


def sibling_eval_files(path: Path) -> list[Path]:
    """The eval file a results file is named after, beside it: AgentV names baselines and results
    ``<suite>.eval.baseline.jsonl``, ``<suite>.eval.results.jsonl`` for ``<suite>.eval.yaml``."""
    name = path.name.removesuffix(".jsonl")
    while "." in name and not name.endswith(".eval"):
        name = name.rsplit(".", 1)[0]
    if not name.endswith(".eval"):
        return []
    return [path.parent / (name + ext) for ext in (".yaml", ".yml")]


def read_jsonl(path: Path) -> ImportSource:
    if not path.is_file():
        raise ImportFormatError(f"{path}: no such results file")
    first = first_json_row(path)
    if first is not None and first.get("schema_version") == TRANSCRIPT_SCHEMA:
        # What `agentv eval --transcript` grades: messages, no scores. Written in a run folder (each test's
        # outputs/transcript.jsonl) or by `agentv import claude|codex|copilot` (no run folder behind them).
        source = first.get("source")
        if isinstance(source, dict) and source.get("kind") == "imported_transcript":
            raise ImportFormatError(
                f"{path}: AgentV transcript rows ({TRANSCRIPT_SCHEMA}) from `agentv import`, not results: grade "
                f"them with AgentV first (`agentv eval run EVAL --transcript {path} --output DIR`), then "
                "`evalstore import DIR --eval EVAL` keeps them and `evalstore replay` regrades them"
            )
        raise ImportFormatError(
            f"{path}: AgentV transcript rows ({TRANSCRIPT_SCHEMA}), not results: import the run folder whose "
            "outputs/transcript.jsonl they are, then `evalstore replay RUN --eval FILE` regrades them as "
            "`agentv eval --transcript` does"
        )
    suite = first.get("suite") if first else None
    return ImportSource(
        format=FORMAT,
        root=path,
        suite=suite if isinstance(suite, str) else None,
        eval_path_hints=eval_hints(first, path.parent) + sibling_eval_files(path),
        source_digest=_digest(path, first),
        _iterate=lambda skip_bad, span: _iter_tests(path, skip_bad, span),
        lines=path,
    )
