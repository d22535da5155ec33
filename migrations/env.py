"""Alembic environment for evalstore. The URL comes from the same place as the CLI's
(``--db`` → ``EVALSTORE_DB`` → the embedded SQLite file), via ``evalstore.store.engine``."""

from __future__ import annotations

from alembic import context

from evalstore.store.engine import make_engine, resolve_url
from evalstore.store.schema import metadata

config = context.config
target_metadata = metadata


def _url() -> str:
    return config.attributes.get("evalstore_url") or resolve_url(config.get_main_option("sqlalchemy.url") or None)


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_url())
    with engine.begin() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
