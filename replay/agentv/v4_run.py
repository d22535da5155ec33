"""AgentV 4.x run directory: ``index.jsonl`` plus ``<suite>/<test>/{grading.json,timing.json,outputs/...}``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from evalstore.replay.agentv.jsonl import iter_built
from evalstore.replay.agentv.records import ImportedTest, ImportSource, SkippedLine, Span
from evalstore.replay.agentv.rows import attempt_of, build_test, eval_hints, rows_eval_hints, unique_paths
from evalstore.replay.agentv.sidecars import sidecars_for
from evalstore.replay.agentv.wire import first_json_row, read_json, tree_sha256
from evalstore.replay.errors import ImportFormatError

FORMAT = "agentv-v4-run"
INDEX = "index.jsonl"


def _iter_tests(root: Path, index: Path, skip_bad: bool, span: Span | None) -> Iterator[ImportedTest | SkippedLine]:
    return iter_built(
        index,
        skip_bad,
        lambda source, row: [build_test(row, source=source, attempt=attempt_of(row), sidecars=sidecars_for(root, row))],
        span,
    )


def read_v4_run(path: Path) -> ImportSource:
    root = path.parent if path.is_file() else path
    index = root / INDEX
    if not index.is_file():
        raise ImportFormatError(f"{root}: not an AgentV 4 run directory (no {INDEX})")
    first = first_json_row(index)
    benchmark = root / "benchmark.json"
    hints = eval_hints(first, root)
    planned = None
    if benchmark.is_file():
        doc = read_json(benchmark)
        metadata = (doc.get("metadata") if isinstance(doc, dict) else None) or {}
        if isinstance(metadata.get("eval_file"), str):
            hints.insert(0, Path(metadata["eval_file"]))
        count = metadata.get("planned_test_count")
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            planned = count
    suite = first.get("suite") if first else None
    return ImportSource(
        format=FORMAT,
        root=root,
        suite=suite if isinstance(suite, str) else None,
        eval_path_hints=unique_paths(hints),
        source_digest=tree_sha256(root),
        _iterate=lambda skip_bad, span: _iter_tests(root, index, skip_bad, span),
        lines=index,
        result_eval_hints=lambda: rows_eval_hints(index, root),
        planned=planned,
    )
