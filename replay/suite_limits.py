"""A suite's ``execution.budget_usd`` and ``execution.fail_on_error``, as AgentV 4.42.4's orchestrator keeps
them while ``evalstore run`` runs: checked before each test starts, so tests already running finish (AgentV
calls this best effort under concurrency, and so is it here).

A test not started for either reason ends in AgentV's execution error, with AgentV's words. ``fail_on_error``
counts AgentV's execution errors only (``failures.agentv_execution_error``): a test whose code grader crashed
is evalstore's execution error but AgentV's quality failure, and halts nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from evalstore.replay import failures


class SuiteLimits:
    def __init__(self, budget_usd: float | None, fail_on_error: bool) -> None:
        self.budget_usd = budget_usd
        self.fail_on_error = fail_on_error
        self.spent = 0.0
        self._exhausted = False
        self._errored = False
        self._lock = threading.Lock()

    def refusal(self) -> tuple[str, dict[str, str]] | None:
        """Why the next test must not start, and AgentV's failure labels for it; None when it may."""
        with self._lock:
            if self.budget_usd is not None and self._exhausted:
                return f"Suite budget exceeded (${self.spent:.4f} / ${self.budget_usd:.4f})", failures.BUDGET
            if self.fail_on_error and self._errored:
                return "Halted: execution error encountered with fail_on_error enabled", failures.HALTED
            return None

    def count(self, costs: Sequence[float | None], errored: bool) -> None:
        """A test that ran: its trials' agent costs (None: not reported), and whether it ended in AgentV's
        execution error (``failures.agentv_execution_error``; with trials, every trial did)."""
        reported = [c for c in costs if c is not None]
        with self._lock:
            # AgentV sums the trials' costs and counts a test with no cost (or a zero sum) as none.
            if self.budget_usd is not None and reported and sum(reported) > 0:
                self.spent += sum(reported)
                if self.spent >= self.budget_usd:
                    self._exhausted = True
            if errored:
                self._errored = True
