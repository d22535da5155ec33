"""The search for a store under odd ``EVALSTORE_CEILING_DIRECTORIES`` values, read as git reads
``GIT_CEILING_DIRECTORIES``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalstore import cli
from evalstore.store.engine import CEILING_VAR, find_store


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``top/.evalstore/evalstore.db`` and ``top/a/b``, the search run from ``top/a/b``."""
    store = tmp_path / "top" / ".evalstore" / "evalstore.db"
    store.parent.mkdir(parents=True)
    store.touch()
    (tmp_path / "top" / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "top" / "a" / "b")
    return tmp_path / "top"


@pytest.mark.parametrize("value", ["", os.pathsep, f"{os.pathsep}{os.pathsep}", " ", "/nonexistent/folder", "/"])
def test_entries_that_name_no_folder_above_stop_nothing(
    tree: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(CEILING_VAR, value)
    assert find_store(tree / "a" / "b") == tree / ".evalstore" / "evalstore.db"


@pytest.mark.parametrize("value", ["..", "../..", "a", " /"])
def test_a_relative_entry_is_ignored_as_git_ignores_it(tree: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    # ".." was read from the current folder: it stopped the search at top/a from here, elsewhere elsewhere
    monkeypatch.setenv(CEILING_VAR, value)
    assert find_store(tree / "a" / "b") == tree / ".evalstore" / "evalstore.db"


def test_an_absolute_entry_stops_the_search_below_it_not_in_it(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for entry in (str(tree / "a"), f"{tree / 'a'}/", str(tree / "a" / "b" / ".." / ".." / "a")):
        monkeypatch.setenv(CEILING_VAR, entry)
        assert find_store(tree / "a" / "b") is None, entry
        assert find_store(tree / "a") == tree / ".evalstore" / "evalstore.db"  # started in the ceiling: as git
    (tree.parent / "link").symlink_to(tree / "a")
    monkeypatch.setenv(CEILING_VAR, str(tree.parent / "link"))  # a symlink to the ceiling is the ceiling
    assert find_store(tree / "a" / "b") is None


def test_a_symlink_loop_among_the_entries_is_no_internal_error(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tree.parent / "loop1").symlink_to(tree.parent / "loop2")
    (tree.parent / "loop2").symlink_to(tree.parent / "loop1")
    monkeypatch.setenv(CEILING_VAR, f"{tree.parent / 'loop1'}{os.pathsep}{tree / 'a'}")
    assert find_store(tree / "a" / "b") is None  # the other entry still counts
    # every command failed: "internal error: RuntimeError: Symlink loop from ...", exit 3
    result = CliRunner().invoke(cli.main, ["runs", "--json"])
    assert result.exit_code == 2, result.output
    assert "no store found" in result.stderr and "internal error" not in result.output


def test_a_store_says_whether_another_process_can_open_it_and_whether_it_is_on_a_server(store) -> None:  # type: ignore[no-untyped-def]
    """Forked export workers and Ray's open the store again: any but an in-memory SQLite database. A read of
    a store on a server is a round trip (a replay grades meanwhile)."""
    from evalstore.store import EventStore, make_engine

    assert store.reopenable
    assert store.on_server == (store.engine.dialect.name == "postgresql")
    for url in ("sqlite://", "sqlite:///:memory:"):
        in_memory = EventStore(make_engine(url))
        assert not in_memory.reopenable and not in_memory.on_server
        in_memory.close()
