"""``evalstore import PATH`` (AgentV results in) and ``evalstore export RUN`` (results out)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from replay.agentv import export as agentv_export
from replay.importer import import_results
from replay.material import result_bundles
from replay.views import resolve_run, run_started

from .context import open_store
from .errors import handle_errors
from .output import json_option, note, print_json, progress_bar


@click.command(name="import")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--eval", "eval_path", type=click.Path(path_type=Path),
              help="The eval file the results came from (default: found from the results, when it still exists).")
@click.option("--skip-bad", is_flag=True, help="Record malformed lines as skipped instead of aborting.")
@json_option
@click.pass_context
@handle_errors
def import_(ctx, path: Path, eval_path: Path | None, skip_bad: bool, as_json: bool) -> None:  # type: ignore[no-untyped-def]
    """Import AgentV results: a v4 run directory, a v5-next run bundle, or a results JSONL file.

    Importing the same results twice gives the same run. A malformed line aborts the import with its
    file and line number and nothing is written, unless --skip-bad.

    \b
    Example:
      evalstore import .agentv/results/runs/default/2026-02-20T21-40-12-230Z
      evalstore import dataset.eval.baseline.jsonl --eval dataset.eval.yaml
    """
    store = open_store(ctx)
    with progress_bar("importing") as bar:
        outcome = import_results(store, path, eval_path=eval_path, skip_bad=skip_bad,
                                 progress=lambda n: bar.advance())
    info = {
        "run_id": outcome.run_id,
        "format": outcome.format,
        "tests": outcome.tests,
        "skipped": outcome.skipped,
        "already_imported": outcome.already_imported,
        "eval_path": outcome.eval_path,
    }
    if as_json:
        print_json(info)
        return
    if outcome.already_imported:
        click.echo(f"already imported as run {outcome.run_id} ({outcome.tests} results); nothing written")
        return
    click.echo(f"imported {outcome.tests} results ({outcome.format}) as run {outcome.run_id}"
               + (f", {outcome.skipped} bad lines skipped" if outcome.skipped else ""))
    if outcome.eval_path:
        click.echo(f"eval snapshot: {outcome.eval_path}")
    else:
        note("no eval file found for these results: pass --eval to replay them later")


@click.command()
@click.argument("run")
@click.option("--format", "fmt", type=click.Choice(["agentv-jsonl", "csv", "json"]), default="agentv-jsonl",
              show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE instead of stdout.")
@click.pass_context
@handle_errors
def export(ctx, run: str, fmt: str, output: Path | None) -> None:  # type: ignore[no-untyped-def]
    """Export a run: AgentV 4.x result rows (JSONL), CSV (one row per test and grader), or JSON.

    \b
    Example:
      evalstore export last --format csv -o results.csv
    """
    store = open_store(ctx)
    run_id = resolve_run(store, run)
    started = run_started(store, run_id)
    bundles = result_bundles(store, run_id)
    fh = open(output, "w", encoding="utf-8", newline="") if output else sys.stdout
    try:
        if fmt == "agentv-jsonl":
            agentv_export.write_jsonl(agentv_export.export_rows(started, bundles), fh)
        elif fmt == "csv":
            agentv_export.write_csv(started, bundles, fh)
        else:
            agentv_export.write_json(started, bundles, fh)
    finally:
        if output:
            fh.close()
    if output:
        note(f"wrote {output}")
