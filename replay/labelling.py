"""What a person labelling a run is shown, test by test: ``evalstore label RUN --next``.

For each result of a run: the question (the input messages, criteria and expected output as recorded, or
as the run's eval snapshot has them when the result recorded none: ``analysis/cases.py``),
the answer as the graders saw it (the last assistant message with every file block replaced by the text
its recorded conversion produced, under the same ``[[ file: PATH ]]`` header), and the run's verdicts,
which the command hides unless asked. Nothing here runs a converter or calls a judge: the text comes
from the conversions the run (or the run it regraded) recorded.

:func:`pending` is the queue: the results of the run that this person has not labelled yet (for this
grader, or for the whole answer), sorted by test id, so a second session continues where the first
stopped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from evalstore.replay.analysis.cases import CaseOrigin, RunCases
from evalstore.replay.analysis.per_test import key_label
from evalstore.replay.analysis.views import resolve_run
from evalstore.replay.content import FileBlock, ImageBlock, Message, TextBlock, candidate_message
from evalstore.replay.grading.answer import assemble, file_part, file_text, warning_line
from evalstore.replay.labels import LabelInput, default_labeller, label_run, labelled_keys
from evalstore.replay.material import ResultKey, TestMaterial, load_run
from evalstore.store import EventStore
from evalstore.store.errors import BlobNotFound
from evalstore.store.events import PreprocessingRecorded

NOT_CONVERTED = "no recorded conversion and the bytes are not UTF-8 text"


@dataclass(frozen=True)
class Verdict:
    grader: str
    verdict: str | None
    score: float | None


@dataclass
class Review:
    """One result as the person labelling it sees it."""

    key: ResultKey
    question: str
    """The input messages as text; when there is no case, why (``RunCases``: "no question recorded: ...")."""
    answer: str
    criteria: str | None = None
    expected: str | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    passed: bool | None = None
    """The run's test-level pass, None when the run did not score the test."""
    case_origin: CaseOrigin | None = None
    """Where the question came from (``RunCases``): the result's recorded case, or the run's eval snapshot
    (the result recorded none, as AgentV's result rows do not); None when there is no question."""

    @property
    def name(self) -> str:
        """``test``, or ``test@target#attempt`` when the result needs them to be told apart."""
        test_id, target, attempt = self.key
        return key_label((test_id, target or None, attempt))

    def label_input(self, **fields: Any) -> LabelInput:
        """A label for this very result: its test id, target and attempt given apart, never parsed."""
        test_id, target, attempt = self.key
        return LabelInput(test=test_id, target=target or None, attempt=attempt, **fields)


@dataclass
class Queue:
    run_id: str
    """The run given (a recorded run or a replay): its verdicts are the ones shown."""
    base_run_id: str
    """The run holding the transcripts, which the labels are recorded against."""
    by: str
    grader: str | None
    total: int
    """Results in the run."""
    keys: list[ResultKey]
    """The results still to label, by test id, target and attempt."""
    _store: EventStore
    _run: TestMaterials
    _base: TestMaterials
    _conversions: dict[tuple[ResultKey, str], str]
    _cases: RunCases

    def __iter__(self) -> Iterator[Review]:
        for key in self.keys:
            yield self.review(key)

    def review(self, key: ResultKey) -> Review:
        own = self._run.get(key)
        base = self._base.get(key) or own
        case_of = own if own is not None and own.case is not None else base
        found = self._cases.find(key, case_of.case[1] if case_of is not None and case_of.case is not None else None)
        case = found.case
        if case is None:
            question = f"({found.missing})"
        else:
            question = _question(case.input) or "(the test case has no input messages)"
        answer = self._answer(key, base)
        verdicts = [Verdict(name, v.verdict, v.score) for name, (_, v) in sorted((own.verdicts if own else {}).items())]
        scored = own.scored[1] if own is not None and own.scored is not None else None
        return Review(
            key=key,
            question=question,
            answer=answer,
            criteria=case.criteria if case else None,
            expected=_text(case.expected_output) if case and case.expected_output is not None else None,
            verdicts=verdicts,
            passed=scored.passed if scored else None,
            case_origin=found.origin,
        )

    def _answer(self, key: ResultKey, test: TestMaterial | None) -> str:
        if test is None or test.transcript is None:
            return "(no transcript)"
        t = test.transcript[1]
        if not t.messages_sha256:
            return (t.output_text or "").strip()
        messages = [Message.model_validate(m) for m in json.loads(self._store.get_blob(t.messages_sha256))]
        message = candidate_message(messages)
        if message is None:
            return (t.output_text or "").strip()
        if isinstance(message.content, str):
            return message.content.strip()
        parts: list[str] = []
        warnings: list[str] = []
        for block in message.blocks():
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, FileBlock):
                text, reason = self._file_text(key, block)
                if text is not None:
                    parts.append(file_part(block.path, text))
                else:
                    warnings.append(warning_line(block.path, block.media_type, reason))
            elif isinstance(block, ImageBlock):
                continue
        return assemble(parts, warnings).strip()  # shown to a labeller: the blank space around it says nothing

    def _file_text(self, key: ResultKey, block: FileBlock) -> tuple[str | None, str]:
        if block.sha256 is None:
            return None, block.reason or block.status or "not captured"
        digest = self._conversions.get((key, block.sha256))
        try:
            if digest is not None:
                return self._store.get_blob(digest).decode("utf-8"), ""  # stored as graders saw it
            return file_text(self._store.get_blob(block.sha256).decode("utf-8")), ""
        except UnicodeDecodeError:
            return None, NOT_CONVERTED
        except BlobNotFound:
            return None, "the captured bytes are not in the store"


TestMaterials = dict[ResultKey, TestMaterial]


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2)


def _question(messages: list[dict]) -> str:
    """The input messages as a person reads them: one per paragraph, roles named when there are several."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            text = "\n".join(
                b.get("text", "") if b.get("type") == "text" else f"[{b.get('type')}: {b.get('path', '')}]"
                for b in content
                if isinstance(b, dict)
            )
        else:
            text = _text(content) if content is not None else ""
        out.append(text if len(messages) == 1 else f"{m.get('role', '?')}: {text}")
    return "\n\n".join(out).strip()


def _conversions(store: EventStore, run_ids: list[str]) -> dict[tuple[ResultKey, str], str]:
    """(result, artifact digest) -> the output digest of its conversion; later runs' conversions win."""
    found: dict[tuple[ResultKey, str], str] = {}
    for run_id in run_ids:
        for stored in store.read_stream(run_id, types=[PreprocessingRecorded.type]):
            ev = stored.event
            assert isinstance(ev, PreprocessingRecorded)
            if ev.artifact_sha256 and ev.output_sha256:
                found[((ev.test_id, ev.target or "", ev.attempt), ev.artifact_sha256)] = ev.output_sha256
    return found


def pending(store: EventStore, run: str, *, by: str | None = None, grader: str | None = None) -> Queue:
    """The results of ``run`` that ``by`` (default: the OS user) has not labelled yet for ``grader``
    (default: the whole answer)."""
    run_id = resolve_run(store, run)
    base_id = label_run(store, run_id)
    who = (by or "").strip() or default_labeller()
    own = load_run(store, run_id)
    base = own if base_id == run_id else load_run(store, base_id)
    order = sorted(k for k in base.order if base.tests[k].transcript is not None) or sorted(own.order)
    done = labelled_keys(store, base_id, by=who, grader=grader)
    return Queue(
        run_id=run_id,
        base_run_id=base_id,
        by=who,
        grader=grader or None,
        total=len(order),
        keys=[k for k in order if k not in done],
        _store=store,
        _run=own.tests,
        _base=base.tests,
        _conversions=_conversions(store, [base_id] if base_id == run_id else [base_id, run_id]),
        _cases=RunCases([own.started, base.started], store.get_blob),
    )
