"""AgentV 4.42.4's labels of an execution error, ``failure_stage`` and ``failure_reason_code``
(orchestrator.ts ``buildErrorResult`` and its callers, workspace/setup.ts ``WorkspaceSetupError``), and the
one rule of which execution errors AgentV counts (:func:`agentv_execution_error`).

A result evalstore produces keeps them in ``TestScored.row_fields``, where an import keeps its row's: an
export writes them on the row as AgentV does, and a replay tells a failure before the agent answered from
a grader's by the stage (``regrade.AGENT_STAGES``).
"""

from __future__ import annotations

from collections.abc import Mapping


def _labels(stage: str, code: str) -> dict[str, str]:
    return {"failure_stage": stage, "failure_reason_code": code}


AGENT = _labels("agent", "provider_error")
"""The target's call failed (an error reply, a timeout, a crash)."""
GRADER = _labels("evaluator", "evaluator_error")
"""A grader could not grade where AgentV's could not either: its verdict is AgentV's ``skip`` (an LLM grader
whose judge never answered, or never in shape; a composite none of whose members could grade)."""
GRADER_SCORED = _labels("evaluator", "quality_failure_in_agentv")
"""A grader could not grade where AgentV scores the failure 0 as a failed verdict (a code grader that crashed,
timed out or exited non-zero with stderr; a grader that threw): evalstore's execution error (the grader is
left out of the score, the test cannot pass), AgentV's ``quality_failure``. Not AgentV's labels: AgentV writes
none on such a row; these say why evalstore's status is not AgentV's."""
HOOK = _labels("setup", "script_error")
"""A ``before_all`` or ``before_each`` hook failed."""
REPOS = _labels("repo_setup", "clone_error")
"""The workspace's repositories could not be materialised."""
DEPENDENCY = _labels("setup", "dependency_failed")
BUDGET = _labels("setup", "budget_exceeded")
HALTED = _labels("setup", "error_threshold_exceeded")
"""Not started: ``fail_on_error`` after an execution error."""


def agentv_execution_error(status: str, labels: Mapping[str, str]) -> bool:
    """Whether a result is an execution error to AgentV 4.42.4: what stops the tests that ``depends_on`` it and
    what ``fail_on_error`` counts (orchestrator.ts: both read ``executionStatus === 'execution_error'``).

    Every ``execution_error`` is, but one labelled :data:`GRADER_SCORED`: an agent or target that failed, a
    workspace that could not be set up, a test not run (a failed dependency, the budget, ``fail_on_error``),
    an LLM grader whose judge failed. ``labels``: the result's ``row_fields`` (an import's are its row's, so an
    export of a run read back says what the run did)."""
    return status == "execution_error" and labels.get("failure_reason_code") != GRADER_SCORED["failure_reason_code"]


NOT_RUN_CODES = frozenset(
    {DEPENDENCY["failure_reason_code"], BUDGET["failure_reason_code"], HALTED["failure_reason_code"]}
)


def failed_part(labels: Mapping[str, str], graders: list[str] | None) -> str:
    """What an execution error says failed, by its labels: ``agent`` (the target's call), ``setup`` (a hook
    or the workspace's repositories), ``not_run`` (a failed dependency, the budget, ``fail_on_error``), else
    ``grader``. A result no grader took part in (``graders`` empty) and with no stage is the agent's: an
    import's row of an older AgentV names none (``regrade.agent_failure`` reads such a row alike)."""
    stage = labels.get("failure_stage")
    if stage == AGENT["failure_stage"]:
        return "agent"
    if stage in (HOOK["failure_stage"], REPOS["failure_stage"]):
        return "not_run" if labels.get("failure_reason_code") in NOT_RUN_CODES else "setup"
    if stage is None and graders == []:
        return "agent"
    return "grader"
