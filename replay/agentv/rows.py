"""One AgentV result row (plus what its sidecars added) -> an ImportedTest. Shared by every layout reader."""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from evalstore.replay.agentv.grading import (
    Grading,
    clean_assertions,
    derive_verdict,
    finite_number,
    merge_verdicts,
    verdict_from_score,
)
from evalstore.replay.agentv.records import FileRole, ImportedFile, ImportedTest, ImportedVerdict
from evalstore.replay.agentv.transcripts import file_refs, input_messages, last_assistant_text, normalise_messages
from evalstore.replay.agentv.wire import (
    FROM_ROW_ASSERTIONS,
    TRIALS_ROW_FIELDS,
    as_dict,
    is_legacy_camel_row,
    iter_json_lines,
    json_type,
    nonempty_text,
    normalise_legacy_row,
)
from evalstore.replay.jsontext import js_number, stringify
from evalstore.store.events import SourceRef

# Held in structured form on the ImportedTest (or derivable from it), so not repeated in raw_row.
_BULKY_KEYS = frozenset(
    {
        "trace",
        "input",
        "output",
        "requests",
        "scores",
        "assertions",
        "attempts",
        "samples",
        "file_changes",
        "transcript_summary",
        "target_execution",
        "before_all_output",
        "before_each_output",
        "after_all_output",
        "after_each_output",
        "expected_output",
        "criteria",
    }
)
_STATUS_PASSED = {"ok": True, "quality_failure": False, "execution_error": False}
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]+://")
_EXTRA_MEDIA_TYPES = {
    ".md": "text/markdown",
    ".jsonl": "application/x-ndjson",
    ".diff": "text/x-diff",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
}


class RowError(ValueError):
    """A row that cannot be imported; readers turn it into ``FILE:LINE: reason`` or a SkippedLine."""


def media_type_for(path: str) -> str | None:
    suffix = Path(path).suffix.lower()
    return _EXTRA_MEDIA_TYPES.get(suffix) or mimetypes.guess_type(path)[0]


def resolve_path(ref: str, bases: Sequence[Path]) -> Path | None:
    """The existing file a reference names (``file://`` URL, absolute, or relative to a base), made absolute.

    Whether the import may read it is decided later, against the roots the user controls
    (``file_access.FileAccess``): bases named by the result file (its ``workspace_path``) are where to look,
    not permission. Remote URLs never resolve (AgentV cannot preprocess them either).
    """
    if ref.startswith("file://"):
        candidates = [Path(unquote(urlparse(ref).path))]
    elif _SCHEME.match(ref):
        return None
    elif Path(ref).is_absolute():
        candidates = [Path(ref)]
    else:
        candidates = [base / ref for base in bases]
    for candidate in candidates:
        try:
            real = candidate.resolve()
            if real.is_file():
                return real
        except (OSError, RuntimeError, ValueError):  # ValueError: a NUL byte, which no path can hold
            continue
    return None


def imported_file(ref: str, bases: Sequence[Path], role: FileRole, media_type: str | None = None) -> ImportedFile:
    return ImportedFile(
        path=ref, resolved=resolve_path(ref, bases), media_type=media_type or media_type_for(ref), role=role
    )


NOT_A_RESULT = "not a result row"
"""What the reason says of a row of another kind of file (--skip-bad would leave out every line of it)."""


def check_row(row: dict[str, Any]) -> tuple[str, float]:
    """The row's test id and score, or RowError with the reason AgentV's reader would give."""
    test_id = row.get("test_id")
    if not isinstance(test_id, str) or not test_id:
        if row.get("schema_version") == "agentv.replay_fixture.v1":
            raise RowError(f"missing test_id: this is an AgentV replay fixture row, {NOT_A_RESULT}")
        if isinstance(row.get("id"), str) and "score" not in row and {"input", "criteria", "assertions"} & set(row):
            raise RowError(
                f"missing test_id: this is a test case (id, input, criteria), {NOT_A_RESULT}: an eval's tests "
                "file, which its eval file names (`tests: file://...`); `evalstore run EVAL.yaml` runs them, "
                "`evalstore import` takes the results `agentv eval` writes"
            )
        raise RowError("missing test_id")
    score = finite_number(row.get("score"))
    if score is None:
        hint = "; this is an AgentV replay fixture, not a result file" if "fixture_id" in row else ""
        raise RowError(f"Missing or invalid score for test {test_id!r}{hint}")
    if not 0.0 <= score <= 1.0:
        raise RowError(f"score {score:g} for test {test_id!r} is outside 0..1, where AgentV's scores lie")
    return test_id, score


@dataclass
class Sidecars:
    """What a layout reader found beside the row."""

    grading: Grading | None = None
    messages: list[dict[str, Any]] | None = None
    answer_text: str | None = None
    files: list[ImportedFile] = field(default_factory=list)
    file_bases: list[Path] = field(default_factory=list)
    """Where relative ContentFile paths are looked up, after the row's workspace_path."""
    fallbacks: dict[str, Any] = field(default_factory=dict)
    """Usage and timing from timing.json / metrics.json, used only where the row has none."""
    warnings: list[str] = field(default_factory=list)
    """Sidecars found but left out, and why (``ImportedTest.warnings``)."""


def _verdicts(row: dict[str, Any], score: float, grading: Grading | None) -> list[ImportedVerdict]:
    scores = row.get("scores")
    try:
        verdicts = [verdict_from_score(s, i) for i, s in enumerate(scores or []) if isinstance(s, dict)]
    except ValueError as exc:
        raise RowError(str(exc)) from exc
    if grading is not None:
        verdicts = merge_verdicts(verdicts, grading.verdicts)
    if not verdicts and not scores and isinstance(row.get("assertions"), list) and row["assertions"]:
        # Early v4 rows carry only the flattened assertions of the implicit llm-grader (formats 7.1).
        verdicts = [
            ImportedVerdict(
                name="llm-grader",
                type="llm-grader",
                score=score,
                verdict=derive_verdict(None, None, score),
                assertions=clean_assertions(row["assertions"]),
                details=dict(FROM_ROW_ASSERTIONS),
            )
        ]
    return verdicts


def _passed(row: dict[str, Any], status: str | None, grading: Grading | None) -> bool | None:
    if isinstance(row.get("pass"), bool):
        return bool(row["pass"])
    if row.get("verdict") in ("pass", "fail"):
        return bool(row["verdict"] == "pass")
    if grading is not None and grading.passed is not None:
        return grading.passed
    return _STATUS_PASSED.get(status or "")


def _error(row: dict[str, Any]) -> str | None:
    if isinstance(row.get("error"), str) and row["error"]:
        return str(row["error"])
    execution_error = row.get("execution_error")
    if isinstance(execution_error, dict) and isinstance(execution_error.get("message"), str):
        return str(execution_error["message"])
    return None


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


KEPT_ROW_FIELDS = ("category", "conversation_id", "experiment", "failure_stage", "failure_reason_code")
"""v4 index-row labels evalstore stores as they are and exports back; it interprets none of them."""

_TRIALS_FIELD_TYPES: dict[str, type] = {"trials": list, "aggregation": dict, "cost_limited": bool}
"""The JSON type AgentV writes each of ``wire.TRIALS_ROW_FIELDS`` as (another is read as absent)."""


def kept_row_fields(row: dict[str, Any]) -> dict[str, str]:
    """What ``TestScored.row_fields`` keeps of a row: its labels (``KEPT_ROW_FIELDS``) as they are, and, on a
    row of a test with trials (one with ``trials[]``: AgentV 4.42.4 writes ``aggregation`` and ``cost_limited``
    only beside it), each of ``wire.TRIALS_ROW_FIELDS`` as the JSON text AgentV wrote: its keys in AgentV's
    order, its numbers spelt as ``JSON.stringify`` spells them, so an export writes the same bytes back.
    evalstore interprets none of them: the result is the row's one (its score the trials' aggregate)."""
    kept = {k: row[k] for k in KEPT_ROW_FIELDS if nonempty_text(row.get(k))}
    if isinstance(row.get("trials"), list):
        for key in TRIALS_ROW_FIELDS:
            value = row.get(key)
            if isinstance(value, _TRIALS_FIELD_TYPES[key]):
                kept[key] = stringify(js_number(value)).decode("utf-8")
    return kept


def build_test(
    row: dict[str, Any],
    *,
    source: SourceRef,
    attempt: int = 1,
    suite: str | None = None,
    sidecars: Sidecars | None = None,
) -> ImportedTest:
    """Raises RowError for anything that makes the row unusable."""
    _check_types(row)
    try:
        return _built_test(row, source=source, attempt=attempt, suite=suite, sidecars=sidecars)
    except (TypeError, AttributeError) as exc:
        # A value of a shape AgentV never writes, deeper than _check_types looks: the row, not a bug here.
        raise RowError(f"a field is not of the type AgentV writes ({exc}); is this an AgentV result row?") from None


_FIELD_TYPES: dict[str, tuple[type, ...]] = {"scores": (list,), "assertions": (list,), "execution_status": (str,)}
"""Fields of a result row that say how it was graded, and the JSON types AgentV writes them as (null aside): a
row with another is refused. Other optional fields of another type are read as absent."""


def _target(value: Any) -> str | None:
    """A row's target as AgentV names it: a number as its text (AgentV keys and shows ``7`` as ``"7"``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _check_types(row: dict[str, Any]) -> None:
    for key, types in _FIELD_TYPES.items():
        value = row.get(key)
        if value is not None and not isinstance(value, types):
            wanted = " or ".join(json_type(t()) for t in types)
            raise RowError(f"{key} is {json_type(value)}, where AgentV writes {wanted}")


def _built_test(
    row: dict[str, Any],
    *,
    source: SourceRef,
    attempt: int,
    suite: str | None,
    sidecars: Sidecars | None,
) -> ImportedTest:
    extra = sidecars or Sidecars()
    test_id, score = check_row(row)
    output = row.get("output")
    try:
        if isinstance(output, list):
            output_messages = normalise_messages(output)
        else:
            output_messages = None
        trace = row.get("trace")
        trace_messages = normalise_messages(trace.get("messages")) if isinstance(trace, dict) else []
        input_ = input_messages(row.get("input"))
    except ValueError as exc:
        raise RowError(str(exc)) from exc
    messages = _first(extra.messages, output_messages, trace_messages or None)

    if isinstance(output, str):
        output_text: str | None = output
    elif output_messages is not None:
        output_text = last_assistant_text(output_messages)
    else:
        output_text = extra.answer_text

    status = _first(row.get("execution_status"), extra.grading.execution_status if extra.grading else None)
    workspace = row.get("workspace_path") if isinstance(row.get("workspace_path"), str) else None
    bases = ([Path(workspace)] if workspace else []) + extra.file_bases
    files = list(extra.files)
    for ref, media_type in file_refs(messages or []):
        files.append(imported_file(ref, bases, "content_file", media_type))

    fallbacks = extra.fallbacks
    return ImportedTest(
        test_id=test_id,
        target=_target(row.get("target")),
        attempt=attempt,
        suite=_first(row.get("suite"), suite),
        score=score,
        passed=_passed(row, status, extra.grading),
        execution_status=status,
        error=_error(row),
        input=input_,
        expected_output=row.get("expected_output"),
        criteria=row.get("criteria") if isinstance(row.get("criteria"), str) else None,
        metadata=row["metadata"] if isinstance(row.get("metadata"), dict) else {},
        messages=messages,
        output_text=output_text,
        # Optional fields of the wrong type (a numeric start_time, a "n/a" token_usage) are treated as absent.
        token_usage=_first(as_dict(row.get("token_usage")) or None, fallbacks.get("token_usage")),
        cost_usd=_first(finite_number(row.get("cost_usd")), fallbacks.get("cost_usd")),
        duration_ms=_first(finite_number(row.get("duration_ms")), fallbacks.get("duration_ms")),
        start_time=_first(nonempty_text(row.get("start_time")), fallbacks.get("start_time")),
        end_time=_first(nonempty_text(row.get("end_time")), fallbacks.get("end_time")),
        **_file_changes(nonempty_text(row.get("file_changes")) or fallbacks.get("file_changes"), extra.grading),
        workspace_path=workspace,
        files=files,
        verdicts=_verdicts(row, score, extra.grading),
        source=source,
        raw_row={k: v for k, v in row.items() if k not in _BULKY_KEYS},
        warnings=list(extra.warnings),
        row_fields=kept_row_fields(row),
    )


_CUT_DIFF = re.compile(r"\n\.\.\. \((\d+) more lines\)\Z")
"""How AgentV's run folder ends a diff it cut (``run-artifacts.ts``: the first 20 lines kept)."""


def _file_changes(full: str | None, grading: Grading | None) -> dict[str, Any]:
    """The test's file_changes: the row's (v5 bundles: their diff file) when there is one, else what v4's
    grading.json kept of it, without AgentV's "... (N more lines)" line, and how many lines are lost."""
    if full is not None or grading is None or grading.diff_summary is None:
        return {"file_changes": full, "file_changes_lost_lines": None}
    cut = _CUT_DIFF.search(grading.diff_summary)
    if cut is None:
        return {"file_changes": grading.diff_summary, "file_changes_lost_lines": None}
    return {"file_changes": grading.diff_summary[: cut.start()], "file_changes_lost_lines": int(cut.group(1))}


_SAMPLE_DIR = re.compile(r"(?:^|/)sample-(\d+)/?$")

MAX_ATTEMPT = 2**31 - 1
"""The largest attempt a store holds (an INTEGER column on PostgreSQL)."""


def _in_range(attempt: int, what: str) -> int:
    if attempt > MAX_ATTEMPT:
        raise RowError(f"{what} is out of range: an attempt is at most {MAX_ATTEMPT}")
    return attempt


def sample_number(sample_path: Any) -> int | None:
    """N of a ``sample-N`` folder reference, the 1-based attempt AgentV itself shows."""
    if isinstance(sample_path, str):
        match = _SAMPLE_DIR.search(sample_path.rstrip("/"))
        if match:
            return _in_range(int(match.group(1)), f"sample folder {sample_path!r}")
    return None


def attempt_of(row: dict[str, Any]) -> int:
    """1-based attempt: the sample folder, else ``sample`` (1-based), else ``sample_index``/``attempt`` (0-based).

    ``retry_index`` is not an attempt: a retry replaces the sample it retried.
    """
    number = sample_number(row.get("sample_path"))
    if number is not None:
        return number
    for key, offset in (("sample", 0), ("sample_index", 1), ("attempt", 1)):
        value = row.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value + offset >= 1:
            return _in_range(value + offset, f"{key} {value}")
    return 1


def eval_hints(row: dict[str, Any] | None, root: Path) -> list[Path]:
    """Candidate eval files a row names: the source eval path first, then the bundled copy."""
    if not row:
        return []
    hints: list[Path] = []
    identity = row.get("projection_identity")
    dimensions = identity.get("dimensions") if isinstance(identity, dict) else None
    if isinstance(dimensions, dict) and isinstance(dimensions.get("eval_path"), str):
        hints.append(Path(dimensions["eval_path"]))
    eval_path = row.get("eval_path")
    if isinstance(eval_path, str) and eval_path:
        in_run = root / eval_path
        hints.append(in_run.resolve() if in_run.exists() else Path(eval_path))
    return hints


def rows_eval_hints(index: Path, root: Path) -> Iterator[tuple[str | None, list[Path]]]:
    """Each row's test id and :func:`eval_hints`, a line at a time (a bad line names nothing: it is
    reported when the results are read)."""
    for _, row, _ in iter_json_lines(index):
        if row is None:
            continue
        if is_legacy_camel_row(row):
            try:
                row = normalise_legacy_row(row)
            except ValueError:
                continue
        test_id = row.get("test_id")
        yield (test_id if isinstance(test_id, str) else None), eval_hints(row, root)


def unique_paths(paths: Iterable[Path]) -> list[Path]:
    seen: set[Path] = set()
    return [p for p in paths if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]
