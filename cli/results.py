"""Printing a run's scored results, shared by ``run``, ``replay`` and ``quickstart``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalstore.cli.output import TABLE_ROWS, echo, fmt_score, print_table

if TYPE_CHECKING:  # annotations only: the modules load when the command runs, not for its --help
    from evalstore.store.events import TestScored


def scored_rows(store, run_id: str, results: list[TestScored]) -> list[dict]:  # type: ignore[no-untyped-def]
    """``results`` of the run ``run_id`` as rows, with each one's grader scores and score note read from the store."""
    graders = grader_scores(store, run_id)
    from evalstore.replay.analysis.views import score_notes

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
            "graders": graders.get((r.test_id, r.target or "", r.attempt), {}),
            "note": notes.get((r.test_id, r.target or "", r.attempt), ""),
        }
        for r in results
    ]


ERROR_CHARS = 500
"""How much of an execution error is printed under the table (its end is kept: the cause is usually there)."""


def result_labels(keys: list[tuple[str, str | None, int]]) -> list[str]:
    """How results are named in a table or a list: the test id, with ``@target`` when the results span
    several targets and ``#attempt`` after the first (``analysis.compare.key_label``)."""
    from evalstore.replay.analysis.compare import key_label

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
                ", ".join(f"{g}={fmt_score(s)}" for g, s in r["graders"].items()),
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


def grader_scores(store, run_id: str) -> dict[tuple, dict[str, float]]:  # type: ignore[no-untyped-def]
    from evalstore.replay.analysis.views import run_results

    return {(r.test_id, r.target, r.attempt): r.graders for r in run_results(store, run_id)}
