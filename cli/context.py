"""Opening the store for a command, once, closed when the command ends.

Commands that write create the default store when there is none; commands that only read
(``open_store(create=False)``) never create a store or a folder: on a missing one they say where they
looked and exit 2."""

from __future__ import annotations

import click
from sqlalchemy.engine import Engine

from evalstore.store import EventStore, locate, make_engine


def db_url(ctx: click.Context) -> str | None:
    return (ctx.find_root().obj or {}).get("db")


def engine_for(ctx: click.Context, *, create: bool = True) -> Engine:
    """An engine on the command's store; says on stderr which store it is when it was found in a parent folder."""
    from evalstore.cli.output import note

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
        engine = engine_for(ctx, create=create)
        try:
            store = EventStore(engine, create=create)
        except BaseException:
            engine.dispose()
            raise
        root.obj["store"] = store
        root.call_on_close(store.close)
    return store
