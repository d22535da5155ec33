"""Stored results out again: AgentV 4.x result rows (JSONL), a flat CSV, or one JSON document.

Everything streams: one result in, one row out, so exporting a large run keeps memory flat.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from store.events import RunStarted, TestCaseRecorded, TestScored, TranscriptRecorded, VerdictRecorded

CSV_COLUMNS = (
    "run_id", "test_id", "target", "attempt", "test_score", "passed", "status",
    "grader", "grader_type", "grader_score", "verdict", "weight",
)


@dataclass
class ResultBundle:
    """Everything stored about one (test, target, attempt) result."""

    scored: TestScored
    verdicts: list[VerdictRecorded] = field(default_factory=list)
    transcript: TranscriptRecorded | None = None
    case: TestCaseRecorded | None = None
    timestamp: str | None = None
    """When the result was recorded (the TestScored event's time); AgentV's row ``timestamp``."""
    rendered_prompts: dict[str, Any] = field(default_factory=dict)
    """Grader name -> AgentV's recorded grader request (``scores[].input``), read from its blob."""


def _assertion(a: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"text": a.text, "passed": a.passed}
    if a.evidence:
        out["evidence"] = a.evidence
    return out


def score_entry(verdict: VerdictRecorded, rendered_prompt: Any = None) -> dict[str, Any]:
    """A v4 ``scores[]`` entry; ``input`` is the recorded grader request, ``target`` the judge target."""
    entry: dict[str, Any] = {
        "name": verdict.grader,
        "type": verdict.grader_type,
        "score": verdict.score,
        "weight": verdict.weight,
        "verdict": verdict.verdict,
        "assertions": [_assertion(a) for a in verdict.assertions],
    }
    if rendered_prompt is not None:
        entry["input"] = rendered_prompt
    if verdict.grader_target is not None:
        entry["target"] = verdict.grader_target
    if verdict.details is not None:
        entry["details"] = verdict.details
    return entry


def flatten_assertions(verdicts: Iterable[VerdictRecorded]) -> list[dict[str, Any]]:
    """v4's row-level list: passed assertions first, then failed, each in grader order (as real rows show)."""
    every = [a for v in verdicts for a in v.assertions]
    return [_assertion(a) for a in every if a.passed] + [_assertion(a) for a in every if not a.passed]


def export_row(run: RunStarted, result: ResultBundle) -> dict[str, Any]:
    scored, transcript, case = result.scored, result.transcript, result.case
    row: dict[str, Any] = {
        "timestamp": result.timestamp or (transcript.end_time if transcript else None),
        "test_id": scored.test_id,
        "suite": run.suite,
        "score": scored.score,
        "target": scored.target or run.target_name,
        "scores": [score_entry(v, result.rendered_prompts.get(v.grader)) for v in result.verdicts],
        "assertions": flatten_assertions(result.verdicts),
        "execution_status": scored.status,
        "error": scored.error,
    }
    if scored.attempt != 1:
        row["sample_index"] = scored.attempt - 1  # AgentV's 0-based sample index
    if transcript is not None:
        row.update(
            token_usage=transcript.token_usage,
            cost_usd=transcript.cost_usd,
            duration_ms=transcript.duration_ms,
            start_time=transcript.start_time,
            end_time=transcript.end_time,
            output=transcript.output_text,
            file_changes=transcript.file_changes,
            workspace_path=transcript.workspace_path,
        )
    if case is not None:
        row.update(input=case.input or None, metadata=case.metadata or None)
    # AgentV leaves undefined fields out rather than writing nulls.
    return {k: v for k, v in row.items() if v is not None}


def export_rows(run: RunStarted, results: Iterable[ResultBundle]) -> Iterator[dict[str, Any]]:
    """AgentV 4.x result rows, one per result, in the order given."""
    for result in results:
        yield export_row(run, result)


def write_jsonl(rows: Iterable[dict[str, Any]], fh: IO[str]) -> int:
    """One compact JSON object a line; returns the number of rows written."""
    count = 0
    for row in rows:
        fh.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
        count += 1
    return count


def write_csv(run: RunStarted, results: Iterable[ResultBundle], fh: IO[str]) -> int:
    """One line per (test, grader); a test without verdicts still gets one line. Returns data lines written."""
    writer = csv.writer(fh, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    count = 0
    for result in results:
        s = result.scored
        head = [run.run_id, s.test_id, s.target or run.target_name or "", s.attempt, s.score,
                "true" if s.passed else "false", s.status]
        graders = [[v.grader, v.grader_type, v.score, v.verdict, v.weight] for v in result.verdicts]
        for tail in graders or [["", "", "", "", ""]]:
            writer.writerow(head + tail)
            count += 1
    return count


def write_json(run: RunStarted, results: Iterable[ResultBundle], fh: IO[str]) -> int:
    """``{"run": {...}, "results": [...]}`` written result by result; returns the number of results."""
    fh.write('{"run": ' + json.dumps(run.model_dump(mode="json"), ensure_ascii=False) + ', "results": [')
    count = 0
    for result in results:
        item: dict[str, Any] = result.scored.model_dump(mode="json")
        item["timestamp"] = result.timestamp
        item["verdicts"] = [v.model_dump(mode="json") for v in result.verdicts]
        item["transcript"] = result.transcript.model_dump(mode="json") if result.transcript else None
        item["case"] = result.case.model_dump(mode="json") if result.case else None
        fh.write(("," if count else "") + "\n" + json.dumps(item, ensure_ascii=False, allow_nan=False))
        count += 1
    fh.write("\n]}\n")
    return count
