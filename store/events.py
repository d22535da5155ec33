"""The event catalogue: one pydantic class per event type, defined here and nowhere else.

Payloads are immutable (frozen) and carry only JSON-serialisable values. Large bodies (transcripts,
artifact bytes, rendered prompts, raw judge replies, converter output) live in blobs; events carry
their SHA-256 digests.

Each class declares ``schema_version``. When a payload's shape changes, bump the version and add an
``upcast_vN_vN+1`` static method that turns a stored dict of version N into version N+1; stored
events are never rewritten, they are upcast on read (see :func:`decode`).
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalstore.store.errors import UnknownEventType

RunKind = Literal["recorded", "imported", "replay"]
ExecutionStatus = Literal["ok", "quality_failure", "execution_error", "not_regradable"]
"""``not_regradable``: a replay had nothing to grade (an imported result with neither transcript nor
output); such a result is left out of the run's scores and of comparisons."""
Verdict = Literal["pass", "fail", "skip"]
Origin = Literal["graded", "imported", "carried"]


# Schemas are built on first use (defer_build): a command that reads few event types (an export, a
# compare) does not build the other classes' at import, a third of loading this module.
_CONFIG = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class DomainEvent(BaseModel):
    """Base class of every event payload."""

    model_config = _CONFIG

    type: ClassVar[str]
    schema_version: ClassVar[int] = 1


class FileSnapshot(BaseModel):
    """A file an eval depends on, captured as a blob when the run started."""

    model_config = _CONFIG

    role: str
    """What the file is to the suite: eval, tests, prompt, grader, converter, targets."""
    path: str
    """The path as resolved when the run started (absolute)."""
    ref: str | None = None
    """The reference as written in the eval file, e.g. ``file://prompts/judge.md``."""
    sha256: str | None
    """Digest of the bytes, stored as a blob; None when the file could not be read."""
    size: int | None = None


class Assertion(BaseModel):
    """One checked statement inside a verdict (AgentV's ``{text, passed, evidence}``)."""

    model_config = _CONFIG

    text: str
    passed: bool
    evidence: str | None = None


class SourceRef(BaseModel):
    """Where an imported fact came from: a file and, for JSONL, the 1-based line.

    A run's ``run_started`` names the imported path as it was given (absolute). Its other events name
    their file relative to that path, or not at all when it is that file: the path is the same for
    every event of the run and, at a hundred bytes and four or five events per test, was a tenth of
    an imported store. An absolute ``file`` (outside the imported path) is kept as it is.
    """

    model_config = _CONFIG

    file: str | None = None
    line: int | None = None

    @property
    def location(self) -> str:
        """``file:line`` (or the file alone), as error messages and listings name it."""
        return f"{self.file}:{self.line}" if self.line is not None else str(self.file)

    def relative_to(self, root: str) -> SourceRef:
        """This reference as an event of a run imported from ``root`` (absolute) records it."""
        if self.file is None or self.file == root:
            return SourceRef(line=self.line)
        path = PurePath(self.file)
        if path.is_absolute() and path.is_relative_to(root):
            return SourceRef(file=path.relative_to(root).as_posix(), line=self.line)
        return self

    def resolved(self, root: str | None) -> SourceRef:
        """The reference with its file absolute again, given the run's imported path."""
        if root is None or (self.file is not None and PurePath(self.file).is_absolute()):
            return self
        return SourceRef(file=root if self.file is None else str(PurePath(root) / self.file), line=self.line)


class RunStarted(DomainEvent):
    """First event of every run stream."""

    type: ClassVar[str] = "run_started"

    run_id: str
    kind: RunKind
    parent_run_id: str | None = None
    suite: str | None = None
    eval_path: str | None = None
    """The eval file as given by the user (absolute)."""
    eval_snapshot: list[FileSnapshot] = Field(default_factory=list)
    target_name: str | None = None
    target: dict[str, Any] | None = None
    """Target configuration with every secret left as its ``${{ ENV }}`` reference."""
    targets: dict[str, dict[str, Any]] | None = None
    """A run of several targets (AgentV's matrix; ``target_name`` and ``target`` are then None): each
    target's configuration by name, as ``target`` holds one."""
    threshold: float | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)
    """What a replay swapped, or the CLI options a run was recorded with."""
    source: SourceRef | None = None
    """For imports: the file or directory imported."""
    source_format: str | None = None
    source_started_at: str | None = None
    """For imports: when the AgentV run started (its results' earliest ``start_time``/``timestamp``, UTC)."""
    source_status: str | None = None
    """For imports: how the source run ended, when it did not succeed (an Inspect eval's ``cancelled``,
    ``error`` or ``started``); the import holds what it recorded. None when it succeeded or does not say."""
    tool_version: str
    shard: str | None = None
    experiment: str | None = None
    """The experiment a run evalstore made was given (``run --experiment``; a replay keeps its parent's):
    the ``experiment`` AgentV writes on each result row, ``default`` when None. None for imports, whose
    rows keep their own label (``TestScored.row_fields``)."""

    def target_config(self, name: str | None) -> dict[str, Any] | None:
        """The stored configuration of the target a result of this run was produced by."""
        if self.targets is not None:
            return self.targets.get(name or "")
        return self.target


class TestCaseRecorded(DomainEvent):
    """The resolved test case a result was produced for."""

    type: ClassVar[str] = "test_case_recorded"

    test_id: str
    target: str | None = None
    attempt: int = 1
    input: list[dict[str, Any]] = Field(default_factory=list)
    expected_output: Any = None
    criteria: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    graders: list[dict[str, Any]] = Field(default_factory=list)
    input_files: list[str] = Field(default_factory=list)
    conversation_id: str | None = None
    category: str | None = None
    """The labels AgentV writes on the test's result row (``conversation_id``, ``category``), for an
    export of a run evalstore made; None in cases recorded before they were kept, and in imports (whose
    results keep their row's own labels)."""


class TranscriptRecorded(DomainEvent):
    """What the target said and did: the messages live in a JSON blob."""

    type: ClassVar[str] = "transcript_recorded"

    test_id: str
    target: str | None = None
    attempt: int = 1
    messages_sha256: str | None
    """Blob holding the JSON list of messages (content blocks, tool calls); None if unknown."""
    output_text: str | None = None
    """The final answer as text, when the source gave one (AgentV's ``output`` string)."""
    token_usage: dict[str, Any] | None = None
    cost_usd: float | None = None
    duration_ms: float | None = None
    start_time: str | None = None
    end_time: str | None = None
    file_changes: str | None = None
    file_changes_lost_lines: int | None = None
    """For imports: how many lines at the end of ``file_changes`` the source did not keep (AgentV 4's run
    folder keeps a diff's first 20 lines only); a grader reading them cannot be regraded as it was."""
    workspace_path: str | None = None
    exit_code: int | None = None
    status: Literal["ok", "error", "timeout"] = "ok"
    error: str | None = None
    source: SourceRef | None = None
    source_record_sha256: str | None = None
    """Blob holding the source's own record of this result, as it was, for an export back to that format
    (an Inspect AI sample's JSON, its attachments kept apart in ``attachments``)."""
    attachments: list[dict[str, Any]] = Field(default_factory=list)
    """The source record's attachments, each ``{"id", "sha256", "size"}``: its content a blob of its own
    (Inspect AI keeps repeated content once per sample, named ``attachment://ID``)."""
    provider_attempt: int = 0
    """Which call of the target this is, counted from 0 (AgentV's provider ``attempt``, a cli command's
    ``{ATTEMPT}``): as many calls before it failed, each a ``target_call_failed`` event."""


class TargetCallFailed(DomainEvent):
    """A call of the target that failed and was tried again (AgentV's ``--max-retries``): how it ended, for
    audit. The call that ends the test, answered or failed, is its ``transcript_recorded``."""

    type: ClassVar[str] = "target_call_failed"

    test_id: str
    target: str | None = None
    attempt: int = 1
    provider_attempt: int
    """This call, counted from 0 (AgentV's provider ``attempt``, a cli command's ``{ATTEMPT}``)."""
    status: Literal["error", "timeout"]
    error: str | None = None
    exit_code: int | None = None
    stderr_tail: str | None = None
    duration_ms: float | None = None
    start_time: str | None = None
    end_time: str | None = None
    wait_ms: float
    """How long evalstore waited before calling again (AgentV's backoff: 1 s, then 2 s, ...)."""


class ArtifactStored(DomainEvent):
    """A file the agent produced (a ContentFile block), captured as bytes, or why it was not."""

    type: ClassVar[str] = "artifact_stored"

    test_id: str
    target: str | None = None
    attempt: int = 1
    path: str
    """The path exactly as the agent gave it."""
    media_type: str | None = None
    status: Literal["stored", "missing", "refused"] = "stored"
    sha256: str | None = None
    size: int | None = None
    reason: str | None = None


class WorkspaceEntry(BaseModel):
    """One path of a workspace snapshot: a file (bytes in the blob ``sha256``), a symlink (its target as
    written, never followed) or an empty folder."""

    model_config = _CONFIG

    path: str
    """Relative to the workspace, ``/``-separated."""
    kind: Literal["file", "symlink", "dir"] = "file"
    mode: int | None = None
    """Permission bits (``0o755`` for an executable script)."""
    size: int | None = None
    sha256: str | None = None
    target: str | None = None
    """For a symlink: where it points, as the link says."""


class WorkspaceSnapshotted(DomainEvent):
    """The agent's workspace as it was when the agent finished: a manifest whose files are blobs, so a
    functional grader (``pytest`` in the workspace) can be replayed without the agent."""

    type: ClassVar[str] = "workspace_snapshotted"

    test_id: str
    target: str | None = None
    attempt: int = 1
    root: str
    """The workspace folder as it was on the recording machine."""
    entries: list[WorkspaceEntry] = Field(default_factory=list)
    file_count: int = 0
    total_bytes: int = 0
    partial: bool = False
    """True when a limit left files out: graders that need the workspace cannot be replayed faithfully."""
    omitted: list[str] = Field(default_factory=list)
    """``path: reason`` of files a limit left out (the first 100)."""
    omitted_count: int = 0
    exclude: list[str] = Field(default_factory=list)
    """The exclude globs applied (excluded paths are not stored and do not make a snapshot partial)."""
    limits: dict[str, int] = Field(default_factory=dict)


class WorkspaceHookRan(DomainEvent):
    """One execution of a workspace hook (``before_all``, ``before_each``, ``after_each``, ``after_all``)."""

    type: ClassVar[str] = "workspace_hook_ran"

    hook: str
    test_id: str | None = None
    """None for ``before_all``/``after_all`` (the run's)."""
    target: str | None = None
    attempt: int = 1
    argv: list[str]
    cwd: str | None = None
    workspace_path: str | None = None
    exit_code: int | None = None
    duration_ms: float | None = None
    outcome: Literal["ok", "error", "timeout"] = "ok"
    error: str | None = None
    stdout_tail: str | None = None
    stderr_tail: str | None = None


class PreprocessingRecorded(DomainEvent):
    """One file→text conversion (or UTF-8 read) done for a grader."""

    type: ClassVar[str] = "preprocessing_recorded"

    test_id: str
    target: str | None = None
    attempt: int = 1
    path: str
    media_type: str | None = None
    artifact_sha256: str | None = None
    converter_type: str | None = None
    argv: list[str] | None = None
    script_sha256: str | None = None
    fingerprint: str
    """Digest of (artifact digest, converter argv, converter script digest): the reuse key."""
    output_sha256: str | None = None
    stderr: str | None = None
    status: Literal["converted", "read_as_text", "not_evaluable", "failed"]
    reason: str | None = None
    duration_ms: float | None = None
    reused_from: str | None = None
    """Event id of the earlier conversion this one reused, if any."""


class GraderCalled(DomainEvent):
    """One call of a grader's outside world: a judge request or a code-grader process."""

    type: ClassVar[str] = "grader_called"
    schema_version: ClassVar[int] = 3

    test_id: str
    target: str | None = None
    attempt: int = 1
    grader: str
    grader_type: str
    call: Literal["judge", "process"]
    request_sha256: str | None = None
    """Rendered judge messages (JSON) or the code grader's stdin payload."""
    reply_sha256: str | None = None
    """Raw judge reply body or the code grader's stdout."""
    stderr_sha256: str | None = None
    model: str | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)
    cache_key: str | None = None
    cache_hit: bool = False
    reused_from: str | None = None
    usage: dict[str, Any] | None = None
    latency_ms: float | None = None
    attempt_number: int = 1
    outcome: Literal["ok", "error", "timeout", "parse_error"] = "ok"
    error: str | None = None
    argv: list[str] | None = None
    script_sha256: str | None = None
    exit_code: int | None = None
    parse_attempt: int | None = None
    """A judge call's parse attempt (1-3; a repair request is attempt 1 of its own request), part of its
    cache key. Set since judge replies that did not parse are cached too: such a call is reused as well."""
    cwd: str | None = None
    """The folder a code-grader process ran in (absolute): AgentV records a script grader's request as
    ``{command, cwd}``. Since version 2."""
    batch_id: str | None = None
    """The provider's batch that answered this judge request (``replay --batch``; its
    ``judge_batch_submitted`` is in the same stream); None for a request sent on its own. Since version 3."""

    @staticmethod
    def upcast_v1_v2(payload: dict[str, Any]) -> dict[str, Any]:
        return payload  # a version-1 call did not record its folder: cwd stays unknown (None)

    @staticmethod
    def upcast_v2_v3(payload: dict[str, Any]) -> dict[str, Any]:
        return payload  # before batches every request was sent on its own: batch_id stays None


class VerdictRecorded(DomainEvent):
    """One grader's verdict on one test result."""

    type: ClassVar[str] = "verdict_recorded"

    test_id: str
    target: str | None = None
    attempt: int = 1
    grader: str
    grader_type: str
    score: float
    verdict: Verdict
    status: Literal["ok", "execution_error", "unscored"] = "ok"
    """``unscored``: no score and no error, left out of the test's score (``grading.errored.UNSCORED``)."""
    assertions: list[Assertion] = Field(default_factory=list)
    weight: float = 1.0
    required: bool | float = False
    min_score: float | None = None
    negate: bool = False
    details: dict[str, Any] | None = None
    evidence: list[str] = Field(default_factory=list)
    """Notes that explain the score: preprocessing warnings, stderr tails, judge replies."""
    cache_hit: bool = False
    origin: Origin = "graded"
    transcript_event_id: str | None = None
    preprocessing_event_ids: list[str] = Field(default_factory=list)
    grader_call_event_ids: list[str] = Field(default_factory=list)
    carried_from: str | None = None
    """For carried verdicts: the parent run's verdict event id."""
    source: SourceRef | None = None
    rendered_prompt_sha256: str | None = None
    """Blob holding AgentV's recorded grader request (``scores[].input``) as JSON: an import's; for an LLM
    grader evalstore ran, only where AgentV records another request than the one sent (the prompt as
    rendered, where the judge is sent it trimmed), else the export rebuilds it from the grader's calls."""
    grader_target: str | None = None
    token_usage: dict[str, Any] | None = None
    """For imports: the grader's own usage as the source recorded it (AgentV ``scores[].token_usage``)."""
    timing: dict[str, Any] | None = None
    """For imports: when the grader ran as the source recorded it (AgentV ``scores[]``' ``duration_ms``,
    ``started_at``, ``ended_at``, as written), which the export writes back."""
    source_name: str | None = None
    """For imports: the grader's name in the source, when two graders shared it and ``grader`` had to differ."""


class ScoreEdited(DomainEvent):
    """One edit of an imported score, as its source recorded it (Inspect AI's ``Score.history``): the
    value before and after, what the edit set, who made it, why and when. A result's edits of a score
    come in the order they were made, before the score's verdicts (which hold the score as it stands)."""

    type: ClassVar[str] = "score_edited"

    test_id: str
    target: str | None = None
    attempt: int = 1
    grader: str
    """The score's name in the source (a dict-valued score's verdicts are ``NAME/KEY``)."""
    edit: int
    """Its place among the score's edits: 1 for the first."""
    value: Any = None
    """The score's value after the edit, as the source writes it."""
    previous_value: Any = None
    """Before the edit; None when the edit added the score."""
    changes: dict[str, Any] = Field(default_factory=dict)
    """What the edit set (value, answer, explanation, reason, metadata), fields it left unchanged absent."""
    author: str | None = None
    reason: str | None = None
    edited_at: str | None = None
    provenance_metadata: dict[str, Any] = Field(default_factory=dict)
    source: SourceRef | None = None


class TestScored(DomainEvent):
    """The aggregate over a test's verdicts."""

    type: ClassVar[str] = "test_scored"

    test_id: str
    target: str | None = None
    attempt: int = 1
    score: float
    passed: bool
    status: ExecutionStatus
    threshold: float
    error: str | None = None
    origin: Origin = "graded"
    source: SourceRef | None = None
    produced_at: str | None = None
    """When the result was produced: for imports, when the source says (AgentV's row ``timestamp``); for
    runs and replays, when it was graded (kept by a run moved to another store, where the events' own
    ``recorded_at`` is the copy's). None in results recorded before runs set it."""
    row_fields: dict[str, str] = Field(default_factory=dict)
    """For imports: the source row's labels evalstore keeps without interpreting them (AgentV's
    ``category``, ``conversation_id``, ``experiment``, ``failure_stage``, ``failure_reason_code``), so
    an export gives them back; and a row of a test with trials keeps AgentV's ``trials``, ``aggregation``
    and ``cost_limited`` here too, each as the JSON text AgentV wrote (its key order kept)."""
    graders: list[str] | None = None
    """The graders whose verdicts (of this result, recorded before it) this score aggregates, in order;
    empty when none graded it. An attestation proves a result's verdicts are exactly these. None in
    results recorded before it was kept (their verdict sets cannot be proven complete)."""


class LineSkipped(DomainEvent):
    """An input line ``import --skip-bad`` left out, and why."""

    type: ClassVar[str] = "line_skipped"

    source: SourceRef
    reason: str


class LabelRecorded(DomainEvent):
    """A person's judgement of one test's answer: a human label.

    A label belongs to the transcript (the agent's answer), not to one grading of it: ``run_id`` is the
    run that holds the transcript (for a replay, the run it ultimately replayed), so the label applies to
    every regrade. Labels live in their own stream per transcript run (``lbl-<run id>``) and are never
    edited: a newer label by the same person for the same test and grader supersedes the older one, and
    both stay in the log.
    """

    type: ClassVar[str] = "label_recorded"

    run_id: str
    """The run holding the labelled transcript."""
    test_id: str
    target: str | None = None
    attempt: int = 1
    transcript_event_id: str | None = None
    by: str
    """Who labelled: the name the user gave (``--by``), else the OS user."""
    grader: str | None = None
    """The grader (criterion) the label is about; None for the answer as a whole."""
    verdict: Literal["pass", "fail"] | None = None
    score: float | None = None
    note: str | None = None
    labelled_at: str | None = None
    """When the person labelled, if the source says so (an import); else the event's recorded_at."""
    source: SourceRef | None = None
    """For imports: the file and line the label came from."""


class JudgeBatchIntended(DomainEvent):
    """A provider batch of judge requests a replay is about to submit (``replay --batch``), recorded before
    it submits: the batch carries ``intent_id`` (OpenAI's and Azure's batch ``metadata``), so a replay
    killed after submitting and before recording ``judge_batch_submitted`` finds that batch on ``--resume``
    instead of submitting a second one."""

    type: ClassVar[str] = "judge_batch_intended"

    intent_id: str
    provider: str
    judge_target: str
    model: str
    requests: int
    intended_at: float
    """Seconds since the epoch: a batch found on resume was created after this (less the clocks' skew)."""


class JudgeBatchSubmitted(DomainEvent):
    """A provider batch of judge requests a replay submitted (``replay --batch``), recorded before it waits
    for the batch: a replay stopped meanwhile is finished by ``--resume`` from this batch, never a second.
    Each request's ``custom_id`` is its judge cache key."""

    type: ClassVar[str] = "judge_batch_submitted"
    schema_version: ClassVar[int] = 2

    batch_id: str
    provider: str
    """``openai``, ``azure`` or ``anthropic``: which batch API holds it."""
    judge_target: str
    """The judge target's name (its configuration, and the key's variable, come from the targets)."""
    model: str
    requests: int
    input_file_id: str | None = None
    """The uploaded JSONL file (OpenAI and Azure)."""
    intent_id: str | None = None
    """The ``judge_batch_intended`` this batch fulfils. Since version 2."""

    @staticmethod
    def upcast_v1_v2(payload: dict[str, Any]) -> dict[str, Any]:
        return payload  # a version-1 batch was submitted with no intent recorded before it: intent_id stays None


class RunCompleted(DomainEvent):
    type: ClassVar[str] = "run_completed"

    tests: int
    passed: int
    failed: int
    errors: int
    mean_score: float | None = None
    not_regradable: int = 0
    """Results a replay could not grade (nothing to grade); not in ``tests`` nor the mean."""


class RunFailed(DomainEvent):
    type: ClassVar[str] = "run_failed"

    reason: str


class RunMoved(DomainEvent):
    """A run copied in from another store (``evalstore import BUNDLE``), appended after the events it
    brought. Their ``recorded_at`` is this log's (when they were copied), so the times the run had
    there, as that store listed them, are kept here; ``evalstore runs`` shows them."""

    type: ClassVar[str] = "run_moved"

    started_at: str
    """When the run started, as the store it came from listed it (an import's: when its AgentV run did)."""
    ended_at: str | None = None
    """When it completed or failed there; None for a run still open when it was moved."""
    from_tool_version: str | None = None
    """The evalstore that wrote the bundle."""


class KeyRegistered(DomainEvent):
    """A public key that signs this log's checkpoints, and its name; the private key is never stored."""

    type: ClassVar[str] = "key_registered"

    name: str
    key_id: str
    """8 hex digits: the signed-note key hash of name and key."""
    public_key: str
    """The verifier key as ``evalstore keys show`` prints it (``NAME+KEYHASH+BASE64``)."""
    algorithm: Literal["ed25519"] = "ed25519"


class CheckpointRecorded(DomainEvent):
    """A signed checkpoint of the log's first ``size`` events (written after them, so not among them)."""

    type: ClassVar[str] = "checkpoint_recorded"

    origin: str
    size: int
    root_hash: str
    """Hex RFC 6962 Merkle root over the hashes of events seq 1..size."""
    head_hash: str
    """Hash-chain hash of event ``seq = size``."""
    key_name: str
    key_id: str
    note: str
    """The signed note exactly as printed (C2SP signed-note text)."""


LOG_STREAM = "log"
"""The stream that holds key registrations and checkpoints: facts about the log, not about a run."""


EVENT_TYPES: dict[str, type[DomainEvent]] = {
    cls.type: cls
    for cls in (
        RunStarted,
        TestCaseRecorded,
        TranscriptRecorded,
        TargetCallFailed,
        ArtifactStored,
        WorkspaceSnapshotted,
        WorkspaceHookRan,
        PreprocessingRecorded,
        GraderCalled,
        VerdictRecorded,
        ScoreEdited,
        TestScored,
        LineSkipped,
        LabelRecorded,
        JudgeBatchIntended,
        JudgeBatchSubmitted,
        RunCompleted,
        RunFailed,
        RunMoved,
        KeyRegistered,
        CheckpointRecorded,
    )
}


def event_class(type_name: str) -> type[DomainEvent]:
    try:
        return EVENT_TYPES[type_name]
    except KeyError:
        raise UnknownEventType(f"unknown event type {type_name!r}; is this store newer than evalstore?") from None


def upcast(type_name: str, schema_version: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Bring a stored payload of an older schema version up to the current class, step by step."""
    cls = event_class(type_name)
    if schema_version > cls.schema_version:
        raise UnknownEventType(
            f"event type {type_name!r} has schema version {schema_version}, newer than this evalstore "
            f"understands ({cls.schema_version}); upgrade evalstore"
        )
    version = schema_version
    while version < cls.schema_version:
        step = getattr(cls, f"upcast_v{version}_v{version + 1}")
        payload = step(dict(payload))
        version += 1
    return payload


def decode(type_name: str, schema_version: int, payload: dict[str, Any]) -> DomainEvent:
    """A stored payload as its current event class."""
    return event_class(type_name).model_validate(upcast(type_name, schema_version, payload))


def decode_json(type_name: str, schema_version: int, payload_json: str) -> DomainEvent:
    """:func:`decode` from the stored JSON text: parsed by pydantic in one step when no upcast applies."""
    cls = event_class(type_name)
    if schema_version == cls.schema_version:
        return cls.model_validate_json(payload_json)
    return decode(type_name, schema_version, json.loads(payload_json))


def payload_fields(type_name: str, schema_version: int, payload: dict[str, Any]) -> dict[str, Any]:
    """A stored payload as ``decode(...).model_dump(mode="json")`` gives it, without building the model:
    upcast, then every field :func:`encode` left out at its default written back. For reading whole runs
    out again (exports), where validating what the store itself wrote is most of the cost. Nested models
    (``assertions``, ``source``) stay as stored: their defaults left out, their keys sorted. The default
    values are shared between calls: never mutate them."""
    defaults = current_defaults(type_name, schema_version)
    if defaults is None:  # an older version
        return {**_defaults(event_class(type_name)), **upcast(type_name, schema_version, payload)}
    return {**defaults, **payload}


def current_defaults(type_name: str, schema_version: int) -> dict[str, Any] | None:
    """The fields :func:`payload_fields` writes back into a payload of the type's current version (what
    it returns is ``{**current_defaults(...), **payload}``), or None for an older version, which needs an
    upcast. A loop over a run's payloads keeps it per type: the call per payload was half the cost."""
    cls, defaults = _CURRENT.get((type_name, schema_version), (None, None))
    if defaults is None or cls is not EVENT_TYPES.get(type_name):  # first seen, or an older version
        cls = event_class(type_name)
        if schema_version != cls.schema_version:
            return None
        defaults = _defaults(cls)
        _CURRENT[(type_name, schema_version)] = (cls, defaults)
    return defaults


def _defaults(cls: type[DomainEvent]) -> dict[str, Any]:
    return {
        name: info.get_default(call_default_factory=True)
        for name, info in cls.model_fields.items()
        if not info.is_required()
    }


_CURRENT: dict[tuple[str, int], tuple[type[DomainEvent], dict[str, Any]]] = {}
"""(type, current schema version) -> its class and the class's defaults, for payloads needing no
upcast: computed once (reading the class's version and fields per event was most of the cost)."""


def encode(event: DomainEvent) -> dict[str, Any]:
    """The payload dict that is stored (and hashed): fields left at their defaults are omitted, which
    keeps the log compact; decoding restores them. So a default may only change together with a
    schema_version bump and an upcast that writes the old default in."""
    return event.model_dump(mode="json", exclude_defaults=True)
