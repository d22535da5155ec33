"""Graders of an imported result whose input the source did not keep whole.

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

from evalstore.replay.evalfile.specs import CodeGraderSpec, CompositeSpec, EvalTest, LlmGraderSpec
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
    name = getattr(spec, "name", None)
    if any(p.partition("=")[0].strip() == name for p in options.prompts):
        return True
    return isinstance(spec, (LlmGraderSpec, CompositeSpec)) and bool(options.judge_target or options.judge_model)
