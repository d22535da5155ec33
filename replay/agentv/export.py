"""Stored results out again: AgentV 4.x result rows (JSONL), a flat CSV, or one JSON document.

Everything streams: results are read from the run's event stream as each one is scored, and written
one at a time, so exporting a large run keeps memory flat. Each format is written from the events'
payload fields (``store.events.payload_fields``), the dicts ``model_dump(mode="json")`` gives: a result
holding event models is dumped first (:func:`_fields`), so there is one definition of each format.

The JSON document (``--format json``) is ``{"format": "evalstore-export", "version": 3, "run": {...},
"results": [...]}``; every key listed in ``JSON_*_FIELDS`` below is always present (null when the store
holds nothing for it), so scripts can rely on the shape. A new field means a new version: version 2 added
each result's ``experiment`` (the label its AgentV row has), version 3 the case's ``origin`` (a result that
recorded no case, as AgentV's rows do not, has the one its run's eval snapshot gives: ``analysis/cases.py``);
otherwise it is version 1.
"""

from __future__ import annotations

import codecs
import csv
import io
import os
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from functools import lru_cache, partial
from operator import itemgetter
from typing import IO, TYPE_CHECKING, Any

from evalstore.replay.agentv.chunked import CHUNK_RESULTS, Encode, encoded_results
from evalstore.replay.agentv.records import TIMING_KEYS
from evalstore.replay.agentv.stored import Payload, ResultBundle, Window, stored_results
from evalstore.replay.agentv.wire import FROM_ROW_ASSERTIONS, MEMBER_SCORES, TRIALS_ROW_FIELDS
from evalstore.replay.analysis.cases import RunCases
from evalstore.replay.analysis.views import RunSummary, result_key, run_started, run_summary, transcript_run_id
from evalstore.replay.choices import DEFAULT_EXPERIMENT, EXPORT_FORMATS
from evalstore.replay.errors import ReplayError
from evalstore.replay.jsontext import RawJSON, js_number, stringify
from evalstore.store.errors import StoreError
from evalstore.store.events import RunStarted, SourceRef, VerdictRecorded

if TYPE_CHECKING:
    from evalstore.replay.evalfile.specs import TrialsSpec
    from evalstore.store import EventStore

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

JSON_FORMAT, JSON_VERSION = "evalstore-export", 3
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
JSON_CASE_ORIGIN = "origin"
"""The case's key beside ``JSON_CASE_FIELDS``: ``recorded`` (with the result) or ``eval_snapshot`` (built from
the run's eval snapshot, the result having recorded none; ``RunCases``)."""


def _byte_writer(fh: IO[str]) -> Callable[[bytes | memoryview], object]:
    """Where encoded JSON goes: straight to the bytes under a UTF-8 text file (the CLI's output file and
    stdout), which saves decoding and encoding again every line; any other handle is given text. What
    was written to ``fh`` before is flushed first, so it stays in order."""
    buffer = getattr(fh, "buffer", None)
    encoding = getattr(fh, "encoding", None)
    if buffer is None or not encoding or codecs.lookup(encoding).name != "utf-8" or os.linesep != "\n":
        return lambda data: fh.write(str(data, "utf-8"))
    fh.flush()
    return buffer.write


def _fields(event: Any) -> Payload:
    """An event's fields as the writers read them: a payload dict as it is, a model dumped."""
    return event if isinstance(event, dict) else event.model_dump(mode="json")


# --- AgentV 4.x rows -----------------------------------------------------------------------------


def score_entry(
    verdict: VerdictRecorded | Payload,
    rendered_prompt: Any = None,
    usage: dict[str, Any] | None = None,
    assertions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A v4 ``scores[]`` entry; ``input`` is the recorded grader request, ``target`` the judge target;
    ``assertions``: the verdict's, as :func:`_shown` shows them, when the caller has them."""
    v = _fields(verdict)
    entry: dict[str, Any] = {
        "name": v["source_name"] or v["grader"],
        "type": v["grader_type"],
        "score": js_number(v["score"]),
        "weight": js_number(v["weight"]),
        "verdict": v["verdict"],
        "assertions": _shown(v["assertions"]) if assertions is None else assertions,
    }
    if rendered_prompt is not None:
        entry["input"] = rendered_prompt
    if v["grader_target"] is not None:
        entry["target"] = v["grader_target"]
    details = v["details"]
    if details:  # AgentV index rows carry no empty details object
        if v["grader_type"] == "composite" and MEMBER_SCORES in details:
            # a composite's members are AgentV's nested scores[]
            entry["scores"] = js_number(details[MEMBER_SCORES])
            details = {k: value for k, value in details.items() if k != MEMBER_SCORES}
        if details:
            entry["details"] = details
    if (token_usage := v["token_usage"] or usage) is not None:
        entry["token_usage"] = token_usage
    if timing := v["timing"]:  # an imported grader's, as its row had them (stored with sorted keys)
        entry.update((key, timing[key]) for key in TIMING_KEYS if key in timing)
    return entry


def flatten_assertions(verdicts: Iterable[VerdictRecorded | Payload]) -> list[dict[str, Any]]:
    """v4's row-level list: passed assertions first, then failed, each in grader order (as real rows show)."""
    return _flattened([_shown(_fields(v)["assertions"]) for v in verdicts])


def _flattened(shown: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    passed: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for assertions in shown:
        for a in assertions:
            (passed if a["passed"] else failed).append(a)
    return passed + failed


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


def _shown(assertions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assertions as a row shows them: ``text``, ``passed``, and ``evidence`` when there is some."""
    return [
        {"text": a["text"], "passed": a["passed"], "evidence": a["evidence"]}
        if a.get("evidence")
        else {"text": a["text"], "passed": a["passed"]}
        for a in assertions
    ]


def _scores(
    result: ResultBundle, verdicts: list[Payload], shown: list[list[dict[str, Any]]]
) -> list[dict[str, Any]] | None:
    """``scores[]``; None (left out) for a row that had only flattened assertions, as it came in."""
    prompts, usage = result.rendered_prompts, result.grader_usage
    entries = [
        score_entry(v, prompts.get(v["grader"]), usage.get(v["grader"]), a)
        for v, a in zip(verdicts, shown)
        if v["details"] != FROM_ROW_ASSERTIONS
    ]
    return None if verdicts and not entries else entries


_TRANSCRIPT_KEYS = (
    ("token_usage", "token_usage"),
    ("cost_usd", "cost_usd"),
    ("duration_ms", "duration_ms"),
    ("start_time", "start_time"),
    ("end_time", "end_time"),
    ("output", "output_text"),
    ("file_changes", "file_changes"),
    ("workspace_path", "workspace_path"),
)
"""The row's keys from the transcript, in the row's order, and the transcript field each is."""
_NUMBER_KEYS = frozenset({"cost_usd", "duration_ms"})


def export_row(run: RunStarted, result: ResultBundle) -> dict[str, Any]:
    scored = _fields(result.scored)
    verdicts = [_fields(v) for v in result.verdicts]
    # Each assertion as the row shows it, once: in its grader's scores[] entry and in the row's list alike.
    shown = [_shown(v["assertions"]) for v in verdicts]
    transcript = _fields(result.transcript) if result.transcript is not None else None
    case = _fields(result.case) if result.case is not None else None
    # An imported row's labels as it had them; a run evalstore made has them on its test cases.
    labels = scored["row_fields"]
    if case is not None and (of_case := _case_labels(case)):
        labels = {**of_case, **labels}
    get = labels.get
    # AgentV leaves undefined fields out rather than writing nulls: each key is set only when it has a
    # value, in the order AgentV writes them (each set in turn: a table of the pairs, built per row, was a
    # tenth of the row's cost).
    row: dict[str, Any] = {}
    value: Any
    if (value := agentv_time(result.timestamp or (transcript["end_time"] if transcript else None))) is not None:
        row["timestamp"] = value
    if (value := scored["test_id"]) is not None:
        row["test_id"] = value
    if (value := run.suite) is not None:
        row["suite"] = value
    if (value := get("category")) is not None:
        row["category"] = value
    if (value := get("conversation_id")) is not None:
        row["conversation_id"] = value
    if (value := row_experiment(run, scored["row_fields"])) is not None:
        row["experiment"] = value
    if (value := js_number(scored["score"])) is not None:
        row["score"] = value
    if (value := _target(run, scored)) is not None:
        row["target"] = value
    if (value := _scores(result, verdicts, shown)) is not None:
        row["scores"] = value
    row["assertions"] = _flattened(shown)
    if (value := scored["status"]) is not None:
        row["execution_status"] = value
    if (value := scored["error"]) is not None:
        row["error"] = value
    if (value := get("failure_stage")) is not None:
        row["failure_stage"] = value
    if (value := get("failure_reason_code")) is not None:
        row["failure_reason_code"] = value
    if scored["attempt"] != 1:
        row["sample_index"] = scored["attempt"] - 1  # AgentV's 0-based sample index
    if transcript is not None:
        for key, name in _TRANSCRIPT_KEYS:
            if (value := transcript[name]) is not None:
                row[key] = js_number(value) if key in _NUMBER_KEYS else value
    if case is not None:
        if case["input"]:
            row["input"] = case["input"]
        if case["metadata"]:
            row["metadata"] = case["metadata"]
    if "trials" in scored["row_fields"]:
        # An imported row of a test with trials: AgentV's trials[] and aggregation, last, as AgentV wrote them.
        fields = scored["row_fields"]
        for key in TRIALS_ROW_FIELDS:
            if (value := fields.get(key)) is not None:
                row[key] = RawJSON(value.encode("utf-8"))
    return row


def row_experiment(run: RunStarted, row_fields: dict[str, Any]) -> str | None:
    """A result's ``experiment``, as AgentV writes it on every row: an imported row's own (a replay's rows
    keep the label their imported origin's had, ``stored.CARRIED_ROW_FIELDS``), else, for a run evalstore
    made, the run's; None for an imported row that had none."""
    made = None if run.kind == "imported" else run.experiment or DEFAULT_EXPERIMENT
    return row_fields.get("experiment") or made


def _case_labels(case: Payload | None) -> dict[str, str]:
    return {k: case[k] for k in ("category", "conversation_id") if case and case.get(k) is not None}


def export_rows(run: RunStarted, results: Iterable[ResultBundle]) -> Iterator[dict[str, Any]]:
    """AgentV 4.x result rows, one per result, in the order given."""
    for result in results:
        yield export_row(run, result)


def write_jsonl(rows: Iterable[dict[str, Any]], fh: IO[str]) -> int:
    """One compact JSON object a line; returns the number of rows written."""
    write, count = _byte_writer(fh), 0
    for row in rows:
        write(stringify(row, line=True))
        count += 1
    return count


# --- AgentV rows of a run with trials ------------------------------------------------------------


def trials_spec(store: EventStore, started: RunStarted) -> TrialsSpec | None:
    """The ``execution.trials`` a run's results are trials of: that of a run evalstore made (``run``, and its
    replays), whose eval (the run's eval snapshot, else that of the run holding its transcripts) has trials;
    None for any other run. An import's rows are AgentV's own (one a test with the trials' score already,
    as 4.42.4 writes them, or v5's samples), each kept as it came; so are those of a replay of an import,
    which regrades the one answer each row kept."""
    origin = transcript_run_id(store, started)
    runs = [started] if origin == started.run_id else [started, run_started(store, origin)]
    if runs[-1].kind == "imported":
        return None
    snapshot = next((r.eval_snapshot for r in runs if any(s.role == "eval" and s.sha256 for s in r.eval_snapshot)), [])
    # Only an eval that names trials is parsed (the eval-file modules stay unloaded for every other export).
    if not any(s.role == "eval" and s.sha256 and b"trials" in store.get_blob(s.sha256) for s in snapshot):
        return None
    from evalstore.replay.evalfile.snapshot import snapshot_eval

    try:
        suite = snapshot_eval(snapshot, store.get_blob)
    except (ReplayError, StoreError):
        return None  # an eval the run kept but cannot be read: its results as they are, one row each
    return suite.trials if suite is not None else None


def trials_row(run: RunStarted, spec: TrialsSpec, attempts: list[ResultBundle]) -> dict[str, Any]:
    """The one row AgentV 4.42.4 writes for a test (and target) with trials (``runEvalCaseWithTrials``), from
    its trials (``attempts``, in order): the best trial's row (the first with the highest score: its answer,
    transcript, timings and ``scores[]``) whose ``score`` is the trials' aggregate (``grading.trials``,
    the score ``run`` prints), ``execution_status`` ``ok`` when a trial's is, else ``execution_error`` when
    every trial's is, else ``quality_failure`` (an ``ok`` test keeps no ``failure_stage`` or
    ``failure_reason_code``), without a ``sample_index``; then each trial as AgentV's ``trials[]`` holds it
    (``attempt`` from 0, ``score``, ``verdict`` at 0.8, ``scores``, ``error``, ``cost_usd``,
    ``execution_status``, ``failure_stage``, ``failure_reason_code``), the ``aggregation`` and, when the trials
    stopped at ``cost_limit_usd``, ``cost_limited``."""
    from evalstore.replay.grading.graders.base import score_to_verdict
    from evalstore.replay.grading.trials import aggregate

    rows = [export_row(run, a) for a in attempts]
    scored = [_fields(a.scored) for a in attempts]
    scores = [s["score"] for s in scored]
    costs = [_fields(a.transcript)["cost_usd"] if a.transcript is not None else None for a in attempts]
    outcome = aggregate(spec, scores, scored[0]["threshold"], costs, [bool(s["passed"]) for s in scored])
    row = dict(rows[scores.index(max(scores))])
    row.pop("sample_index", None)
    row["score"] = js_number(outcome.score)
    statuses = [s["status"] for s in scored]
    if "ok" in statuses:
        row["execution_status"] = "ok"
        row.pop("failure_stage", None)
        row.pop("failure_reason_code", None)
    else:
        row["execution_status"] = (
            "execution_error" if all(s == "execution_error" for s in statuses) else "quality_failure"
        )
    row["trials"] = [
        {
            "attempt": s["attempt"] - 1,
            "score": js_number(s["score"]),
            "verdict": score_to_verdict(s["score"]),
            **{k: trial[k] for k in _TRIAL_KEYS if k in trial},
        }
        for s, trial in zip(scored, rows)
    ]
    row["aggregation"] = js_number(outcome.aggregation)
    if outcome.cost_limited:
        row["cost_limited"] = True
    return row


_TRIAL_KEYS = ("scores", "error", "cost_usd", "execution_status", "failure_stage", "failure_reason_code")
"""What a trial of AgentV's ``trials[]`` holds after its attempt, score and verdict, each as the trial's own row
has it (``TrialResult``, snake-cased)."""


def _trials_rows(
    store: EventStore,
    run_id: str,
    run: RunStarted,
    spec: TrialsSpec,
    upto_seq: int | None,
    progress: Callable[[int], None] | None,
) -> Iterator[dict[str, Any]]:
    """The rows of a run with trials (:func:`trials_row`), each written once its test's last trial is read:
    a first pass over the run's scores finds where each test's trials end, so only the trials of the tests
    still being read are held (a test's trials are next to each other in a run of one worker, and never
    far apart in one of several). ``progress`` is told how many results were read."""
    ends = store.result_ends(run_id, every=2**62, upto_seq=upto_seq)  # the last result's score
    window: Window = (0, None if upto_seq is None else ends[-1] if ends else 0)
    last: dict[tuple[str, str | None], int] = {}
    read = 0
    for read, result in enumerate(stored_results(store, run_id, inputs=False, window=window), 1):
        s = _fields(result.scored)
        last[(s["test_id"], s["target"])] = read
    held: dict[tuple[str, str | None], dict[int, ResultBundle]] = {}
    for i, result in enumerate(stored_results(store, run_id, window=window), 1):
        s = _fields(result.scored)
        key = (s["test_id"], s["target"])
        held.setdefault(key, {})[s["attempt"]] = result  # a result scored again replaces the one before
        if last.get(key) == i:
            trials = held.pop(key)
            yield trials_row(run, spec, [trials[n] for n in sorted(trials)])
        if progress and i % CHUNK_RESULTS == 0:
            progress(i)
    for trials in held.values():  # (none: both passes read the same results, in the same order)
        yield trials_row(run, spec, [trials[n] for n in sorted(trials)])
    if progress:
        progress(read)


# --- CSV -----------------------------------------------------------------------------------------


def csv_rows(run: RunStarted, result: ResultBundle) -> list[list[Any]]:
    """A result's CSV lines: one per grader, or one with empty grader cells for a result without verdicts."""
    s = _fields(result.scored)
    head = _spreadsheet_cells(
        [
            run.run_id,
            s["test_id"],
            _target(run, s) or "",
            s["attempt"],
            s["score"],
            "true" if s["passed"] else "false",
            s["status"],
        ]
    )
    tail = _spreadsheet_cells([s["error"] or ""])
    lines = []
    for v in map(_fields, result.verdicts):
        assertions = v["assertions"]
        failed = [a["text"] for a in assertions if not a["passed"]]
        grader = [
            v["grader"],
            v["grader_type"],
            v["score"],
            v["verdict"],
            v["weight"],
            len(assertions) - len(failed),
            len(assertions),
            "\n".join(failed),
        ]
        lines.append(head + _spreadsheet_cells(grader) + tail)
    return lines or [head + [""] * 8 + tail]


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _spreadsheet_cells(cells: list[Any]) -> list[Any]:
    """A text cell a spreadsheet would run as a formula (``=HYPERLINK(...)`` in a test id or an assertion
    of an imported run) is written with a leading ``'``, as OWASP advises for CSV meant for spreadsheets;
    numbers are left as they are. The JSON formats keep every value exactly."""
    return ["'" + cell if isinstance(cell, str) and cell.startswith(_FORMULA_STARTS) else cell for cell in cells]


def write_csv(run: RunStarted, results: Iterable[ResultBundle], fh: IO[str]) -> int:
    """One line per (test, grader); a test without verdicts still gets one line. Returns data lines
    written. Cells holding commas, quotes or newlines (evidence, errors) are quoted as RFC 4180 says."""
    writer = csv.writer(fh, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    count = 0
    for result in results:
        rows = csv_rows(run, result)
        writer.writerows(rows)
        count += len(rows)
    return count


def _csv_text(rows: Iterable[Iterable[Any]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue()


# --- JSON ----------------------------------------------------------------------------------------


def _picker(fields: tuple[str, ...]) -> Callable[[Any], dict[str, Any]]:
    """An event's ``fields`` as a dict, in their order (each is one of the event's: its fields dict always
    holds it); made once per field list, as its getter is."""
    get = itemgetter(*fields)
    return lambda event: dict(zip(fields, get(_fields(event))))


_run_item, _result_item, _verdict_item, _transcript_item, _case_item = map(
    _picker, (JSON_RUN_FIELDS, JSON_RESULT_FIELDS, JSON_VERDICT_FIELDS, JSON_TRANSCRIPT_FIELDS, JSON_CASE_FIELDS)
)


def _json_verdict(result: ResultBundle, verdict: Any) -> dict[str, Any]:
    item = _verdict_item(verdict)
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


def json_result(run: RunStarted, result: ResultBundle, cases: RunCases | None = None) -> dict[str, Any]:
    """One result of the JSON document; ``cases``: the run's (:class:`RunCases`), which give a result that
    recorded no case the one its run's eval snapshot has (without them, such a result has none)."""
    item = _result_item(result.scored)
    if "trials" in item["row_fields"]:  # an imported row's trials are AgentV's: its agentv-jsonl export writes them
        item["row_fields"] = {k: v for k, v in item["row_fields"].items() if k not in TRIALS_ROW_FIELDS}
    source = item["source"]
    if source is not None:  # stored relative to the run's imported path (SourceRef)
        root = run.source.file if run.source else None
        item["source"] = {"file": _resolved_file(source.get("file"), root), "line": source.get("line")}
    item["timestamp"] = result.timestamp
    item["experiment"] = row_experiment(run, item["row_fields"])
    item["verdicts"] = [_json_verdict(result, v) for v in result.verdicts]
    item["transcript"] = _transcript_item(result.transcript) if result.transcript else None
    found = (cases or _NO_SNAPSHOT).find(result_key(item["test_id"], item["target"], item["attempt"]), result.case)
    item["case"] = {**_case_item(found.case), JSON_CASE_ORIGIN: found.origin} if found.case is not None else None
    return item


_NO_SNAPSHOT = RunCases([], lambda digest: b"")
"""The cases of a run without an eval snapshot: only the recorded ones."""


def _json_head(run: RunStarted, summary: RunSummary | None) -> str:
    """The document up to its results' opening bracket."""
    head = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "run": _run_item(run),
        "summary": {f: getattr(summary, f) for f in JSON_SUMMARY_FIELDS} if summary else None,
    }
    return stringify(head)[:-1].decode() + ',"results":['


JSON_TAIL = "\n]}\n"


def write_json(
    run: RunStarted,
    results: Iterable[ResultBundle],
    fh: IO[str],
    summary: RunSummary | None = None,
    cases: RunCases | None = None,
) -> int:
    """``{"format", "version", "run", "summary", "results": [...]}`` written result by result; returns
    the number of results. ``cases``: as :func:`json_result` takes them."""
    fh.write(_json_head(run, summary))
    write = _byte_writer(fh)
    count = 0
    for result in results:
        write((b",\n" if count else b"\n") + stringify(json_result(run, result, cases)))
        count += 1
    fh.write(JSON_TAIL)
    return count


def _jsonl_encoded(run: RunStarted, result: ResultBundle) -> tuple[bytes, int]:
    return stringify(export_row(run, result), line=True), 1


def _json_encoded(run: RunStarted, cases: RunCases, result: ResultBundle) -> tuple[bytes, int]:
    return b",\n" + stringify(json_result(run, result, cases)), 1  # the first result's comma is cut


def _csv_encoded(run: RunStarted, result: ResultBundle) -> tuple[bytes, int]:
    rows = csv_rows(run, result)
    return _csv_text(rows).encode("utf-8"), len(rows)


def export_run(
    store: EventStore,
    run_id: str,
    fmt: str,
    fh: IO[str],
    progress: Callable[[int], None] | None = None,
    summary: RunSummary | None = None,
    *,
    workers: int | None = None,
) -> int:
    """Write one stored run to ``fh`` as ``agentv-jsonl``, ``csv`` or ``json``, streaming; returns the
    number of results (lines for CSV) written. ``progress`` is told how many results are written after
    each chunk (``chunked.CHUNK_RESULTS``); ``summary`` is the run's, when the caller has read it (a JSON
    document's head is read here otherwise). The results written are those the summary counted
    (``RunSummary.last_seq``), so that its counts are the rows', also while an import still adds to the run.
    ``workers``: processes encoding at once (``chunked.encoded_results``; default one per core)."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}: one of {', '.join(EXPORT_FORMATS)}")
    started = run_started(store, run_id)
    if summary is None and fmt == "json":
        summary = run_summary(store, run_id)  # before the results are cut into chunks: they end where it does
    upto = None if summary is None else summary.last_seq or 0
    if fmt == "agentv-jsonl" and (spec := trials_spec(store, started)) is not None:
        # One row a test and target, its trials' aggregate: AgentV's (a test's trials are read together, here).
        return write_jsonl(_trials_rows(store, run_id, started, spec, upto, progress), fh)
    encode: Encode
    if fmt == "json":
        # A result that recorded no case (an AgentV import's) gets the one its run's eval snapshot gives; a
        # worker parses the snapshot on the first such result it meets (``RunCases``).
        encode = partial(_json_encoded, started, RunCases.of(store, run_id))
    else:
        encode = partial(_jsonl_encoded if fmt == "agentv-jsonl" else _csv_encoded, started)
    if fmt == "csv":
        fh.write(_csv_text([CSV_COLUMNS]))
    write = _byte_writer(fh)
    results = items = 0

    def head() -> None:
        write(_json_head(started, summary).encode("utf-8"))

    # CSV reads scores and verdicts only: no case, transcript or grader request.
    chunks = encoded_results(store, run_id, encode, inputs=fmt != "csv", workers=workers, upto_seq=upto)
    for chunk in chunks:
        if fmt == "json" and not results:
            head()
            write(chunk.data[1:])  # the first result's comma is cut
        else:
            write(chunk.data)
        results += chunk.results
        items += chunk.items
        if progress:
            progress(results)
    if fmt == "json":
        if not results:
            head()
        fh.write(JSON_TAIL)
    if progress and not results:
        progress(0)
    return items
