"""One way to print results: a rich table for people, JSON for scripts (``--json``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table

# Piped output gets a wide fixed width: rich would otherwise wrap tables at 80 columns.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, highlight=False)


def json_option(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def fmt_score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    table = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*["" if cell is None else str(cell) for cell in row])
    console.print(table)


def note(message: str) -> None:
    """A line for people on stderr, so stdout stays clean for --json."""
    err_console.print(message)
