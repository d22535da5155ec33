"""Graders of an imported result whose input the source did not keep whole.

An AgentV result row imported alone (without its run folder's ``outputs/trace.json``) keeps the answer
text but no messages: there is no trace, and the graders that count the agent's calls grade it as AgentV
grades a response given without one (``No trace available for evaluation``, ``No trace summary
available``: a fail), never as zero calls. :func:`untraced_warning` names the tests a replay grades so.

AgentV 4's run folder keeps the first 20 lines of a test's file_changes (``grading.json``'s
``diff_summary``); the full diff its code and LLM graders read is gone. Regrading them from what is left
would give another score for no change of the grader, so a replay that does not change such a grader
carries its recorded verdict, saying why in the verdict's evidence (the replay's warnings name the tests).
A grader the replay does change (another eval, prompt, converter or judge) is regraded on the lines kept:
the user asked for a new verdict and gets one on what there is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from evalstore.replay.evalfile.conversation import verdict_graders
from evalstore.replay.evalfile.specs import CodeGraderSpec, CompositeSpec, EvalTest, LlmGraderSpec, counts_calls, within
from evalstore.store.events import TranscriptRecorded, VerdictRecorded

if TYPE_CHECKING:
    from evalstore.replay.regrade import ReplayOptions

Carried = Mapping[str, tuple[str, VerdictRecorded]]


def lost_diff_note(transcript: TranscriptRecorded) -> str | None:
    lost = transcript.file_changes_lost_lines
    if not lost:
        return None
    return (
        f"the source kept only the first lines of this test's file_changes ({lost} more lines lost: AgentV 4's "
        "run folder keeps a diff's first 20 lines), so a grader reading them cannot be regraded as it was"
    )


def reads_file_changes(spec: object) -> bool:
    """Code graders get file_changes in their payload, LLM graders in their prompt (a composite through its
    members); deterministic and trace graders do not read them."""
    return isinstance(spec, (CodeGraderSpec, LlmGraderSpec, CompositeSpec))


def keep_recorded(
    test: EvalTest,
    transcript: TranscriptRecorded,
    options: ReplayOptions,
    only: list[str] | None,
    carried: Carried,
) -> tuple[list[str] | None, dict[str, tuple[str, VerdictRecorded]], list[str]]:
    """``(only, carried, carried names)`` for grading the test: the graders to run and the recorded verdicts
    to carry, with the note added to the evidence of those carried for the lost diff."""
    note = lost_diff_note(transcript)
    out = dict(carried)
    if note is None:
        return only, out, []
    kept: list[str] = []
    for spec in test.graders:
        if not reads_file_changes(spec) or spec.name not in carried or _changed(spec, options):
            continue
        if only is not None and spec.name not in only:
            continue  # carried over anyway: --graders did not ask for it
        event_id, verdict = carried[spec.name]
        out[spec.name] = (event_id, verdict.model_copy(update={"evidence": [*verdict.evidence, f"carried: {note}"]}))
        kept.append(spec.name)
    if not kept:
        return only, out, []
    names = [spec.name for spec in test.graders]
    run = [name for name in (only if only is not None else names) if name not in kept]
    return run, out, kept


def _changed(spec: object, options: ReplayOptions) -> bool:
    """Whether the replay grades with something else than the run it regrades did."""
    if options.eval_path or options.preprocessors:
        return True
    names = {g.name for g in within(spec)}  # type: ignore[arg-type]
    if any(p.partition("=")[0].strip() in names for p in options.prompts):
        return True
    return isinstance(spec, (LlmGraderSpec, CompositeSpec)) and bool(options.judge_target or options.judge_model)


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
