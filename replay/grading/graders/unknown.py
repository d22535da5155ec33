"""A grader of a type AgentV 4.42.4 does not register (``type: Contains``, ``type: script``, a typo).

AgentV's parser keeps such an entry as a custom type, and its registry throws when the grader is made
(``GraderRegistry.create``: ``Unknown grader type: "X". Registered types: ...``); the orchestrator records
the throw as a score of 0, ``fail``, counted in the test's mean (``runEvaluatorList``'s catch). This grader
throws the same words, which the engine records the same way (``engine.grader_threw``).
"""

from __future__ import annotations

from evalstore.replay.evalfile.specs import UnknownTypeSpec
from evalstore.replay.grading.graders.base import GraderResult, GraderThrew, GradingContext


class UnknownTypeGrader:
    def __init__(self, spec: UnknownTypeSpec) -> None:
        self.spec = spec

    def grade(self, ctx: GradingContext) -> GraderResult:
        raise GraderThrew(self.spec.message)
