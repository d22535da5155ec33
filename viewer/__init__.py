"""``evalstore view``: a read-only local web viewer over a store (runs, a run's results, a test's
transcript, artifacts and verdicts, comparisons), which records human labels from the test pages only
when given a labeller's name. :func:`create_app` builds the web application."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from evalstore.store import EventStore

__all__ = ["create_app"]


def create_app(store: EventStore, *, allowed_hosts: list[str] | None = None, label_as: str | None = None) -> Starlette:
    from evalstore.viewer.app import create_app as create

    return create(store, allowed_hosts=allowed_hosts, label_as=label_as)
