"""A command stopped by the database (here: SQLite's write lock, held by another process past the busy
timeout) says so on one line, and says what finishes its work: the command that failed, not another one's
way (an import was told to `evalstore replay --resume`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import evalstore.store.engine as engine_module
from evalstore.cli.errors import handle_errors
from evalstore.cli.output import resume_hint
from evalstore.store import EventStore, NewEvent, make_engine
from evalstore.store.events import LineSkipped, SourceRef

LOCKED = "Error: database error: database is locked (another evalstore command is writing this store; "


def _appending_command(url: str, command: str | None) -> click.Command:
    """A command that appends to the store at ``url``; with ``command``, after its run has begun, as
    ``run`` and ``replay`` do (``resume_hint``)."""

    @click.command()
    @handle_errors
    def appending() -> None:
        store = EventStore(make_engine(url))
        try:
            event = NewEvent(LineSkipped(source=SourceRef(file="a.jsonl", line=1), reason="x"), "e-1")
            if command is None:
                store.append("s", [event])
                return
            with resume_hint(command) as begun:
                begun("rep-1")
                store.append("s", [event])
        finally:
            store.close()

    return appending


@pytest.mark.parametrize(
    ("command", "finish"),
    [
        ("replay", "finish it with: evalstore replay --resume rep-1)"),
        ("run", "finish it with: evalstore run --resume rep-1)"),
        (None, "run the command again)"),
    ],
)
def test_a_command_locked_out_says_how_to_finish_its_own_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str | None, finish: str
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    EventStore(make_engine(url)).close()  # the store exists; the command only appends
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 200)
    holder = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another command writing, for longer than this one waits
        result = CliRunner().invoke(_appending_command(url, command), [], obj={})
    finally:
        holder.close()
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"{LOCKED}nothing uncommitted was recorded; when that command has finished, {finish}"
    ]
