"""One error hierarchy for the store; drivers' errors are translated into it at the edge."""

import sys


class StoreError(Exception):
    """Base class of every error the store raises."""


class UnknownEventType(StoreError):
    """A stored event names a type or schema version this code does not know."""


class ConcurrencyError(StoreError):
    """An append's expected stream version did not match the stream."""


class IdempotencyError(StoreError):
    """An event id is already stored with different content."""


class AppendOnlyError(StoreError):
    """Something tried to change or remove stored events or blobs."""


class SchemaOutOfDate(StoreError):
    """The database is behind the migrations this code needs."""


class StoreDamaged(SchemaOutOfDate):
    """The store's migration record cannot be what evalstore wrote (not text, several rows, removed while
    the tables stay): damage, which ``verify`` reports as such (exit 1), not a store that is behind."""


class DamagedRead(StoreError):
    """A read failed in a way no sound store causes (a value of the wrong type where a command expected
    text), on a store that ``verify`` finds damaged: the damage is the report, not the failure."""


class BlobNotFound(StoreError):
    """A digest that no stored blob has."""


class BlobCorrupt(StoreError):
    """A stored blob whose bytes cannot be decoded (altered, or naming an encoding this code does not know)."""


class NotFound(StoreError):
    """A run, test or event that the store does not hold."""


class StoreMissing(StoreError):
    """A command that only reads was pointed at a store that does not exist (it is never created)."""


class DatabaseFailure(StoreError):
    """The database failed under an append (a lock held past the busy timeout, a dropped connection), not
    a fact about the data: nothing of the append was recorded. ``orig``: the driver's error."""

    def __init__(self, message: str, orig: BaseException | None = None) -> None:
        super().__init__(message)
        self.orig = orig


def is_database_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the database failing (a dropped connection, a lock, a server error), as raised by
    SQLAlchemy or by an append (:class:`DatabaseFailure`), not a fact about the data. Work under way when
    it happens must not be recorded as anything else (a grader's verdict): what was not committed is done
    again by a resume. A store read through sqlite3 alone (store/sqlite_reads.py) raises the driver's own."""
    if isinstance(exc, DatabaseFailure):
        return True
    # A driver not loaded raised nothing: neither is imported here for the asking.
    sqlite3, sqlalchemy_exc = sys.modules.get("sqlite3"), sys.modules.get("sqlalchemy.exc")
    return (sqlite3 is not None and isinstance(exc, sqlite3.Error)) or (
        sqlalchemy_exc is not None and isinstance(exc, sqlalchemy_exc.DBAPIError)
    )


SQLITE_BUSY, SQLITE_LOCKED = 5, 6
"""SQLite's primary result codes for "database is locked" (another connection holds the lock)."""


def is_locked_out(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database is locked": another connection (another evalstore command)
    held the store's write lock past the busy timeout. Nothing is wrong with the store; the command can be
    run again once the other has finished."""
    return _sqlite_code(exc) in (SQLITE_BUSY, SQLITE_LOCKED)


SQLITE_READONLY = 8
"""SQLite's primary result code for "attempt to write a readonly database"."""


def is_read_only(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite refusing a write to a store opened read-only (``mode=ro`` in ``--db``) or
    whose file or folder cannot be written: running the command again does not help."""
    return _sqlite_code(exc) == SQLITE_READONLY


def _sqlite_code(exc: BaseException) -> int | None:
    """SQLite's primary result code of a driver error, raw or under SQLAlchemy's (``orig``); else None."""
    code = getattr(getattr(exc, "orig", None) or exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def error_line(exc: BaseException) -> str:
    """One line naming what went wrong: the driver's own message under a SQLAlchemy error (``orig``), else
    the error's first line, else its type."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
