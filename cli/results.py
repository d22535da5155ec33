"""Printing a run's scored results, shared by ``run``, ``replay`` and ``quickstart``."""

from __future__ import annotations

import click

from evalstore.cli.output import fmt_score, print_table
from evalstore.store.events import TestScored


def scored_rows(results: list[TestScored], graders: dict[tuple, dict[str, float]]) -> list[dict]:
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
        }
        for r in results
    ]


ERROR_CHARS = 500
"""How much of an execution error is printed under the table (its end is kept: the cause is usually there)."""


def print_scored(title: str, rows: list[dict]) -> None:
    print_table(
        title,
        ["test", "score", "pass", "status", "graders"],
        [
            (
                r["test_id"],
                fmt_score(r["score"]),
                "yes" if r["passed"] else "no",
                r["status"],
                ", ".join(f"{g}={fmt_score(s)}" for g, s in r["graders"].items()),
            )
            for r in rows
        ],
    )
    # Errors are sentences (which command, what it said): whole lines under the table, not a cut cell.
    errors = [r for r in rows if r["error"] and r["status"] == "execution_error"]
    if errors:
        click.echo("execution errors:")
        for r in errors:
            text = " ".join(r["error"].split())
            text = text if len(text) <= ERROR_CHARS else "..." + text[-ERROR_CHARS:]
            click.echo(f"  {r['test_id']}: {text}")


def grader_scores(store, run_id: str) -> dict[tuple, dict[str, float]]:  # type: ignore[no-untyped-def]
    from evalstore.replay.analysis.views import run_results

    return {(r.test_id, r.target, r.attempt): r.graders for r in run_results(store, run_id)}
