"""Translate domain errors into one ``Error: ...`` line and an exit code, at the edge."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn

import click

from evalstore.cli.output import echo

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED = 130
"""Ctrl-C or SIGTERM (which ``entry`` turns into the same interrupt): 128 + SIGINT, as shells report it."""


class UsageError(click.UsageError):
    """Bad input to a command: exits 2."""


def handle_errors(f: Callable) -> Callable:
    @wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = (ctx.find_root().obj or {}).get("debug", False)
        try:
            return f(*args, **kwargs)
        except KeyboardInterrupt:
            echo("Interrupted.", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except Exception as exc:
            if debug:
                raise
            _exit_for(exc)

    return wrapper


def _exit_for(exc: Exception) -> NoReturn:
    """One ``Error: ...`` line for ``exc`` and its exit code. The layers' errors are imported here, when
    one is raised, not with the command: a command's ``--help`` loads neither layer (nor SQLAlchemy)."""
    from evalstore.replay.errors import ReplayError
    from evalstore.store.errors import StoreError, error_line, is_database_failure

    if isinstance(exc, (ReplayError, StoreError)):
        echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if isinstance(exc, OSError):
        # A path the user gave that cannot be read or written (an output folder that does not exist).
        where = f"{exc.filename}: " if exc.filename else ""
        echo(f"Error: {where}{exc.strerror or exc}", err=True)
        sys.exit(EXIT_USAGE)
    if is_database_failure(exc):
        # Whatever was not committed was not recorded: running the command again (a replay: resuming
        # it) does the rest.
        echo(
            f"Error: database error: {error_line(exc)} (nothing uncommitted was recorded; "
            "a replay resumes with `evalstore replay --resume RUN`)",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    damage = _damage_behind(exc)
    if damage is not None:
        echo(f"Error: {damage}", err=True)
        sys.exit(EXIT_USAGE)
    message = str(exc).splitlines()[0] if str(exc) else ""
    echo(
        f"Error: internal error: {type(exc).__name__}: {message} (rerun with --debug for the traceback)",
        err=True,
    )
    sys.exit(EXIT_INTERNAL)


def _damage_behind(exc: Exception) -> Exception | None:
    """What a damaged store did to make the command fail with ``exc`` (a retyped value read back as
    bytes), when the command had opened one: then the store, not the code, is at fault."""
    ctx = click.get_current_context(silent=True)
    store = ((ctx.find_root().obj or {}) if ctx else {}).get("store")
    return store.damage_behind(exc) if store is not None else None
