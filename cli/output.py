"""One way to print results: a rich table for people, JSON for scripts (``--json``)."""

from __future__ import annotations

import gc
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID
    from rich.table import Table

PIPED_WIDTH = 200
"""Tables written to a pipe or file are this wide unless ``COLUMNS`` says otherwise (rich would use 80)."""


# rich is imported when something is first printed through it, not when a command module loads.
def console() -> Console:
    """A console on the current stdout, made per table: its width follows ``COLUMNS`` or the terminal."""
    from rich.console import Console

    width = None
    if not sys.stdout.isatty():
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH
    return Console(highlight=False, width=width)


@cache
def err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters but tab and newline: C0, DEL and C1 (U+0085, NEXT LINE, among them)."""

_LINE_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
""":data:`_CONTROL` with tab, newline and Unicode's line and paragraph separators: what a table cell
or a note must not hold."""


def visible(text: str, *, one_line: bool = False) -> str:
    """Text for a person's terminal with its control characters written out (``\\x1b``): what a table,
    a note or a line shows comes from imported data, and an escape sequence there could clear the
    screen, retitle the window, hide a link, or with a carriage return draw a failed assertion over with
    a passed one. ``one_line`` (table cells, notes, a line's fields) writes out tab and the line breaks
    too (``\\x0a``, ``\\u2028``): a test id holding a newline and a forged row would print as a row of
    its own. ``--json`` needs none of this (JSON escapes them), nor ``export`` (the data as it is)."""
    pattern = _LINE_CONTROL if one_line else _CONTROL
    if not pattern.search(text):
        return text
    return pattern.sub(_written_out, text)


def _written_out(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def echo(message: Any = None, *, one_line: bool = False, **kwargs: Any) -> None:
    """``click.echo`` of a line for people: :func:`visible` (``one_line``: a line made of stored text,
    which must stay one)."""
    click.echo(visible(message, one_line=one_line) if isinstance(message, str) else message, **kwargs)


def json_option(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def plural(n: int, word: str) -> str:
    """``1 result``, ``2 results``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def fmt_score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def print_table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    ids: Sequence[str] = (),
    optional: Sequence[str] = (),
) -> None:
    """A table on stdout. Columns named in ``ids`` (run ids, test ids, and short values such as scores)
    are never wrapped or cut, so they can be copied; the others fold. When even that does not fit the
    width, the ``optional`` columns are left out, in the order given, and a note on stderr names them (``--json`` has everything)."""
    from rich.measure import Measurement

    out = console()
    cells = [["" if cell is None else visible(str(cell), one_line=True) for cell in row] for row in rows]
    shown = list(columns)
    left_out: list[str] = []
    while True:
        table = _table(columns, shown, cells, ids)
        unbounded = out.options.update(max_width=1_000_000)  # Measurement clamps to the width it is given
        fits = Measurement.get(out, unbounded, table).minimum <= out.width
        droppable = [c for c in optional if c in shown]
        if fits or not droppable:
            break
        shown.remove(droppable[0])
        left_out.append(droppable[0])
    if title:  # its own line, never folded to the width of a narrow table
        out.print(
            visible(title, one_line=True),
            style="table.title",
            soft_wrap=True,
            highlight=False,
            markup=False,
            emoji=False,
        )
    out.print(table)
    if left_out:
        note(f"({out.width} columns: left out {', '.join(left_out)}; a wider terminal or --json shows them)")


FOLD_MIN = 10
"""A column that folds keeps at least this many characters a line (fewer, and columns are left out)."""

TOKEN_MAX = 24
"""A folding column is at least as wide as its longest word up to this many characters: wider words
(paths, long messages' tokens) may fold inside."""


def _table(columns: Sequence[str], shown: Sequence[str], cells: list[list[str]], ids: Sequence[str]) -> Table:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    # No vertical rules: a copied id carries no box characters, and narrow terminals fit more.
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0), show_lines=False)
    index = [columns.index(c) for c in shown]
    for i in index:
        name = columns[i]
        widest = max([len(name), *(len(row[i]) for row in cells)])
        if name in ids:
            table.add_column(name, no_wrap=True, min_width=widest)
        else:
            # A folding column wraps between words, never inside one (a header such as TP/FN/FP/TN, a
            # grader name, a number), unless a word is longer than TOKEN_MAX (a path in a message).
            token = max(len(word) for text in (name, *(row[i] for row in cells)) for word in [*text.split(), ""])
            table.add_column(name, overflow="fold", min_width=max(min(widest, FOLD_MIN), min(token, TOKEN_MAX)))
    for row in cells:  # Text, not markup: a grader named regex-caf[eé] keeps its brackets
        table.add_row(*(Text(row[i]) for i in index))
    return table


TABLE_ROWS = 50
"""How many rows a table shows before it says how many more there are (``--all`` prints every row)."""


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """For writing a whole run out (``export``, ``show --all``/``--json``): a few dicts and lists are
    built per result and dropped before the next, with no reference cycles, so the cyclic collector's
    passes over them find nothing (they were a tenth of a CSV export). Freed by reference counting as
    before; memory stays flat."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def print_plain(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Rows as tab-separated lines under a header, written as they come: nothing is measured, so a
    run of any size prints at the speed of its rows. A cell's tabs and line breaks are written out as a
    table's are (:func:`visible`). Returns the number of rows."""
    out = sys.stdout
    out.write("\t".join(columns) + "\n")
    count = 0
    for row in rows:
        out.write("\t".join(_plain(c) for c in row) + "\n")
        count += 1
    return count


def _plain(cell: Any) -> str:
    return visible("" if cell is None else str(cell), one_line=True)


def note(message: str) -> None:
    """A line for people on stderr, so stdout stays clean for --json.

    Printed as written: never wrapped (stderr that is not a terminal is 80 columns to rich, and a
    hint such as ``evalstore run --resume RUN`` must survive copy-paste), and never read as rich markup
    or emoji codes (a path or a warning with ``[...]`` in it is text, not a style). To a terminal it goes
    through rich, which drops control codes a path or an echoed error may hold; anywhere else it is
    written as it is (and rich is not loaded for it)."""
    message = visible(message, one_line=True)
    if not sys.stderr.isatty():
        sys.stderr.write(message + "\n")
        return
    err_console().print(message, soft_wrap=True, markup=False, emoji=False)


_TERMINAL_SETTINGS = ("FORCE_COLOR", "FORCE_TERMINAL", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
"""What can make rich treat a stderr that is not a terminal as one."""


def _stderr_may_be_terminal() -> bool:
    """Whether rich might call stderr a terminal: not when it is none and nothing says to (a script), and
    then rich's console module is not loaded to ask."""
    return sys.stderr.isatty() or any(os.environ.get(name) for name in _TERMINAL_SETTINGS)


class progress_bar:
    """A progress bar on stderr; ``advance()`` once per finished item. Quiet when stderr is not a terminal,
    and then rich's progress module is not even imported (a scripted replay or import saves its load).
    The bar (and rich's thread that redraws it) starts with the first thing it shows, not on entering
    the block: an export forks its worker processes first, and a forked child would inherit a copy of
    a thread's locks without the thread."""

    def __init__(self, description: str) -> None:
        self._progress: Progress | None = None
        if _stderr_may_be_terminal() and err_console().is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err_console(),
                transient=False,
            )
        self._description = description
        self._task: TaskID | None = None
        self._live = False

    @property
    def visible(self) -> bool:
        """Whether it draws anything (stderr is a terminal)."""
        return self._progress is not None

    def _shown(self) -> Progress | None:
        if self._progress is not None and not self._live:
            self._progress.__enter__()
            self._live = True
        return self._progress

    def start(self, total: int | None) -> None:
        if (progress := self._shown()) is not None:
            self._task = progress.add_task(self._description, total=total)

    def show(self, phase: str, done: int, total: int | None) -> None:
        """Set the bar to ``done`` of ``total``; a new ``phase`` (e.g. checking, then importing) starts a new bar."""
        if (progress := self._shown()) is None:
            return
        if self._task is None or phase != self._description:
            if self._task is not None:  # the finished phase's bar shows its final count as its total
                finished = progress.tasks[-1].completed
                progress.update(self._task, total=finished)
            self._description = phase
            self.start(total)
        progress.update(self._task, completed=done, total=total)  # type: ignore[arg-type]

    def advance(self, *_: object) -> None:
        if (progress := self._shown()) is None:
            return
        if self._task is None:
            self.start(None)
        progress.advance(self._task)  # type: ignore[arg-type]

    def __enter__(self) -> progress_bar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None and self._live:
            self._progress.__exit__(*exc)  # type: ignore[arg-type]
            self._live = False


@contextmanager
def resume_hint(command: str) -> Iterator[Callable[[str], None]]:
    """Yields ``begun(run_id)``, to call once the run exists; on Ctrl-C after that, says how to finish
    it (``evalstore COMMAND --resume RUN``), and so does the error line of a database failure
    (``finish_with``). What was recorded stays recorded."""
    from evalstore.cli.errors import finish_with

    begun: list[str] = []

    def begin(run_id: str) -> None:
        begun.append(run_id)
        finish_with(_resume_clause(command, run_id))

    try:
        yield begin
    except KeyboardInterrupt:
        if begun:
            note(f"{command} {begun[0]} is incomplete; {_resume_clause(command, begun[0])}")
        raise


def _resume_clause(command: str, run_id: str) -> str:
    return f"finish it with: evalstore {command} --resume {run_id}"
