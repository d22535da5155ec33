"""Recording a run: call the target for each test, capture what it produced, grade it, store it all.

This is the only module outside ``evalstore.replay.targets`` that imports target code. Each test becomes two
atomic appends: first what the target produced (case, transcript, artifact bytes) as soon as it
finishes, then the grading (conversions, grader calls, verdicts, score). A run killed between tests,
or between the two appends of a test, resumes without calling the target again for anything recorded.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from evalstore import __version__
from evalstore.replay import failures
from evalstore.replay.content import Message, dump_messages, messages_json
from evalstore.replay.errors import JudgeConfigError, JudgeProviderError, NoJudgeError, ReplayError
from evalstore.replay.evalfile.dependencies import blocked_by, waves
from evalstore.replay.evalfile.parser import load_eval, load_eval_text
from evalstore.replay.evalfile.preflight import preflight
from evalstore.replay.evalfile.selection import matches_any, tags_selected
from evalstore.replay.evalfile.snapshot import drift, snapshot_suite
from evalstore.replay.evalfile.specs import EvalSuite, EvalTest, judge_askers
from evalstore.replay.grading.conversation import TURN_ERROR, ConversationGrader, opening, user_turn, windowed
from evalstore.replay.grading.engine import grade_test, missing_runtime
from evalstore.replay.grading.graders.base import GradeOptions, TranscriptInfo, process_slots, reads_files_itself
from evalstore.replay.grading.scoring import effective_threshold, produced_now
from evalstore.replay.grading.trials import TrialsOutcome, more_trials
from evalstore.replay.grading.trials import aggregate as aggregate_trials
from evalstore.replay.material import (
    ResultKey,
    Tally,
    TestMaterial,
    case_event,
    completion_event_id,
    info_from_transcript,
    load_run,
    new_run_id,
    result_key,
    transcript_info,
)
from evalstore.replay.processes.children import child_environment, withholding
from evalstore.replay.processes.lifetime import WorkspaceLock
from evalstore.replay.processes.warm import WarmPool
from evalstore.replay.processes.workers import run_concurrently
from evalstore.replay.recording import StoreRecorder
from evalstore.replay.suite_limits import SuiteLimits
from evalstore.replay.targets import (
    DEFAULT_MAX_RETRIES,
    TargetOutcome,
    as_target_spec,
    call_with_retries,
    capture_files,
    check_target,
    exchange_masks,
    run_target,
    stored_config,
)
from evalstore.replay.targetsfile.loader import (
    TargetEntry,
    TargetsFile,
    explicit_targets_file,
    find_targets_file,
    load_targets_file,
)
from evalstore.replay.targetsfile.redaction import SecretMask, environment_mask
from evalstore.replay.workspace.changes import folder_state, unified_diff, with_session_changes
from evalstore.replay.workspace.setup import HookFailed, RunWorkspaces, check_workspaces
from evalstore.replay.workspace.snapshot import take_snapshot
from evalstore.store import EventStore, NewEvent
from evalstore.store.codec import sha256_hex
from evalstore.store.envelope import new_event_id
from evalstore.store.events import (
    ArtifactStored,
    RunFailed,
    RunStarted,
    TargetCallFailed,
    TestScored,
    TranscriptRecorded,
)

if TYPE_CHECKING:
    from evalstore.replay.grading.judge.pool import JudgePool


DEFAULT_WORKERS = 4


@dataclass
class RunOptions:
    target: str | None = None
    targets: list[str] = field(default_factory=list)
    """Several targets (``--target`` given more than once): AgentV's matrix, every test run against each
    in one run, its results keyed by target. Overrides ``target`` and the eval's ``execution.targets``."""
    targets_path: Path | None = None
    workers: int | None = None
    """Tests run at once; None: the eval's ``execution.workers``, else :data:`DEFAULT_WORKERS`."""
    threshold: float | None = None
    timeout: float | None = None
    max_retries: int | None = None
    """How many times a failed target call is tried again (``agentv eval --max-retries``); None: the run's
    own when resumed, else :data:`DEFAULT_MAX_RETRIES`. A conversation's turns are not retried (AgentV's
    neither)."""
    workdir: Path | None = None
    """Where per-test workspaces are made (default: .evalstore/workspaces/RUN under the cwd)."""
    grade: GradeOptions = field(default_factory=GradeOptions)
    judge_concurrency: int = 8
    warm: bool = True
    """Fork Python code graders and converters from warm interpreters (``processes.warm``); False
    (``--no-warm``): spawn every process."""
    cache: bool = False
    """Reuse judge replies and converter outputs the store holds for identical requests. Off by default:
    a run is a new observation of the agent and of its graders (AgentV too asks afresh without ``--cache``);
    a replay is where recorded replies are reused."""
    experiment: str | None = None
    """``--experiment`` (``choices.experiment_name``), recorded on the run: AgentV's ``experiment`` label of
    its rows; None: AgentV's ``default``."""
    test_ids: list[str] = field(default_factory=list)
    """``--test-id`` globs (``agentv eval run --test-id``): only the tests whose id matches one run; recorded
    on the run, so that a resumed run runs the same tests. Empty: every test."""
    tags: list[str] = field(default_factory=list)
    """``--tag``: run the file only if it has every one of these ``tags:`` (:class:`Unselected` otherwise)."""
    exclude_tags: list[str] = field(default_factory=list)
    """``--exclude-tag``: run the file only if it has none of these."""


class Unselected(ReplayError):
    """The eval file's tags are not those ``--tag``/``--exclude-tag`` ask for: nothing to run (AgentV's "No eval
    files matched the tag filters. Nothing to run.", not an error)."""


@dataclass
class RunOutcome:
    run_id: str
    results: list[TestScored]
    threshold: float
    warnings: list[str] = field(default_factory=list)
    """What the eval file parser warned about (unknown keys, missing scripts)."""
    trials: dict[tuple[str, str], TrialsOutcome] = field(default_factory=dict)
    """Per test and target, its trials made one score (``execution.trials``; each trial is a result of its own)."""


Progress = Callable[[TestScored], None]


@dataclass(frozen=True)
class PreparedRun:
    """A run checked and ready to record (:func:`prepare_run`): its eval, targets and first event, made
    before anything touches a store, so a bad eval file or target leaves no store behind."""

    suite: EvalSuite
    targets: list[TargetEntry]
    aliases: dict[str, list[str]]
    targets_file: TargetsFile | None
    options: RunOptions
    started: RunStarted
    blobs: dict[str, bytes]


def prepare_run(
    eval_path: str | Path, options: RunOptions | None = None, *, on_warning: Callable[[str], None] | None = None
) -> PreparedRun:
    """``on_warning`` hears, before the agent runs, what the run will record in AgentV's place of a judge it
    cannot find; without it, that warning is the outcome's first."""
    options = options or RunOptions()
    suite = _selected(load_eval(eval_path), options)
    preflight(suite)
    waves(suite)
    targets_file, targets, aliases = _resolve_targets(suite, options)
    for target in targets:  # what a file meant for AgentV too must change (the other targets: `validate`)
        suite.warnings.extend(targets_file.agentv_notes.get(target.name, []) if targets_file else [])
    if any(t.provider == "cli" for t in targets):
        suite.warnings.extend(_unrunnable_ids(suite))
    # One warning, before any agent runs, for every target's graders with no judge to be found.
    unjudged = list(dict.fromkeys(w for t in targets if (w := _check_judges(suite, t.name, targets_file, options))))
    for warning in unjudged:
        if on_warning is not None:
            on_warning(warning)
    if unjudged and on_warning is None:
        suite = suite.model_copy(update={"warnings": [*unjudged, *suite.warnings]})
    check_workspaces(suite)
    run_id = new_run_id("rec")
    snapshot, blobs = snapshot_suite(suite)
    source = targets_file.path if targets_file else None
    started = RunStarted(
        run_id=run_id,
        kind="recorded",
        suite=suite.name,
        eval_path=suite.path,
        eval_snapshot=snapshot,
        target_name=targets[0].name if len(targets) == 1 else None,
        target=stored_config(targets[0], source=source) if len(targets) == 1 else None,
        targets={t.name: stored_config(t, source=source) for t in targets} if len(targets) > 1 else None,
        threshold=_threshold(suite, options),
        overrides=_overrides(options, targets_file),
        tool_version=__version__,
        experiment=options.experiment,
    )
    return PreparedRun(suite, targets, aliases, targets_file, options, started, blobs)


def record_run(
    store: EventStore,
    eval_path: str | Path,
    options: RunOptions | None = None,
    *,
    progress: Progress | None = None,
    on_start: Callable[[str, int, list[tuple[str, str]]], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> RunOutcome:
    """Run an eval file and record it; ``on_warning``: see :func:`prepare_run`."""
    return record_prepared(store, prepare_run(eval_path, options, on_warning=on_warning), progress, on_start)


def record_prepared(
    store: EventStore,
    run: PreparedRun,
    progress: Progress | None = None,
    on_start: Callable[[str, int, list[tuple[str, str]]], None] | None = None,
) -> RunOutcome:
    """Record a run :func:`prepare_run` made: its first event, then its tests."""
    run_id = run.started.run_id
    store.append(run_id, [run.started], expected_version=0, blobs=run.blobs)
    return _execute(
        store, run_id, run.suite, run.targets, run.aliases, run.targets_file, run.options, {}, progress, on_start
    )


def resume_run(
    store: EventStore,
    run_id: str,
    options: RunOptions | None = None,
    *,
    progress: Progress | None = None,
    on_start: Callable[[str, int, list[tuple[str, str]]], None] | None = None,
) -> RunOutcome:
    """Finish an interrupted recorded run: tests with a transcript are graded, not run again."""
    material = load_run(store, run_id)
    started = material.started
    if started.kind != "recorded":
        what = (
            "an imported run; importing its source again completes it"
            if started.kind == "imported"
            else f"a replay; `evalstore replay --resume {run_id}` continues it"
        )
        raise ReplayError(f"run {run_id} is {what} (`evalstore run --resume` continues runs `evalstore run` made)")
    options = options or RunOptions()
    stored_overrides = started.overrides
    options.target = options.target or started.target_name
    if started.targets and not options.targets:
        options.targets = list(started.targets)
    if options.targets_path is None and stored_overrides.get("targets_file"):
        options.targets_path = Path(stored_overrides["targets_file"])
    if options.threshold is None:
        options.threshold = stored_overrides.get("threshold")
    if options.max_retries is None:
        options.max_retries = stored_overrides.get("max_retries")
    options.test_ids = list(stored_overrides.get("test_ids") or [])  # the tests it began with, no others
    eval_snap = next(s for s in started.eval_snapshot if s.role == "eval")
    suite = load_eval_text(store.get_blob(eval_snap.sha256).decode("utf-8"), Path(eval_snap.path))  # type: ignore[arg-type]
    suite = _selected(suite, options)
    if any(d.current is not None for d in drift([eval_snap], roles=("eval",))):  # edited, not gone
        suite.warnings.append(
            f"{eval_snap.path} changed since run {run_id} began: the run goes on with the eval it began with "
            f"(`evalstore replay {run_id}` regrades it with the file as it is now)"
        )
    targets_file, targets, aliases = _resolve_targets(suite, options)
    return _execute(store, run_id, suite, targets, aliases, targets_file, options, material.tests, progress, on_start)


def _resolve_targets(suite: EvalSuite, options: RunOptions):  # type: ignore[no-untyped-def]
    """The targets file and the targets ``agentv eval`` would run the suite against (run-eval.ts
    ``prepareFileMetadata``): every ``--target`` given, else the eval's ``execution.targets``; two or more
    are AgentV's matrix, one is the single target (``_resolve_target``). With them, per target run, the
    names it was given by (several when ``use_target`` makes two names one target)."""
    names = options.targets or ([] if options.target else suite.targets or [])
    if len(names) <= 1:
        single = replace(options, target=names[0]) if names else options
        targets_file, (target,) = _resolve_target(suite, single, matrix=False)
        return targets_file, [target], {target.name: names}
    unique = list(dict.fromkeys(names))
    resolved = [_resolve_target(suite, replace(options, target=name), matrix=True) for name in unique]
    # Results are keyed by the target they ran on (the end of a use_target chain), as AgentV names its rows.
    targets: dict[str, TargetEntry] = {}
    named: dict[str, list[str]] = {}
    for name, (_, (target,)) in zip(unique, resolved, strict=True):
        targets.setdefault(target.name, target)
        named.setdefault(target.name, []).append(name)
    for target_name, aliases in named.items():
        if len(aliases) > 1:
            suite.warnings.append(
                f"targets {', '.join(aliases)} are all target {target_name!r} (use_target): it runs once (AgentV "
                "runs it for each name and writes every row as that target)"
            )
    return resolved[0][0], list(targets.values()), named


def _resolve_target(suite: EvalSuite, options: RunOptions, *, matrix: bool):  # type: ignore[no-untyped-def]
    """The targets file and the target ``agentv eval`` would use: ``--targets`` (a file, or a folder holding
    one), else the file discovered from the eval file; ``--target`` (but ``default``, outside a matrix),
    else the eval's, else ``default``; its ``use_target`` chain followed in this environment."""
    path = explicit_targets_file(options.targets_path) if options.targets_path else find_targets_file(suite.path)
    # ``agentv eval --target default`` is no choice (``pickTargetName``): the eval's target still wins.
    chosen = options.target if options.target != "default" or matrix else None
    suite_target = None if chosen else suite.target
    name = chosen or suite_target or "default"
    if path is None:
        raise ReplayError(
            f"{suite.path}: no targets file found (looked for targets.yaml or .agentv/targets.yaml from the eval "
            "file's folder up to the repository root, and in the working directory); pass --targets FILE"
        )
    targets_file = load_targets_file(path)
    if name not in targets_file.targets and not (chosen or suite_target):
        raise ReplayError(
            f"{suite.path}: no target named: set execution.target in the eval, pass --target NAME, or define a "
            f"target named 'default' in {targets_file.path}"
        )
    target = targets_file.select(name, os.environ)
    # Before anything is recorded: a bad target config must not leave a half-started run behind.
    check_target(target, eval_dir=Path(suite.path).parent, targets_file=targets_file.path)
    return targets_file, [target]


def _judge_pool(targets_file: TargetsFile | None, options: RunOptions) -> JudgePool:
    from evalstore.replay.grading.judge.pool import JudgePool

    if targets_file:
        return JudgePool.from_targets_file(targets_file, concurrency=options.judge_concurrency)
    return JudgePool.from_env()


def _check_judges(
    suite: EvalSuite, run_target: str, targets_file: TargetsFile | None, options: RunOptions
) -> str | None:
    """Before the agent runs: an LLM grader whose judge is configured but cannot be called (an unset
    ``${{ VAR }}`` or key) would end every test in an execution error after the expensive part: refused.
    Graders with no judge to be found (none chosen, a name not defined) or a judge evalstore cannot ask (an
    agent) do not stop the run: AgentV starts such a suite, runs the agent and records the grader's failure,
    and so does ``run``. What they are is returned, for a warning before the agent runs."""
    graders = [
        (f"{suite.path}: test {test.id!r}", name, grader_target)
        for test in suite.tests
        for grader in test.graders
        for name, grader_target in judge_askers(grader)
    ]
    if not graders:
        return None
    unjudged: dict[str, str] = {}
    with _judge_pool(targets_file, options) as pool:
        for where, name, grader_target in graders:
            try:
                pool.resolve(
                    pool.target(
                        grader_target=grader_target,
                        run_target=run_target,
                        override_target=options.grade.judge_target,
                        override_model=options.grade.judge_model,
                    )
                )
            except NoJudgeError as exc:
                unjudged.setdefault(name, str(exc))
            except JudgeProviderError as exc:
                unjudged.setdefault(name, f"{exc}; its verdicts are execution errors")
            except JudgeConfigError as exc:
                raise JudgeConfigError(f"{where}: grader {name!r} needs a judge: {exc}") from None
    if not unjudged:
        return None
    return "; ".join(f"LLM grader {name!r}: {why}" for name, why in sorted(unjudged.items())) + (
        "; the agent runs, as in AgentV, and a grader with no judge records AgentV's \"No grader provider "
        "available\" (score 0; the test's error when it is the test's implicit grader)"
    )


def _threshold(suite: EvalSuite, options: RunOptions) -> float:
    return options.threshold if options.threshold is not None else suite.threshold


def _overrides(options: RunOptions, targets_file: TargetsFile | None) -> dict:
    overrides = {
        "targets_file": targets_file.path if targets_file else None,
        "threshold": options.threshold,
        "judge_target": options.grade.judge_target,
        "judge_model": options.grade.judge_model,
        "max_retries": _max_retries(options),
    }
    return {**overrides, "test_ids": options.test_ids} if options.test_ids else overrides


def _unrunnable_ids(suite: EvalSuite) -> list[str]:
    """What AgentV 4.42.4's cli target makes of a test id holding ``/``: it writes the prompt to
    ``<tmpdir>/agentv-<id>-<time>.prompt.txt`` (``generateOutputFilePath``), a path in a folder that does not
    exist (ENOENT, an execution error). evalstore runs such a test."""
    return [
        f"AgentV 4.42.4 cannot run test {t.id!r} with a cli target: it names a temporary file after the id, and the "
        "`/` makes it a path in a folder that does not exist; rename it to run this suite under AgentV too"
        for t in suite.tests
        if "/" in t.id
    ]


def _selected(suite: EvalSuite, options: RunOptions) -> EvalSuite:
    """The suite with the tests ``--test-id`` selects; :class:`Unselected` when its tags are not those
    ``--tag``/``--exclude-tag`` ask for, a :class:`ReplayError` when no test id matches (AgentV: "No tests
    matched the provided filters.")."""
    if (options.tags or options.exclude_tags) and not tags_selected(suite.tags, options.tags, options.exclude_tags):
        have = (
            f"its tags: {', '.join(suite.tags)}"
            if suite.tags
            else "it has no tags: AgentV reads `tags:` only in a file with a `name:`"
        )
        raise Unselected(f"{suite.path} is not selected by the tag filters ({have}); nothing to run")
    if not options.test_ids:
        return suite
    tests = [t for t in suite.tests if matches_any(t.id, options.test_ids)]
    if not tests:
        globs = " ".join(f"--test-id {g!r}" for g in options.test_ids)
        listed = ", ".join(t.id for t in suite.tests[:20]) + (", ..." if len(suite.tests) > 20 else "")
        raise ReplayError(f"{globs} matches no test of {suite.path} (its tests: {listed or 'none'})")
    return suite.model_copy(update={"tests": tests})


def _max_retries(options: RunOptions) -> int:
    return DEFAULT_MAX_RETRIES if options.max_retries is None else options.max_retries


def _safe_dirname(test_id: str) -> str:
    """The test's workspace folder under the run's: its id where that is a plain name. An id changed to
    make one (``a/b``), or one naming another folder (``..``), gets its digest too: ``a/b`` and ``a_b``
    must not share a workspace, and ``..`` must not be the folder of every run."""
    name = re.sub(r'[/\\:*?"<>|\s]+', "_", test_id)[:120]
    if name == test_id and name.strip("."):
        return name
    return f"{name.strip('.') or 'test'}-{sha256_hex(test_id.encode('utf-8', 'surrogatepass'))[:12]}"


def _execute(
    store: EventStore,
    run_id: str,
    suite: EvalSuite,
    targets: list[TargetEntry],
    aliases: dict[str, list[str]],
    targets_file: TargetsFile | None,
    options: RunOptions,
    recorded: dict[ResultKey, TestMaterial],
    progress: Progress | None,
    on_start: Callable[[str, int, list[tuple[str, str]]], None] | None,
) -> RunOutcome:
    """The run's tests against each target, one target after the other (AgentV runs a matrix's targets at
    once), each as AgentV runs one target: its own workspaces, dependency waves, budget and fail_on_error."""
    workdir = Path(options.workdir or Path(".evalstore") / "workspaces" / run_id).resolve()
    matrix = len(targets) > 1
    suites = [(target, _for_target(suite, aliases[target.name]) if matrix else suite) for target in targets]
    results: list[TestScored] = []
    trials: dict[tuple[str, str], TrialsOutcome] = {}
    # Refused while an agent of an interrupted run still works there: the agents hold the lock too.
    with WorkspaceLock(workdir):
        if on_start:
            unable = list(
                dict.fromkeys(
                    (t.id, reason) for _, s in suites for t in s.tests if (reason := missing_runtime(t)) is not None
                )
            )
            on_start(run_id, sum(len(s.tests) for _, s in suites), unable)
        for target, target_suite in suites:
            # The judges' keys are not the agent's nor its graders' business: the variables only the judges'
            # targets reference are kept from every child (those a target of the run names are not only theirs;
            # a replay keeps back the same ones, whichever graders it runs: ``regrade._judges``).
            with _judge_pool(targets_file, options) as pool:
                withheld = pool.variables(excluding=[t.name for t in targets])
            folder = workdir / _safe_dirname(target.name) if matrix else workdir
            with withholding(withheld):
                done, done_trials = _execute_locked(
                    store, run_id, target_suite, target, targets_file, options, recorded, progress, folder
                )
            results += done
            trials.update(done_trials)
    _complete(store, run_id, results)
    return RunOutcome(run_id, results, _threshold(suite, options), list(suite.warnings), trials)


def _for_target(suite: EvalSuite, names: list[str]) -> EvalSuite:
    """The suite's tests a matrix runs against a target given by ``names``: a test's own
    ``execution.targets`` limits it to those it names (run-eval.ts: ``test.targets.includes(targetName)``,
    the name as given, not the target it resolves to)."""
    return suite.model_copy(
        update={"tests": [t for t in suite.tests if not t.targets or any(n in t.targets for n in names)]}
    )


def _execute_locked(
    store: EventStore,
    run_id: str,
    suite: EvalSuite,
    target: TargetEntry,
    targets_file: TargetsFile | None,
    options: RunOptions,
    recorded: dict[ResultKey, TestMaterial],
    progress: Progress | None,
    workdir: Path,
) -> tuple[list[TestScored], dict[tuple[str, str], TrialsOutcome]]:
    threshold = _threshold(suite, options)
    workers = options.workers or suite.workers or DEFAULT_WORKERS
    target_spec = as_target_spec(target, source=targets_file.path if targets_file else None)
    grade_options = replace(
        options.grade,
        threshold=threshold,
        file_references=reads_files_itself(target_spec.provider),
        no_cache=options.grade.no_cache or not options.cache,
        environment=child_environment(),
        process_slots=process_slots(workers),
        warm=WarmPool() if options.warm else None,
    )
    results: list[TestScored] = []
    trials: dict[tuple[str, str], TrialsOutcome] = {}
    lock = threading.Lock()

    workspaces = RunWorkspaces(suite, workdir, run_id, mask=exchange_masks(target_spec)[0])
    todo = [t for t in suite.tests if not ((d := recorded.get(result_key(t.id, target.name, 1))) and d.transcript)]
    if todo:
        try:
            started = workspaces.start()
        except HookFailed as exc:
            store.append(run_id, [*exc.events, RunFailed(reason=str(exc))])
            raise
        if started:
            store.append(run_id, started)
    judges = _judge_pool(targets_file, options)

    def attempt(test: EvalTest, n: int) -> tuple[TestScored, float | None]:
        """Trial ``n`` of the test (1 without trials): recorded, graded from its transcript, or run."""
        done = recorded.get(result_key(test.id, target.name, n))
        cost = done.transcript[1].cost_usd if done and done.transcript else None
        if done and done.scored:
            return done.scored[1], cost
        if done and done.transcript:
            info = transcript_info(store.get_blob, done)
            return _grade(store, run_id, suite, test, target.name, info, grade_options, judges, n), cost
        folder = workdir / (_safe_dirname(test.id) if n == 1 else f"{_safe_dirname(test.id)}-trial-{n}")
        args = (store, run_id, suite, test, target_spec, folder, options, grade_options, judges, workspaces, n)
        if workspaces.shared:
            with workspaces.lock:  # one shared workspace: one test in it at a time, agent to grading
                return _run_and_grade(*args)
        return _run_and_grade(*args)

    failed: set[str] = set()  # tests that ended in AgentV's execution error, for those depending on them
    limits = SuiteLimits(suite.budget_usd, suite.fail_on_error)

    def one(test: EvalTest) -> TestScored:
        # AgentV's order: the test's dependencies, then the suite's budget, then fail_on_error.
        dependency = blocked_by(test, failed)
        blocked = (dependency, failures.DEPENDENCY) if dependency is not None else limits.refusal()
        if blocked is not None and result_key(test.id, target.name, 1) not in recorded:
            scored = _not_run(
                store,
                run_id,
                test,
                target.name,
                effective_threshold(test.threshold, threshold, suite.threshold),
                *blocked,
            )
            with lock:
                results.append(scored)
                failed.add(test.id)
            if progress:
                progress(scored)
            return scored
        scores: list[float] = []
        costs: list[float | None] = []
        passes: list[bool] = []
        errors: list[bool] = []
        while True:
            scored, cost = attempt(test, len(scores) + 1)
            scores.append(scored.score)
            costs.append(cost)
            passes.append(scored.passed)
            errors.append(failures.agentv_execution_error(scored.status, scored.row_fields))
            with lock:
                results.append(scored)
            if progress:
                progress(scored)
            if suite.trials is None or not more_trials(suite.trials, scores, costs):
                break
        if suite.trials is not None:
            with lock:
                trials[(test.id, target.name)] = aggregate_trials(
                    suite.trials, scores, effective_threshold(test.threshold, threshold, suite.threshold), costs, passes
                )
        # What AgentV counts for both: its execution error; with trials, when every trial ended in one
        # (runEvalCaseWithTrials: any trial ``ok`` makes the test ``ok``, else ``quality_failure``).
        errored = all(errors)
        if errored:
            with lock:
                failed.add(test.id)
        limits.count(costs, errored)
        return scored

    try:
        for wave in waves(suite):
            run_concurrently(one, wave, workers)
    finally:
        judges.close()
        if grade_options.warm is not None:
            grade_options.warm.close()
    if todo and (finished := workspaces.finish()):
        store.append(run_id, finished)
    order = {t.id: i for i, t in enumerate(suite.tests)}
    results.sort(key=lambda s: (order.get(s.test_id, 0), s.attempt))
    return results, trials


def _not_run(
    store: EventStore, run_id: str, test: EvalTest, target: str, threshold: float, error: str, labels: dict[str, str]
) -> TestScored:
    """A test not run (a test it depends on failed, the suite's budget is spent, ``fail_on_error``): an
    execution error, no agent call."""
    scored = TestScored(
        test_id=test.id,
        target=target,
        attempt=1,
        score=0.0,
        passed=False,
        status="execution_error",
        threshold=threshold,
        error=error,
        produced_at=produced_now(),
        row_fields=labels,
    )
    store.append(run_id, [case_event(test, target, 1), scored])
    return scored


def _run_and_grade(  # type: ignore[no-untyped-def]
    store, run_id, suite, test, target_spec, folder, options, grade_options, judges, workspaces, attempt=1
) -> tuple[TestScored, float | None]:
    """One trial of one test: the agent run, what it made recorded, graded; its score and the agent's cost."""
    recorder = StoreRecorder(store, run_id)
    recorder.record(case_event(test, target_spec.name, attempt))
    tw = workspaces.prepare(test, target_spec.name, folder)
    for ran in tw.events:
        recorder.record(ran)
    if tw.error is not None:
        scored = TestScored(
            test_id=test.id,
            target=target_spec.name,
            attempt=attempt,
            score=0.0,
            passed=False,
            status="execution_error",
            threshold=effective_threshold(test.threshold, grade_options.threshold, suite.threshold),
            error=tw.error,
            produced_at=produced_now(),
            graders=[],
            row_fields=tw.failure,
        )
        recorder.record(scored)
        recorder.flush()
        return scored, None
    workspace = tw.folder
    if test.mode == "conversation":
        return _converse(suite, test, target_spec, options, grade_options, judges, workspaces, tw, attempt, recorder)
    outcome, provider_attempt = _ask_retrying(target_spec, test, workspace, suite, options, recorder, attempt)
    captured = capture_files(outcome.messages, workspace, agent_cwd=outcome.cwd, mask=outcome.output_mask)
    messages: list[Message] = [*test.input, *captured.messages]
    file_changes = with_session_changes(
        _after_agent(suite, test, target_spec.name, attempt, workspaces, tw, recorder, outcome.output_mask),
        outcome.file_changes,
    )
    messages_blob = messages_json(dump_messages(messages))
    for f in captured.files:
        if f.data is not None:
            recorder.put_blob(f.data)
        recorder.record(
            ArtifactStored(
                test_id=test.id,
                target=target_spec.name,
                attempt=attempt,
                path=f.path,
                media_type=f.media_type,
                status=f.status,
                sha256=f.sha256,
                size=f.size,
                reason=f.reason,
            )
        )
    transcript = TranscriptRecorded(
        test_id=test.id,
        target=target_spec.name,
        attempt=attempt,
        messages_sha256=recorder.put_blob(messages_blob),
        output_text=outcome.output_text,
        token_usage=outcome.token_usage,
        cost_usd=outcome.cost_usd,
        duration_ms=outcome.duration_ms,
        start_time=outcome.start_time,
        end_time=outcome.end_time,
        workspace_path=str(workspace),
        file_changes=file_changes or None,
        exit_code=outcome.exit_code,
        status=outcome.status,
        error=outcome.error,
        provider_attempt=provider_attempt,
    )
    transcript_id = recorder.record(transcript)
    recorder.flush()
    if outcome.status != "ok":
        scored = TestScored(
            test_id=test.id,
            target=target_spec.name,
            attempt=attempt,
            score=0.0,
            passed=False,
            status="execution_error",
            threshold=effective_threshold(test.threshold, grade_options.threshold, suite.threshold),
            # Provider errors already start with "target 'NAME': "; a second prefix only costs width.
            error=outcome.error or f"target '{target_spec.name}': {outcome.status}",
            produced_at=produced_now(),
            graders=[],
            row_fields=failures.AGENT,
        )
        store.append(run_id, [scored])
        return scored, outcome.cost_usd
    info = info_from_transcript(
        transcript, transcript_id, messages, workspace_path=str(workspace), workspace_mask=outcome.output_mask
    )
    return _grade(store, run_id, suite, test, target_spec.name, info, grade_options, judges, attempt), outcome.cost_usd


def _ask_retrying(  # type: ignore[no-untyped-def]
    target_spec, test: EvalTest, workspace, suite: EvalSuite, options: RunOptions, recorder, attempt: int
) -> tuple[TargetOutcome, int]:
    """The agent asked for a test, a failed call tried again as AgentV tries it (``call_with_retries``), in
    the same workspace; each failed call that is tried again recorded (``target_call_failed``), the last
    call's outcome returned with its number."""

    def failed(outcome: TargetOutcome, provider_attempt: int, wait: float) -> None:
        recorder.record(
            TargetCallFailed(
                test_id=test.id,
                target=target_spec.name,
                attempt=attempt,
                provider_attempt=provider_attempt,
                status="timeout" if outcome.status == "timeout" else "error",
                error=outcome.error,
                exit_code=outcome.exit_code,
                stderr_tail=outcome.stderr[-STDERR_TAIL_CHARS:] or None,
                duration_ms=outcome.duration_ms,
                start_time=outcome.start_time,
                end_time=outcome.end_time,
                wait_ms=wait * 1000.0,
            )
        )

    return call_with_retries(
        lambda n: _ask(target_spec, test, workspace, suite, options, provider_attempt=n), _max_retries(options), failed
    )


STDERR_TAIL_CHARS = 2000
"""What a failed call tried again keeps of the agent's stderr: its end, where the reason is."""


def _ask(target_spec, test: EvalTest, workspace, suite: EvalSuite, options: RunOptions, provider_attempt: int = 0):  # type: ignore[no-untyped-def]
    """One call of the agent: a test, or a conversation's turn with its history as the test's input."""
    return run_target(
        target_spec,
        test,
        workspace=workspace,
        eval_dir=Path(suite.path).parent,
        timeout=options.timeout,
        suite=suite.name,
        eval_path=suite.path,
        workspace_configured=suite.workspace_for(test).configured,
        attempt=provider_attempt,
    )


def _after_agent(  # type: ignore[no-untyped-def]
    suite: EvalSuite, test: EvalTest, target: str, attempt: int, workspaces, tw, recorder, mask: SecretMask
) -> str | None:
    """What follows the agent, in AgentV's order: the workspace's file_changes, then after_each (its reset,
    its command), then the snapshot the graders see (so a replay sees it too). Returns the file_changes.
    Both pass ``mask``, the agent's answer's (``TargetOutcome.output_mask``): the files are its output too."""
    workspace = tw.folder
    limits = suite.workspace_for(test).snapshot
    after = folder_state(workspace, limits) if tw.baseline is not None else None
    file_changes = unified_diff(tw.baseline, after) if tw.baseline is not None and after is not None else None
    for ran in workspaces.after_each(tw, test, target):
        recorder.record(ran)
    recorder.record(
        take_snapshot(workspace, limits, recorder.put_blob, test_id=test.id, target=target, attempt=attempt, mask=mask)
    )
    return mask.text(file_changes) if file_changes else file_changes


def _converse(  # type: ignore[no-untyped-def]
    suite, test, target_spec, options, grade_options, judges, workspaces, tw, attempt, recorder
) -> tuple[TestScored, float | None]:
    """A conversation test (``grading/conversation.py``): the agent asked once per turn with the
    conversation so far, each answer graded before the next turn (``on_turn_failure: stop`` depends on
    it); then the transcript (the conversation, a failed call's error on its turn's message) and the
    test's verdicts. The turns' grader calls precede the transcript in the log."""
    workspace = tw.folder
    transcript_id = new_event_id()  # the turns' verdicts name it before it is recorded
    info = TranscriptInfo(messages=[], event_id=transcript_id, workspace_path=str(workspace))
    grader = ConversationGrader(suite, test, recorder, target_spec.name, attempt, options=grade_options, judges=judges)
    history = opening(test)
    kept = list(history)
    outcomes = []
    for n, turn in enumerate(test.turns, start=1):
        if grader.stopped:
            break
        history.append(user_turn(turn))
        asked = test.model_copy(update={"input": windowed(history, test.window_size)})
        outcome = _ask(target_spec, asked, workspace, suite, options)
        outcomes.append(outcome)
        info.workspace_mask = outcome.output_mask
        if outcome.status != "ok":
            error = outcome.error or f"target '{target_spec.name}': {outcome.status}"
            kept.append(Message(role="user", content=turn.input, metadata={TURN_ERROR: error}))
            grader.turn_failed(n, error, info)
            continue
        answer = Message(role="assistant", content=outcome.output_text)
        history.append(answer)
        kept += [history[-2], answer]
        grader.grade_turn(n, list(history), answer, info)
    # Every turn's call masks alike (one target, one environment); with no call made, the environment's mask.
    mask = outcomes[-1].output_mask if outcomes else environment_mask()
    file_changes = _after_agent(suite, test, target_spec.name, attempt, workspaces, tw, recorder, mask)
    usage = [o.token_usage for o in outcomes if o.token_usage]
    costs = [o.cost_usd for o in outcomes if o.cost_usd is not None]
    transcript = TranscriptRecorded(
        test_id=test.id,
        target=target_spec.name,
        attempt=attempt,
        messages_sha256=recorder.put_blob(messages_json(dump_messages(kept))),
        output_text=next((m.text() for m in reversed(kept) if m.role == "assistant"), ""),
        token_usage={k: sum(u.get(k) or 0 for u in usage) for k in usage[0]} if usage else None,
        cost_usd=sum(costs) if costs else None,
        duration_ms=sum(o.duration_ms or 0.0 for o in outcomes),
        start_time=outcomes[0].start_time if outcomes else None,
        end_time=outcomes[-1].end_time if outcomes else None,
        workspace_path=str(workspace),
        file_changes=file_changes or None,
        status="ok",
    )
    recorder.record(transcript, transcript_id)
    recorder.flush()
    grade = grader.finish(
        info_from_transcript(transcript, transcript_id, kept, workspace_path=str(workspace), workspace_mask=mask)
    )
    recorder.flush()
    return grade.scored, transcript.cost_usd


def _grade(store, run_id, suite, test, target, info, grade_options, judges, attempt=1) -> TestScored:  # type: ignore[no-untyped-def]
    recorder = StoreRecorder(store, run_id)
    reason = missing_runtime(test)
    if reason is not None:
        # The agent's work is recorded; the test is graded by a replay where the runtime is installed.
        scored = TestScored(
            test_id=test.id,
            target=target,
            attempt=attempt,
            score=0.0,
            passed=False,
            status="not_regradable",
            threshold=effective_threshold(test.threshold, grade_options.threshold, suite.threshold),
            error=f"not regradable: {reason}",
            produced_at=produced_now(),
            graders=[],
        )
        recorder.record(scored)
    else:
        scored = grade_test(
            suite, test, info, recorder, target=target, attempt=attempt, options=grade_options, judges=judges
        ).scored
    recorder.flush()
    return scored


def _complete(store: EventStore, run_id: str, results: list[TestScored]) -> None:
    tally = Tally()
    for scored in results:
        tally.add(scored)
    store.append(run_id, [NewEvent(tally.completed(), event_id=completion_event_id(run_id))])
