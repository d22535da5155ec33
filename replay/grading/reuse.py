"""When recorded work may stand in for doing it again: a conversion, a judge's reply, a code-grader
execution. The store's reuse indexes (``conversions``, ``judge_cache``) hold what was stored; these rules
decide for what a test has recorded but not yet stored (``replay/recording.py``, ``grading/overlap.py``)."""

from __future__ import annotations

from evalstore.replay.grading.graders.process_cache import reusable_process_call
from evalstore.store.events import DomainEvent, GraderCalled, PreprocessingRecorded
from evalstore.store.projections import reusable_outcome

__all__ = ["reusable_conversion", "reusable_judge_call", "reusable_process_call"]

_REUSABLE_CONVERSIONS = ("converted", "read_as_text")


def reusable_conversion(event: DomainEvent, fingerprint: str) -> bool:
    """A conversion whose output may stand in for running the same converter on the same bytes."""
    return (
        isinstance(event, PreprocessingRecorded)
        and event.fingerprint == fingerprint
        and event.status in _REUSABLE_CONVERSIONS
        and event.output_sha256 is not None
    )


def reusable_judge_call(event: DomainEvent, cache_key: str) -> bool:
    """A judge call whose reply may stand in for asking the same judge the same thing (the rule the
    ``judge_cache`` projection keeps, for events not yet stored)."""
    return (
        isinstance(event, GraderCalled)
        and event.call == "judge"
        and event.cache_key == cache_key
        and reusable_outcome(event.outcome, event.parse_attempt)
        and not event.cache_hit
        and event.reply_sha256 is not None
    )
