"""What every grader gets and gives back.

A grader reads a :class:`GradingContext` and returns a :class:`GraderResult`. Everything it does to the
outside world (a converter run, a judge call, a code-grader process) it records through
``ctx.recorder`` as events; it never touches the store directly and issues no SQL. The engine
(``evalstore.replay.grading.engine``) applies ``negate``, turns results into ``VerdictRecorded`` events and scores the test.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from evalstore.replay.content import Message
from evalstore.replay.processes.warm import WarmPool
from evalstore.replay.trace import Trace
from evalstore.store.events import Assertion, DomainEvent, GraderCalled, PreprocessingRecorded, WorkspaceSnapshotted

if TYPE_CHECKING:  # the eval file's models only name types here: `show` and `compare` need not load them
    from evalstore.replay.evalfile.specs import EvalSuite, EvalTest
    from evalstore.replay.grading.judge.batches import JudgeBatches
    from evalstore.replay.targetsfile.redaction import SecretMask


class Recorder(Protocol):
    """Where grading writes events and blobs, and looks up what earlier work it may reuse.

    Events and blobs are buffered and become durable together, atomically, when the engine
    flushes a test. Implementations: ``evalstore.replay.recording.MemoryRecorder`` (in-memory grading) and
    ``evalstore.replay.recording.StoreRecorder`` (the event store).
    """

    def put_blob(self, data: bytes) -> str:
        """Keep these bytes with the next flush; returns their sha256."""

    def get_blob(self, sha256: str) -> bytes:
        """Bytes of a stored or buffered blob; raises ``evalstore.store.errors.BlobNotFound``."""

    def record(self, event: DomainEvent, event_id: str | None = None) -> str:
        """Buffer an event; returns its event id (for verdict links): ``event_id`` when given (an event a
        grader recorded into its own buffer first, ``grading/overlap.py``), else a new one."""

    def find_conversion(self, fingerprint: str) -> tuple[str, PreprocessingRecorded] | None:
        """An earlier successful conversion with this fingerprint: (event id, event)."""

    def find_judge_call(self, cache_key: str) -> tuple[str, GraderCalled] | None:
        """An earlier successful judge call with this cache key: (event id, event)."""

    def find_process_call(self, cache_key: str) -> tuple[str, GraderCalled] | None:
        """An earlier successful code-grader execution with this cache key: (event id, event)."""


@dataclass
class TranscriptInfo:
    """What the target produced for one test, as graders see it."""

    messages: list[Message]
    output_text: str | None = None
    """The final answer text if the source recorded one (imports); else derived from messages."""
    token_usage: dict[str, Any] | None = None
    cost_usd: float | None = None
    duration_ms: float | None = None
    start_time: str | None = None
    end_time: str | None = None
    file_changes: str | None = None
    workspace_path: str | None = None
    event_id: str | None = None
    """The TranscriptRecorded event this was read from."""
    error: str | None = None
    """The target's error, when a result that failed is graded all the same (an errored Inspect sample,
    ``inspect.graded_despite_error``): a code grader's and a prompt script's payload ``error``, an LLM grader's
    ``{{error}}`` and its built-in prompt's ``error`` section."""
    missing: str | None = None
    """Why no transcript is available (an import without one): graders that need it error out."""
    traced: bool = True
    """False for a stored result whose source kept no messages, only the answer text: there is no trace
    (``Trace.recorded``)."""
    snapshot: tuple[str, WorkspaceSnapshotted] | None = None
    """(event id, event) of the stored workspace snapshot, when grading a stored test: a code grader
    gets a private copy of it as its workspace."""
    workspace_mask: SecretMask | None = None
    """With ``workspace_path`` (a live run): the mask the agent's files were stored through
    (``TargetOutcome.output_mask``). A process working in the live workspace reads them unmasked, so what
    it prints passes this mask too (:func:`process_output_mask`)."""


def process_output_mask(transcript: TranscriptInfo, env: dict[str, str]) -> SecretMask:
    """What a grading process's output (a code grader's, a prompt script's) must not carry into the store:
    the secrets of its environment (``redaction.environment_mask``), and those the agent's files were
    masked for when it works in the live workspace (a snapshot's copy is masked already)."""
    from evalstore.replay.targetsfile.redaction import environment_mask

    mask = environment_mask(env)
    return mask | transcript.workspace_mask if transcript.workspace_mask else mask


PASS_SCORE = 0.8
"""AgentV's ``scoreToVerdict``: a grader's own verdict passes at this score (``min_score`` does not move it;
it gates a required grader's test score, ``grading/scoring.py``)."""


def score_to_verdict(score: float) -> Literal["pass", "fail"]:
    return "pass" if score >= PASS_SCORE else "fail"


@dataclass
class GradeOptions:
    no_cache: bool = False
    """Call judges and converters again instead of reusing recorded replies and conversions."""
    judge_target: str | None = None
    judge_model: str | None = None
    threshold: float | None = None
    file_references: bool = False
    """The agent under test reads files itself (:func:`reads_files_itself`): a judge's ``{{input}}`` names
    an input file (``<file: path="...">``) instead of holding its text, as AgentV renders it then."""
    environment: dict[str, str] | None = None
    """The environment code graders start from (:func:`processes.children.child_environment` of this
    process's), read once by the run or replay; None: read for each test."""
    process_slots: threading.Semaphore | None = None
    """Held by each code-grader process while it runs (:func:`process_slots`): tests graded at once and
    their graders overlapping (``grading/overlap.py``) run no more processes than it allows."""
    warm: WarmPool | None = None
    """The warm interpreters Python code graders and converters are forked from (:mod:`processes.warm`),
    opened and closed by the run, replay or assert; None (``--no-warm``): every process is spawned."""
    batch: JudgeBatches | None = None
    """``replay --batch``: judge requests noted for a batch (collecting), or answered from one."""


def process_slots(concurrency: int) -> threading.Semaphore:
    """Code-grader processes at a time for a run or replay grading ``concurrency`` tests at once: as many
    as the tests (one each, as without overlapping graders) or the machine's cores, whichever is more. A
    test's waiting graders then use the cores a one-test replay would leave idle, and a many-test replay
    on a small machine does not run three processes a core."""
    return threading.BoundedSemaphore(max(concurrency, os.cpu_count() or 1))


AGENT_PROVIDERS = frozenset(
    {
        "cli",
        # every spelling targets.ts resolves to one of AgentV's agent kinds
        *("codex-cli", "copilot", "copilot_sdk", "pi", "claude-code", "cc-mirror"),
        "codex",
        "copilot-sdk",
        "copilot-cli",
        "pi-coding-agent",
        "pi-cli",
        "claude",
        "claude-cli",
        "claude-sdk",
        "vscode",
        "vscode-insiders",
    }
)
"""AgentV 4.42's ``usesFileReferencePrompt``: the cli provider and its agent provider kinds."""


def reads_files_itself(provider: object) -> bool:
    """Whether a target of this provider is one AgentV gives file inputs by reference."""
    return isinstance(provider, str) and provider.strip().lower() in AGENT_PROVIDERS


def no_wait() -> None:
    """Graders graded alone: nothing starts while one waits."""


@dataclass
class GradingContext:
    suite: EvalSuite
    test: EvalTest
    transcript: TranscriptInfo
    recorder: Recorder
    target: str | None = None
    attempt: int = 1
    options: GradeOptions = field(default_factory=GradeOptions)
    judges: Any = None
    """``evalstore.replay.grading.judge.JudgePool`` (targets, HTTP client, concurrency limit), when LLM graders run."""
    shared: dict[Any, Any] = field(default_factory=dict)
    """What the graders of this test would each compute alike, kept by the first (each grader prepares
    after the ones before it, ``grading/overlap.py``): e.g. the stdin payload code graders with the same
    ``config`` and answer are sent."""
    waiting: Callable[[], None] = no_wait
    """Called by a grader just before it waits on the outside world (its process, its judge): the test's
    next grader may start meanwhile (``grading/overlap.py``)."""
    test_waiting: Callable[[], None] = no_wait
    """Called just before the test first waits on the outside world: by ``waiting`` (``grading/overlap.py``),
    and by a converter about to run its process (which calls no ``waiting``: the next grader waits for its
    conversion). A replay grades its next test meanwhile (``processes.workers.run_handing_off``), and
    grades tests that never wait one after another on one thread."""
    question: str | None = None
    """A conversation's grading (``grading/conversation.py``): what an LLM grader shows as the question
    (``{{input}}``) instead of the test's input messages, the conversation written ``role: content``;
    there is then no reference answer (AgentV's turn and conversation graders get none)."""

    def trace(self) -> Trace:
        """The test's recorded trace (``replay/trace.py``), built once for all its graders."""
        kept = self.shared.get("trace")
        if kept is None:
            from evalstore.replay.grading.answer import text_answer

            transcript = self.transcript
            answer = text_answer(transcript.messages, transcript.output_text)
            provenance = {"target": self.target} if self.target else {}
            kept = self.shared["trace"] = Trace.of(
                transcript.messages,
                self.test.input,
                token_usage=transcript.token_usage,
                cost_usd=transcript.cost_usd,
                duration_ms=transcript.duration_ms,
                start_time=transcript.start_time,
                end_time=transcript.end_time,
                final_output=answer,
                metadata={**provenance, "eval_case_id": self.test.id},
                recorded=transcript.traced,
            )
        return kept


@dataclass
class GraderResult:
    score: float
    verdict: str  # pass | fail | skip
    status: str = "ok"  # ok | execution_error | unscored (grading.errored.UNSCORED)
    assertions: list[Assertion] = field(default_factory=list)
    details: dict[str, Any] | None = None
    evidence: list[str] = field(default_factory=list)
    cache_hit: bool = False
    preprocessing_event_ids: list[str] = field(default_factory=list)
    grader_call_event_ids: list[str] = field(default_factory=list)
    grader_target: str | None = None
    rendered_prompt_sha256: str | None = None
    """An LLM grader's request as AgentV records it (``scores[].input``), where that is not the one sent:
    AgentV records the prompt as rendered and sends it trimmed (``VerdictRecorded.rendered_prompt_sha256``)."""
    scored_by_agentv: bool = False
    """An execution error AgentV 4.42.4 scores 0 with a ``fail`` verdict instead of skipping the grader: its
    code grader's every failure (a crash, a timeout, a non-zero exit with stderr), a grader that throws.
    evalstore leaves the grader out of the score all the same; the test is AgentV's quality failure, not its
    execution error (``failures.GRADER_SCORED``): it neither stops its dependents nor counts for
    ``fail_on_error``."""


class GraderThrew(Exception):
    """What an AgentV grader throws where evalstore's grader meets the same condition (no grader provider):
    the engine records it as AgentV's orchestrator records a grader that threw (``grader_threw``), and a
    composite's member that throws makes the composite throw, as AgentV's ``Promise.all`` does. ``why`` is
    evalstore's own account (which target is missing), kept in the verdict's evidence."""

    def __init__(self, message: str, why: str | None = None) -> None:
        super().__init__(message)
        self.why = why


class Grader(Protocol):
    def grade(self, ctx: GradingContext) -> GraderResult: ...
