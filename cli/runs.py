"""``evalstore runs`` and ``evalstore show RUN``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING

import click

from evalstore.cli.context import complete_run_id, open_reader
from evalstore.cli.errors import handle_errors
from evalstore.cli.output import (
    TABLE_ROWS,
    echo,
    fmt_score,
    json_option,
    no_cycle_collection,
    print_json,
    print_plain,
    print_table,
)

if TYPE_CHECKING:  # annotations only: the modules load when the command runs, not for its --help
    from evalstore.replay.analysis import views


@click.command()
@click.option("--suite", help="Only runs of this suite.")
@click.option("--kind", type=click.Choice(["recorded", "replay", "imported"]), help="Only runs of this kind.")
@click.option("--limit", type=click.IntRange(0), metavar="N", help="Only the N newest runs (listed oldest first).")
@json_option
@click.pass_context
@handle_errors
def runs(ctx: click.Context, suite: str | None, kind: str | None, limit: int | None, as_json: bool) -> None:
    """List runs: kind, parent, test count, mean score, when started.

    A replay's "changes" column says what it swapped (eval, preprocessors, prompts, judge, graders,
    tests). An import's "started" is when its AgentV run started (the results' own times), "imported"
    when it came into this store; times are UTC. Run ids are never wrapped; in a narrow terminal the
    least needed columns are left out.

    \b
    Example:
      evalstore runs --kind replay --limit 5
      evalstore runs --suite revenue-report --json
    """
    from evalstore.replay.analysis import views

    summaries = views.list_runs(open_reader(ctx), suite=suite, kind=kind, limit=limit)
    if as_json:
        print_json([s.to_dict() for s in summaries])
        return
    if not summaries:
        filtered = suite is not None or kind is not None or limit is not None
        echo(
            "no runs match"
            if filtered
            else "no runs yet: evalstore run EVAL.yaml, evalstore import PATH or evalstore quickstart"
        )
        return
    imports = any(s.imported_at for s in summaries)  # the "imported" column only when an import is listed
    columns = ["run", "kind", "parent", "suite", "status", "passed", "mean", "started"]
    print_table(
        None,
        columns + (["imported"] if imports else []) + ["changes"],
        [
            (
                s.run_id,
                s.kind,
                s.parent_run_id or "",
                s.suite or "",
                s.shown_status,
                f"{s.passed}/{s.tests}",
                fmt_score(s.mean_score),
                _minute(s.started_at),
                *([_minute(s.imported_at)] if imports else []),
                "; ".join(s.changes),
            )
            for s in summaries
        ],
        ids=["run", "kind", "parent", "status", "passed", "mean", "started"],
        optional=["suite", "status", "imported", "started", "changes", "parent"],
    )


def _minute(at: str | None) -> str:
    """``2026-11-22T10:15:00.123+00:00`` as ``2026-11-22 10:15`` (UTC), blank when unknown."""
    return at[:16].replace("T", " ") if at else ""


@click.command()
@click.argument("run", shell_complete=complete_run_id)
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Print every result as tab-separated lines (and every line an import left out).",
)
@json_option
@click.pass_context
@handle_errors
def show(ctx: click.Context, run: str, show_all: bool, as_json: bool) -> None:
    """One run's summary and its results (per-grader scores).

    RUN: an id, a unique prefix, or last. For a replay, says what it changed. The "why" column explains
    a score the grader scores do not: a required grader below its gate, a grader that failed to run. The
    table shows the first results and how many there are; --all prints every one (tab-separated,
    streamed), --json everything for scripts.

    \b
    Example:
      evalstore show last
      evalstore show rpl-2026 --json
      evalstore show imp-5159 --all | grep quality_failure
    """
    from evalstore.cli.results import grader_cell, pass_cell
    from evalstore.replay.analysis import views
    from evalstore.replay.analysis.per_test import key_label

    store = open_reader(ctx)
    run_id = views.resolve_run(store, run)
    summary = views.run_summary(store, run_id)
    skipped = views.skipped_lines(store, run_id) if summary.kind == "imported" else []
    results = views.noted_results(store, run_id)
    if as_json:
        with no_cycle_collection():
            _show_json(summary, results, skipped)
        return
    echo(
        f"run {summary.run_id}  kind={summary.kind}  status={summary.shown_status}  suite={summary.suite or '-'}"
        + (f"  parent={summary.parent_run_id}" if summary.parent_run_id else ""),
        one_line=True,
    )
    if summary.kind == "replay":
        echo(f"changes: {'; '.join(summary.changes) or 'none (the same eval, graders and judge)'}")
    echo(
        f"tests={summary.tests}  passed={summary.passed}  errors={summary.errors}  mean={fmt_score(summary.mean_score)}"
        + (
            f" ({fmt_score(summary.mean_score_without_errors)} without the execution errors, as AgentV reports it)"
            if summary.mean_score_without_errors is not None
            else ""
        )
    )
    echo(
        f"started={_minute(summary.started_at)} UTC"
        + (f"  imported={_minute(summary.imported_at)} UTC" if summary.imported_at else "")
    )
    columns = ["test", "target", "score", "pass", "status", "graders", "why"]
    cells = (
        (
            key_label((r.test_id, None, r.attempt)),  # the target has a column of its own
            r.target,
            fmt_score(r.score),
            pass_cell(r.passed, r.status),
            r.status,
            grader_cell(r.graders, r.left_out, r.unscored),
            note,
        )
        for r, note in results
    )
    if show_all:
        with no_cycle_collection():
            print_plain(columns, cells)
    else:
        # A table is measured whole before it prints: only the first rows, never a whole large run.
        print_table(
            None,
            columns,
            islice(cells, TABLE_ROWS),
            ids=["test", "score", "pass", "status"],
            optional=["target", "status"],
        )
        if summary.tests > TABLE_ROWS:
            echo(f"first {TABLE_ROWS} of {summary.tests} results; --all prints every one, --json for scripts")
    if skipped:
        echo(f"{len(skipped)} source lines left out:")
        for line in skipped if show_all else skipped[:TABLE_ROWS]:
            echo(f"  {line.source.location}: {line.reason}", one_line=True)  # a reason may quote a test id
        if not show_all and len(skipped) > TABLE_ROWS:
            echo(f"  (the first {TABLE_ROWS}; --all lists every one, --json for scripts)")


_ROW_ENCODER = json.JSONEncoder(ensure_ascii=False)


def _show_json(summary: views.RunSummary, results: Iterator[tuple[views.ResultRow, str]], skipped: list) -> None:
    """``{"run", "results", "skipped_lines"}``, the results written one a line as they are read."""
    out = sys.stdout
    out.write('{\n  "run": ' + json.dumps(summary.to_dict(), ensure_ascii=False, default=str) + ',\n  "results": [')
    encode = _ROW_ENCODER.encode  # json.dumps would build an encoder for every row
    for i, (r, note) in enumerate(results):
        row = {**r.to_dict(), "note": note}
        out.write(("," if i else "") + "\n    " + encode(row))
    skipped_lines = [{"source": s.source.model_dump(), "reason": s.reason} for s in skipped]
    out.write('\n  ],\n  "skipped_lines": ' + json.dumps(skipped_lines, ensure_ascii=False, default=str) + "\n}\n")
