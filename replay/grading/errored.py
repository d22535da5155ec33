"""Which verdicts are left out of a test's score, apart from ``scoring`` (it loads the event models):
``show``, ``runs`` and the tables read it over projection rows without loading pydantic."""

from __future__ import annotations


def left_out_of_score(status: str, verdict: str) -> bool:
    """Whether a grader's verdict failed to run (an execution error; AgentV: verdict ``skip``), and so is
    left out of the test's score."""
    return status == "execution_error" or verdict == "skip"
