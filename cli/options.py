"""Options shared by several commands, one definition each."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import click


def no_warm_option(f: Callable) -> Callable:
    """``--no-warm`` (``run``, ``replay``, ``assert``): spawn every grader and converter process."""
    return click.option(
        "--no-warm",
        is_flag=True,
        help="Start every code grader and converter as a process of its own, instead of forking Python "
        "scripts from a warm interpreter of theirs (the same isolation, a fraction of the start-up).",
    )(f)


def refuse_with_resume(options: Mapping[str, object], kept: str) -> None:
    """``--resume`` (``run``, ``replay``) with options that would change what the run grades: refused,
    naming them, since the results recorded before and those made now would differ in them. ``options``:
    flag -> the value given (None, an empty tuple or False when not given)."""
    given = [flag for flag, value in options.items() if value not in (None, ()) and value is not False]
    if given:
        raise click.UsageError(f"{', '.join(given)} with --resume: {kept}")
