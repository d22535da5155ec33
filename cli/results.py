"""Printing a run's scored results, shared by ``run``, ``replay`` and ``quickstart``."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from evalstore.cli.output import TABLE_ROWS, echo, fmt_score, print_table

if TYPE_CHECKING:  # annotations only: the modules load when the command runs, not for its --help
    from evalstore.store.events import TestScored


def scored_rows(store, run_id: str, results: list[TestScored]) -> list[dict]:  # type: ignore[no-untyped-def]
    """``results`` of the run ``run_id`` as rows, with each one's grader scores and score note read from the store."""
    from evalstore.replay.analysis.views import run_results, score_notes

    graders = {(r.test_id, r.target, r.attempt): r for r in run_results(store, run_id)}
    notes = score_notes(store, run_id)
    return [
        {
            "test_id": r.test_id,
            "target": r.target,
            "attempt": r.attempt,
            "score": r.score,
            "passed": r.passed,
            "status": r.status,
            "error": r.error,
            "graders": graders[key].graders if key in graders else {},
            "left_out": graders[key].left_out if key in graders else frozenset(),
            "unscored": graders[key].unscored if key in graders else frozenset(),
            "note": notes.get(key, ""),
        }
        for r in results
        for key in [(r.test_id, r.target or "", r.attempt)]
    ]


ERROR_CHARS = 500
"""How much of an execution error is printed under the table (its end is kept: the cause is usually there)."""


def result_labels(keys: list[tuple[str, str | None, int]]) -> list[str]:
    """How results are named in a table or a list: the test id, with ``@target`` when the results span
    several targets and ``#attempt`` after the first (``analysis.per_test.key_label``)."""
    from evalstore.replay.analysis.per_test import key_label

    several = len({target or None for _, target, _ in keys}) > 1
    return [key_label((test_id, (target or None) if several else None, attempt)) for test_id, target, attempt in keys]


def print_scored(title: str, rows: list[dict], run_id: str | None = None) -> None:
    """The results table of a run or replay that just finished: as ``show`` does, at most
    :data:`TABLE_ROWS` results (and execution errors), then where to see the rest (``show RUN --all``)."""
    names = result_labels([(r["test_id"], r["target"], r["attempt"]) for r in rows])
    print_table(
        title,
        ["test", "score", "pass", "status", "graders", "why"],
        [
            (
                name,
                fmt_score(r["score"]),
                pass_cell(r["passed"], r["status"]),
                r["status"],
                grader_cell(r["graders"], r["left_out"], r["unscored"]),
                r.get("note", ""),
            )
            for name, r in zip(names[:TABLE_ROWS], rows[:TABLE_ROWS], strict=True)
        ],
        ids=["test", "score", "pass", "status"],
        optional=["status"],
    )
    if len(rows) > TABLE_ROWS:
        where = f"evalstore show {run_id} --all" if run_id else "evalstore show RUN --all"
        echo(f"first {TABLE_ROWS} of {len(rows)} results; {where} prints every one, --json for scripts")
    # Errors are sentences (which command, what it said): whole lines under the table, not a cut cell.
    errors = [(name, r) for name, r in zip(names, rows, strict=True) if r["error"] and r["status"] == "execution_error"]
    if errors:
        echo("execution errors:")
        for name, r in errors[:TABLE_ROWS]:
            text = " ".join(r["error"].split())
            text = text if len(text) <= ERROR_CHARS else "..." + text[-ERROR_CHARS:]
            echo(f"  {name}: {text}")
        if len(errors) > TABLE_ROWS:
            echo(f"  and {len(errors) - TABLE_ROWS} more")


def pass_cell(passed: bool, status: str) -> str:
    """yes / no, or error when a grader failed to run (the score then leaves that grader out)."""
    return "error" if status == "execution_error" else "yes" if passed else "no"


def grader_cell(scores: dict[str, float], left_out: Collection[str], unscored: Collection[str] = ()) -> str:
    """A result's graders for a table: each one's score, or ``error`` for one that failed to run and
    ``unscored`` for one that gave no score (either's recorded 0 is left out of the test's score, and would
    read as a real 0)."""
    return ", ".join(
        f"{g}={'unscored' if g in unscored else 'error' if g in left_out else fmt_score(s)}" for g, s in scores.items()
    )


def json_row(row: dict) -> dict:
    """A row of :func:`scored_rows` as ``--json`` prints it, as before the table showed errors (its
    ``error`` names the grader that failed)."""
    return {k: v for k, v in row.items() if k not in ("left_out", "unscored")}
