"""Options shared by several commands, one definition each."""

from __future__ import annotations

from collections.abc import Callable

import click


def no_warm_option(f: Callable) -> Callable:
    """``--no-warm`` (``run``, ``replay``, ``assert``): spawn every grader and converter process."""
    return click.option(
        "--no-warm",
        is_flag=True,
        help="Start every code grader and converter as a process of its own, instead of forking Python "
        "scripts from a warm interpreter of theirs (the same isolation, a fraction of the start-up).",
    )(f)
