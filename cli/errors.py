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
    from evalstore.replay.errors import ReplayError, ServiceError
    from evalstore.store.errors import StoreError, error_line, is_database_failure, is_locked_out, is_read_only

    if is_database_failure(exc) and is_read_only(exc):
        echo(
            f"Error: database error: {error_line(exc)} (this command writes to the store, which is read-only: "
            "opened with mode=ro, or its file or folder cannot be written; nothing was recorded)",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    if is_database_failure(exc):
        # Whatever was not committed was not recorded: the command, run again (or resumed: it says how,
        # `finish_with`), does the rest; a lock held by another command, once that command has finished.
        locked = is_locked_out(exc)
        echo(
            f"Error: database error: {error_line(exc)} ("
            + ("another evalstore command is writing this store; " if locked else "")
            + "nothing uncommitted was recorded; "
            + ("when that command has finished, " if locked else "")
            + f"{_finishing()})",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    if isinstance(exc, ServiceError):
        # A provider refused part-way (a batch not created: HTTP 429): the input was fine and what was
        # recorded stays, so the error says how the work is finished (``finish_with``), and exits 1, as
        # the judge's failures of a direct replay (execution errors) do: exit 2 would blame the input.
        echo(f"Error: {exc} ({_finishing()})", err=True)
        sys.exit(EXIT_FAILED)
    if isinstance(exc, (ReplayError, StoreError)):
        echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if isinstance(exc, OSError):
        # A path the user gave that cannot be read or written (an output folder that does not exist).
        where = f"{exc.filename}: " if exc.filename else ""
        echo(f"Error: {where}{exc.strerror or exc}", err=True)
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


_FINISH = "evalstore_finish"
"""Where the running command keeps how its work is finished once it stopped part-way (``finish_with``)."""


def finish_with(how: str) -> None:
    """How the running command's work is finished if it stops part-way (a database failure): an imperative
    clause (``finish it with: evalstore run --resume RUN``). Without one, the error says to run the command
    again, which is right for a command whose work is done whole or not at all."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.find_root().ensure_object(dict)[_FINISH] = how


def _finishing() -> str:
    ctx = click.get_current_context(silent=True)
    return ((ctx.find_root().obj or {}) if ctx else {}).get(_FINISH, "run the command again")


def _damage_behind(exc: Exception) -> Exception | None:
    """What a damaged store did to make the command fail with ``exc`` (a retyped value read back as
    bytes), when the command had opened one: then the store, not the code, is at fault."""
    ctx = click.get_current_context(silent=True)
    store = ((ctx.find_root().obj or {}) if ctx else {}).get("store")
    return store.damage_behind(exc) if store is not None else None
