"""Resolved configuration models: what an eval file means once parsed.

``evalstore.replay.evalfile.parser`` builds these from YAML; graders, the runner and replay consume them. They are the
one definition of a grader's configuration, and they are what ``TestCaseRecorded.graders`` stores
(``model_dump(mode="json")``), so a stored run can be regraded with exactly what it was graded with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalstore.replay.content import Message


class _Spec(BaseModel):
    # Schemas built on first use, as the events' are (store/events.py): building the eleven grader types'
    # and the rest at import was a tenth of an unchanged replay's start, which validates few of them.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ConverterSpec(_Spec):
    """A configured file→text converter for one media type."""

    type: str
    """The type as written (alias or MIME type)."""
    media_type: str
    """The normalized MIME type it applies to."""
    command: list[str]
    """argv; the last element already resolved to an absolute path through the search roots."""
    timeout: float = 60.0
    max_output_bytes: int = 5_000_000


class RubricItem(_Spec):
    id: str
    outcome: str
    weight: float = 1.0
    required: bool = True
    operator: Literal["correctness", "contradiction"] | None = None
    min_score: float | None = None
    score_ranges: list[dict[str, Any]] | None = None
    """``[{score_range: [lo, hi], outcome}]`` covering 0..10, after shorthand expansion."""
    required_written: bool = False
    """Whether the eval wrote ``required`` (a checklist item is required unless it says not; a score-range
    item is gated at 10/10 only when it says ``required: true`` and has no ``min_score``, as in AgentV)."""


class _GraderSpec(_Spec):
    name: str
    """Unique within a test: the configured ``name``, else the type, suffixed -2, -3 on collision."""
    id: str | None = None
    """The assertion's ``id`` as written (AgentV keeps it with the grader: a code or LLM grader's
    ``config`` carries it too); it names the assertion, it does not change how it grades."""
    weight: float = 1.0
    required: bool | float = False
    min_score: float | None = None
    negate: bool = False


class LlmGraderSpec(_GraderSpec):
    type: Literal["llm-grader"] = "llm-grader"
    declared_type: str = "llm-grader"
    """What the YAML said: llm-grader, rubrics, rubric, or implicit (criteria only)."""
    prompt: str | None = None
    """Inline prompt text, or None for the default template."""
    prompt_file: str | None = None
    """Absolute path of a ``file://`` prompt, resolved through the search roots."""
    prompt_ref: str | None = None
    """The ``file://`` reference as written."""
    prompt_command: list[str] | None = None
    """An executable prompt template (``prompt: {command: [bun, run, grader.ts], config}``): argv, its last
    element the script (absolute). It runs in the script's folder when the grader grades, gets the eval
    context as JSON on stdin, and what it prints, trimmed, is the template."""
    prompt_config: dict[str, Any] | None = None
    """``prompt.config``: the template script's ``config``."""
    rubrics: list[RubricItem] = Field(default_factory=list)
    target: str | None = None
    """Name of the judge target (per-grader ``target:``)."""
    preprocessors: list[ConverterSpec] = Field(default_factory=list)
    """Effective converters for this grader: suite-level merged with the grader's overrides."""
    config: dict[str, Any] | None = None
    temperature: float | None = None
    """The judge's temperature for this grader (0..2), sent when the grader names its own ``target``, as
    AgentV sends it (with no ``target`` AgentV grades with its default grader and leaves it unused)."""
    max_steps: int | None = None
    """Tool-use steps (1..50) for an agent grading in AgentV's agent modes; a Chat Completions judge
    takes one step, in AgentV too."""


class CodeGraderSpec(_GraderSpec):
    type: Literal["code-grader"] = "code-grader"
    command: list[str]
    """argv; a string command in YAML becomes ``["sh", "-c", command]``."""
    script: str | None = None
    """Absolute path of the script the command runs (resolved through the search roots), for digests."""
    cwd: str
    timeout: float = 60.0
    config: dict[str, Any] | None = None
    preprocessors: list[ConverterSpec] = Field(default_factory=list)
    """Empty: the grader reads AgentV's text answer, the raw files in ``files``. An evalstore extension:
    a grader with ``preprocessors:`` of its own reads the answer with its files converted, by the suite's
    converters merged with its own."""
    target_max_calls: int | None = None
    """``target: {max_calls: N}``: the grader may call its judge target N times through the target proxy;
    None: no proxy."""
    target: str | None = None
    """``target: {name: ...}``: the judge target the proxy forwards to (else the run's grader target)."""
    cache: bool = True
    """Reuse a recorded execution when the process's inputs are byte-identical (``cache: false`` for a
    grader that is not deterministic); see ``evalstore.replay.grading.graders.process_cache``."""
    warm: bool = True
    """A Python script may run in a child forked from a warm interpreter (``evalstore.replay.processes.warm``);
    ``warm: false``: always a process of its own."""
    custom_type: str | None = None
    """A custom assertion (``.agentv/assertions/NAME.ts``, run as ``bun run``): the type it was named by."""


DETERMINISTIC_TYPES = (
    "contains",
    "contains-any",
    "contains-all",
    "icontains",
    "icontains-any",
    "icontains-all",
    "starts-with",
    "ends-with",
    "regex",
    "equals",
    "is-json",
)


class AssertionSpec(_GraderSpec):
    type: Literal[
        "contains",
        "contains-any",
        "contains-all",
        "icontains",
        "icontains-any",
        "icontains-all",
        "starts-with",
        "ends-with",
        "regex",
        "equals",
        "is-json",
    ]
    value: Any = None
    flags: str | None = None
    preprocessors: list[ConverterSpec] = Field(default_factory=list)
    """An evalstore extension: converters this assertion asked for (``preprocessors:`` of its own), merged
    over the suite's; it then reads the answer with its files converted. Empty: AgentV's text answer."""


ArgsMatch = Literal["exact", "superset", "subset", "ignore"] | list[str]
"""How a tool call's arguments are compared with an expected item's ``args``: deep equality, the expected
keys present, no key beyond the expected, not at all, or only the listed (dot-path) fields."""


class ExpectedToolCall(_Spec):
    """One ``expected`` item of a tool-trajectory grader."""

    tool: str
    args: Literal["any"] | dict[str, Any] | None = None
    """None: no constraint (as ``any``)."""
    max_duration_ms: float | None = None
    """A latency assertion on the matched call."""
    args_match: ArgsMatch | None = None
    """This item's matcher, over the grader's ``args_match``."""


class ToolTrajectorySpec(_GraderSpec):
    """``tool-trajectory``: the agent's tool calls against minimums (``any_order``) or an expected list."""

    type: Literal["tool-trajectory"] = "tool-trajectory"
    mode: Literal["any_order", "in_order", "exact", "subset", "superset"]
    minimums: dict[str, float] | None = None
    expected: list[ExpectedToolCall] | None = None
    args_match: ArgsMatch | None = None
    """The default matcher of the items (``exact`` when neither says)."""


class LatencySpec(_GraderSpec):
    """``latency``: the target's duration at most ``threshold`` ms."""

    type: Literal["latency"] = "latency"
    threshold: float


class CostSpec(_GraderSpec):
    """``cost``: the target's cost at most ``budget`` USD."""

    type: Literal["cost"] = "cost"
    budget: float


class TokenUsageSpec(_GraderSpec):
    """``token-usage``: the target's input, output and total (input + output + cached) tokens."""

    type: Literal["token-usage"] = "token-usage"
    max_total: float | None = None
    max_input: float | None = None
    max_output: float | None = None


class ExecutionMetricsSpec(_GraderSpec):
    """``execution-metrics``: each threshold set is one check; the score is the share that pass."""

    type: Literal["execution-metrics"] = "execution-metrics"
    max_tool_calls: float | None = None
    max_llm_calls: float | None = None
    max_tokens: float | None = None
    max_cost_usd: float | None = None
    max_duration_ms: float | None = None
    target_exploration_ratio: float | None = None
    exploration_tolerance: float | None = None


class SkillTriggerSpec(_GraderSpec):
    """``skill-trigger``: whether the agent invoked (or, with ``should_trigger: false``, did not) a skill."""

    type: Literal["skill-trigger"] = "skill-trigger"
    skill: str
    should_trigger: bool = True


class FieldSpec(_Spec):
    """One field of a field-accuracy grader."""

    path: str
    """Dot path with array indexes (``line_items[0].amount``)."""
    match: Literal["exact", "numeric_tolerance", "date"]
    required: bool = True
    weight: float = 1.0
    tolerance: float | None = None
    relative: bool = False
    formats: list[str] | None = None


class FieldAccuracySpec(_GraderSpec):
    """``field-accuracy``: the answer's JSON fields against the expected output's."""

    type: Literal["field-accuracy"] = "field-accuracy"
    fields: list[FieldSpec]
    aggregation: Literal["weighted_average", "all_or_nothing"] = "weighted_average"


class AggregatorSpec(_Spec):
    """How a composite grader combines its members: ``weighted_average`` (``weights`` by member name),
    ``threshold`` (the share of members that pass, passing at ``threshold``), a ``code-grader`` script
    (``path``, run in ``cwd``), or an ``llm-grader`` judge (``prompt``, the template)."""

    type: Literal["weighted_average", "threshold", "code-grader", "llm-grader"]
    weights: dict[str, float] | None = None
    threshold: float | None = None
    path: str | None = None
    cwd: str | None = None
    prompt: str | None = None
    """The ``llm-grader`` aggregator's template, as AgentV 4.42.4 takes it: the inline text, and for a
    ``file://PATH`` reference the text ``PATH`` itself (its loader keeps the reference, and its aggregator
    sends what it keeps; the file is never read)."""
    prompt_file: str | None = None
    """The file a ``file://`` prompt names, found through the search roots (AgentV refuses the eval when it
    is not found); its text is not the prompt."""


class UnknownTypeSpec(_GraderSpec):
    """A grader whose type AgentV 4.42.4's registry does not hold (``type: Contains``, ``type: script``, a
    typo): AgentV's parser keeps it as a custom type and its registry throws when the grader runs, which
    the orchestrator records as a score of 0, ``fail`` (``Grader 'NAME' failed: Unknown grader type: ...``),
    counted in the test's mean. Graded here the same way (``grading/graders/unknown.py``)."""

    type: Literal["unknown-type"] = "unknown-type"
    written_type: str
    """The type AgentV looked up (``_`` read as ``-``, as its parser does; a turn's as written), which its
    result names as the grader's type."""
    registered: list[str]
    """AgentV's registered types when the eval was read: its built-in ones, then the custom assertions it
    discovered above the eval file, in its order (its error lists them)."""

    @property
    def message(self) -> str:
        """What AgentV's registry throws (``GraderRegistry.create``)."""
        return f'Unknown grader type: "{self.written_type}". Registered types: {", ".join(self.registered)}'


class CompositeSpec(_GraderSpec):
    """``composite``: member graders (any type, composites too) and their aggregator."""

    type: Literal["composite"] = "composite"
    assertions: list[GraderSpec]
    aggregator: AggregatorSpec


TRACE_TYPES = ("tool-trajectory", "latency", "cost", "token-usage", "execution-metrics", "skill-trigger")
"""Graders of what the agent did: they read the recorded trace (``replay/trace.py``), not the answer."""


def result_type(spec: GraderSpec) -> str:
    """The type a grader's result names, as AgentV writes it (``scores[].type``): an unknown type's as
    looked up (``Contains``), every other grader's own."""
    return spec.written_type if isinstance(spec, UnknownTypeSpec) else spec.type


def within(spec: GraderSpec) -> Iterator[GraderSpec]:
    """A grader, then, for a composite, its members at any depth: each is named by its own ``name``, as its
    result is shown in the composite's (``details.scores``, its ``[name]`` assertions)."""
    yield spec
    if isinstance(spec, CompositeSpec):
        for member in spec.assertions:
            yield from within(member)


def judge_askers(spec: GraderSpec) -> Iterator[tuple[str, str | None]]:
    """Who in a grader asks a judge, at any depth: each LLM grader, by its name, with the judge target it
    names (its ``target:``), and each composite whose aggregator is an ``llm-grader``, as ``NAME
    (aggregator)``, with none (AgentV asks the test's default grader, ``context.graderProvider``)."""
    for g in within(spec):
        if isinstance(g, LlmGraderSpec):
            yield g.name, g.target
        elif isinstance(g, CompositeSpec) and g.aggregator.type == "llm-grader":
            yield f"{g.name} (aggregator)", None


def counts_calls(spec: GraderSpec) -> bool:
    """Whether a grader (or a member of it) counts the agent's calls in the trace: with no trace recorded
    it has nothing to count (``Trace.recorded``)."""
    for g in within(spec):
        if isinstance(g, (ToolTrajectorySpec, SkillTriggerSpec)):
            return True
        if isinstance(g, ExecutionMetricsSpec) and any(
            limit is not None for limit in (g.max_tool_calls, g.max_llm_calls, g.target_exploration_ratio)
        ):
            return True
    return False


GraderSpec = Annotated[
    LlmGraderSpec
    | CodeGraderSpec
    | AssertionSpec
    | ToolTrajectorySpec
    | LatencySpec
    | CostSpec
    | TokenUsageSpec
    | ExecutionMetricsSpec
    | SkillTriggerSpec
    | FieldAccuracySpec
    | CompositeSpec
    | UnknownTypeSpec,
    Field(discriminator="type"),
]
# CompositeSpec's own forward reference (GraderSpec, defined after it) is resolved from this module when
# its schema is first built: model_rebuild() here would build it, and every grader type's, at import.


class WorkspaceEnv(_Spec):
    required_commands: list[str] = Field(default_factory=list)
    required_python_modules: list[str] = Field(default_factory=list)


DEFAULT_SNAPSHOT_EXCLUDES = (".git", "node_modules", "__pycache__", ".venv", ".pytest_cache", ".mypy_cache")
"""Left out of a workspace snapshot unless ``workspace.snapshot.exclude`` says otherwise: VCS internals,
installed dependencies and caches, which a grader rebuilds and which would dwarf the sources."""


class SnapshotSpec(_Spec):
    """``workspace.snapshot``: what of the agent's finished workspace is stored."""

    max_bytes: int = 50_000_000
    """Total bytes of file contents; files beyond it are left out and the snapshot marked partial."""
    max_files: int = 5_000
    max_file_bytes: int = 20_000_000
    exclude: list[str] = Field(default_factory=lambda: list(DEFAULT_SNAPSHOT_EXCLUDES))
    """Globs over workspace-relative paths (``*.log``, ``build/``); a pattern without ``/`` matches any
    path component, so ``node_modules`` leaves out every ``node_modules`` folder."""


class HookSpec(_Spec):
    """One workspace hook: ``{command, timeout_ms, cwd}`` (``before_each``/``after_each`` also ``reset``)."""

    name: str
    """before_all, before_each, after_each or after_all."""
    command: list[str]
    timeout_ms: int = 60_000
    """AgentV's default: 60 s for ``before_*``, 30 s for ``after_*`` (set by the parser)."""
    cwd: str
    """Absolute: the hook's ``cwd`` (relative to the eval file's folder), else the eval file's folder."""
    reset: Literal["none", "fast", "strict"] = "none"


class RepoSpec(_Spec):
    """A repository cloned into the workspace (``workspace.repos[]``: ``{path, repo, commit}``)."""

    path: str
    """Where in the workspace, relative."""
    repo: str
    """A local folder (absolute once parsed) or a clone URL."""
    commit: str | None = None
    """What to check out (``commit`` or ``base_commit``); HEAD by default."""
    local: bool = True


class WorkspaceSpec(_Spec):
    """The suite's ``workspace``: where the agent works and what it starts with."""

    template: str | None = None
    """Absolute path of a folder copied into the workspace."""
    path: str | None = None
    """A fixed workspace folder (absolute) used as it is."""
    isolation: Literal["shared", "per_test"] = "shared"
    repos: list[RepoSpec] = Field(default_factory=list)
    hooks: list[HookSpec] = Field(default_factory=list)
    snapshot: SnapshotSpec = Field(default_factory=SnapshotSpec)

    @property
    def configured(self) -> bool:
        """A workspace the eval asks for: graders then get ``workspace_path`` and ``file_changes``. Hooks
        alone ask for one too: AgentV makes an empty folder for them (workspace/setup.ts
        ``hasSharedWorkspace``, ``prepareEvalCaseWorkspace``)."""
        return bool(self.template or self.path or self.repos or self.hooks)

    def hook(self, name: str) -> HookSpec | None:
        return next((h for h in self.hooks if h.name == name), None)


class TurnSpec(_Spec):
    """One turn of a conversation test (``mode: conversation``)."""

    input: str
    """What the user says at this turn (AgentV sends a turn input that is not a string as its JSON)."""
    expected_output: Any = None
    graders: list[GraderSpec] = Field(default_factory=list)
    """The turn's assertions as AgentV grades them (``buildTurnAssertions``): its strings as one
    ``turn-rubrics`` llm-grader (criteria ``criterion-N``, none required) first, then its other
    assertions; the default llm-grader for a turn with only ``expected_output``; none, a score of 1,
    for a turn with neither."""


class EvalTest(_Spec):
    id: str
    input: list[Message]
    """Suite input prepended, object input rendered; what the target is sent."""
    input_files: list[str] = Field(default_factory=list)
    expected_output: Any = None
    """As written: a string, an object, or a list of messages."""
    criteria: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Suite metadata merged in (governance included)."""
    graders: list[GraderSpec] = Field(default_factory=list)
    """Test graders, then suite graders."""
    threshold: float | None = None
    target: str | None = None
    mode: Literal["conversation"] | None = None
    """``conversation``: the agent is asked turn by turn (``turns``), each turn graded on its answer, and
    the test's own graders grade the whole conversation."""
    turns: list[TurnSpec] = Field(default_factory=list)
    aggregation: Literal["mean", "min", "max"] = "mean"
    """How the turns' scores (and the conversation's) make the test's."""
    on_turn_failure: Literal["continue", "stop"] = "continue"
    """``stop``: after a turn scoring below the threshold the agent is not asked again (later turns 0)."""
    window_size: int | None = None
    """How many past exchanges (user and assistant) the agent and the graders see; None: all."""
    depends_on: list[str] = Field(default_factory=list)
    """Tests that run before this one (AgentV's ``depends_on``)."""
    on_dependency_failure: Literal["skip", "fail", "run"] = "skip"
    """When a test it depends on ended in an execution error: not run (``skip``, ``fail``: an execution
    error saying so) or run all the same (``run``)."""
    targets: list[str] | None = None
    """The test's own ``execution.targets``: in a matrix (a run of several targets), the only targets it is
    run against (AgentV's ``extractTargetsFromTestCase``); None: every one."""
    workspace: WorkspaceSpec | None = None
    """The test's own ``workspace`` merged into the suite's (AgentV's ``mergeWorkspaceConfigs``); None when
    it gives none: the suite's serves it (``EvalSuite.workspace_for``)."""
    conversation_id: str | None = None
    """The test's ``conversation_id``: a label AgentV writes on the test's result row."""
    category: str | None = None
    """AgentV's ``category`` of the test's result row: the suite's ``category``, else the eval file's
    folders relative to the current directory, ``evals`` left out (``deriveCategory``)."""


class TrialsSpec(_Spec):
    """``execution.trials``: each test run ``count`` times (2 or more), its trials made one score."""

    count: int
    strategy: Literal["pass_at_k", "mean", "confidence_interval"] = "pass_at_k"
    cost_limit_usd: float | None = None
    """No further trial once the trials of a test cost this much (USD)."""


class EvalSuite(_Spec):
    path: str
    """Absolute path of the eval file."""
    name: str
    description: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    """The file's ``tags:``, as AgentV reads them (``parseMetadata``: only beside a ``name``): what ``run
    --tag``/``--exclude-tag`` select files by (``selection.tags_selected``)."""
    threshold: float = 0.8
    target: str | None = None
    preprocessors: list[ConverterSpec] = Field(default_factory=list)
    workspace_env: WorkspaceEnv = Field(default_factory=WorkspaceEnv)
    workspace: WorkspaceSpec = Field(default_factory=WorkspaceSpec)
    tests: list[EvalTest] = Field(default_factory=list)
    trials: TrialsSpec | None = None
    workers: int | None = None
    """``execution.workers``: tests run at once when ``--workers`` does not say."""
    tests_from_run: bool = False
    """The file has no ``tests``: its suite-level graders grade a stored run's own tests (a replay's)."""
    targets: list[str] | None = None
    """``execution.targets``: the targets AgentV runs the suite against (a matrix when more than one)."""
    budget_usd: float | None = None
    """``execution.budget_usd``: once the agent's cost reaches it, the tests not yet started are not run."""
    fail_on_error: bool = False
    """``execution.fail_on_error``: after an execution error, the tests not yet started are not run."""
    search_roots: list[str] = Field(default_factory=list)
    referenced_files: list[tuple[str, str, str | None]] = Field(default_factory=list)
    """``(role, absolute path, reference as written)`` of every file the suite depends on: the tests
    file, prompt files, grader scripts, converter scripts. Snapshotted when a run starts."""
    warnings: list[str] = Field(default_factory=list)

    @property
    def directory(self) -> Path:
        return Path(self.path).parent

    def workspace_for(self, test: EvalTest) -> WorkspaceSpec:
        """The workspace configuration a test runs under: its own merged into the suite's, else the suite's."""
        return test.workspace or self.workspace

    def with_graders(self, change: Callable[[GraderSpec], GraderSpec]) -> EvalSuite:
        """A copy with ``change`` applied to every grader of every test (a replay's swaps)."""
        tests = [t.model_copy(update={"graders": [change(g) for g in t.graders]}) for t in self.tests]
        return self.model_copy(update={"tests": tests})
