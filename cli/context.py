"""Opening the store for a command, once, closed when the command ends."""

from __future__ import annotations

import click

from evalstore.store import EventStore, make_engine


def db_url(ctx: click.Context) -> str | None:
    return (ctx.find_root().obj or {}).get("db")


def open_store(ctx: click.Context | None = None) -> EventStore:
    ctx = ctx or click.get_current_context()
    root = ctx.find_root()
    store = root.obj.get("store")
    if store is None:
        store = EventStore(make_engine(db_url(ctx)))
        root.obj["store"] = store
        root.call_on_close(store.close)
    return store
