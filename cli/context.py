"""Opening the store for a command, once, closed when the command ends.

Commands that write create the default store when there is none; commands that only read
(``open_store(create=False)``) never create a store or a folder: on a missing one they say where they
looked and exit 2."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import click

if TYPE_CHECKING:  # the store (and SQLAlchemy) load when a command opens it, not with its --help
    from sqlalchemy.engine import Engine

    from evalstore.store import EventStore, StoreOrOpener
    from evalstore.store.location import Location


def db_url(ctx: click.Context) -> str | None:
    return (ctx.find_root().obj or {}).get("db")


def engine_for(ctx: click.Context, *, create: bool = True) -> Engine:
    """An engine on the command's store; says on stderr which store it is when it was found in a parent folder."""
    from evalstore.store import make_engine
    from evalstore.store.location import locate

    location = locate(db_url(ctx))
    engine = make_engine(location, create=create)
    _say_where(location)
    return engine


def _say_where(location: Location) -> None:
    if location.found_above:
        from evalstore.cli.output import note

        note(f"using the store {location.path}")


def open_store(ctx: click.Context | None = None, *, create: bool = True) -> EventStore:
    ctx = ctx or click.get_current_context()
    root = ctx.find_root()
    store = root.obj.get("store")
    if store is None:
        store = _full_store(engine_for(ctx, create=create), create)
        root.obj["store"] = store
        root.call_on_close(store.close)
    return store


def _full_store(engine: Engine, create: bool) -> EventStore:
    from evalstore.cli import no_pydantic_plugins
    from evalstore.store import EventStore

    try:
        store = EventStore(engine, create=create)
    except BaseException:
        engine.dispose()
        raise
    no_pydantic_plugins()
    return store


def open_reader(ctx: click.Context) -> EventStore:
    """The store for a command that only reads it (``runs``, ``show``, ``compare``, ``export``'s row formats):
    a SQLite file at this evalstore's schema is read through :class:`~evalstore.store.sqlite_reads.SqliteReads`,
    without loading SQLAlchemy (the largest part of such a command's start-up); any other store as
    ``open_store(create=False)``."""
    root = ctx.find_root()
    if root.obj.get("store") is not None:
        return root.obj["store"]
    from evalstore.store.location import locate
    from evalstore.store.sqlite_reads import open_reads

    location = locate(db_url(ctx))
    if location.path is None:
        return open_store(ctx, create=False)

    def full() -> EventStore:
        from evalstore.store import make_engine

        return _full_store(make_engine(location, create=False), False)

    reads = open_reads(location.path, full)
    if reads is None:
        return open_store(ctx, create=False)
    _say_where(location)
    root.obj["store"] = reads
    root.call_on_close(reads.close)
    from evalstore.cli import no_pydantic_plugins

    no_pydantic_plugins()
    return cast("EventStore", reads)  # the reads it makes are EventStore's (store/sqlite_reads.py)


def store_or_opener(ctx: click.Context) -> StoreOrOpener:
    """The store, when there is one; else what makes it (``open_store``), for a command that checks its
    input first: an import refused before anything is written makes no store either."""
    from evalstore.store import StoreMissing

    try:
        return open_store(ctx, create=False)
    except StoreMissing:
        return lambda: open_store(ctx)


# -- shell completion: run ids and test ids from the store (never creating one) ---------------------


def _completion_store(ctx: click.Context) -> EventStore | None:
    root = ctx.find_root()
    db = root.params.get("db") if root.params else None
    from evalstore.store import EventStore, locate, make_engine

    try:
        return EventStore(make_engine(locate(db), create=False), create=False)
    except Exception:  # completion must never fail loudly: no store, no suggestions
        return None


def complete_run_id(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """``last`` and the run ids starting with what was typed."""
    store = _completion_store(ctx)
    if store is None:
        return []
    try:
        ids = store.run_ids()
    finally:
        store.close()
    return [i for i in ["last", *reversed(ids)] if i.startswith(incomplete)]


def complete_test_id(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """The test ids of the run given before this argument (compare: of its first run)."""
    from evalstore.replay.analysis.views import resolve_run

    store = _completion_store(ctx)
    if store is None:
        return []
    try:
        given = ctx.params.get("run") or next(iter(ctx.params.get("runs") or ()), None)
        run_id = resolve_run(store, given or "last")
        ids = sorted({r["test_id"] for r in store.query("results", run_id=run_id)})
    except Exception:
        return []
    finally:
        store.close()
    return [i for i in ids if i.startswith(incomplete)]
