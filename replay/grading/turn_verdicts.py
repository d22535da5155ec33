"""The verdicts of a conversation test (``mode: conversation``) as AgentV 4.42.4 names and writes them
(``runConversationMode``): ``turn-N`` per turn and ``conversation`` for the whole, of type ``rubrics``. Apart
from the conversation grader and the eval file's reader, which load the grader models: ``show``'s notes and the
import read these over stored verdicts."""

from __future__ import annotations

WHOLE = "conversation"
"""The verdict of a conversation's own graders, on the whole conversation (AgentV's ``scores[]`` entry)."""
TURN_TYPE = "rubrics"
"""The type AgentV gives a turn's (and the conversation's) entry in ``scores[]``."""
SKIPPED = "Skipped due to previous turn failure"
"""The one assertion of a turn ``on_turn_failure: stop`` skipped (AgentV's ``runConversationMode``)."""


def stopped_turn(verdict: str, grader_type: str, assertion_texts: list[str]) -> bool:
    """Whether a verdict is a conversation's turn skipped after a failed one (``on_turn_failure: stop``):
    ``skip``, but scored 0 and counted in the conversation's score, not an execution error."""
    return verdict == "skip" and grader_type == TURN_TYPE and assertion_texts == [SKIPPED]


def is_conversation_verdict(grader: str) -> bool:
    """Whether a verdict's name is a conversation's (``turn-N`` or ``conversation``)."""
    return grader == WHOLE or (grader.startswith("turn-") and grader[5:].isdigit())


def turn_verdict(n: int) -> str:
    """The verdict of turn ``n`` (1-based), as AgentV names its ``scores[]`` entry."""
    return f"turn-{n}"
