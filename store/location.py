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
from urllib.parse import parse_qsl, unquote

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
    read_only: bool = False
    """Opened read-only (``mode=ro`` in a SQLite URL): a command that writes fails, naming it."""

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


_PLAIN_SQLITE = re.compile(r"sqlite:///([^?#%@]+)(?:\?([^#%]*))?")
"""A ``sqlite:///PATH[?QUERY]`` URL with nothing SQLAlchemy would read otherwise than as written: no escapes."""

READ_ONLY = ("mode", "ro")
"""The one query argument a SQLite URL may carry (SQLite's own URI parameter): the store opened read-only."""
_URI_FLAG = "uri"  # what SQLAlchemy needs to pass SQLite's URI parameters on: taken, and made by make_engine


def _parsed(url: str) -> Any:
    from sqlalchemy.engine import make_url

    return make_url(url)


def sqlite_target(url: str) -> tuple[Path | None, bool]:
    """The SQLite file a URL names (None: another database, or an in-memory one) and whether it is opened
    read-only. Its database may be a path or SQLite's ``file:`` URI (SQLAlchemy's documented spelling,
    ``sqlite:///file:PATH?mode=ro&uri=true``); its query may hold ``mode=ro`` and ``uri``, nothing else:
    SQLAlchemy warns of other arguments on two lines and drops them, and with ``uri=true`` it appended them
    to a plain path, so ``replay`` wrote a new file ``x.db?mode=ro`` while ``show`` read ``x.db``. One rule
    for both readers (store/sqlite_reads.py and the full store, which ``make_engine`` builds from this)."""
    plain = _PLAIN_SQLITE.fullmatch(url)
    if plain is not None:
        database: str | None = plain[1]
        pairs = parse_qsl(plain[2] or "", keep_blank_values=True)
    else:
        parsed = _parsed(url)
        if parsed.get_backend_name() != "sqlite":
            return None, False
        database = parsed.database
        pairs = [
            (k, v) for k, values in parsed.query.items() for v in ((values,) if isinstance(values, str) else values)
        ]
    read_only = _read_only(url, pairs)
    if not database or database == ":memory:":
        return None, False
    if database.startswith("file:"):
        database = _uri_path(url, database)
    return Path(database).expanduser(), read_only


def _read_only(url: str, pairs: list[tuple[str, str]]) -> bool:
    names = [name for name, _ in pairs]
    for name, value in pairs:
        if names.count(name) > 1:
            raise StoreError(f"the SQLite URL {_scheme(url)} gives {name!r} twice: give it once")
        if name == _URI_FLAG:
            continue
        if (name, value) != READ_ONLY:
            raise StoreError(
                f"the SQLite URL {_scheme(url)} holds {name}={value}, which evalstore does not take: a SQLite "
                "store is sqlite:///PATH, and sqlite:///PATH?mode=ro opens it read-only"
            )
    return READ_ONLY in pairs


def _uri_path(url: str, database: str) -> str:
    """The path of SQLite's ``file:`` URI (``file:x.db``, ``file:///abs/x.db``, ``file://localhost/abs``),
    its %-escapes decoded as SQLite decodes them."""
    rest = database[len("file:") :]
    if rest.startswith("//"):
        authority, _, rest = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            raise StoreError(f"the SQLite URL {_scheme(url)} names the host {authority!r}: a store is a local file")
        rest = "/" + rest
    return unquote(rest)


def _scheme(url: str) -> str:
    """A URL as named in an error: whole when it can hold no password (``sqlite:///``), else its scheme."""
    return url if re.match(r"sqlite(\+\w+)?:///", url) else url.split("://", 1)[0] + "://..."


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
        raise StoreError(f"the database URL {_scheme(url)} cannot be read: {error_line(exc)}") from None


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
        path, read_only = sqlite_target(url)
        return Location(url, path, read_only=read_only)
    here = cwd or Path.cwd()
    found = find_store(here)
    if found is None:
        return Location(DEFAULT_URL, Path(STORE_DIR) / STORE_FILE, default=True, searched_from=here.resolve())
    above = found.parent.parent != here.resolve()
    url = f"sqlite:///{found}" if above else DEFAULT_URL
    return Location(url, found if above else Path(STORE_DIR) / STORE_FILE, True, above, here.resolve())


def resolve_url(db: str | None = None) -> str:
    return locate(db).url
