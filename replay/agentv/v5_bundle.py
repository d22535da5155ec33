"""AgentV v5-next run bundle: ``summary.json`` + ``.internal/index.jsonl`` + ``<case>--<hash>/sample-N/``.

Each sample folder is one attempt. Index rows list their samples in ``samples[]`` (``attempts[]`` before
2026-07-06); a bundle without an index is read folder by folder from result.json / grading.json / metrics.json.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalstore.replay.agentv.grading import finite_number
from evalstore.replay.agentv.jsonl import bad_line, iter_built
from evalstore.replay.agentv.records import ImportedFile, ImportedTest, ImportSource, SkippedLine, Span
from evalstore.replay.agentv.rows import (
    RowError,
    Sidecars,
    attempt_of,
    build_test,
    eval_hints,
    rows_eval_hints,
    sample_number,
    unique_paths,
)
from evalstore.replay.agentv.sidecars import (
    as_file,
    inside,
    load_grading,
    load_json,
    load_messages,
    load_text,
    pick,
    within,
)
from evalstore.replay.agentv.wire import as_dict, first_json_row, iter_json_lines, read_json, tree_sha256
from evalstore.replay.errors import ImportFormatError
from evalstore.store.events import SourceRef

FORMAT = "agentv-v5-bundle"
_SAMPLE = re.compile(r"^sample-(\d+)$")
# Per-sample values a samples[] item carries that override its parent row.
_SAMPLE_KEYS = (
    "score",
    "execution_status",
    "error",
    "cost_usd",
    "failure_stage",
    "failure_reason_code",
    "target_error_kind",
    "verdict",
    "named_scores",
)
# (key in index row, key in result.json, conventional name in the sample folder)
_SIDECARS = (
    ("grading_path", "grading_path", "grading.json"),
    ("metrics_path", "metrics_path", "metrics.json"),
    ("transcript_raw_path", "transcript_raw_path", "transcript-raw.jsonl"),
    ("transcript_path", "transcript_path", "transcript.json"),
    ("answer_path", "answer", "outputs/answer.md"),
    ("file_changes_path", "file_changes", "outputs/file_changes.diff"),
    ("target_execution_path", None, "target-execution.json"),
    ("environment_path", None, "environment.json"),
    ("stdout_path", None, "stdout.txt"),
    ("stderr_path", None, "stderr.txt"),
)


def sample_dirs(case_dir: Path) -> list[Path]:
    found = [(int(m.group(1)), p) for p in case_dir.iterdir() if p.is_dir() and (m := _SAMPLE.match(p.name))]
    return [p for _, p in sorted(found)]


def case_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and sample_dirs(p))


def find_index(root: Path) -> Path | None:
    summary = root / "summary.json"
    if summary.is_file():
        doc = read_json(summary)
        ref = doc.get("index_path") if isinstance(doc, dict) else None
        if isinstance(ref, str):
            try:
                within(root / ref, root, f"index_path {ref!r}")
            except RowError as exc:
                raise ImportFormatError(f"{summary}: {exc}") from None
        if isinstance(ref, str) and (root / ref).is_file():
            return root / ref
    for candidate in (root / ".internal" / "index.jsonl", root / "index.jsonl"):
        if candidate.is_file():
            return candidate
    return None


def _metrics_fallbacks(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        return {}
    out: dict[str, Any] = {}
    duration = as_dict(doc.get("duration"))
    if finite_number(duration.get("total_ms")) is not None:
        out["duration_ms"] = float(duration["total_ms"])
    tokens = as_dict(doc.get("tokens"))
    usage = {
        k: tokens[k] for k in ("input", "output", "cached", "reasoning") if finite_number(tokens.get(k)) is not None
    }
    if usage and tokens.get("source") != "unavailable":
        out["token_usage"] = usage
    cost = as_dict(doc.get("cost"))
    if finite_number(cost.get("usd")) is not None:
        out["cost_usd"] = float(cost["usd"])
    return out


def sample_sidecars(root: Path, sample_dir: Path, row: dict[str, Any], test_id: str | None) -> Sidecars:
    """Sidecars of one sample folder; a path the row or result.json names must exist."""
    result_path = sample_dir / "result.json"
    result = as_dict(load_json(result_path)) if result_path.is_file() else {}
    output_paths = as_dict(result.get("output_paths"))
    found = Sidecars(file_bases=[sample_dir, sample_dir / "outputs", sample_dir.parent, root])
    files: list[ImportedFile] = [as_file(result_path, root)] if result_path.is_file() else []
    paths: dict[str, Path | None] = {}
    for row_key, result_key, conventional in _SIDECARS:
        row_ref = row.get(row_key)
        result_ref = (output_paths if row_key in ("answer_path", "file_changes_path") else result).get(result_key or "")
        if isinstance(row_ref, str) and inside(root / row_ref, sample_dir):
            path = pick(row_key, row_ref, root)
        elif isinstance(result_ref, str):
            path = pick(f"{result_path.name} {result_key}", result_ref, sample_dir)
        else:
            path = pick(row_key, None, sample_dir, sample_dir / conventional)
        paths[row_key] = path
        if path is not None and row_key != "answer_path":
            files.append(as_file(path, root))

    if paths["grading_path"] is not None:
        found.grading = load_grading(paths["grading_path"])
    if paths["metrics_path"] is not None:
        found.fallbacks = _metrics_fallbacks(load_json(paths["metrics_path"]))
    for key in ("transcript_raw_path", "transcript_path"):
        transcript = paths[key]
        if found.messages is None and transcript is not None:
            found.messages = load_messages(transcript, test_id)
    if paths["file_changes_path"] is not None:
        found.fallbacks["file_changes"] = load_text(paths["file_changes_path"])
    if paths["answer_path"] is not None:
        found.answer_text = load_text(paths["answer_path"])
        files.insert(0, as_file(paths["answer_path"], root, "answer"))
    if "duration_ms" not in found.fallbacks and finite_number(result.get("duration_ms")) is not None:
        found.fallbacks["duration_ms"] = float(result["duration_ms"])
    found.files = files
    return found


def _row_samples(root: Path, row: dict[str, Any]) -> list[tuple[int, Path, dict[str, Any]]]:
    """(attempt, sample folder, effective row) for every sample an index row covers; each inside the bundle."""
    named = row.get("result_dir")
    result_dir = within(root / named, root, f"result_dir {named!r}") if isinstance(named, str) else None
    items = row.get("samples") if isinstance(row.get("samples"), list) else row.get("attempts")
    if not isinstance(items, list) or not items:
        grading = row.get("grading_path")
        folder = (
            within((root / grading).parent, root, f"grading_path {grading!r}") if isinstance(grading, str) else None
        )
        attempt = sample_number(folder.name) if folder else None
        attempt = attempt or attempt_of(row)
        if folder is None:
            if result_dir is None:
                raise RowError("index row names neither result_dir nor grading_path; cannot find its samples")
            folder = result_dir / f"sample-{attempt}"
        return [(attempt, folder, row)]
    if result_dir is None:
        raise RowError("index row lists samples but has no result_dir")
    out = []
    for item in items:
        if not isinstance(item, dict):
            continue
        attempt = attempt_of(item)
        sample_path = item.get("sample_path")
        ref = sample_path if isinstance(sample_path, str) else f"sample-{attempt}"
        folder = within(result_dir / ref, root, f"sample_path {ref!r}")
        if isinstance(sample_path, str) and not folder.is_dir():
            raise RowError(f"sample_path {ref!r} names a folder that does not exist: {folder}")
        effective = dict(row)
        effective.update({k: item[k] for k in _SAMPLE_KEYS if k in item})
        effective["scores"] = item.get("scores", row.get("scores") if len(items) == 1 else None)
        out.append((attempt, folder, effective))
    return out


def _iter_indexed(root: Path, index: Path, skip_bad: bool, span: Span | None) -> Iterator[ImportedTest | SkippedLine]:
    def build(source: SourceRef, row: dict[str, Any]) -> list[ImportedTest]:
        return [
            build_test(
                effective,
                source=source,
                attempt=attempt,
                sidecars=sample_sidecars(root, folder, effective, row.get("test_id")),
            )
            for attempt, folder, effective in _row_samples(root, row)
        ]

    return iter_built(index, skip_bad, build, span)


def _raw_test_id(path: Path) -> str | None:
    for _, row, _ in iter_json_lines(path):
        if row is not None and isinstance(row.get("test_id"), str):
            return str(row["test_id"])
    return None


def _folder_row(case_dir: Path, sample_dir: Path) -> dict[str, Any]:
    """An index row rebuilt from a sample folder, for bundles whose index is gone."""
    metrics_path, result_path = sample_dir / "metrics.json", sample_dir / "result.json"
    metrics = as_dict(load_json(metrics_path)) if metrics_path.is_file() else {}
    result = as_dict(load_json(result_path)) if result_path.is_file() else {}
    grading_path = sample_dir / "grading.json"
    grading = as_dict(load_json(grading_path)) if grading_path.is_file() else {}
    raw = sample_dir / "transcript-raw.jsonl"
    test_id = metrics.get("test_id") or (_raw_test_id(raw) if raw.is_file() else None)
    return {
        "test_id": test_id or case_dir.name.rsplit("--", 1)[0],
        "target": metrics.get("target") or result.get("model"),
        "suite": metrics.get("suite"),
        "category": metrics.get("category"),
        "score": grading.get("score", result.get("score")),
        "execution_status": result.get("execution_status"),
        "verdict": result.get("verdict"),
        "duration_ms": result.get("duration_ms"),
        "result_dir": case_dir.name,
    }


def _iter_folders(root: Path, skip_bad: bool) -> Iterator[ImportedTest | SkippedLine]:
    for case_dir in case_dirs(root):
        for sample_dir in sample_dirs(case_dir):
            source = SourceRef(file=str(sample_dir))
            try:
                row = _folder_row(case_dir, sample_dir)
                sidecars = sample_sidecars(root, sample_dir, {}, row["test_id"])
                attempt = sample_number(sample_dir.name) or 1
                yield build_test(row, source=source, attempt=attempt, sidecars=sidecars)
            except RowError as exc:
                yield bad_line(source, str(exc), skip_bad)


def read_v5_bundle(path: Path) -> ImportSource:
    root = path.parent.parent if path.is_file() and path.parent.name == ".internal" else path
    root = root.parent if root.is_file() else root
    index = find_index(root)
    cases = case_dirs(root)
    if index is None and not cases:
        raise ImportFormatError(
            f"{root}: not an AgentV v5 run bundle (no .internal/index.jsonl and no <case>/sample-N/ folders)"
        )
    summary = as_dict(read_json(root / "summary.json")) if (root / "summary.json").is_file() else {}
    metadata = as_dict(summary.get("metadata"))
    listed = summary.get("cases") or summary.get("tests") or []
    first_case = listed[0] if listed and isinstance(listed[0], dict) else {}
    first = first_json_row(index) if index else None

    hints: list[Path] = []
    if isinstance(metadata.get("eval_file"), str):
        hints.append(Path(metadata["eval_file"]))
    if isinstance(first_case.get("eval_path"), str):
        hints.append(Path(first_case["eval_path"]))
    hints.extend(eval_hints(first, root))
    bundled = [case / "test" / "EVAL.yaml" for case in cases[:1]]
    hints.extend(p.resolve() for p in bundled if p.is_file())

    suite = (first or {}).get("suite") or first_case.get("suite")
    if index is not None:

        def iterate(skip_bad: bool, span: Span | None) -> Iterator[ImportedTest | SkippedLine]:
            return _iter_indexed(root, index, skip_bad, span)
    else:

        def iterate(skip_bad: bool, span: Span | None) -> Iterator[ImportedTest | SkippedLine]:
            assert span is None  # only a source with lines is read in parts
            return _iter_folders(root, skip_bad)

    def result_eval_hints() -> Iterator[tuple[str | None, list[Path]]]:
        if index is not None:
            yield from rows_eval_hints(index, root)
        for case in cases:  # a case's bundled copy (the rows name it too, when there is an index)
            bundled = case / "test" / "EVAL.yaml"
            if bundled.is_file():
                yield None, [bundled.resolve()]

    return ImportSource(
        format=FORMAT,
        root=root,
        suite=suite if isinstance(suite, str) else None,
        eval_path_hints=unique_paths(hints),
        source_digest=tree_sha256(root),
        _iterate=iterate,
        lines=index,
        result_eval_hints=result_eval_hints,
    )
