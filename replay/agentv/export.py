"""Stored results out again: AgentV 4.x result rows (JSONL), a flat CSV, or one JSON document.

Everything streams: results are read from the run's event stream as each one is scored, and written
one at a time, so exporting a large run keeps memory flat. Each format is written from the events'
payload fields (``store.events.payload_fields``), the dicts ``model_dump(mode="json")`` gives: a result
holding event models is dumped first (:func:`_fields`), so there is one definition of each format.

The JSON document (``--format json``) is ``{"format": "evalstore-export", "version": 1, "run": {...},
"results": [...]}``; every key listed in ``JSON_*_FIELDS`` below is always present (null when the store
holds nothing for it), so scripts can rely on the shape. A new field means a new version.
"""

from __future__ import annotations

import codecs
import csv
import os
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from functools import lru_cache
from operator import itemgetter
from typing import IO, Any

from evalstore.replay.agentv.stored import Payload, ResultBundle, stored_results
from evalstore.replay.agentv.wire import from_row_assertions
from evalstore.replay.analysis.views import RunSummary, run_started, run_summary
from evalstore.replay.jsontext import js_number, stringify
from evalstore.store import EventStore
from evalstore.store.events import RunStarted, SourceRef, VerdictRecorded

CSV_COLUMNS = (
    "run_id",
    "test_id",
    "target",
    "attempt",
    "test_score",
    "passed",
    "status",
    "grader",
    "grader_type",
    "grader_score",
    "verdict",
    "weight",
    "assertions_passed",
    "assertions_total",
    "failed_assertions",
    "error",
)

JSON_FORMAT, JSON_VERSION = "evalstore-export", 1
JSON_RUN_FIELDS = (
    "run_id",
    "kind",
    "parent_run_id",
    "suite",
    "eval_path",
    "target_name",
    "threshold",
    "source",
    "source_format",
    "tool_version",
    "overrides",
)
JSON_SUMMARY_FIELDS = ("status", "tests", "passed", "errors", "mean_score", "started_at")
JSON_RESULT_FIELDS = (
    "test_id",
    "target",
    "attempt",
    "score",
    "passed",
    "status",
    "threshold",
    "error",
    "origin",
    "source",
    "row_fields",
)
JSON_VERDICT_FIELDS = (
    "grader",
    "grader_type",
    "score",
    "verdict",
    "status",
    "weight",
    "required",
    "min_score",
    "negate",
    "assertions",
    "details",
    "evidence",
    "grader_target",
    "token_usage",
    "source_name",
    "origin",
    "carried_from",
    "cache_hit",
)
JSON_TRANSCRIPT_FIELDS = (
    "output_text",
    "token_usage",
    "cost_usd",
    "duration_ms",
    "start_time",
    "end_time",
    "file_changes",
    "workspace_path",
    "exit_code",
    "status",
    "error",
    "messages_sha256",
)
JSON_CASE_FIELDS = ("input", "expected_output", "criteria", "metadata", "input_files")


def _byte_writer(fh: IO[str]) -> Callable[[bytes], object]:
    """Where encoded JSON goes: straight to the bytes under a UTF-8 text file (the CLI's output file and
    stdout), which saves decoding and encoding again every line; any other handle is given text. What
    was written to ``fh`` before is flushed first, so it stays in order."""
    buffer = getattr(fh, "buffer", None)
    encoding = getattr(fh, "encoding", None)
    if buffer is None or not encoding or codecs.lookup(encoding).name != "utf-8" or os.linesep != "\n":
        return lambda data: fh.write(data.decode())
    fh.flush()
    return buffer.write


def _fields(event: Any) -> Payload:
    """An event's fields as the writers read them: a payload dict as it is, a model dumped."""
    return event if isinstance(event, dict) else event.model_dump(mode="json")


# --- AgentV 4.x rows -----------------------------------------------------------------------------


def _assertion(a: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"text": a["text"], "passed": a["passed"]}
    if a.get("evidence"):
        out["evidence"] = a["evidence"]
    return out


def score_entry(
    verdict: VerdictRecorded | Payload, rendered_prompt: Any = None, usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A v4 ``scores[]`` entry; ``input`` is the recorded grader request, ``target`` the judge target."""
    v = _fields(verdict)
    entry: dict[str, Any] = {
        "name": v["source_name"] or v["grader"],
        "type": v["grader_type"],
        "score": js_number(v["score"]),
        "weight": js_number(v["weight"]),
        "verdict": v["verdict"],
        "assertions": [_assertion(a) for a in v["assertions"]],
    }
    if rendered_prompt is not None:
        entry["input"] = rendered_prompt
    if v["grader_target"] is not None:
        entry["target"] = v["grader_target"]
    if v["details"]:  # AgentV index rows carry no empty details object
        entry["details"] = v["details"]
    if (v["token_usage"] or usage) is not None:
        entry["token_usage"] = v["token_usage"] or usage
    return entry


def flatten_assertions(verdicts: Iterable[VerdictRecorded | Payload]) -> list[dict[str, Any]]:
    """v4's row-level list: passed assertions first, then failed, each in grader order (as real rows show)."""
    every = [a for v in verdicts for a in _fields(v)["assertions"]]
    return [_assertion(a) for a in every if a["passed"]] + [_assertion(a) for a in every if not a["passed"]]


def agentv_time(value: str | None) -> str | None:
    """AgentV writes UTC times as ``2026-02-20T21:40:12.230Z``; times the store made (``+00:00``,
    microseconds) are rewritten so; anything else (an imported row's own text) is kept verbatim."""
    if not value or not value.endswith("+00:00"):
        return value
    try:
        moment = datetime.fromisoformat(value).astimezone(UTC)
    except ValueError:
        return value
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _target(run: RunStarted, scored: Payload) -> str | None:
    return scored["target"] or run.target_name


def _scores(result: ResultBundle, verdicts: list[Payload]) -> list[dict[str, Any]] | None:
    """``scores[]``; None (left out) for a row that had only flattened assertions, as it came in."""
    graders = [v for v in verdicts if not from_row_assertions(v["details"])]
    if verdicts and not graders:
        return None
    return [
        score_entry(v, result.rendered_prompts.get(v["grader"]), result.grader_usage.get(v["grader"])) for v in graders
    ]


def export_row(run: RunStarted, result: ResultBundle) -> dict[str, Any]:
    scored = _fields(result.scored)
    verdicts = [_fields(v) for v in result.verdicts]
    transcript = _fields(result.transcript) if result.transcript is not None else None
    case = _fields(result.case) if result.case is not None else None
    row_fields = scored["row_fields"]
    row: dict[str, Any] = {
        "timestamp": agentv_time(result.timestamp or (transcript["end_time"] if transcript else None)),
        "test_id": scored["test_id"],
        "suite": run.suite,
        "category": row_fields.get("category"),
        "conversation_id": row_fields.get("conversation_id"),
        "experiment": row_fields.get("experiment"),
        "score": js_number(scored["score"]),
        "target": _target(run, scored),
        "scores": _scores(result, verdicts),
        "assertions": flatten_assertions(verdicts),
        "execution_status": scored["status"],
        "error": scored["error"],
        "failure_stage": row_fields.get("failure_stage"),
        "failure_reason_code": row_fields.get("failure_reason_code"),
    }
    if scored["attempt"] != 1:
        row["sample_index"] = scored["attempt"] - 1  # AgentV's 0-based sample index
    if transcript is not None:
        row.update(
            token_usage=transcript["token_usage"],
            cost_usd=js_number(transcript["cost_usd"]),
            duration_ms=js_number(transcript["duration_ms"]),
            start_time=transcript["start_time"],
            end_time=transcript["end_time"],
            output=transcript["output_text"],
            file_changes=transcript["file_changes"],
            workspace_path=transcript["workspace_path"],
        )
    if case is not None:
        row.update(input=case["input"] or None, metadata=case["metadata"] or None)
    # AgentV leaves undefined fields out rather than writing nulls.
    return {k: v for k, v in row.items() if v is not None}


def export_rows(run: RunStarted, results: Iterable[ResultBundle]) -> Iterator[dict[str, Any]]:
    """AgentV 4.x result rows, one per result, in the order given."""
    for result in results:
        yield export_row(run, result)


def write_jsonl(rows: Iterable[dict[str, Any]], fh: IO[str]) -> int:
    """One compact JSON object a line; returns the number of rows written."""
    write, count = _byte_writer(fh), 0
    for row in rows:
        write(stringify(row) + b"\n")
        count += 1
    return count


# --- CSV -----------------------------------------------------------------------------------------


def write_csv(run: RunStarted, results: Iterable[ResultBundle], fh: IO[str]) -> int:
    """One line per (test, grader); a test without verdicts still gets one line. Returns data lines
    written. Cells holding commas, quotes or newlines (evidence, errors) are quoted as RFC 4180 says."""
    writer = csv.writer(fh, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    count = 0
    for result in results:
        s = _fields(result.scored)
        head = [
            run.run_id,
            s["test_id"],
            _target(run, s) or "",
            s["attempt"],
            s["score"],
            "true" if s["passed"] else "false",
            s["status"],
        ]
        graders = []
        for v in map(_fields, result.verdicts):
            assertions = v["assertions"]
            failed = [a["text"] for a in assertions if not a["passed"]]
            graders.append(
                [
                    v["grader"],
                    v["grader_type"],
                    v["score"],
                    v["verdict"],
                    v["weight"],
                    len(assertions) - len(failed),
                    len(assertions),
                    "\n".join(failed),
                ]
            )
        tail = [s["error"] or ""]
        writer.writerows([head + middle + tail for middle in graders or [[""] * 8]])
        count += len(graders) or 1
    return count


# --- JSON ----------------------------------------------------------------------------------------


def _pick(event: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    # Every listed field is one of the event's: its fields dict always holds it.
    return dict(zip(fields, _getter(fields)(_fields(event))))


@lru_cache(maxsize=8)
def _getter(fields: tuple[str, ...]) -> Any:
    return itemgetter(*fields)


def _json_verdict(result: ResultBundle, verdict: Any) -> dict[str, Any]:
    item = _pick(verdict, JSON_VERDICT_FIELDS)
    # Assertions as their model dumps them (stored payloads leave a null evidence out).
    item["assertions"] = [
        {"text": a["text"], "passed": a["passed"], "evidence": a.get("evidence")} for a in item["assertions"]
    ]
    item["rendered_prompt"] = result.rendered_prompts.get(item["grader"])
    return item


@lru_cache(maxsize=64)
def _resolved_file(file: str | None, root: str | None) -> str | None:
    """``SourceRef.resolved``'s file: the same for every result of a run."""
    return SourceRef(file=file).resolved(root).file


def json_result(run: RunStarted, result: ResultBundle) -> dict[str, Any]:
    item = _pick(result.scored, JSON_RESULT_FIELDS)
    source = item["source"]
    if source is not None:  # stored relative to the run's imported path (SourceRef)
        root = run.source.file if run.source else None
        item["source"] = {"file": _resolved_file(source.get("file"), root), "line": source.get("line")}
    item["timestamp"] = result.timestamp
    item["verdicts"] = [_json_verdict(result, v) for v in result.verdicts]
    item["transcript"] = _pick(result.transcript, JSON_TRANSCRIPT_FIELDS) if result.transcript else None
    item["case"] = _pick(result.case, JSON_CASE_FIELDS) if result.case else None
    return item


def write_json(run: RunStarted, results: Iterable[ResultBundle], fh: IO[str], summary: RunSummary | None = None) -> int:
    """``{"format", "version", "run", "summary", "results": [...]}`` written result by result; returns
    the number of results."""
    head = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "run": _pick(run, JSON_RUN_FIELDS),
        "summary": {f: getattr(summary, f) for f in JSON_SUMMARY_FIELDS} if summary else None,
    }
    fh.write(stringify(head)[:-1].decode() + ',"results":[')
    write = _byte_writer(fh)
    count = 0
    for result in results:
        write((b",\n" if count else b"\n") + stringify(json_result(run, result)))
        count += 1
    fh.write("\n]}\n")
    return count


EXPORT_FORMATS = ("agentv-jsonl", "csv", "json")


PROGRESS_EVERY = 500
"""Results between two progress reports of an export."""


def export_run(
    store: EventStore,
    run_id: str,
    fmt: str,
    fh: IO[str],
    progress: Callable[[int], None] | None = None,
    summary: RunSummary | None = None,
) -> int:
    """Write one stored run to ``fh`` as ``agentv-jsonl``, ``csv`` or ``json``, streaming; returns the
    number of results (lines for CSV) written. ``progress`` is told how many results are written, every
    :data:`PROGRESS_EVERY` and at the end; ``summary`` is the run's, when the caller has read it."""
    started = run_started(store, run_id)
    if fmt == "csv":  # scores and verdicts only
        return write_csv(started, _reported(stored_results(store, run_id, inputs=False), progress), fh)
    results = _reported(stored_results(store, run_id), progress)
    if fmt == "agentv-jsonl":
        return write_jsonl(export_rows(started, results), fh)
    if fmt == "json":
        return write_json(started, results, fh, summary or run_summary(store, run_id))
    raise ValueError(f"unknown export format {fmt!r}: one of {', '.join(EXPORT_FORMATS)}")


def _reported(results: Iterator[ResultBundle], progress: Callable[[int], None] | None) -> Iterator[ResultBundle]:
    if progress is None:
        yield from results
        return
    done = 0
    for done, result in enumerate(results, 1):
        yield result
        if done % PROGRESS_EVERY == 0:
            progress(done)
    progress(done)
