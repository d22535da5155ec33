"""Graders of a stored result whose input the run did not keep whole.

An AgentV result row imported alone (without its run folder's ``outputs/trace.json``) keeps the answer
text but no messages: there is no trace, and the graders that count the agent's calls grade it as AgentV
grades a response given without one (``No trace available for evaluation``, ``No trace summary
available``: a fail), never as zero calls. :func:`untraced_warning` names the tests a replay grades so.

Two inputs can be lost whole or in part, and a grader reading one cannot be regraded as it was:

- AgentV 4's run folder keeps the first 20 lines of a test's file_changes (``grading.json``'s
  ``diff_summary``); the full diff its code and LLM graders read is gone.
- A test that ran in a workspace has no snapshot of it when its run is an AgentV import (AgentV's results
  keep none) or was recorded before evalstore took snapshots, and only part of it when the snapshot's
  limits left files out; its code graders (``pytest`` in the workspace) cannot run without it whole
  (``graders.code.grader_workspace``).

Regrading such a grader would give another score, or an execution error, for no change of the grader, so a
replay that does not change it carries its recorded verdict, saying why in the verdict's evidence (the
replay's warnings name the tests). A grader the replay does change (another eval, prompt, converter or
judge) is regraded on what is left: the lines kept, or no workspace, which makes its code grader an
execution error saying so; the user asked for a new verdict and gets one on what there is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from evalstore.replay.evalfile.conversation import verdict_graders
from evalstore.replay.evalfile.specs import (
    CodeGraderSpec,
    CompositeSpec,
    EvalSuite,
    EvalTest,
    GraderSpec,
    LlmGraderSpec,
    counts_calls,
    within,
)
from evalstore.store.events import TranscriptRecorded, VerdictRecorded, WorkspaceSnapshotted

if TYPE_CHECKING:
    from evalstore.replay.material import TestMaterial
    from evalstore.replay.regrade import ReplayOptions

Carried = Mapping[str, tuple[str, VerdictRecorded]]
_Reads = Callable[[GraderSpec], bool]
"""Whether a grader reads an input."""

NO_SNAPSHOT_NOTE = (
    "the run holds no snapshot of this test's workspace (AgentV's results keep none, and evalstore runs "
    "took none before snapshots), so a grader working in it cannot run again"
)


def partial_snapshot_note(snapshot: WorkspaceSnapshotted) -> str:
    return (
        f"the run's snapshot of this test's workspace is partial ({snapshot.omitted_count} file(s) left out by its "
        "limits), so a grader working in it cannot run again as it did"
    )


def lost_diff_note(transcript: TranscriptRecorded) -> str | None:
    lost = transcript.file_changes_lost_lines
    if not lost:
        return None
    return (
        f"the source kept only the first lines of this test's file_changes ({lost} more lines lost: AgentV 4's "
        "run folder keeps a diff's first 20 lines), so a grader reading them cannot be regraded as it was"
    )


def reads_file_changes(spec: GraderSpec) -> bool:
    """Code graders get file_changes in their payload, LLM graders in their prompt (a composite through its
    members); deterministic and trace graders do not read them."""
    return isinstance(spec, (CodeGraderSpec, LlmGraderSpec, CompositeSpec))


def works_in_workspace(spec: GraderSpec) -> bool:
    """A code grader (or a composite with one) runs in the test's workspace when the eval configures one."""
    return any(isinstance(g, CodeGraderSpec) for g in within(spec))


def keep_recorded(
    test: EvalTest,
    source: TestMaterial,
    workspace: bool,
    options: ReplayOptions,
    only: list[str] | None,
    carried: Carried,
) -> tuple[list[str] | None, dict[str, tuple[str, VerdictRecorded]], list[str]]:
    """``(only, carried, carried names)`` for grading the test: the graders to run and the recorded verdicts
    to carry, with the note added to the evidence of those carried for an input the run lost (``source``:
    the result holding the transcript; ``workspace``: the eval configures one for the test). Graders are
    named by their verdicts (a conversation's turns), as ``only`` names them."""
    notes = _lost_inputs(source, workspace)
    out = dict(carried)
    if not notes:
        return only, out, []
    graders = _by_verdict(test)
    kept: list[str] = []
    for name, specs in graders.items():
        if name not in carried or any(_change(spec, options) for spec in specs):
            continue
        if only is not None and name not in only:
            continue  # carried over anyway: --graders did not ask for it
        why = [note for note, reads in notes if any(reads(spec) for spec in specs)]
        if not why:
            continue
        event_id, verdict = carried[name]
        # A replay of a replay carries on what its parent carried, saying why once.
        evidence = [*verdict.evidence, *(e for note in why if (e := f"carried: {note}") not in verdict.evidence)]
        out[name] = (event_id, verdict.model_copy(update={"evidence": evidence}))
        kept.append(name)
    if not kept:
        return only, out, []
    run = [name for name in (only if only is not None else list(graders)) if name not in kept]
    return run, out, kept


def _lost_inputs(source: TestMaterial, workspace: bool) -> list[tuple[str, _Reads]]:
    """Each input of the result the run lost, as the note a carried verdict gets, with which graders read it."""
    notes: list[tuple[str, _Reads]] = []
    if source.transcript is not None and (note := lost_diff_note(source.transcript[1])) is not None:
        notes.append((note, reads_file_changes))
    if source.snapshot is not None and source.snapshot[1].partial:
        # Whether or not the eval configures a workspace: a snapshot is where code graders run.
        notes.append((partial_snapshot_note(source.snapshot[1]), works_in_workspace))
    elif workspace and source.snapshot is None:
        notes.append((NO_SNAPSHOT_NOTE, works_in_workspace))
    return notes


def _by_verdict(test: EvalTest) -> dict[str, list[GraderSpec]]:
    """The test's graders by the verdict they are graded under (a conversation's turn holds several)."""
    graders: dict[str, list[GraderSpec]] = {}
    for name, spec in verdict_graders(test):
        graders.setdefault(name, []).append(spec)
    return graders


def workspace_graders(suite: EvalSuite, test: EvalTest) -> dict[str, list[GraderSpec]]:
    """The test's graders that work in its workspace, by the verdict they are graded under: none when the eval
    configures no workspace for it."""
    if not suite.workspace_for(test).configured:
        return {}
    return {name: specs for name, specs in _by_verdict(test).items() if any(map(works_in_workspace, specs))}


def _change(spec: GraderSpec, options: ReplayOptions) -> str | None:
    """What the replay grades ``spec`` with that the run it regrades did not (the option that changes it),
    or None when it grades it as the run did."""
    if options.eval_path:
        return "--eval"
    if options.preprocessors:
        return "--preprocessor"
    names = {g.name for g in within(spec)}
    if any(p.partition("=")[0].strip() in names for p in options.prompts):
        return "--prompt"
    judged = any(
        isinstance(g, (LlmGraderSpec, CompositeSpec))
        or (isinstance(g, CodeGraderSpec) and g.target_max_calls is not None)  # its target proxy asks the judge
        for g in within(spec)
    )
    if judged and options.judge_target:
        return "--judge-target"
    if judged and options.judge_model:
        return "--judge-model"
    return None


def unsnapshotted_warning(tests: Iterable[EvalTest], suite: EvalSuite, options: ReplayOptions) -> str | None:
    """The replay's warning for ``tests``, regraded from a run that holds no snapshot of their workspaces (an
    AgentV import): which of their graders that work in the workspace keep their recorded verdicts, and which
    this replay changes, and so cannot run."""
    named: list[str] = []
    carried: set[str] = set()
    changed: dict[str, str] = {}
    for test in tests:
        found = False
        for name, specs in workspace_graders(suite, test).items():
            if options.graders is not None and name not in options.graders:
                continue  # carried over whatever this replay is given
            found = True
            why = next((c for spec in specs if (c := _change(spec, options)) is not None), None)
            if why is None:
                carried.add(name)
            else:
                changed[name] = why
        if found:
            named.append(test.id)
    if not named:
        return None
    shown = ", ".join(named[:20]) + (f", and {len(named) - 20} more" if len(named) > 20 else "")
    said = [
        f"{len(named)} test{'s' if len(named) > 1 else ''} ({shown}) ran in a workspace the run holds no snapshot "
        "of (AgentV's results keep none), so their graders that work in it cannot run again"
    ]
    if carried:
        said.append(f"their recorded verdicts are carried over ({', '.join(sorted(carried))})")
    if changed:
        by = ", ".join(f"{name} ({why})" for name, why in sorted(changed.items()))
        said.append(
            f"this replay changes {by}, so {'they are' if len(changed) > 1 else 'it is'} graded without the "
            "workspace: an execution error (an unchanged replay carries the recorded verdict)"
        )
    return ": ".join(said[:2]) + "".join(f"; {s}" for s in said[2:])


def untraced_warning(tests: list[EvalTest], graders: list[str] | None) -> str | None:
    """The replay's warning for ``tests``, regraded from results that recorded no trace: those whose graders
    to regrade (``graders``: all when None) count the agent's calls, named with those graders."""
    named: dict[str, list[str]] = {}
    for test in tests:
        found = [n for n, g in verdict_graders(test) if (graders is None or n in graders) and counts_calls(g)]
        if found:
            named[test.id] = found
    if not named:
        return None
    kinds = sorted({g for found in named.values() for g in found})
    shown = ", ".join(list(named)[:20]) + (f", and {len(named) - 20} more" if len(named) > 20 else "")
    return (
        f"{len(named)} test{'s' if len(named) > 1 else ''} ({shown}): the source recorded no trace (no messages or "
        "tool calls, only the answer: AgentV result rows imported without their run folder); "
        f"their graders that count the agent's calls ({', '.join(kinds)}) fail with AgentV's 'No trace available' "
        "(a skill-trigger finds no skill called), as AgentV grades a response without a trace"
    )
