"""``evalstore runs`` and ``evalstore show RUN``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from itertools import islice

import click

from evalstore.cli.context import open_store
from evalstore.cli.errors import handle_errors
from evalstore.cli.output import TABLE_ROWS, fmt_score, json_option, print_json, print_plain, print_table
from evalstore.replay.analysis import views


@click.command()
@json_option
@click.pass_context
@handle_errors
def runs(ctx: click.Context, as_json: bool) -> None:
    """List runs: kind, parent, test count, mean score, when started."""
    summaries = views.list_runs(open_store(ctx))
    if as_json:
        print_json([s.to_dict() for s in summaries])
        return
    if not summaries:
        click.echo("no runs yet: `evalstore run EVAL.yaml`, `evalstore import PATH` or `evalstore quickstart`")
        return
    print_table(
        None,
        ["run", "kind", "parent", "suite", "status", "tests", "passed", "mean", "started"],
        [
            (
                s.run_id,
                s.kind,
                s.parent_run_id or "",
                s.suite or "",
                s.status,
                s.tests,
                s.passed,
                fmt_score(s.mean_score),
                s.started_at[:19],
            )
            for s in summaries
        ],
    )


@click.command()
@click.argument("run")
@click.option("--all", "show_all", is_flag=True, help="Print every result as tab-separated lines, not the first rows.")
@json_option
@click.pass_context
@handle_errors
def show(ctx: click.Context, run: str, show_all: bool, as_json: bool) -> None:
    """One run's summary and its results (per-grader scores). RUN: an id, a unique prefix, or ``last``.

    The table shows the first results and how many there are; --all prints every one (tab-separated,
    streamed), --json everything for scripts.

    \b
    Example:
      evalstore show last
      evalstore show imp-5159 --all | grep quality_failure
    """
    store = open_store(ctx)
    run_id = views.resolve_run(store, run)
    summary = views.run_summary(store, run_id)
    skipped = views.skipped_lines(store, run_id) if summary.kind == "imported" else []
    results = views.iter_results(store, run_id)
    if as_json:
        _show_json(summary, results, skipped)
        return
    click.echo(
        f"run {summary.run_id}  kind={summary.kind}  status={summary.status}  suite={summary.suite or '-'}"
        + (f"  parent={summary.parent_run_id}" if summary.parent_run_id else "")
    )
    click.echo(
        f"tests={summary.tests}  passed={summary.passed}  errors={summary.errors}  mean={fmt_score(summary.mean_score)}"
    )
    columns = ["test", "target", "score", "pass", "status", "graders"]
    cells = (
        (
            r.test_id + (f" #{r.attempt}" if r.attempt != 1 else ""),
            r.target,
            fmt_score(r.score),
            "yes" if r.passed else "no",
            r.status,
            ", ".join(f"{g}={fmt_score(s)}" for g, s in r.graders.items()),
        )
        for r in results
    )
    if show_all:
        print_plain(columns, cells)
    else:
        # A table is measured whole before it prints: only the first rows, never a whole large run.
        print_table(None, columns, islice(cells, TABLE_ROWS))
        if summary.tests > TABLE_ROWS:
            click.echo(f"first {TABLE_ROWS} of {summary.tests} results; --all prints every one, --json for scripts")
    if skipped:
        click.echo(f"{len(skipped)} source lines left out:")
        for line in skipped:
            click.echo(f"  {line.source.location}: {line.reason}")


def _show_json(summary: views.RunSummary, results: Iterator[views.ResultRow], skipped: list) -> None:
    """``{"run", "results", "skipped_lines"}``, the results written one a line as they are read."""
    out = sys.stdout
    out.write('{\n  "run": ' + json.dumps(summary.to_dict(), ensure_ascii=False, default=str) + ',\n  "results": [')
    for i, r in enumerate(results):
        out.write(("," if i else "") + "\n    " + json.dumps(r.to_dict(), ensure_ascii=False))
    skipped_lines = [{"source": s.source.model_dump(), "reason": s.reason} for s in skipped]
    out.write('\n  ],\n  "skipped_lines": ' + json.dumps(skipped_lines, ensure_ascii=False, default=str) + "\n}\n")
