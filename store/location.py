"""Where the store is, without opening it: ``--db``, then ``EVALSTORE_DB``, then the embedded SQLite file
found the way git finds ``.git`` (:mod:`evalstore.store.engine` opens what this finds).

A plain SQLite path or ``sqlite:///PATH`` URL is read here without SQLAlchemy, whose import is a command's
largest start-up cost: a command that only reads a SQLite file never loads it (store/sqlite_reads.py).
Any other URL is parsed by SQLAlchemy's ``make_url``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstore.store.errors import StoreError, StoreMissing, error_line

STORE_DIR, STORE_FILE = ".evalstore", "evalstore.db"
DEFAULT_URL = f"sqlite:///{STORE_DIR}/{STORE_FILE}"
ENV_VAR = "EVALSTORE_DB"
# Folders the search for a store does not climb into, as git's GIT_CEILING_DIRECTORIES: a store left in
# /tmp or a home folder is not picked up by every command run below it (the test suite sets its temp root).
CEILING_VAR = "EVALSTORE_CEILING_DIRECTORIES"


@dataclass(frozen=True)
class Location:
    """Where a store is: its URL; for SQLite the file; ``default`` when neither ``--db`` nor
    ``EVALSTORE_DB`` named it; ``found_above`` when the default store was found in a parent folder."""

    url: str
    path: Path | None = None
    default: bool = False
    found_above: bool = False
    searched_from: Path | None = None

    def missing(self) -> StoreMissing:
        if self.default:
            return StoreMissing(
                f"no store found: looked for {STORE_DIR}/{STORE_FILE} in {self.searched_from} and every parent "
                "folder; record a run first (evalstore run, import or quickstart) or pass --db URL"
            )
        where = self.path.resolve() if self.path is not None else _parsed(self.url).render_as_string()
        return StoreMissing(f"no store at {where}: nothing was created; check --db / {ENV_VAR}")


def find_store(start: Path) -> Path | None:
    """The nearest ``.evalstore/evalstore.db`` in ``start`` or one of its parents, as git finds ``.git``;
    the search stops below a ceiling folder (``EVALSTORE_CEILING_DIRECTORIES``) unless it starts there."""
    start = start.resolve()
    ceilings = _ceilings()
    for folder in (start, *start.parents):
        if folder in ceilings and folder != start:
            break
        candidate = folder / STORE_DIR / STORE_FILE
        if candidate.is_file():
            return candidate
    return None


def _ceilings() -> set[Path]:
    """The folders ``EVALSTORE_CEILING_DIRECTORIES`` names, read as git reads ``GIT_CEILING_DIRECTORIES``:
    absolute paths only (a relative one, ``..``, would stop the search at a different folder for each
    folder a command runs in; git ignores them, as it does an empty entry), symlinks resolved. An entry
    that cannot be resolved (a symlink loop: every command failed with a RuntimeError) is taken as
    written: it is no folder a search passes through."""
    found = set()
    for entry in os.environ.get(CEILING_VAR, "").split(os.pathsep):
        path = Path(entry)
        if not path.is_absolute():
            continue
        try:
            found.add(path.resolve())
        except (OSError, RuntimeError):
            found.add(path)
    return found


_PLAIN_SQLITE = re.compile(r"sqlite:///([^?#%@]+)")
"""A ``sqlite:///PATH`` URL with nothing SQLAlchemy would read otherwise than as written: no query, no
escapes."""


def _parsed(url: str) -> Any:
    from sqlalchemy.engine import make_url

    return make_url(url)


def sqlite_file(url: str) -> Path | None:
    """The SQLite file a URL names; None for another database, an in-memory one or a `file:` URI."""
    plain = _PLAIN_SQLITE.fullmatch(url)
    if plain is not None and plain[1] != ":memory:" and not plain[1].startswith("file:"):
        return Path(plain[1]).expanduser()
    parsed = _parsed(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser()


def _check_url(url: str) -> None:
    """A URL that cannot be read is bad input, said without echoing what may be a password."""
    authority = url.split("://", 1)[-1].split("/", 1)[0]
    if authority.count("@") > 1:  # parsed otherwise than meant: the part after the first @ would be shown
        raise StoreError(
            "the database URL's user or password holds '@': write it as %40 (postgresql://user:p%40ss@host/db)"
        )
    if _PLAIN_SQLITE.fullmatch(url):
        return
    from sqlalchemy.exc import ArgumentError

    try:
        _parsed(url)
    except (ArgumentError, ValueError) as exc:
        raise StoreError(f"the database URL {url.split('://', 1)[0]}://... cannot be read: {error_line(exc)}") from None


def locate(db: str | None = None, *, cwd: Path | None = None) -> Location:
    """Resolve where the store is, without creating anything."""
    if db is not None and not db.strip():
        raise StoreError("--db is empty: give a SQLite file's path or a database URL")
    url = db or os.environ.get(ENV_VAR)
    if url:
        if "://" not in url:
            # A bare path is taken as a SQLite file: friendlier than SQLAlchemy's parse error.
            url = f"sqlite:///{url}"
        _check_url(url)
        return Location(url, sqlite_file(url))
    here = cwd or Path.cwd()
    found = find_store(here)
    if found is None:
        return Location(DEFAULT_URL, Path(STORE_DIR) / STORE_FILE, default=True, searched_from=here.resolve())
    above = found.parent.parent != here.resolve()
    url = f"sqlite:///{found}" if above else DEFAULT_URL
    return Location(url, found if above else Path(STORE_DIR) / STORE_FILE, True, above, here.resolve())


def resolve_url(db: str | None = None) -> str:
    return locate(db).url
