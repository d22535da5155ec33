"""Shared fixtures: a store on every backend, and the scripted judge server.

``store_url`` is parametrized over SQLite (a real file in tmp_path) and PostgreSQL (the real server,
each test in a schema of its own). PostgreSQL is located by ``EVALSTORE_TEST_POSTGRES_URL``; without
it those cases skip with the reason shown, except in CI (``CI=true``) where a missing server fails.
"""

from __future__ import annotations

import importlib.abc
import os
import socket
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# Tables follow ``COLUMNS`` (cli/output.py); a terminal's width (``COLUMNS=80``) inherited by the test run
# would wrap the tables the tests read, so they are read at the width a pipe gets.
os.environ.pop("COLUMNS", None)
# A store named by the environment the suite was started from is not one a test made.
os.environ.pop("EVALSTORE_DB", None)

PG_ENV = "EVALSTORE_TEST_POSTGRES_URL"
LOCAL_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
REPO = Path(__file__).resolve().parent.parent

# The product installs as one package, `evalstore`. Its source folders (store/, replay/, cli/,
# migrations/) sit at the repository's top level, which `python -m pytest` puts on sys.path; a test
# importing `store` would get a second copy of every module (two EventStore classes, two event
# catalogues). Take the repository off the path and refuse the bare names outright.
BARE_NAMES = frozenset({"store", "replay", "cli", "migrations", "grader"})
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO]


class _RefuseBareNames(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname.split(".")[0] in BARE_NAMES:
            raise ImportError(f"import evalstore.{fullname}, not {fullname}: the product has one import name")
        return None


sys.meta_path.insert(0, _RefuseBareNames())

# Fixture folders hold other projects' files (AgentV's examples ship their own test_*.py): data, not tests.
collect_ignore_glob = ["fixtures/*"]

try:  # the judge server fixture lives beside this file
    pytest_plugins = ["judge_server"] if (Path(__file__).parent / "judge_server.py").exists() else []
except Exception:  # pragma: no cover
    pytest_plugins = []


@pytest.fixture(scope="session", autouse=True)
def _store_search_stays_in_the_test_folders(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Commands the tests run look for ``.evalstore/evalstore.db`` in their folder and its parents; a
    store someone left in /tmp or above pytest's temp root would be found by every test that expects
    none. The search stops at those folders (inherited by every subprocess a test starts)."""
    ceilings = (str(tmp_path_factory.getbasetemp()), tempfile.gettempdir())
    os.environ["EVALSTORE_CEILING_DIRECTORIES"] = os.pathsep.join(ceilings)


def postgres_base_url() -> str | None:
    return os.environ.get(PG_ENV)


def _pg_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


def _pg_skip_reason() -> str:
    """Why the PostgreSQL cases skip, and the one variable that turns them on."""
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=0.5):
            answering = True
    except OSError:
        answering = False
    if answering and _trust_auth_works():
        return f"a PostgreSQL server answers on 127.0.0.1:5432 with trust auth: set {PG_ENV}={LOCAL_PG} to run these"
    return f"PostgreSQL tests need {PG_ENV} (e.g. {LOCAL_PG})"


def _trust_auth_works() -> bool:
    try:
        import psycopg

        with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=test", connect_timeout=2):
            return True
    except Exception:
        return False


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    base = postgres_base_url()
    if not base:
        if os.environ.get("CI"):
            pytest.fail(f"{PG_ENV} is not set in CI")
        pytest.skip(_pg_skip_reason())
    from sqlalchemy import create_engine, text

    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield _pg_schema_url(base, schema)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


AMCHECK_LOCK = 31_4159
"""A PostgreSQL advisory lock the amcheck tests hold one at a time: the extension is one per database,
installed in a test's schema and dropped with it, so two test workers at once would each find it in the
other's schema, which the other then drops."""


@pytest.fixture
def amcheck_turn() -> Iterator[None]:
    """This test's turn with amcheck, for as long as it lasts: asked for before ``postgres_url``, so it is
    given back after the test's schema, and the extension in it, are dropped."""
    from sqlalchemy import create_engine, text

    base = postgres_base_url()
    if not base:
        yield
        return
    engine = create_engine(base)
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": AMCHECK_LOCK})
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": AMCHECK_LOCK})
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def store(store_url: str):
    from evalstore.store import EventStore, make_engine

    s = EventStore(make_engine(store_url))
    yield s
    s.close()


@pytest.fixture
def sqlite_store(sqlite_url: str):
    from evalstore.store import EventStore, make_engine

    s = EventStore(make_engine(sqlite_url))
    yield s
    s.close()
