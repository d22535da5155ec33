"""What a replay does to the parent's graders that its eval does not grade as the parent did.

A replay grades with its eval's graders: a parent's verdict of a grader the eval does not have is not in the
replay's results, and with ``--graders`` a grader left out of the list keeps the parent's verdict of that
name, whatever graded it. Both are what was asked for when the eval is the parent's own, and easy to miss
when it is not: an Inspect log's scorers are not in the eval a user writes to regrade it (a ``contains``
named as a scorer takes over that scorer's scores, and the others are gone from the regrade). The replay
says so, once each, rather than leave a grader's scores to vanish or change hands without a word.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from evalstore.replay.evalfile.conversation import verdict_graders
from evalstore.replay.evalfile.specs import EvalSuite, result_type
from evalstore.replay.inspect.scores import GRADER_TYPE as INSPECT_SCORER

_LISTED = 5
"""How many graders a warning names before it says how many more there are."""


def grader_warnings(
    parent: Iterable[tuple[str, str, str]], suite: EvalSuite, only: Collection[str] | None
) -> list[str]:
    """Warnings for the parent run's verdicts of the results a replay regrades, each ``(test id, grader,
    grader type)``, that the replay drops or carries over as another kind of grader; ``only``: ``--graders``.
    Each test is held to its own graders in the eval: a test the replay leaves alone (``--tests``, or one a
    resumed replay has graded) keeps its verdicts, and is not given here."""
    graded: dict[str, dict[str, str]] = {}
    for test in suite.tests:
        own = graded[test.id] = {}
        for name, spec in verdict_graders(test):  # a conversation's verdicts are its turns' and its own
            own.setdefault(name, result_type(spec))
    dropped: dict[str, str] = {}
    taken: dict[str, str] = {}
    kept: dict[str, set[str]] = {}
    for test_id, grader, kind in parent:
        kept.setdefault(test_id, set()).add(grader)
        eval_graders = graded.get(test_id, {})
        if grader not in eval_graders:
            dropped[grader] = kind
        elif only is not None and grader not in only and kind == INSPECT_SCORER:
            # A scorer's verdict carried as an eval grader of that name: scored by the log, counted as the eval's.
            taken[grader] = eval_graders[grader]
    warnings = []
    scorers = sorted(name for name, kind in dropped.items() if kind == INSPECT_SCORER)
    others = sorted(name for name, kind in dropped.items() if kind != INSPECT_SCORER)
    if scorers:
        warnings.append(
            f"the log's Inspect scorer{_s(scorers)} {_named(scorers)} {_are(scorers)} not in this eval: the "
            f"regraded results leave {_their(scorers)} scores out (`export --format inspect` keeps them as the "
            "log has them)"
        )
    if others:
        warnings.append(
            f"the parent's grader{_s(others)} {_named(others)} {_are(others)} not in this eval: the regraded "
            f"results leave {_their(others)} verdicts out (add {_them(others)} to the eval to keep {_them(others)})"
        )
    # Left out of --graders, but with no verdict of the parent's to keep: graded, as the eval says.
    fresh: list[str] = []
    if only is not None:
        fresh = sorted(
            {name for test_id, own in kept.items() for name in graded.get(test_id, {}) if name not in (own | set(only))}
        )
    if fresh:
        warnings.append(
            f"--graders leaves out {_named(fresh)}, but the parent has no verdict of {_them(fresh)} to keep: "
            f"{'they are' if len(fresh) > 1 else 'it is'} graded as the eval says"
        )
    if taken:
        names = sorted(taken)
        warnings.append(
            f"--graders leaves {_named(names)} as the parent scored {_them(names)}: the log's Inspect "
            f"scorer{_s(names)} of that name, not the eval's {', '.join(sorted(set(taken.values())))} grader "
            f"(name {_them(names)} in --graders to grade as the eval says)"
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
