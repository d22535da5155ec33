"""Human labels: a person's pass/fail (and/or score) for a test's answer, recorded as events.

A label belongs to the transcript, not to one grading of it: it is stored against the run that holds the
transcript (:func:`evalstore.replay.analysis.views.transcript_run_id`), in that run's label stream
``lbl-<run id>``, so it applies to the run and every replay of it. Labels are never edited: a newer label
by the same person for the same test and grader supersedes the older one (:func:`current_labels`), and
both stay in the log.

Files (``evalstore labels import`` / ``export``) are CSV with a header or JSONL, one label per row, with
the columns of :data:`COLUMNS`; ``run`` may be left out when the command names the run.
"""

from __future__ import annotations

import csv
import getpass
import io
import json
import math
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalstore.replay.analysis.views import resolve_run, run_started, transcript_run_id
from evalstore.replay.errors import NotFoundError, ReplayError
from evalstore.replay.jsontext import decode_problem
from evalstore.replay.regular_files import read_regular
from evalstore.store import NewEvent, sha256_hex
from evalstore.store.events import LabelRecorded, SourceRef, TestScored, TranscriptRecorded

if TYPE_CHECKING:
    from evalstore.store import EventStore

STREAM_PREFIX = "lbl-"
COLUMNS = ("run", "test_id", "target", "attempt", "grader", "verdict", "score", "note", "by", "labelled_at")
"""The columns of an import or export file. ``test_id`` and one of ``verdict``/``score`` are required;
``run`` unless the command names the run; the rest are optional."""
_NAMESPACE = uuid.UUID("0d9d7c1e-54a4-4f0e-9d43-6c1f3a1b7a17")


class LabelError(ReplayError):
    """A label that cannot be recorded as given (an unknown test, no verdict, a bad row of a file)."""


def label_stream(run_id: str) -> str:
    return f"{STREAM_PREFIX}{run_id}"


def default_labeller() -> str:
    """Who labels when ``--by`` is not given: the OS user."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@dataclass(frozen=True)
class LabelInput:
    """One label as a person or a file gives it, before it is checked against the store."""

    test: str
    """A test id, or ``test@target#attempt`` as evalstore names results."""
    verdict: str | None = None
    score: float | None = None
    grader: str | None = None
    note: str | None = None
    by: str | None = None
    target: str | None = None
    attempt: int | None = None
    labelled_at: str | None = None
    run: str | None = None
    source: SourceRef | None = None


@dataclass(frozen=True)
class Label:
    """A stored label with when it was recorded and whether a newer one by the same person replaced it."""

    event_id: str
    seq: int
    recorded_at: str
    label: LabelRecorded
    superseded: bool = False

    @property
    def when(self) -> str:
        return self.label.labelled_at or self.recorded_at

    @property
    def key(self) -> tuple[str, str | None, int]:
        return (self.label.test_id, self.label.target, self.label.attempt)

    def to_dict(self) -> dict[str, Any]:
        lab = self.label
        return {
            "run": lab.run_id,
            "test_id": lab.test_id,
            "target": lab.target,
            "attempt": lab.attempt,
            "grader": lab.grader,
            "verdict": lab.verdict,
            "score": lab.score,
            "note": lab.note,
            "by": lab.by,
            "labelled_at": self.when,
            "event_id": self.event_id,
            "superseded": self.superseded,
        }


def _readings(test: str) -> Iterator[tuple[str, str | None, int | None]]:
    """The ways to read ``test@target#2`` as (test id, target, attempt): the whole text as a test id (ids
    such as ``user@example.com`` or ``issue#12`` are common), a trailing ``#N`` as the attempt, and each
    ``@`` as the start of the target."""
    attempt_readings: list[tuple[str, int | None]] = [(test, None)]
    head, sep, tail = test.rpartition("#")
    if sep and head and tail.isdigit():
        attempt_readings.append((head, int(tail)))
    for text, attempt in attempt_readings:
        yield text, None, attempt
    for text, attempt in attempt_readings:
        at = len(text)
        while (at := text.rfind("@", 0, at)) > 0:
            yield text[:at], text[at + 1 :], attempt


class _Transcripts:
    """The transcripts of one run, to match labels to (test id, target, attempt)."""

    def __init__(self, store: EventStore, run_id: str) -> None:
        self.run_id = run_id
        self.events: dict[tuple[str, str | None, int], str] = {}
        for stored in store.read_stream(run_id, types=["transcript_recorded"]):
            ev = stored.event
            assert isinstance(ev, TranscriptRecorded)
            self.events[(ev.test_id, ev.target, ev.attempt)] = stored.event_id

    def match(self, item: LabelInput) -> tuple[tuple[str, str | None, int], str]:
        """The one result ``item.test`` names. Every reading of the text is tried (``_readings``): when two
        readings name different results (test ``x@y`` and test ``x`` on target ``y``), the text is
        ambiguous and refused, never guessed."""
        found: dict[tuple[str, str | None, int], None] = {}
        # A target or attempt given apart (a labels file's columns) makes the text a test id as it is.
        readings = (
            [(item.test, item.target, item.attempt)]
            if item.target is not None or item.attempt is not None
            else list(_readings(item.test))
        )
        for test_id, target, attempt in readings:
            for k in self.events:
                if k[0] == test_id and (target is None or k[1] == target) and (attempt is None or k[2] == attempt):
                    found[k] = None
        if not found:
            raise LabelError(self._missing(item))
        if len(found) > 1:
            names = ", ".join(result_name(k) for k in sorted(found, key=_in_order)[:5])
            raise LabelError(
                f"test {item.test!r} names several results in run {self.run_id} ({names}); name one as "
                "TEST@TARGET#ATTEMPT, or in a labels file with its test_id, target and attempt columns"
            )
        [key] = found
        return key, self.events[key]

    def _missing(self, item: LabelInput) -> str:
        """Why nothing matched: the test is not in the run, or it is, on other targets or attempts."""
        for test_id, _, _ in _readings(item.test):
            results = sorted((k for k in self.events if k[0] == test_id), key=_in_order)
            if results:
                names = ", ".join(result_name(k) for k in results[:5]) + (" and more" if len(results) > 5 else "")
                return f"run {self.run_id} has no result {item.test!r}; test {test_id!r} has {names}"
        return f"run {self.run_id} has no test {item.test!r}; `evalstore show {self.run_id}` lists them"


def _in_order(key: tuple[str, str | None, int]) -> tuple[str, str, int]:
    """Results as a person counts them: by test, target, then attempt as a number (``#2`` before ``#10``)."""
    return key[0], key[1] or "", key[2]


def result_name(key: tuple[str, str | None, int]) -> str:
    """``test@target#attempt``, the attempt always written, so that a name listed in an error can be typed
    back (attempts count from 1: AgentV's ``sample_index`` + 1)."""
    test_id, target, attempt = key
    return f"{test_id}{'@' + target if target else ''}#{attempt}"


def contradiction(verdict: str | None, score: float | None) -> str | None:
    """Why ``verdict`` and ``score`` cannot both be meant, whatever the pass mark; None when they can.

    A result passes at a score of at least its pass mark (the test's ``execution.threshold``, else
    ``--threshold``, else the eval file's; a regrade may change it), and a label holds for every regrade of
    the answer: a score between 0 and 1 goes with either verdict under some pass mark. The ends do not: a
    score of 1 passes under every pass mark, and 0 fails under every one above 0 (a pass mark of 0 passes
    every answer, so a label could not tell a grader from it)."""
    if verdict == "pass" and score == 0.0:
        return "a score of 0 fails under any pass mark"
    if verdict == "fail" and score == 1.0:
        return "a score of 1 passes under every pass mark"
    return None


def _event(item: LabelInput, run_id: str, key: tuple[str, str | None, int], transcript: str) -> LabelRecorded:
    verdict = item.verdict.lower() if item.verdict else None
    if verdict not in (None, "pass", "fail"):
        raise LabelError(f"verdict: expected pass or fail, got {item.verdict!r}")
    if item.score is not None and not (math.isfinite(item.score) and 0.0 <= item.score <= 1.0):
        raise LabelError(f"score: expected a number from 0 to 1, got {item.score}")
    if verdict is None and item.score is None:
        raise LabelError("a label needs a verdict (pass/fail), a score, or both")
    why = contradiction(verdict, item.score)
    if why:
        raise LabelError(f"verdict {verdict} and score {item.score:g} contradict each other: {why}")
    if item.labelled_at:
        try:
            datetime.fromisoformat(item.labelled_at.replace("Z", "+00:00"))
        except ValueError:
            raise LabelError(
                f"labelled_at: expected an ISO 8601 date or time (2026-11-25, 2026-11-25T10:00:00Z), "
                f"got {item.labelled_at!r}"
            ) from None
    by = (item.by or "").strip() or default_labeller()
    return LabelRecorded(
        run_id=run_id,
        test_id=key[0],
        target=key[1],
        attempt=key[2],
        transcript_event_id=transcript,
        by=by,
        grader=item.grader or None,
        verdict=verdict,  # type: ignore[arg-type]
        score=item.score,
        note=item.note or None,
        labelled_at=item.labelled_at or None,
        source=item.source,
    )


def label_run(store: EventStore, ref: str) -> str:
    """The run whose transcripts a run's labels belong to (itself, or the run a replay regraded)."""
    return transcript_run_id(store, run_started(store, resolve_run(store, ref)))


def record_labels(
    store: EventStore,
    items: Iterable[LabelInput],
    *,
    run: str | None = None,
    ids: Iterable[str] | None = None,
    skip_present: bool = False,
) -> list[LabelRecorded]:
    """Check every label against the store, then append them, one transaction per labelled run.

    Every item is checked before anything is written, so a bad one (named by its source line, when it
    has one) leaves the store as it was. ``ids`` gives deterministic event ids (an import's), so the same
    file imported twice records its labels once. ``skip_present`` (an import): a label the store holds
    already, by its id or as the same label (:func:`_identity`: an export of this store imported back into
    it), is left out; the labels returned are those appended.
    """
    items = list(items)
    id_list = list(ids) if ids is not None else [None] * len(items)
    stored = set(store.get_events([i for i in id_list if i])) if skip_present else set()
    present: dict[str, set[tuple]] = {}
    bases: dict[str, str] = {}
    runs: dict[str, _Transcripts] = {}
    by_stream: dict[str, list[NewEvent]] = {}
    events: list[LabelRecorded] = []
    for item, event_id in zip(items, id_list):
        where = f"{item.source.location}: " if item.source else ""
        try:
            ref = item.run or run
            if not ref:
                raise LabelError("no run: give a `run` column or name the run on the command line")
            if ref not in bases:
                bases[ref] = label_run(store, ref)
            base = bases[ref]
            if base not in runs:
                runs[base] = _Transcripts(store, base)
            key, transcript = runs[base].match(item)
            event = _event(item, base, key, transcript)
        except (LabelError, NotFoundError) as exc:
            raise LabelError(f"{where}{exc}") from None
        if skip_present:
            if base not in present:
                present[base] = {_identity(lab.label, lab.when) for lab in read_labels(store, base)}
            if event_id in stored or (event.labelled_at and _identity(event, event.labelled_at) in present[base]):
                continue
        events.append(event)
        by_stream.setdefault(label_stream(base), []).append(NewEvent(event, event_id))
    for stream, new in by_stream.items():
        store.append(stream, new)
    return events


def _identity(label: LabelRecorded, when: str) -> tuple:
    """What makes two labels the same label: the result and grader, who, what they said, and when (as a
    time: an export writes it as stored, a spreadsheet may write it otherwise)."""
    try:
        at: object = datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        at = when
    return (
        label.test_id,
        label.target,
        label.attempt,
        label.grader,
        label.by,
        label.verdict,
        label.score,
        label.note,
        at,
    )


GRADERS_NAMED = 10
"""How many of the graders there are a warning about a grader none of them is names."""


def label_warnings(store: EventStore, events: Sequence[LabelRecorded]) -> list[str]:
    """What may not be what the person meant in labels just recorded (recorded all the same), a line
    each: a grader no run of the answers has, and verdicts their score is not at their pass mark
    (:func:`contradiction` refuses the scores no pass mark reconciles)."""
    return [*_unknown_graders(store, events), *_off_the_pass_mark(store, events)]


def family_graders(store: EventStore, run_id: str) -> set[str]:
    """The graders with a verdict in a (transcript) run or in any run regrading it, replays of replays too:
    the graders its labels apply to."""
    names: set[str] = set()
    todo = [run_id]
    while todo:
        run = todo.pop()
        names.update(row["grader"] for row in store.grader_counts(run))
        todo.extend(row["run_id"] for row in store.query("runs", parent_run_id=run))
    return names


def unknown_grader(store: EventStore, run_id: str, grader: str) -> str | None:
    """Why a label about ``grader`` may be about nothing: neither the (transcript) run nor a replay of it
    has a grader of that name; None when one has. Such a label is kept all the same (the grader may be a
    criterion not written yet), so this is a warning."""
    return _grader_warning(run_id, grader, sorted(family_graders(store, run_id)))


def _grader_warning(run_id: str, grader: str, known: list[str]) -> str | None:
    if grader in known:
        return None
    there = ", ".join(known[:GRADERS_NAMED]) + (
        f" and {len(known) - GRADERS_NAMED} more" if known[GRADERS_NAMED:] else ""
    )
    return (
        f"grader {grader!r}: neither run {run_id} nor a replay of it has a grader of that name (labelled all "
        f"the same, for a grader still to be written); {'they have ' + there if known else 'they have no graders'}"
    )


def _unknown_graders(store: EventStore, events: Sequence[LabelRecorded]) -> Iterator[str]:
    asked: dict[str, dict[str, None]] = {}  # per run, the graders labels name, in order
    for event in events:
        if event.grader:
            asked.setdefault(event.run_id, {})[event.grader] = None
    for run_id, names in asked.items():
        known = sorted(family_graders(store, run_id))
        yield from filter(None, (_grader_warning(run_id, name, known) for name in names))


def _off_the_pass_mark(store: EventStore, events: Sequence[LabelRecorded]) -> Iterator[str]:
    """One line for the labels whose verdict is not what their score makes of it at their pass mark: a
    grader's (a grader's own verdict is pass from 0.8), or for the whole answer the one its run graded the
    result at (a label applies to every regrade, whose pass mark may be another)."""
    from evalstore.replay.grading.graders.base import PASS_SCORE

    given = [e for e in events if e.verdict is not None and e.score is not None]
    marks: dict[tuple[str, str, str | None, int], float] = {}
    for run_id in dict.fromkeys(e.run_id for e in given if not e.grader):
        for _, _, payload, _ in store.stream_payloads(run_id, types=[TestScored.type]):
            p = json.loads(payload)  # stored without its defaults: target None, attempt 1
            marks[(run_id, p["test_id"], p.get("target"), p.get("attempt", 1))] = p["threshold"]
    off = [
        (e, mark)
        for e in given
        if (mark := PASS_SCORE if e.grader else marks.get((e.run_id, e.test_id, e.target, e.attempt))) is not None
        and (e.score >= mark) != (e.verdict == "pass")  # type: ignore[operator]
    ]
    if not off:
        return
    e, mark = off[0]
    example = (
        f"{e.source.location + ': ' if e.source else ''}{result_name((e.test_id, e.target, e.attempt))}"
        f"{f' [{e.grader}]' if e.grader else ''} of run {e.run_id}: {e.verdict} with score {e.score:g}, pass mark "
        f"{mark:g}"
    )
    if len(off) == 1:
        what = f"1 label gives a verdict its score does not have at its pass mark ({example})"
    else:
        what = f"{len(off)} labels give a verdict their score does not have at their pass mark (e.g. {example})"
    yield f"{what}; recorded as given: agreement counts the verdict, not the score"


def read_labels(store: EventStore, run_id: str) -> list[Label]:
    """Every label of a (transcript) run in log order, each marked superseded when a newer one by the
    same person for the same test and grader exists."""
    labels = [
        Label(s.event_id, s.seq, s.recorded_at, s.event)  # type: ignore[arg-type]
        for s in store.read_stream(label_stream(run_id), types=[LabelRecorded.type])
    ]
    latest: dict[tuple, int] = {}
    for i, lab in enumerate(labels):
        latest[(lab.key, lab.label.grader, lab.label.by)] = i
    keep = set(latest.values())
    return [
        lab if i in keep else Label(lab.event_id, lab.seq, lab.recorded_at, lab.label, True)
        for i, lab in enumerate(labels)
    ]


def current_labels(store: EventStore, run_id: str) -> list[Label]:
    return [lab for lab in read_labels(store, run_id) if not lab.superseded]


def labelled_keys(store: EventStore, run_id: str, *, by: str, grader: str | None) -> set[tuple[str, str, int]]:
    """The results of a (transcript) run that ``by`` has a current label for, for ``grader`` (None: the
    whole answer), keyed as runs pair results: (test id, target or "", attempt)."""
    return {
        (lab.label.test_id, lab.label.target or "", lab.label.attempt)
        for lab in current_labels(store, run_id)
        if lab.label.by == by and (lab.label.grader or None) == (grader or None)
    }


def all_labels(store: EventStore) -> Iterator[Label]:
    """Every label in the store, run by run (in the order runs started)."""
    for run_id in store.run_ids():
        yield from read_labels(store, run_id)


# --- files -------------------------------------------------------------------------------------


def _cell(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _row_input(row: dict[str, Any], source: SourceRef) -> LabelInput:
    unknown = sorted(k for k in row if k not in COLUMNS and k is not None)
    if unknown:
        raise LabelError(f"{source.location}: unknown column(s) {', '.join(unknown)}; expected {', '.join(COLUMNS)}")
    test = _cell(row.get("test_id"))
    if not test:
        raise LabelError(f"{source.location}: test_id is empty")
    score_text, attempt_text = _cell(row.get("score")), _cell(row.get("attempt"))
    try:
        score = float(score_text) if score_text is not None else None
    except ValueError:
        raise LabelError(f"{source.location}: score: expected a number, got {score_text!r}") from None
    try:
        attempt = int(attempt_text) if attempt_text is not None else None
    except ValueError:
        raise LabelError(f"{source.location}: attempt: expected a whole number, got {attempt_text!r}") from None
    return LabelInput(
        test=test,
        verdict=_cell(row.get("verdict")),
        score=score,
        grader=_cell(row.get("grader")),
        note=_cell(row.get("note")),
        by=_cell(row.get("by")),
        target=_cell(row.get("target")),
        attempt=attempt,
        labelled_at=_cell(row.get("labelled_at")),
        run=_cell(row.get("run")),
        source=source,
    )


def read_label_file(path: Path) -> tuple[list[LabelInput], list[str]]:
    """The labels of a CSV or JSONL file, with a deterministic event id per row (from the file's bytes
    and the line), so importing the same file again is a no-op."""
    name = str(path)
    try:
        data = read_regular(path)
    except OSError as exc:
        raise LabelError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    digest = sha256_hex(data)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LabelError(f"{name}: not UTF-8 text (byte {exc.start}); save the labels as UTF-8 CSV or JSONL") from None
    rows: list[tuple[int, dict[str, Any]]] = []
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
                raise LabelError(f"{name}:{number}: not JSON ({decode_problem(exc)})") from None
            except RecursionError:
                raise LabelError(f"{name}:{number}: nested too deep to read; a label is one flat JSON object") from None
            if not isinstance(row, dict):
                raise LabelError(f"{name}:{number}: expected a JSON object, got {type(row).__name__}")
            rows.append((number, row))
    elif path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        if not reader.fieldnames:
            raise LabelError(f"{name}: empty; a labels CSV begins with a header ({', '.join(COLUMNS)})")
        if "test_id" not in reader.fieldnames:
            raise LabelError(f"{name}:1: the header names no test_id column; expected {', '.join(COLUMNS)}")
        twice = sorted({c for c in reader.fieldnames if reader.fieldnames.count(c) > 1})
        if twice:  # a row would keep the last column's cell, silently
            raise LabelError(f"{name}:1: the header names {twice[0]} twice; name each column once")
        for row in reader:
            if None in row:
                raise LabelError(f"{name}:{reader.line_num}: more cells than the header has columns")
            if any(v for v in row.values()):
                rows.append((reader.line_num, row))
    else:
        raise LabelError(f"{name}: expected a .csv or .jsonl file")
    if not rows:
        raise LabelError(f"{name}: no labels in it (a label is a row with a test_id and a verdict or score)")
    items = [_row_input(row, SourceRef(file=name, line=number)) for number, row in rows]
    ids = [str(uuid.uuid5(_NAMESPACE, f"{digest}:{number}")) for number, _ in rows]
    return items, ids


def export_rows(labels: Iterable[Label]) -> Iterator[dict[str, Any]]:
    """Labels as import rows (the :data:`COLUMNS`), so an export can be imported elsewhere."""
    for lab in labels:
        d = lab.to_dict()
        yield {c: d[c] for c in COLUMNS}
