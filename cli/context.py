"""Opening the store for a command, once, closed when the command ends.

Commands that write create the default store when there is none; commands that only read
(``open_store(create=False)``) never create a store or a folder: on a missing one they say where they
looked and exit 2."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # the store (and SQLAlchemy) load when a command opens it, not with its --help
    from sqlalchemy.engine import Engine

    from evalstore.store import EventStore, StoreOrOpener


def db_url(ctx: click.Context) -> str | None:
    return (ctx.find_root().obj or {}).get("db")


def engine_for(ctx: click.Context, *, create: bool = True) -> Engine:
    """An engine on the command's store; says on stderr which store it is when it was found in a parent folder."""
    from evalstore.cli.output import note
    from evalstore.store import locate, make_engine

    location = locate(db_url(ctx))
    engine = make_engine(location, create=create)
    if location.found_above:
        note(f"using the store {location.path}")
    return engine


def open_store(ctx: click.Context | None = None, *, create: bool = True) -> EventStore:
    ctx = ctx or click.get_current_context()
    root = ctx.find_root()
    store = root.obj.get("store")
    if store is None:
        from evalstore.store import EventStore

        engine = engine_for(ctx, create=create)
        try:
            store = EventStore(engine, create=create)
        except BaseException:
            engine.dispose()
            raise
        root.obj["store"] = store
        root.call_on_close(store.close)
        from evalstore.cli import no_pydantic_plugins

        no_pydantic_plugins()
    return store


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
