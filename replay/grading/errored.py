"""Which verdicts are left out of a test's score, apart from ``scoring`` (it loads the event models):
``show``, ``runs`` and the tables read it over projection rows without loading pydantic."""

from __future__ import annotations

from typing import Final

UNSCORED: Final = "unscored"
"""The status of a verdict that gave no score and is no error: an Inspect score Inspect's metrics leave out
(NaN, ``Score.unscored``; a None in a dict). Left out of the test's score, as Inspect leaves it out of a
metric, without making the test an execution error: the test's status follows its other verdicts."""


def left_out_of_score(status: str) -> bool:
    """Whether a grader's verdict failed to run (an execution error) or gave no score (:data:`UNSCORED`), and
    so is left out of the test's score.

    Its status says it, not its verdict: AgentV's ``skip`` is an execution error (an import records it so),
    except for a conversation's turn that ``on_turn_failure: stop`` skipped, which scores 0 and counts in the
    conversation's score (AgentV's ``runConversationMode``): its status is ``ok``."""
    return status in ("execution_error", UNSCORED)
