"""What a replay does to the parent's graders that its eval does not grade as the parent did.

A replay grades with its eval's graders: a parent's verdict of a grader the eval does not have is not in the
replay's results, and with ``--graders`` a grader left out of the list keeps the parent's verdict of that
name, whatever graded it. Both are what was asked for when the eval is the parent's own, and easy to miss
when it is not: an Inspect log's scorers are not in the eval a user writes to regrade it (a ``contains``
named as a scorer takes over that scorer's scores, and the others are gone from the regrade). The replay
says so, once each, rather than leave a grader's scores to vanish or change hands without a word.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from evalstore.replay.evalfile.conversation import verdict_graders
from evalstore.replay.evalfile.specs import EvalSuite
from evalstore.replay.inspect.scores import GRADER_TYPE as INSPECT_SCORER

_LISTED = 5
"""How many graders a warning names before it says how many more there are."""


def grader_warnings(
    parent: Mapping[str, str], suite: EvalSuite, test_ids: Collection[str], only: Collection[str] | None
) -> list[str]:
    """Warnings for the graders of the parent run (name -> grader type, ``EventStore.grader_counts``) that
    the replay drops or carries over as another kind of grader, over the tests it regrades (``test_ids``);
    ``only``: ``--graders``."""
    graded: dict[str, str] = {}
    for test in suite.tests:
        if test.id in test_ids:
            for name, spec in verdict_graders(test):  # a conversation's verdicts are its turns' and its own
                graded.setdefault(name, spec.type)
    warnings = []
    dropped = sorted(name for name in parent if name not in graded)
    scorers = [name for name in dropped if parent[name] == INSPECT_SCORER]
    others = [name for name in dropped if parent[name] != INSPECT_SCORER]
    if scorers:
        warnings.append(
            f"the log's Inspect scorer{_s(scorers)} {_named(scorers)} {_are(scorers)} not in this eval: the "
            f"regraded results leave {_their(scorers)} scores out (`export --format inspect` keeps them as the log has them)"
        )
    if others:
        warnings.append(
            f"the parent's grader{_s(others)} {_named(others)} {_are(others)} not in this eval: the regraded "
            f"results leave {_their(others)} verdicts out (add {_them(others)} to the eval to keep {_them(others)})"
        )
    if only is not None:
        # A scorer's verdict carried as an eval grader of that name: scored by the log, counted as the eval's.
        taken = sorted(name for name, kind in graded.items() if name not in only and parent.get(name) == INSPECT_SCORER)
        if taken:
            warnings.append(
                f"--graders leaves {_named(taken)} as the parent scored {_them(taken)}: "
                f"the log's Inspect scorer{_s(taken)} of that name, not the eval's "
                f"{', '.join(sorted({graded[n] for n in taken}))} grader (name "
                f"{_them(taken)} in --graders to grade as the eval says)"
            )
    return warnings


def _s(names: list[str]) -> str:
    return "s" if len(names) > 1 else ""


def _are(names: list[str]) -> str:
    return "are" if len(names) > 1 else "is"


def _their(names: list[str]) -> str:
    return "their" if len(names) > 1 else "its"


def _them(names: list[str]) -> str:
    return "them" if len(names) > 1 else "it"


def _named(names: list[str]) -> str:
    shown = ", ".join(names[:_LISTED])
    return shown + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")
