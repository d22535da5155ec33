"""Plain AgentV results JSONL (one ``EvaluationResult`` row a line, snake_case or legacy camelCase).

Streams line by line: a 1 GB file is never held in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from evalstore.replay.agentv.records import ImportedTest, ImportSource, SkippedLine
from evalstore.replay.agentv.rows import RowError, Sidecars, attempt_of, build_test, eval_hints
from evalstore.replay.agentv.wire import (
    file_sha256,
    first_json_row,
    is_legacy_camel_row,
    iter_json_lines,
    normalise_legacy_row,
)
from evalstore.replay.errors import ImportFormatError
from evalstore.store.events import SourceRef

FORMAT = "results-jsonl"


def bad_line(source: SourceRef, reason: str, skip_bad: bool) -> SkippedLine:
    """A SkippedLine under ``--skip-bad``; otherwise the one-line error that stops the import."""
    if not skip_bad:
        raise ImportFormatError(f"{source.location}: {reason} (fix it, or import with --skip-bad to leave it out)")
    return SkippedLine(source=source, reason=reason)


def iter_rows(path: Path, skip_bad: bool) -> Iterator[tuple[SourceRef, dict[str, Any]] | SkippedLine]:
    """Each row as snake_case with its source line; unreadable lines raise or come back as SkippedLine."""
    for number, row, error in iter_json_lines(path):
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
) -> Iterator[ImportedTest | SkippedLine]:
    """Every test ``build`` makes of each row of ``path``; a row it rejects is a bad line."""
    for item in iter_rows(path, skip_bad):
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


def _iter_tests(path: Path, skip_bad: bool) -> Iterator[ImportedTest | SkippedLine]:
    bases = [path.parent]
    return iter_built(
        path,
        skip_bad,
        lambda source, row: [
            build_test(row, source=source, attempt=attempt_of(row), sidecars=Sidecars(file_bases=bases))
        ],
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
    suite = first.get("suite") if first else None
    return ImportSource(
        format=FORMAT,
        root=path,
        suite=suite if isinstance(suite, str) else None,
        eval_path_hints=eval_hints(first, path.parent) + sibling_eval_files(path),
        source_digest=file_sha256(path),
        _iterate=lambda skip_bad: _iter_tests(path, skip_bad),
    )
