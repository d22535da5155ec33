"""Neutral records an AgentV reader yields: one shape whatever the source layout (JSONL, v4 run, v5 bundle).

The importer turns these into events; nothing here knows about the store beyond ``SourceRef``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from evalstore.store.events import SourceRef

FileRole = Literal["answer", "content_file", "sidecar"]
Span = tuple[int, int, int]
"""A part of a JSONL file, whole lines: (its first byte, the byte after it, the number of its first line)."""
VerdictName = Literal["pass", "fail", "skip"]


@dataclass
class ImportedFile:
    """A file a result refers to: the agent's answer, a ContentFile it produced, or an AgentV sidecar."""

    path: str
    """The path exactly as the source referenced it."""
    resolved: Path | None
    """Absolute path when the file exists on disk, else None (missing, remote URL)."""
    media_type: str | None
    role: FileRole
    refused: str | None = None
    """Why the file was not read although it exists (outside every folder the import may read)."""
    allow_with: str | None = None
    """What would let an import read a refused file: ``--eval FILE`` (the eval file whose folder its agent ran
    in), ``--files-root`` or the size cap's variable (``file_access.MAX_FILE_BYTES_ENV``)."""


@dataclass
class ImportedVerdict:
    """One grader's recorded result (an AgentV ``scores[]`` entry or a grading.json component)."""

    name: str
    type: str
    score: float
    verdict: VerdictName
    weight: float = 1.0
    assertions: list[dict[str, Any]] = field(default_factory=list)
    """``{text, passed, evidence}`` items; evidence may be None."""
    details: dict[str, Any] | None = None
    rendered_prompt: dict[str, Any] | None = None
    """v4 ``scores[].input`` as it was: ``{userPrompt, systemPrompt}`` or ``{command, cwd}``."""
    grader_target: str | None = None
    token_usage: dict[str, Any] | None = None
    timing: dict[str, Any] | None = None
    """v4 ``scores[]``' :data:`TIMING_KEYS`, those it has, as written."""
    reason: str | None = None


TIMING_KEYS = ("duration_ms", "started_at", "ended_at")
"""A v4 ``scores[]`` entry's timing, in the order AgentV writes it (last in the entry)."""


@dataclass
class ImportedTest:
    """One (test, target, attempt) result as AgentV recorded it."""

    test_id: str
    target: str | None
    attempt: int
    suite: str | None
    score: float
    passed: bool | None
    execution_status: str | None
    error: str | None
    input: list[dict[str, Any]]
    expected_output: Any
    criteria: str | None
    metadata: dict[str, Any]
    messages: list[dict[str, Any]] | None
    """Transcript messages in the content-model shape (replay/content.py); None without a transcript."""
    output_text: str | None
    token_usage: dict[str, Any] | None
    cost_usd: float | None
    duration_ms: float | None
    start_time: str | None
    end_time: str | None
    file_changes: str | None
    workspace_path: str | None
    files: list[ImportedFile]
    verdicts: list[ImportedVerdict]
    source: SourceRef
    raw_row: dict[str, Any]
    """The source row minus the bulky parts already held above (trace, input, output, scores...)."""
    row_fields: dict[str, str] = field(default_factory=dict)
    """The row's labels kept as they are, and its trials' fields as the JSON text AgentV wrote
    (``rows.kept_row_fields``)."""
    warnings: list[str] = field(default_factory=list)
    """What the import noticed about this result and left out (``ImportOutcome.warnings``)."""
    file_changes_lost_lines: int | None = None
    """Lines at the end of ``file_changes`` the source did not keep."""


@dataclass
class SkippedLine:
    """A line (or result) left out under ``--skip-bad``, and why."""

    source: SourceRef
    reason: str


@dataclass
class ImportSource:
    """A readable AgentV result source; ``iter_tests`` streams it afresh on every call."""

    format: str
    root: Path
    suite: str | None
    eval_path_hints: list[Path]
    """Candidate original eval files, most likely first; relative ones are relative to where AgentV ran."""
    source_digest: str
    """SHA-256 over the source bytes (every file of a run directory, with its relative path)."""
    _iterate: Callable[[bool, Span | None], Iterator[ImportedTest | SkippedLine]] = field(repr=False)
    lines: Path | None = None
    """The JSONL file the results are read from, a line at a time (a results file, a run's index), when
    reading a part of it (:meth:`iter_tests` with a span) gives the results of that part; None for a
    source read otherwise (a bundle's folders)."""
    result_eval_hints: Callable[[], Iterator[tuple[str | None, list[Path]]]] | None = field(default=None, repr=False)
    """Each result's test id and the eval files it names (the source eval first, then its bundled copy),
    read afresh on every call: a run may cover several eval files, each test has its own bundled copy."""
    planned: int | None = None
    """The results an AgentV run set out to make (its ``benchmark.json``'s ``planned_test_count``: tests times
    targets, written before the first test runs); a run holding fewer did not finish, as AgentV's dashboard
    reads it (``results.length < planned_test_count``: resumable)."""

    def unfinished(self, results: int) -> str | None:
        """A warning when the run holds fewer than the results it planned; None when it finished."""
        if self.planned is None or results >= self.planned:
            return None
        return (
            f"{self.root}: the AgentV run planned {self.planned} test runs and holds {results}: it did not finish "
            "(stopped, or still running); the import is marked interrupted at source, and "
            "`agentv eval run EVAL --output DIR --resume` runs the rest"
        )

    def iter_tests(self, skip_bad: bool = False, span: Span | None = None) -> Iterator[ImportedTest | SkippedLine]:
        """The results, or those of one part of :attr:`lines` (``wire.line_spans``)."""
        return self._iterate(skip_bad, span)
