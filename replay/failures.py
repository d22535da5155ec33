"""AgentV 4.42.4's labels of an execution error, ``failure_stage`` and ``failure_reason_code``
(orchestrator.ts ``buildErrorResult`` and its callers, workspace/setup.ts ``WorkspaceSetupError``).

A result evalstore produces keeps them in ``TestScored.row_fields``, where an import keeps its row's: an
export writes them on the row as AgentV does, and a replay tells a failure before the agent answered from
a grader's by the stage (``regrade.AGENT_STAGES``).
"""

from __future__ import annotations


def _labels(stage: str, code: str) -> dict[str, str]:
    return {"failure_stage": stage, "failure_reason_code": code}


AGENT = _labels("agent", "provider_error")
"""The target's call failed (an error reply, a timeout, a crash)."""
GRADER = _labels("evaluator", "evaluator_error")
"""A grader could not grade (an LLM grader's parse failure, a crash)."""
HOOK = _labels("setup", "script_error")
"""A ``before_all`` or ``before_each`` hook failed."""
REPOS = _labels("repo_setup", "clone_error")
"""The workspace's repositories could not be materialised."""
DEPENDENCY = _labels("setup", "dependency_failed")
BUDGET = _labels("setup", "budget_exceeded")
HALTED = _labels("setup", "error_threshold_exceeded")
"""Not started: ``fail_on_error`` after an execution error."""
