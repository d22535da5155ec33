"""Regrading a stored run: a new run of kind ``replay`` whose parent is the original.

Structurally unable to call a target: nothing here imports ``evalstore.replay.targets``. Transcripts and
artifacts are read from the run that recorded them (walking up through replays of replays) and used
by reference. What is swapped (eval, converters, prompts, judge, graders, tests) is recorded in the
replay's ``run_started`` event, so an interrupted replay resumes with exactly the same settings.

A replay of a replay starts from what its parent graded with (:func:`effective_options`: the swaps of
every replay down the chain, in order), and its own swaps apply on top: replaying any run with no
options reproduces it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import shlex
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evalstore import __version__
from evalstore.replay.analysis.views import run_started, transcript_run_id
from evalstore.replay.errors import JudgeConfigError, NotFoundError, ReplayError
from evalstore.replay.evalfile.aliases import alias_of, normalize_media_type
from evalstore.replay.evalfile.conversation import verdict_graders
from evalstore.replay.evalfile.fields import read_text
from evalstore.replay.evalfile.graders import PROMPT_VARIABLE
from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.evalfile.preflight import preflight
from evalstore.replay.evalfile.search_roots import DiskResolver, resolve_reference
from evalstore.replay.evalfile.selection import id_matcher
from evalstore.replay.evalfile.snapshot import Drift, drift, snapshot_eval, snapshot_suite
from evalstore.replay.evalfile.specs import (
    AssertionSpec,
    CodeGraderSpec,
    CompositeSpec,
    ConverterSpec,
    EvalSuite,
    EvalTest,
    GraderSpec,
    LlmGraderSpec,
    judge_askers,
    within,
)
from evalstore.replay.executors import Executor, Work
from evalstore.replay.executors.local import LocalExecutor
from evalstore.replay.grader_sets import grader_warnings
from evalstore.replay.grading.engine import grade_test, missing_runtime
from evalstore.replay.grading.graders.base import GradeOptions, no_wait, process_slots, reads_files_itself
from evalstore.replay.grading.scoring import produced_now
from evalstore.replay.grading.turn_verdicts import TURN_TYPE, is_conversation_verdict
from evalstore.replay.inspect import SOURCE_FORMATS as INSPECT_FORMATS
from evalstore.replay.inspect import graded_despite_error
from evalstore.replay.jsontext import decode_problem, strings_in
from evalstore.replay.lost_inputs import keep_recorded, unsnapshotted_warning, untraced_warning
from evalstore.replay.material import (
    ResultKey,
    RunMaterial,
    RunWindows,
    Tally,
    TestMaterial,
    case_event,
    completion_event_id,
    load_run,
    new_run_id,
    recorded_trace,
    result_key,
    transcript_info,
)
from evalstore.replay.pass_marks import marked_otherwise, scored_zero
from evalstore.replay.processes.children import child_environment
from evalstore.replay.processes.warm import WarmPool
from evalstore.replay.processes.workers import run_concurrently
from evalstore.replay.recording import BatchedAppends, ReadAhead, StoreRecorder
from evalstore.replay.restored import restored_files
from evalstore.replay.targetsfile.loader import TargetsFile, load_targets_file, run_targets_file
from evalstore.store import EventStore, NewEvent
from evalstore.store.codec import digest_json
from evalstore.store.events import (
    GraderCalled,
    RunStarted,
    TestCaseRecorded,
    TestScored,
    VerdictRecorded,
)

if TYPE_CHECKING:
    from evalstore.replay.grading.judge.batches import BatchSummary, JudgeBatches
    from evalstore.replay.grading.judge.pool import JudgePool


@dataclass
class ReplayOptions:
    eval_path: str | None = None
    preprocessors: list[str] = field(default_factory=list)
    """``TYPE=COMMAND`` swaps, COMMAND a JSON argv array or a plain command line."""
    prompts: list[str] = field(default_factory=list)
    """``GRADER=file://PATH`` swaps."""
    judge_target: str | None = None
    judge_model: str | None = None
    graders: list[str] | None = None
    tests: str | None = None
    """A glob over test ids: the tests to regrade; the rest are carried over from the parent."""
    no_cache: bool = False
    threshold: float | None = None
    targets_path: str | None = None
    shard: tuple[int, int] | None = None
    batch: bool = False
    """Judge requests that miss the cache go through the providers' batch APIs (``judge/batches.py``)."""
    inherited_prompts: list[str] = field(default_factory=list)
    """Prompt swaps made by the replays this one descends from (set by :func:`effective_options`): one
    whose grader the eval no longer has is dropped with a warning instead of refused."""
    inherited_preprocessors: list[str] = field(default_factory=list)
    """Converter swaps made by the replays this one descends from (set by :func:`effective_options`): each
    runs the converter its replay recorded (the parent's eval snapshot), wherever this replay runs."""

    def recorded(self) -> dict[str, Any]:
        """What goes into the replay's run_started event: the options given (not the shard, nor what
        was inherited, which the parent chain records)."""
        return {
            k: v for k, v in asdict(self).items() if k not in ("shard", "inherited_prompts", "inherited_preprocessors")
        }


INHERITED = ("preprocessors", "prompts", "judge_target", "judge_model", "graders", "tests", "threshold", "targets_path")
"""What a replay takes from the replay it regrades. Not the eval (the parent's eval snapshot is already
the eval it graded with) and not ``no_cache`` or ``batch`` (how to get replies, not what to grade with)."""


def effective_options(store: EventStore, parent: RunStarted, own: ReplayOptions) -> ReplayOptions:
    """The configuration a replay of ``parent`` grades with: what ``parent`` graded with, then ``own``'s
    swaps on top. For a recorded or imported parent that is ``own``; for a replay, the options of every
    replay down to the transcript run are layered oldest first (converters and prompts add up, a later
    swap of the same type or grader winning; judge, graders, tests, threshold and targets file are
    replaced when given)."""
    chain: list[dict[str, Any]] = []
    started, seen = parent, set()
    while started.kind == "replay" and started.parent_run_id and started.run_id not in seen:
        seen.add(started.run_id)
        chain.append(started.overrides or {})
        started = run_started(store, started.parent_run_id)
    if not chain:
        return own
    inherited: dict[str, Any] = {"preprocessors": [], "prompts": []}
    for layer in reversed(chain):
        inherited = _layer(inherited, layer)
    mine = _layer(inherited, own.recorded())
    return ReplayOptions(
        **{k: mine.get(k) for k in INHERITED if k not in ("preprocessors", "prompts")},
        preprocessors=list(own.preprocessors),
        inherited_preprocessors=[p for p in mine["preprocessors"] if p not in own.preprocessors],
        prompts=list(own.prompts),
        inherited_prompts=[p for p in mine["prompts"] if p not in own.prompts],  # less those own replaces
        eval_path=own.eval_path,
        no_cache=own.no_cache,
        shard=own.shard,
        batch=own.batch,
    )


def _layer(base: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    # A swap of the same type (or grader) replaces the earlier one, which is never read again: its file may
    # be gone (another user's checkout, a moved folder) and must not stop the replay that replaces it.
    for key, kind in (
        ("preprocessors", lambda v: normalize_media_type(v.partition("=")[0].strip())),
        ("prompts", lambda v: v.partition("=")[0]),
    ):
        new = list(layer.get(key) or [])
        replaced = {kind(v) for v in new}
        out[key] = [v for v in base[key] if kind(v) not in replaced] + new
    for key in INHERITED:
        if key not in ("preprocessors", "prompts") and layer.get(key) is not None:
            out[key] = layer[key]
    return out


@dataclass
class ReplayOutcome:
    run_id: str
    parent_run_id: str
    results: list[TestScored]
    drift: list[Drift]
    complete: bool
    warnings: list[str] = field(default_factory=list)
    not_regradable: list[tuple[ResultKey, str]] = field(default_factory=list)
    """The tests this process found nothing to grade in, with why (recorded as ``not_regradable``)."""
    batch: BatchSummary | None = None
    """What ``--batch`` did in this process: the batches used, the requests they answered and did not."""


Started = Callable[[str, int, list[Drift], list[tuple[ResultKey, str]]], None]
"""Told before grading starts: the replay's id, the tests to regrade, drift, and the tests among them that
cannot be regraded, with why."""


AGENT_STAGES = frozenset({"setup", "repo_setup", "agent"})
"""AgentV's ``failure_stage`` values of failures before the agent's answer existed (agentv-formats §1.1)."""

AGENT_FAILURE_FIELDS = ("failure_stage", "failure_reason_code")
"""An imported row's labels that describe an agent failure: a replay, which reproduces the failure, keeps them."""


def agent_failure(source: TestMaterial) -> str | None:
    """The recorded failure of the target (or of its workspace's setup) that left this test without an
    answer to grade, else None. Neither the run nor AgentV graded such a test, and a replay does not:
    its assertions would grade the absence of an answer (a negated one would pass it). An Inspect
    sample that errored is graded from what it kept, as ``inspect score`` grades it."""
    if source.transcript is not None and graded_despite_error(source.transcript[1]):
        return None
    if source.transcript is not None and source.transcript[1].status != "ok":
        transcript = source.transcript[1]
        return transcript.error or f"target '{transcript.target}': {transcript.status}"
    scored = source.scored[1] if source.scored is not None else None
    if scored is None or scored.status != "execution_error":
        return None
    # An import records the failure on its score: AgentV names the stage, and an execution error no
    # grader took part in (rows that name none) is one no grader could take part in.
    stage = scored.row_fields.get("failure_stage")
    if stage in AGENT_STAGES or (stage is None and not source.verdicts):
        return scored.error or "the target failed"
    return None


def not_regradable_reason(source: TestMaterial) -> str | None:
    """Why a stored result cannot be regraded: there is nothing to grade (None when there is)."""
    if source.transcript is None:
        return "the run holds no transcript for this test"
    transcript = source.transcript[1]
    if not transcript.messages_sha256 and transcript.output_text is None:
        return "the imported result has neither a transcript nor an output"
    return None


Progress = Callable[[TestScored], None]


def parse_shard(value: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in value.split("/", 1))
    except ValueError:
        raise ReplayError(f"--shard {value!r}: expected K/N, e.g. 1/3") from None
    if n < 1 or not 1 <= k <= n:
        raise ReplayError(f"--shard {value!r}: K must be between 1 and N")
    return k, n


def in_shard(key: tuple, shard: tuple[int, int] | None) -> bool:
    if shard is None:
        return True
    k, n = shard
    return int(digest_json(list(key))[:12], 16) % n == k - 1


def replay_run(
    store: EventStore,
    parent_run_id: str,
    options: ReplayOptions,
    *,
    strict: bool = False,
    concurrency: int = 4,
    warm: bool = True,
    progress: Progress | None = None,
    on_start: Started | None = None,
    executor: Executor | None = None,
    note: Callable[[str], None] | None = None,
) -> ReplayOutcome:
    """Regrade ``parent_run_id`` into a new run. ``warm``: Python graders and converters are forked from
    warm interpreters (``processes.warm``; False: ``--no-warm``, every process spawned), how they run,
    not what they grade with, so it is not recorded. ``executor`` grades its tests (default: threads here);
    ``note`` is told what a ``--batch`` replay's batches are doing."""
    parent = RunWindows(store, parent_run_id)
    _check_selection(store, parent, options)
    effective = effective_options(store, parent.started, options)
    with restored_files(store, _suite(store, parent, effective), drift(parent.started.eval_snapshot)) as (
        suite,
        drifted,
        moved,
    ):
        drifted = _regraded_drift(drifted, suite, effective.graders, moved)
        if strict and drifted:
            raise ReplayError("refusing to replay (--strict): " + "; ".join(d.describe() for d in drifted))
        preflight(suite)
        _check_eval(parent, suite, options)
        suite = _warned(suite, _unused_judge(suite, options, effective))
        _check_judges(suite, effective, parent)
        snapshot, blobs = snapshot_suite(suite, moved)
        # The prompt files as found from this folder: a resume, or a replay of this replay, run from another
        # folder grades with the same files.
        pinned = [prompt_swap(v, suite.search_roots) for v in options.prompts]
        overrides = {**options.recorded(), "prompts": [f"{name}=file://{path}" for name, _, path in pinned]}
        if options.shard:
            # Every shard derives the same replay id and the same first event, so they share one run.
            run_id = f"rpl-{digest_json({'parent': parent.run_id, 'overrides': overrides})[:16]}"
        else:
            run_id = new_run_id("rpl")
        started = RunStarted(
            run_id=run_id,
            kind="replay",
            parent_run_id=parent.run_id,
            # The parent's label (an import's is AgentV's suite), so a run and its regrades list together.
            suite=parent.started.suite or suite.name,
            eval_path=suite.path,
            eval_snapshot=snapshot,
            target_name=parent.started.target_name,
            target=parent.started.target,
            targets=parent.started.targets,
            threshold=effective.threshold if effective.threshold is not None else suite.threshold,
            overrides=overrides,
            tool_version=__version__,
            experiment=parent.started.experiment,  # a regrade is of the parent's experiment
        )
        executor = executor or LocalExecutor()

        def begin() -> None:
            store.append(
                run_id,
                [NewEvent(started, str(uuid.uuid5(uuid.NAMESPACE_URL, f"evalstore:{run_id}:started")))],
                blobs=blobs,
            )

        with executor.session(store):  # Ray found and its cluster reached before the run is written
            return _execute(
                store,
                run_id,
                parent,
                suite,
                effective,
                drifted,
                concurrency,
                progress,
                on_start,
                warm=warm,
                executor=executor,
                note=note,
                begin=begin,
            )


def resume_replay(
    store: EventStore,
    run_id: str,
    *,
    concurrency: int = 4,
    shard: tuple[int, int] | None = None,
    warm: bool = True,
    progress: Progress | None = None,
    on_start: Started | None = None,
    executor: Executor | None = None,
    note: Callable[[str], None] | None = None,
) -> ReplayOutcome:
    """Continue an interrupted replay with the settings it recorded; graded tests are not redone."""
    try:
        mine = run_started(store, run_id)
    except NotFoundError:
        raise NotFoundError(f"no run {run_id!r} in this store; `evalstore runs` lists them") from None
    if mine.kind != "replay" or not mine.parent_run_id:
        raise ReplayError(f"run {run_id} is not a replay; `evalstore replay --resume` continues replays")
    own = ReplayOptions(**{**mine.overrides, "shard": shard})
    parent = RunWindows(store, mine.parent_run_id)
    options = effective_options(store, parent.started, own)
    with restored_files(store, _suite(store, parent, options), drift(parent.started.eval_snapshot)) as (
        suite,
        drifted,
        moved,
    ):
        executor = executor or LocalExecutor()
        with executor.session(store):
            return _execute(
                store,
                run_id,
                parent,
                suite,
                options,
                _regraded_drift(drifted, suite, options.graders, moved),
                concurrency,
                progress,
                on_start,
                warm=warm,
                executor=executor,
                note=note,
            )


def _regraded_drift(
    drifted: list[Drift], suite: EvalSuite, graders: list[str] | None, moved: Mapping[str, str]
) -> list[Drift]:
    """The drift of files the graders regraded use: with ``--graders``, a script or prompt only the graders
    left out use changes nothing this replay grades (their verdicts are carried over), so it is neither
    told nor refused by ``--strict``. A gone file is used where ``moved`` restored it."""
    if graders is None:
        return drifted
    only = set(graders)
    used = [
        text
        for t in suite.tests
        for name, g in verdict_graders(t)
        if name in only
        for text in strings_in(g.model_dump())
    ]
    return [d for d in drifted if any(p in text for p in (d.path, moved.get(d.path, d.path)) for text in used)]


def _execute(
    store: EventStore,
    run_id: str,
    parent: RunWindows,
    suite: EvalSuite,
    options: ReplayOptions,
    drifted: list[Drift],
    concurrency: int,
    progress: Progress | None,
    on_start: Started | None,
    *,
    warm: bool = True,
    executor: Executor | None = None,
    note: Callable[[str], None] | None = None,
    begin: Callable[[], None] | None = None,
) -> ReplayOutcome:
    """Grade the replay ``run_id``. ``begin`` records its start (a new replay; a resumed one has begun):
    called before anything else is written, after a ``--batch`` replay's collecting pass, so a replay
    refused for the judge its batch cannot call writes nothing."""
    origin = _origin(store, parent)
    graded = {result_key(r["test_id"], r["target"], r["attempt"]) for r in store.query("results", run_id=run_id)}
    tests_by_id = {t.id: t for t in suite.tests}
    threshold = options.threshold if options.threshold is not None else suite.threshold
    grade_options = GradeOptions(
        no_cache=options.no_cache,
        judge_target=options.judge_target,
        judge_model=options.judge_model,
        threshold=threshold,
        file_references=reads_files_itself((parent.started.target or {}).get("provider")),
        environment=child_environment(),
        process_slots=process_slots(concurrency),
        warm=WarmPool() if warm else None,
    )
    todo = [key for key in parent.order if in_shard(key, options.shard) and key not in graded]
    regraded = {key for key in todo if _selected(key[0], tests_by_id, options)}
    alone = _left_alone(tests_by_id, options, regraded)
    regraded -= alone
    alone_note, alone_warning = _left_alone_notes(store, parent, alone, tests_by_id)
    missing = sorted({key[0] for key in todo if _asked(key[0], options) and key[0] not in tests_by_id})
    if missing:
        # Asked to regrade (all tests, or those --tests names) but the eval has no such test: carried over
        # as the parent graded them, and said so.
        carried = (
            f"{len(missing)} test{'s' if len(missing) > 1 else ''} carried over unchanged, not regraded: "
            f"the eval has no test {_listing(missing)} (pass --eval with the eval file that has them)"
        )
        suite = _warned(suite, carried)
    suite = _warned(
        suite,
        _unfinished(store, parent),
        alone_warning,
        *_agentv_scores(store, parent, options, suite, threshold, regraded),
        *_grader_changes(store, parent, suite, options, regraded),
    )
    reasons, cut, untraced = _regradable(origin, regraded)
    suite = _warned(
        suite,
        untraced_warning([tests_by_id[t] for t in dict.fromkeys(k[0] for k in todo if k in untraced)], options.graders),
    )
    if cut:
        truncated = (
            f"{len(cut)} test{'s' if len(cut) > 1 else ''} ({_listing(cut)}): the source kept only the first lines of "
            "file_changes (AgentV 4's run folder keeps 20); their code and LLM graders' verdicts are carried over "
            "unless this replay changes the grader, which then grades the lines kept"
        )
        suite = _warned(suite, truncated)
    if origin.started.kind == "imported":  # an import holds no workspace snapshot (AgentV's results keep none)
        tests = [tests_by_id[t] for t in dict.fromkeys(k[0] for k in todo if k in regraded)]
        suite = _warned(suite, unsnapshotted_warning(tests, suite, options))
    unable = [
        (key, reason)
        for key in todo
        if key in regraded
        and (
            reason := reasons.get(key, _NO_TRANSCRIPT)
            or (missing_runtime(tests_by_id[key[0]]) if key[0] in tests_by_id else None)
        )
        is not None
    ]
    del reasons
    targets = _targets_file(suite, options, parent)
    judges = _judges(suite, options, parent, targets)
    suite = _warned(suite, _judgeless(suite, options, judges, [k for k in todo if k in regraded]))
    job = ReplayJob(
        run_id=run_id,
        suite=suite,
        options=options,
        grade_options=grade_options,
        judges=judges,
        origin=transcript_run_id(store, parent.started),
        concurrency=concurrency,
        file_references=_file_references(parent, targets),
    )
    results: list[TestScored] = []
    lock = threading.Lock()

    def done(key: ResultKey, scored: TestScored) -> None:
        with lock:
            results.append(scored)
        if progress and key in regraded:
            progress(scored)

    pending = set(todo)

    def windows(only: set[ResultKey] | None = None) -> Iterator[list[Work]]:
        """The work of ``todo`` (of ``only`` among it), a window of the parent at a time, read as it is asked for."""
        for keys in parent.windows():
            keys = [k for k in keys if k in pending and (only is None or k in only)]
            if keys:
                tests = parent.tests(keys)
                sources = origin.tests(keys) if origin is not parent else tests
                yield [Work(key, tests[key], sources.get(key, tests[key])) for key in keys]

    def carrying_then_regraded() -> Iterator[list[Work]]:
        # Carrying a verdict over takes no grading: those tests stay here, window by window, the rest go on
        # to the workers.
        for work in windows():
            LocalExecutor().grade(job, store, [[w for w in work if w.key not in regraded]], concurrency=1, done=done)
            yield [w for w in work if w.key in regraded]

    executor = executor or LocalExecutor()
    batch: BatchSummary | None = None
    try:
        with contextlib.closing(judges):
            batches = _collect_judge_requests(store, job, windows(regraded)) if options.batch and regraded else None
            if begin is not None:
                begin()
            if on_start:
                # The tests that will be graded (the others are carried over, which takes no time to speak
                # of), told once the replay has begun: a --batch replay refused above names no replay.
                on_start(run_id, len(regraded), drifted, unable)
            if note is not None and alone_note is not None:
                note(alone_note)
            if batches is not None:
                batch = _judge_batches(store, job, batches, note)
            executor.grade(
                job,
                store,
                carrying_then_regraded() if executor.remote else windows(),
                concurrency=concurrency,
                done=done,
            )
    finally:
        if grade_options.warm is not None:
            grade_options.warm.close()
    complete = _complete_if_done(store, run_id, parent)
    position = {t.id: i for i, t in enumerate(suite.tests)}
    results.sort(key=lambda s: (position.get(s.test_id, len(position)), s.test_id, s.target or "", s.attempt))
    return ReplayOutcome(run_id, parent.run_id, results, drifted, complete, list(suite.warnings), unable, batch)


def _warned(suite: EvalSuite, *warnings: str | None) -> EvalSuite:
    """``suite`` with the warnings given (None: none) after its own, as the replay reports them."""
    given = [w for w in warnings if w]
    return suite.model_copy(update={"warnings": [*suite.warnings, *given]}) if given else suite


_FINISH = {
    "recorded": "`evalstore run --resume {run}` runs the rest",
    "replay": "`evalstore replay --resume {run}` regrades the rest",
    "imported": "importing the same source again completes it",
}
"""How each kind of run that stopped part way is finished."""


def _unfinished(store: EventStore, parent: RunWindows) -> str | None:
    """A warning when the run regraded stopped part way (Ctrl-C, a crash): only what it recorded is regraded."""
    (row,) = store.query("runs", run_id=parent.run_id) or [{"status": "completed"}]
    if row["status"] != "started":
        return None
    finish = _FINISH.get(parent.started.kind, "").format(run=parent.run_id)
    return (
        f"run {parent.run_id} did not finish (it was interrupted, or is still running): this replay regrades the "
        f"{len(parent.order)} result{'s' if len(parent.order) != 1 else ''} it recorded"
        + (f"; {finish} first" if finish else "")
    )


def _agentv_scores(
    store: EventStore,
    parent: RunWindows,
    options: ReplayOptions,
    suite: EvalSuite,
    threshold: float,
    regraded: set[ResultKey],
) -> list[str | None]:
    """Warnings for results of the AgentV run this replay regrades that it scores or marks otherwise with no
    grader changed (:mod:`pass_marks`): marked pass or fail against another pass mark than the one it
    applies (none when ``--threshold`` chose it), scored 0 by AgentV for a grader that failed to run."""
    started = parent.started
    # An import that is not an Inspect log's is AgentV's (the two importers); asked so, not through the
    # AgentV readers' module, which every replay would then load (8 ms of an unchanged replay).
    agentv = started.kind == "imported" and started.source_format not in INSPECT_FORMATS
    if not regraded or not agentv:
        return []
    own = {t.id: t.threshold for t in suite.tests}
    results = store.query("results", run_id=parent.run_id)  # read once for both
    return [
        None if options.threshold is not None else marked_otherwise(results, parent.run_id, threshold, own, regraded),
        scored_zero(store, results, parent.run_id, regraded),
    ]


def _grader_changes(
    store: EventStore, parent: RunWindows, suite: EvalSuite, options: ReplayOptions, regraded: set[ResultKey]
) -> list[str]:
    """Warnings for the parent's graders of the results regraded that the replay does not grade again as they
    were (:mod:`grader_sets`)."""
    if not regraded:
        return []
    of_regraded = (
        (test_id, grader, kind)
        for test_id, target, attempt, grader, kind in store.graders_of(parent.run_id)
        if (test_id, target, attempt) in regraded
    )
    return grader_warnings(of_regraded, suite, options.graders)


def _collect_judge_requests(store: EventStore, job: ReplayJob, work: Iterable[list[Work]]) -> JudgeBatches | None:
    """``--batch``'s collecting pass over the tests' judge graders (nothing it grades is kept, nothing is
    written): the requests that miss the judge cache. A judge they need that cannot be called (its key
    unset) is refused here, as ``run`` refuses it, before the replay begins: a batch could not be
    submitted, and each request sent directly instead would be an execution error."""
    from evalstore.replay.grading.judge.batches import JudgeBatches  # httpx, only when batching

    names = {g.name for t in job.suite.tests for g in t.graders if isinstance(g, (LlmGraderSpec, CompositeSpec))}
    if job.options.graders is not None:
        names &= set(job.options.graders)
    if not names:
        return None
    batches = JudgeBatches()
    collecting = dataclasses.replace(
        job,
        options=dataclasses.replace(job.options, graders=sorted(names)),
        grade_options=dataclasses.replace(job.grade_options, batch=batches),
    )
    for window in work:
        run_concurrently(lambda w: collecting.grade(store, w, Collected()), window, job.concurrency)
    batches.collecting = False
    batches.check_callable(job.judges)
    return batches


def _judge_batches(
    store: EventStore, job: ReplayJob, batches: JudgeBatches, note: Callable[[str], None] | None
) -> BatchSummary:
    """``--batch``: the requests the collecting pass noted through the batch APIs (the batches this replay
    recorded before first: a resume submits nothing again), and the replies handed to the grading that
    follows."""
    from evalstore.replay.grading.judge.batches import settle  # httpx, only when batching

    kinds = ["judge_batch_intended", "judge_batch_submitted"]
    recorded = [s.event for s in store.read_stream(job.run_id, types=kinds)]
    summary = settle(
        batches,
        job.judges,
        recorded,  # type: ignore[arg-type]
        lambda event: store.append(job.run_id, [event]),  # an intent before its submission, a batch before its wait
        note=note,
    )
    job.grade_options = dataclasses.replace(job.grade_options, batch=batches)
    return summary


def judge_requests(store: EventStore, run_id: str) -> dict[str, int]:
    """A replay's judge requests (every session of it): answered by a batch (``by_batch``), sent one at a
    time (``direct``), and replies reused from the judge cache (``reused``)."""
    counts = {"by_batch": 0, "direct": 0, "reused": 0}
    for stored in store.read_stream(run_id, types=["grader_called"]):
        call = stored.event
        if call.call != "judge":  # type: ignore[attr-defined]
            continue
        if call.cache_hit:  # type: ignore[attr-defined]
            counts["reused"] += 1
        else:
            counts["by_batch" if call.batch_id else "direct"] += 1  # type: ignore[attr-defined]
    return counts


@dataclass
class ReplayJob:
    """What grading one test of a replay takes besides the store and the test: the same for every test,
    and picklable, so an executor can send it to worker processes once (``executors/ray.py``)."""

    run_id: str
    suite: EvalSuite
    options: ReplayOptions
    grade_options: GradeOptions
    judges: JudgePool
    origin: str
    """The run holding the transcripts, whose executions a code grader may reuse (``read_ahead``)."""
    concurrency: int = 4
    """Tests graded at once by one process (a worker of a remote executor too)."""
    file_references: dict[str, bool] = dataclasses.field(default_factory=dict)
    """Of a run of several targets, per target: whether AgentV gives it file inputs by reference (each
    target's provider; ``grade_options`` holds the one target's of a run of one)."""

    @functools.cached_property
    def tests_by_id(self) -> dict[str, EvalTest]:
        return {t.id: t for t in self.suite.tests}

    def read_ahead(self, store: EventStore) -> ReadAhead | None:
        return _read_ahead(store, self.suite, self.options, self.origin)

    def transcript_digests(self, work: Sequence[Work]) -> list[str]:
        """The message blobs the tests of ``work`` that are regraded will read, in order."""
        return [
            t[1].messages_sha256
            for w in work
            if _selected(w.key[0], self.tests_by_id, self.options)
            and (t := w.source.transcript)
            and t[1].messages_sha256
        ]

    def grade(
        self,
        store: EventStore,
        work: Work,
        appends: BatchedAppends | Collected,
        ahead: ReadAhead | None = None,
        transcript_blob: Callable[[str], bytes] | None = None,
        test_waiting: Callable[[], None] = no_wait,
    ) -> TestScored:
        """Grade (or carry over) one test into its own recorder, handed whole to ``appends``.
        ``test_waiting``: see ``GradingContext.test_waiting``."""
        return _replay_test(
            store,
            self.run_id,
            work.key,
            work.parent,
            {work.key: work.source},
            self.tests_by_id,
            self.suite,
            self.options,
            _for_target(self.grade_options, self.file_references, work.key[1]),
            self.judges,
            appends,
            ahead,
            transcript_blob,
            test_waiting,
        )


def _for_target(options: GradeOptions, file_references: dict[str, bool], target: str | None) -> GradeOptions:
    if target not in file_references or file_references[target] == options.file_references:
        return options
    return dataclasses.replace(options, file_references=file_references[target])


class Collected(list["StoreRecorder"]):
    """Finished tests' recorders kept instead of appended (a remote worker returns them to the driver)."""

    def add(self, recorder: StoreRecorder) -> None:
        self.append(recorder)


def _read_ahead(store: EventStore, suite: EvalSuite, options: ReplayOptions, origin: str) -> ReadAhead | None:
    """The code-grader executions this replay is most likely to reuse, read at once: those of the runs
    sharing its transcripts (``origin`` and every replay descending from it). None when nothing may be
    reused (``--no-cache``, or no code grader that allows it)."""
    if options.no_cache or not any(
        isinstance(g, CodeGraderSpec) and g.cache for test in suite.tests for g in test.graders
    ):
        return None
    parents = {r["run_id"]: r["parent_run_id"] if r["kind"] == "replay" else None for r in store.query("runs")}
    origins: dict[str, str] = {}

    def origin_of(run_id: str) -> str:
        seen = []
        while run_id not in origins and parents.get(run_id) and run_id not in seen:
            seen.append(run_id)
            run_id = parents[run_id]  # type: ignore[assignment]
        found = origins.get(run_id, run_id)
        for r in seen:
            origins[r] = found
        return found

    return ReadAhead.of_runs(store, [run_id for run_id in parents if origin_of(run_id) == origin])


def _asked(test_id: str, options: ReplayOptions) -> bool:
    """Whether the replay was asked to regrade a test: every test, or those ``--tests`` names."""
    return options.tests is None or id_matcher(options.tests)(test_id)


def _selected(test_id: str, tests_by_id: dict[str, EvalTest], options: ReplayOptions) -> bool:
    """Whether a test is regraded (else its parent's verdicts are carried over)."""
    return test_id in tests_by_id and _asked(test_id, options)


def _leaves_alone(test: EvalTest, options: ReplayOptions) -> bool:
    """Whether ``--graders`` leaves a test alone: it names none of the test's graders. Such a test is carried
    over whole, its parent's verdicts and score kept, as a test ``--tests`` leaves out is: nothing of it is
    regraded, so it neither counts as regraded nor gates the exit code, whatever its parent scored."""
    if options.graders is None:
        return False
    return not {name for name, _ in verdict_graders(test)} & set(options.graders)


def _left_alone(tests_by_id: dict[str, EvalTest], options: ReplayOptions, keys: set[ResultKey]) -> set[ResultKey]:
    """The results of ``keys`` that ``--graders`` leaves alone (:func:`_leaves_alone`)."""
    if options.graders is None or not keys:
        return set()
    return {key for key in keys if _leaves_alone(tests_by_id[key[0]], options)}


def _left_alone_notes(
    store: EventStore, parent: RunWindows, alone: set[ResultKey], tests_by_id: dict[str, EvalTest]
) -> tuple[str | None, str | None]:
    """What the replay says of the results ``--graders`` leaves alone: a note naming those whose parent holds
    verdicts of their graders (carried over as they were), and a warning naming those whose parent holds
    none (an AgentV import's test graded by its implicit ``llm-grader`` alone, whose row holds the test's
    score and no verdict of that grader: its score is carried over, though nothing says which grader gave it)."""
    if not alone:
        return None, None
    held = {result_key(t, target, attempt) for t, target, attempt, _, _ in store.graders_of(parent.run_id)}
    kept = sorted({key[0] for key in alone if key in held})
    bare = sorted({key[0] for key in alone if key not in held})
    note = (
        f"{len(kept)} test{'s' if len(kept) > 1 else ''} carried over unchanged, not regraded: --graders names "
        f"none of {'their' if len(kept) > 1 else 'its'} graders ({_listing(kept)})"
        if kept
        else None
    )
    if not bare:
        return note, None
    names = sorted({name for test_id in bare for name, _ in verdict_graders(tests_by_id[test_id])})
    warning = (
        f"--graders names no grader of {_listing(bare)} ({', '.join(names)}), and the parent has no verdict of "
        "them to keep (an AgentV import has none of its implicit llm-grader): carried over with the parent's "
        f"score, not graded (name {', '.join(names)} in --graders to grade them)"
    )
    return note, warning


def reuse_counts(store: EventStore, run_id: str) -> dict[str, int]:
    """What a replay did with its code graders and judges: code-grader verdicts whose process ran
    (``code_ran``), whose recorded execution was reused (``code_reused``), that could not start a process
    (``code_not_run``: an execution error saying why, such as a workspace the run holds no snapshot of) and
    that were carried over from the parent (``code_carried``: a grader ``--graders`` left out, a test
    ``--tests`` left out, a grader whose input the run lost); and verdicts of other graders that reused a
    judge reply (``judge_reused``)."""
    counts = {"code_ran": 0, "code_reused": 0, "code_not_run": 0, "code_carried": 0, "judge_reused": 0}
    by_type = store.cache_hit_counts(run_id, "graded")
    for (grader_type, cache_hit), n in by_type.items():
        if grader_type == "code-grader":
            counts["code_reused" if cache_hit else "code_ran"] += n
        elif cache_hit:
            counts["judge_reused"] += n
    counts["code_carried"] = sum(
        n for (grader_type, _), n in store.cache_hit_counts(run_id, "carried").items() if grader_type == "code-grader"
    )
    if counts["code_ran"]:
        # A grader that could not start its process (no workspace to run in) recorded no call: an execution
        # error, of the few a replay has, whose verdict names no grader call.
        errored = store.query(
            "verdicts", run_id=run_id, grader_type="code-grader", origin="graded", status="execution_error"
        )
        seqs = [row["seq"] for row in errored if not row["cache_hit"]]
        verdicts = [stored.event for stored in store.events_at(seqs).values()] if seqs else []
        unrun = len([v for v in verdicts if isinstance(v, VerdictRecorded) and not v.grader_call_event_ids])
        counts["code_ran"] -= unrun
        counts["code_not_run"] += unrun
    # A conversation's verdicts are its turns' (``turn-N``, ``conversation``, of type ``rubrics``), each holding
    # its graders' results: what those graders ran and reused is counted from the calls the replay recorded
    # for those tests (a judged grader's first call says whether its reply was reused), not from the verdicts.
    conversation = [
        v
        for v in (
            store.query("verdicts", run_id=run_id, grader_type=TURN_TYPE, origin="graded")
            if any(grader_type == TURN_TYPE for grader_type, _ in by_type)
            else []
        )
        if is_conversation_verdict(v["grader"])
    ]
    counts["judge_reused"] -= sum(1 for v in conversation if v["cache_hit"])
    turns = {(v["test_id"], v["target"] or "", v["attempt"]) for v in conversation}
    for test_id in sorted({key[0] for key in turns}):
        for stored in store.test_events(run_id, test_id, types=("grader_called",)):
            call = stored.event
            assert isinstance(call, GraderCalled)
            if (call.test_id, call.target or "", call.attempt) not in turns:
                continue
            if call.call == "process":
                counts["code_reused" if call.cache_hit else "code_ran"] += 1
            elif call.cache_hit and call.attempt_number == 1:
                counts["judge_reused"] += 1
    return counts


def plain_text_graders(store: EventStore, run_id: str, parent_run_id: str, changed: Iterable[str]) -> list[str]:
    """The code graders whose verdicts in the ``changed`` tests of a replay of an AgentV import were read from
    plain-text stdout that AgentV reads by the exit code alone (``graders.code.PLAIN_TEXT_DIFFERS``): a change
    of score the grader did not make. None for a replay of anything else (the same reading on both sides)."""
    from evalstore.replay.grading.graders.code import PLAIN_TEXT_DIFFERS

    changed = list(changed)
    parent = store.query("runs", run_id=parent_run_id) if changed else []
    if not parent or parent[0]["kind"] != "imported":
        return []
    found = set()
    for _, grader, stored in store.verdict_events(run_id, changed):
        verdict = stored.event
        if isinstance(verdict, VerdictRecorded) and PLAIN_TEXT_DIFFERS in verdict.evidence:
            found.add(grader)
    return sorted(found)


def _unscored(
    key: ResultKey,
    grade_options: GradeOptions,
    suite: EvalSuite,
    status: Literal["execution_error", "not_regradable"],
    error: str,
) -> TestScored:
    """The score of a test a replay could not grade: 0, failed, with why."""
    test_id, target, attempt = key
    return TestScored(
        test_id=test_id,
        target=target or None,
        attempt=attempt,
        score=0.0,
        passed=False,
        status=status,
        # _execute always sets it (the run's threshold, else the suite's); the fallback is for the type.
        threshold=grade_options.threshold if grade_options.threshold is not None else suite.threshold,
        error=error,
        produced_at=produced_now(),
        graders=[],
    )


def _replay_test(
    store: EventStore,
    run_id: str,
    key: ResultKey,
    parent_test: TestMaterial,
    sources: dict[ResultKey, TestMaterial],
    tests_by_id: dict[str, EvalTest],
    suite: EvalSuite,
    options: ReplayOptions,
    grade_options: GradeOptions,
    judges: JudgePool,
    batches: BatchedAppends | Collected,
    ahead: ReadAhead | None = None,
    transcript_blob: Callable[[str], bytes] | None = None,
    test_waiting: Callable[[], None] = no_wait,
) -> TestScored:
    test_id, target, attempt = key
    recorder = StoreRecorder(store, run_id, ahead, key=key, waiting=test_waiting)
    carried = parent_test.verdicts
    test = tests_by_id.get(test_id)
    if test is None or not _selected(test_id, tests_by_id, options) or _leaves_alone(test, options):
        # Not regraded: the parent's verdicts and score carry over unchanged, marked as carried.
        for _grader, (vid, verdict) in carried.items():
            recorder.record(verdict.model_copy(update={"origin": "carried", "carried_from": vid, "source": None}))
        scored = parent_test.scored[1] if parent_test.scored else None
        if scored is None:
            scored = _unscored(
                key,
                grade_options,
                suite,
                "execution_error",
                "the parent run has no score for this test and the eval has no such test",
            )
        else:
            scored = scored.model_copy(update={"origin": "carried", "source": None})
        recorder.record(scored)
        batches.add(recorder)
        return scored
    source = sources.get(key, parent_test)
    recorder.record(case_event(test, target or None, attempt))
    failure = agent_failure(source)
    if failure is not None:
        origin = source.scored[1].row_fields if source.scored is not None else {}
        scored = _unscored(key, grade_options, suite, "execution_error", failure).model_copy(
            update={"row_fields": {k: origin[k] for k in AGENT_FAILURE_FIELDS if k in origin}}
        )
        recorder.record(scored)
        batches.add(recorder)
        return scored
    reason = not_regradable_reason(source) or missing_runtime(test)
    if reason is not None:
        # Nothing to grade: marked so, with no verdicts, and left out of the run's scores and comparisons.
        scored = _unscored(key, grade_options, suite, "not_regradable", f"not regradable: {reason}")
        recorder.record(scored)
        batches.add(recorder)
        return scored
    info = transcript_info(transcript_blob or store.get_blob, source)
    only = options.graders
    if source.transcript is not None:
        only, carried, _ = keep_recorded(test, source, suite.workspace_for(test).configured, options, only, carried)
    grade = grade_test(
        suite,
        test,
        info,
        recorder,
        target=target or None,
        attempt=attempt,
        options=grade_options,
        judges=judges,
        only=only,
        carried=carried,
        test_waiting=test_waiting,
    )
    batches.add(recorder)
    return grade.scored


_LISTED = 20
"""How many test ids or media types an error lists before it says how many more there are."""


def _listing(items: list[str]) -> str:
    shown = ", ".join(items[:_LISTED])
    return shown + (f", and {len(items) - _LISTED} more" if len(items) > _LISTED else "")


def _check_selection(store: EventStore, parent: Run, options: ReplayOptions) -> None:
    """Refuse, before anything is written, a ``--tests`` glob that matches no test of the run and a
    ``--preprocessor`` for a type no file in the run has: either would write a full replay that
    changes nothing, and is almost always a typo."""
    if options.tests is not None:
        ids = sorted({key[0] for key in parent.order})
        if not any(id_matcher(options.tests)(test_id) for test_id in ids):
            raise ReplayError(
                f"--tests {options.tests!r} matches no test of run {parent.run_id} (its tests: {_listing(ids) or 'none'})"
            )
    if not options.preprocessors:
        return
    present = {
        normalize_media_type(stored.event.media_type)  # type: ignore[attr-defined]
        for stored in store.read_stream(transcript_run_id(store, parent.started), types=["artifact_stored"])
        if stored.event.media_type  # type: ignore[attr-defined]
    }
    for value in options.preprocessors:
        type_ = value.partition("=")[0].strip()
        if type_ and normalize_media_type(type_) not in present:
            shown = [f"{m} ({alias_of(m)})" if alias_of(m) else m for m in sorted(present)]
            raise ReplayError(
                f"--preprocessor {type_}: no file of that type in run {parent.run_id} "
                f"(media types in its artifacts: {_listing(shown) or 'none'})"
            )


def _check_eval(parent: Run, suite: EvalSuite, options: ReplayOptions) -> None:
    """Refuse, before anything is written, an ``--eval`` that has none of the run's tests: the replay
    would regrade nothing (almost always the wrong file)."""
    if not options.eval_path:
        return
    ran = sorted({key[0] for key in parent.order})
    if ran and not {t.id for t in suite.tests} & set(ran):
        theirs = sorted(t.id for t in suite.tests)
        raise ReplayError(
            f"--eval {options.eval_path}: none of its tests is a test of run {parent.run_id} "
            f"(the run's tests: {_listing(ran)}; the eval's: {_listing(theirs) or 'none'})"
        )


def transcript_run(store: EventStore, run: RunMaterial) -> RunMaterial:
    """The run holding the transcripts, loaded: the run itself, or for a replay, the run it (ultimately) replayed."""
    origin = transcript_run_id(store, run.started)
    return run if origin == run.run_id else load_run(store, origin)


Run = RunMaterial | RunWindows
"""A stored run as a replay's checks read it: its id, its ``run_started`` and its results' keys in order."""


def _origin(store: EventStore, run: Run) -> RunWindows:
    """The run holding ``run``'s transcripts, to be read a window at a time (``run`` itself when it does)."""
    origin = transcript_run_id(store, run.started)
    return run if isinstance(run, RunWindows) and origin == run.run_id else RunWindows(store, origin)


_NO_TRANSCRIPT = not_regradable_reason(TestMaterial(("", "", 1)))
"""Why a test whose run holds no transcript cannot be regraded."""


def _regradable(
    origin: RunWindows, keys: set[ResultKey]
) -> tuple[dict[ResultKey, str | None], list[str], set[ResultKey]]:
    """For each of these tests that has a transcript, why it cannot be regraded (None: it can); the tests
    whose transcript lost lines of its file changes; and those regradable whose source recorded no trace.
    Read from the run holding the transcripts, one transcript at a time, keeping only these answers (a
    replay of 10^7 results holds no transcript)."""
    reasons: dict[ResultKey, str | None] = {}
    cut: set[str] = set()
    untraced: set[ResultKey] = set()
    for event_id, event in origin.transcripts():
        key = result_key(event.test_id, event.target, event.attempt)
        if key in keys:
            reasons[key] = not_regradable_reason(TestMaterial(key, transcript=(event_id, event)))
            if event.file_changes_lost_lines:
                cut.add(key[0])
            if reasons[key] is None and not recorded_trace(event):
                untraced.add(key)
    return reasons, sorted(cut), untraced


def _complete_if_done(store: EventStore, run_id: str, parent: Run) -> bool:
    counts = store.result_counts(run_id).get(run_id)
    if counts is None or counts["tests"] + counts["not_regradable"] < len(parent.order):
        return False
    tally = Tally.from_counts(**counts)
    # Derived from the projections, so shards finishing together append identical, idempotent events.
    store.append(run_id, [NewEvent(tally.completed(), completion_event_id(run_id))])
    return True


# --- building the suite a replay grades with ----------------------------------------------------


def _suite(store: EventStore, parent: Run, options: ReplayOptions) -> EvalSuite:
    run_tests = partial(_run_tests, store, parent)
    if options.eval_path:
        suite = load_eval(options.eval_path, run_tests=run_tests)
    else:
        # A plain import's suite is the union of its results' eval files (``evalfile/union.py``).
        found = snapshot_eval(
            parent.started.eval_snapshot, store.get_blob, fallback=DiskResolver(), run_tests=run_tests
        )
        if found is None:
            # An Inspect log carries no eval file at all: its regrade names the graders in one of suite-level
            # `assertions:` only, which the run's own samples are graded with.
            inspect = parent.started.source_format in INSPECT_FORMATS
            raise ReplayError(
                f"run {parent.run_id} has no eval snapshot (imported without its eval file); pass --eval EVAL.yaml"
                + (
                    ": for an Inspect log, a file of suite-level `assertions:` (no `tests:`) grades its samples"
                    if inspect
                    else ""
                )
            )
        suite = found
    suite = _swap_preprocessors(suite, options.inherited_preprocessors, recorded=parent.started)
    suite = _swap_preprocessors(suite, options.preprocessors)
    suite = _swap_prompts(suite, options.inherited_prompts, inherited=True)
    suite = _swap_prompts(suite, options.prompts)
    if options.graders is not None:
        known = {name for t in suite.tests for name, _ in verdict_graders(t)}  # a conversation's turn-N too
        if not options.graders:
            # Read as "no selection", an empty list would regrade every grader.
            raise ReplayError(
                f"--graders names no grader: give names separated by commas (graders: {', '.join(sorted(known))}), "
                "or leave --graders out to regrade every grader"
            )
        unknown = [g for g in options.graders if g not in known]
        if unknown:
            raise ReplayError(f"--graders: no grader named {', '.join(unknown)} (graders: {', '.join(sorted(known))})")
        _check_prompts_regraded(suite, options)
    return suite


def _check_prompts_regraded(suite: EvalSuite, options: ReplayOptions) -> None:
    """Refuse a ``--prompt`` swap for a grader the replay does not regrade: its verdicts are carried over
    from the parent, so the swap would change nothing, yet the replay would record it as made."""
    only = set(options.graders or ())
    regraded = only | {m.name for t in suite.tests for name, g in verdict_graders(t) if name in only for m in within(g)}
    for value in options.prompts:
        name = value.partition("=")[0]
        if name not in regraded:
            raise ReplayError(
                f"--prompt {name}: the replay regrades only {', '.join(sorted(only))} (--graders, or the replay "
                f"it regrades), not {name}, so the prompt would change nothing; add {name} to --graders"
            )


def _run_tests(store: EventStore, parent: Run) -> list[dict[str, Any]]:
    """The run's own tests as raw test objects, for an eval of suite-level assertions and no tests: each
    test's recorded case (its input, expected output, criteria and metadata), once per test id."""
    tests: dict[str, dict[str, Any]] = {}
    for stored in store.read_stream(transcript_run_id(store, parent.started), types=["test_case_recorded"]):
        case: TestCaseRecorded = stored.event  # type: ignore[assignment]
        if case.test_id in tests or not case.input:
            continue  # a result with no recorded case (some AgentV rows) has no input to grade
        raw: dict[str, Any] = {"id": case.test_id, "input": case.input}
        if case.expected_output is not None:
            raw["expected_output"] = case.expected_output
        if case.criteria:
            raw["criteria"] = case.criteria
        if case.metadata:
            raw["metadata"] = case.metadata
        tests[case.test_id] = raw
    return list(tests.values())


def graded_suite(store: EventStore, run: RunMaterial, stack: contextlib.ExitStack) -> EvalSuite:
    """The suite ``evalstore replay RUN`` with no options grades RUN's tests with: RUN's eval snapshot and
    the swaps of every replay down its chain, gone scripts and converters run from their recorded bytes
    (kept until ``stack`` closes). A run with no eval snapshot is refused (pass ``--eval``)."""
    options = effective_options(store, run.started, ReplayOptions())
    suite, _, _ = stack.enter_context(
        restored_files(store, _suite(store, run, options), drift(run.started.eval_snapshot))
    )
    return suite


def parse_preprocessor(value: str, search_roots: list[str], recorded: RunStarted | None = None) -> ConverterSpec:
    """A ``TYPE=COMMAND`` swap as a converter, its script resolved through ``search_roots``; with
    ``recorded`` (an inherited swap: the run that inherits it, a replay), the converter its eval
    snapshot recorded, whatever folder this one runs from (``restored.py`` runs its recorded bytes
    when it is gone)."""
    type_, sep, command = value.partition("=")
    if not sep or not type_.strip() or not command.strip():
        raise ReplayError(f"--preprocessor {value!r}: expected TYPE=COMMAND, e.g. xlsx='python3 to_csv.py'")
    if command.lstrip().startswith("["):
        try:
            argv = json.loads(command)
        except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
            problem = decode_problem(exc)
            raise ReplayError(f"--preprocessor {type_}: COMMAND is not a valid JSON array ({problem})") from None
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
            raise ReplayError(f"--preprocessor {type_}: COMMAND must be a non-empty JSON array of strings")
    else:
        argv = shlex.split(command)
    found = _recorded_converter(value, argv[-1], recorded.eval_snapshot) if recorded is not None else None
    if found is not None:
        argv[-1] = found
    else:
        try:
            argv[-1] = str(resolve_reference(argv[-1], search_roots))
        except ReplayError as exc:
            raise ReplayError(f"--preprocessor {type_}: {exc}") from None
    return ConverterSpec(type=type_.strip(), media_type=normalize_media_type(type_), command=argv)


def _recorded_converter(value: str, ref: str, recorded: list[Any]) -> str | None:
    """The path a replay recorded for the converter of swap ``value``: the snapshot entry the swap wrote
    (its ``ref`` is the swap as given), else, for replays recorded before that, the converter whose
    recorded path ``ref`` names (absolute, or its last components)."""
    converters = [s for s in recorded if s.role == "converter"]
    for snap in converters:
        if snap.ref == value:
            return snap.path
    name = ref.removeprefix("file://")
    parts = Path(name).parts
    if ".." in parts or not parts:
        return None
    for snap in converters:
        if Path(name).is_absolute() and snap.path == name:
            return snap.path
        if not Path(name).is_absolute() and Path(snap.path).parts[-len(parts) :] == parts:
            return snap.path
    return None


def _with_converter(converters: list[ConverterSpec], new: ConverterSpec) -> list[ConverterSpec]:
    return [c for c in converters if c.media_type != new.media_type] + [new]


def _swap_preprocessors(suite: EvalSuite, values: list[str], recorded: RunStarted | None = None) -> EvalSuite:
    swapped: dict[str, str] = {}  # media type -> the type as given
    for value in values:
        new = parse_preprocessor(value, suite.search_roots, recorded)
        if recorded is None and new.media_type in swapped:  # the last would win, silently
            raise ReplayError(
                f"--preprocessor {new.type}: {new.media_type} is swapped twice (also as {swapped[new.media_type]}); "
                "give one converter per type"
            )
        swapped[new.media_type] = new.type
        suite = suite.with_graders(partial(_graded_with, new))
        # The swap as given is the snapshot entry's ref: how a replay of this replay finds the converter.
        refs = [*suite.referenced_files, ("converter", new.command[-1], value)]
        suite = suite.model_copy(
            update={"preprocessors": _with_converter(suite.preprocessors, new), "referenced_files": refs}
        )
    return suite


def _graded_with(converter: ConverterSpec, grader: GraderSpec) -> GraderSpec:
    """A swapped converter reaches the graders that read converted files: LLM graders, and a code or
    deterministic grader that asked for converted text with ``preprocessors:`` of its own; the others read
    the text answer (and raw files), as in AgentV, and are left as they are."""
    if isinstance(grader, CompositeSpec):
        return grader.model_copy(update={"assertions": [_graded_with(converter, g) for g in grader.assertions]})
    if isinstance(grader, LlmGraderSpec) or (
        isinstance(grader, (CodeGraderSpec, AssertionSpec)) and grader.preprocessors
    ):
        return grader.model_copy(update={"preprocessors": _with_converter(grader.preprocessors, converter)})
    return grader


def prompt_swap(value: str, search_roots: list[str], *, inherited: bool = False) -> tuple[str, str, Path]:
    """A ``GRADER=file://PATH`` swap's grader, the reference as given, and the file it names. A path typed
    on the command line is looked for in the current folder first, as every path a command is given, then
    where the eval's own references are (the eval's folder, its parents: ``--prompt q=file://../prompts/q.md``
    as the eval file writes it); an inherited swap, recorded by a replay, as that replay resolved it."""
    name, sep, ref = value.partition("=")
    if not sep or not name or not ref:
        raise ReplayError(f"--prompt {value!r}: expected GRADER=file://PATH")
    roots = search_roots if inherited else [str(Path.cwd()), *search_roots]
    try:
        return name, ref, resolve_reference(ref, roots)
    except ReplayError as exc:
        raise ReplayError(f"--prompt {name}: {exc}") from None


def _gone_prompt(value: str) -> tuple[str, str, Path] | None:
    """An inherited swap's grader, reference and file, when the replay recorded the file by its absolute
    path and it is no longer there; None otherwise (it is looked for as any swap is)."""
    name, _, ref = value.partition("=")
    path = Path(ref.removeprefix("file://"))
    return (name, ref, path) if path.is_absolute() and not path.exists() else None


def _swap_prompts(suite: EvalSuite, values: list[str], *, inherited: bool = False) -> EvalSuite:
    if not inherited:
        names = [v.partition("=")[0] for v in values]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ReplayError(f"--prompt {twice[0]} is given more than once; give one prompt per grader")
    for value in values:
        gone = _gone_prompt(value) if inherited else None
        if gone is not None:
            # Another checkout, a bundle imported elsewhere: graded from the bytes its replay recorded
            # (``restored.py``), which were checked when it was given.
            name, ref, path, text = *gone, None
        else:
            name, ref, path = prompt_swap(value, suite.search_roots, inherited=inherited)
            try:
                text = read_text(path, DiskResolver())
            except ReplayError as exc:
                raise ReplayError(f"--prompt {name}: {exc}") from None
        if text is not None and not PROMPT_VARIABLE.search(text):
            raise ReplayError(
                f"--prompt {name}: `{path}` contains neither {{{{output}}}} nor {{{{expected_output}}}}; "
                "add one so the judge sees the answer"
            )
        swapped: list[bool] = []
        tests = [
            test.model_copy(update={"graders": [_prompted(g, name, str(path), ref, swapped) for g in test.graders]})
            for test in suite.tests
        ]
        found = bool(swapped)
        if not found and inherited:
            warning = f"the parent replay's --prompt {name} is not applied: the eval has no LLM grader {name!r}"
            suite = _warned(suite, warning)
            continue
        if not found:
            raise ReplayError(_no_llm_grader(suite, name))
        suite = suite.model_copy(
            update={"tests": tests, "referenced_files": [*suite.referenced_files, ("prompt", str(path), ref)]}
        )
    return suite


def _prompted(grader: GraderSpec, name: str, path: str, ref: str, swapped: list[bool]) -> GraderSpec:
    """``grader`` with the prompt of its LLM grader ``name`` swapped: itself, or a member of a composite at any
    depth (named by its own name, as its result is shown in the composite's); ``swapped`` told of each."""
    if isinstance(grader, CompositeSpec):
        members = [_prompted(g, name, path, ref, swapped) for g in grader.assertions]
        return grader.model_copy(update={"assertions": members})
    if grader.name == name and isinstance(grader, LlmGraderSpec):
        swapped.append(True)
        return grader.model_copy(update={"prompt": None, "prompt_file": path, "prompt_ref": ref})
    return grader


def _no_llm_grader(suite: EvalSuite, name: str) -> str:
    """Why ``--prompt NAME`` swaps nothing, with the eval's LLM graders (a composite's members by their own
    names, saying whose members they are); for a composite's own name, its LLM members to name instead."""
    llm: dict[str, str] = {}  # name -> where, in the listing
    members: dict[str, list[str]] = {}  # composite -> its LLM members
    for test in suite.tests:
        for g in test.graders:
            for inner in within(g):
                if isinstance(inner, LlmGraderSpec):
                    llm.setdefault(inner.name, inner.name if inner is g else f"{inner.name} (in composite {g.name})")
                    if inner is not g and inner.name not in members.setdefault(g.name, []):
                        members[g.name].append(inner.name)
            if isinstance(g, CompositeSpec):
                members.setdefault(g.name, [])
    if name in members:
        if not members[name]:
            return f"--prompt {name}: {name!r} is a composite with no LLM grader among its members"
        return (
            f"--prompt {name}: {name!r} is a composite, not an LLM grader: name the member whose prompt to swap, "
            f"--prompt {members[name][0]}=file://... (its LLM members: {', '.join(members[name])})"
        )
    shown = ", ".join(llm[k] for k in sorted(llm))
    return f"--prompt {name}: no LLM grader named {name!r} in the eval (its LLM graders: {shown or 'none'})"


def _check_judges(suite: EvalSuite, options: ReplayOptions, parent: Run) -> None:
    """Refuse, before anything is written, a replay with LLM graders to regrade for which no judge
    target can be chosen: each of their verdicts would be an execution error (AgentV's run had a judge;
    recording 0.0 errors in its place would be a regrade that says nothing)."""
    tests_by_id = {t.id: t for t in suite.tests}
    keys = [k for k in parent.order if in_shard(k, options.shard) and _selected(k[0], tests_by_id, options)]
    judges = _judge_pool(suite, options, parent)  # asked, not used: nothing to keep from the graders yet
    try:
        problem = _judgeless(suite, options, judges, keys)
    finally:
        judges.close()
    if problem:
        raise JudgeConfigError(problem)


def _unused_judge(suite: EvalSuite, own: ReplayOptions, effective: ReplayOptions) -> str | None:
    """The warning for ``--judge-target``/``--judge-model`` given to a replay that regrades no grader able to
    call a judge: the swap changes nothing. Said, not refused: a script may name the judge for every suite
    it regrades (a ``--prompt`` for a grader left out is refused: it names one grader)."""
    given = [
        flag for flag, value in (("--judge-target", own.judge_target), ("--judge-model", own.judge_model)) if value
    ]
    if not given:
        return None
    only = set(effective.graders) if effective.graders is not None else None
    regraded = {name: g for t in suite.tests for name, g in verdict_graders(t) if only is None or name in only}
    if any(_needs_judge(g) for g in regraded.values()):
        return None
    return f"{' and '.join(given)} changes nothing: no grader this replay regrades calls a judge"


def _judgeless(suite: EvalSuite, options: ReplayOptions, pool: JudgePool, regraded: list[ResultKey]) -> str | None:
    """What is wrong when LLM graders the replay regrades (a composite's LLM members and aggregator too) have
    no judge target that can be chosen (none configured, an unknown name): they could neither call a judge
    nor reuse a reply (the judge's model is in the cache key). A chosen judge whose key is unset is not a
    problem here (its recorded replies may be all the replay needs)."""
    tests_by_id = {t.id: t for t in suite.tests}
    only = set(options.graders) if options.graders else None
    judgeless: dict[str, str] = {}
    for test_id, target, _ in regraded:
        test = tests_by_id[test_id]
        run_target = target or test.target or suite.target
        for name, grader in verdict_graders(test):
            if only is not None and name not in only:
                continue
            for asker, grader_target in judge_askers(grader):
                if asker in judgeless:
                    continue
                try:
                    pool.target(
                        grader_target=grader_target, run_target=run_target, override_target=options.judge_target
                    )
                except JudgeConfigError as exc:
                    judgeless[asker] = str(exc)
    if not judgeless:
        return None
    plural = len(judgeless) > 1
    # Without a targets file the run's target and its grader_target are names nothing defines: say where
    # the judges would have come from.
    unfound = (
        f" (no targets file was found above {suite.path} or named: give the run's with --targets FILE)"
        if pool.targets_file is None and not options.judge_target
        else ""
    )
    return (
        f"LLM grader{'s' if plural else ''} {', '.join(sorted(judgeless))}: {next(iter(judgeless.values()))}"
        f"{unfound}; or regrade only the other graders (--graders NAME,...)"
    )


def _needs_judge(grader: GraderSpec) -> bool:
    """Whether a grader may call a judge target: one that asks a judge (an LLM grader, a composite's LLM
    aggregator: :func:`judge_askers`) or a code grader given a target, itself or a composite's member."""
    return any(judge_askers(grader)) or any(
        isinstance(g, CodeGraderSpec) and bool(g.target_max_calls or g.target) for g in within(grader)
    )


def _judges(suite: EvalSuite, options: ReplayOptions, parent: Run, targets: TargetsFile | None):  # type: ignore[no-untyped-def]
    """The replay's judges. While they are open, no grader is given the variables only judges' targets
    reference (the judges' keys; ``processes.children.withhold``), the same ones whichever graders the replay
    runs, and as its run kept them: a grader's environment is part of its execution's reuse key.
    ``targets``: the replay's targets file as :func:`_targets_file` read it."""
    from evalstore.replay.grading.judge.pool import JudgePool

    pool = _judge_pool(suite, options, parent, targets)
    if targets is None:
        return pool
    own = {parent.started.target_name, *(parent.started.targets or {}), *(key[1] for key in parent.order)}
    # What ``run`` keeps from every child: the variables only the targets file's judges reference, less
    # those of the run's own targets (for an import, those its results name).
    withheld = JudgePool.from_targets_file(targets).variables(excluding={name for name in own if name})
    return pool.withhold_variables(withheld)


def _file_references(parent: Run, targets: TargetsFile | None) -> dict[str, bool]:
    """Per target of the run, whether AgentV gave its graders file inputs by reference (``<file: path>``: an
    agent's, ``graders.base.reads_files_itself``): from the run's targets as it recorded them, or, for an
    import (AgentV's results name a target, not its provider), from the replay's targets file (``targets``:
    the one AgentV bundled beside the eval in a run folder, or found above it)."""
    if parent.started.target or parent.started.targets:
        return {
            name: reads_files_itself((config or {}).get("provider"))
            for name, config in (parent.started.targets or {}).items()
        }
    if targets is None:
        return {}
    names = {key[1] for key in parent.order if key[1]}
    return {name: reads_files_itself(targets.targets[name].provider) for name in names if name in targets.targets}


def _targets_file(suite: EvalSuite, options: ReplayOptions, parent: Run) -> TargetsFile | None:
    """The replay's targets file (:func:`_targets_path`), read once for what it says of the run's targets; None
    when there is none or it cannot be read (a replay that needs no judge does not stop for it; one that does
    reads it again in :func:`_judge_pool`, which says why it cannot)."""
    path = _targets_path(suite, options, parent)
    if not path:
        return None
    try:
        return load_targets_file(path)
    except ReplayError:
        return None


def _targets_path(suite: EvalSuite, options: ReplayOptions, parent: Run) -> str | None:
    """The targets file a replay's judges come from: ``--targets``, the run's, the one found above the eval
    file, or the one AgentV bundled beside it (``run_targets_file``)."""
    path = run_targets_file(suite.path, options.targets_path or (parent.started.overrides or {}).get("targets_file"))
    return str(path) if path and Path(path).is_file() else None


def _judge_pool(  # type: ignore[no-untyped-def]
    suite: EvalSuite, options: ReplayOptions, parent: Run, targets: TargetsFile | None = None
):
    from evalstore.replay.grading.judge.pool import JudgePool

    only = set(options.graders) if options.graders else None
    if not any(
        _needs_judge(g) for t in suite.tests for name, g in verdict_graders(t) if (only is None or name in only)
    ):  # nothing to ask a judge (a conversation's turns' graders too): no targets file is read (one that cannot be read stops nothing)
        return JudgePool.from_env()
    path = _targets_path(suite, options, parent)
    if not path:
        return JudgePool.from_env()
    return JudgePool.from_targets_file(targets if targets is not None else load_targets_file(path))
