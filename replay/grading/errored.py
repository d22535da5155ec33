"""Which verdicts are left out of a test's score, apart from ``scoring`` (it loads the event models):
``show``, ``runs`` and the tables read it over projection rows without loading pydantic."""

from __future__ import annotations


def left_out_of_score(status: str) -> bool:
    """Whether a grader's verdict failed to run (an execution error), and so is left out of the test's score.

    Its status says it, not its verdict: AgentV's ``skip`` is an execution error (an import records it so),
    except for a conversation's turn that ``on_turn_failure: stop`` skipped, which scores 0 and counts in the
    conversation's score (AgentV's ``runConversationMode``): its status is ``ok``."""
    return status == "execution_error"
