"""``evalstore validate PATH...``: eval, targets and results files checked without running anything."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalstore.cli.errors import EXIT_FAILED, handle_errors
from evalstore.cli.output import echo, json_option, plural, print_json


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@json_option
@handle_errors
def validate(paths: tuple[Path, ...], as_json: bool) -> None:
    """Check eval, targets and results files as run and import would load them, running nothing.

    A folder is searched for *.eval.yaml files as agentv validate searches it (hidden folders and
    node_modules left out), unless it is an AgentV run folder, which is checked as results. A YAML file
    is a targets file when it is .agentv/targets.yaml or holds a top-level targets: list (of entries
    with name and provider), else an eval file; a .jsonl file is results. No agent, grader or judge is
    called and no store is opened. Exits 1 when any file is invalid.

    \b
    Example:
      evalstore validate evals/
      evalstore validate evals/report.eval.yaml .agentv/targets.yaml --json
      evalstore validate .agentv/results/runs/default/2026-02-20T21-40-12-230Z
    """
    from evalstore.replay.validation import validate as validate_files

    checks = validate_files(paths)
    if as_json:
        print_json({"files": [c.as_json() for c in checks]})
    else:
        for check in checks:
            what = check.kind if check.kind == "targets" else f"{check.kind}, {plural(check.tests, _unit(check.kind))}"
            echo(f"{'✓' if check.ok else '✗'} {check.path} ({what})")
            for error in check.errors:
                echo(f"  ✗ {error}")
            for warning in check.warnings:
                echo(f"  ⚠ {warning}")
        invalid = sum(not c.ok for c in checks)
        warned = sum(bool(c.warnings) for c in checks)
        echo(f"{plural(len(checks), 'file')}: {len(checks) - invalid} valid, {invalid} invalid, {warned} with warnings")
    if any(not c.ok for c in checks):
        sys.exit(EXIT_FAILED)


def _unit(kind: str) -> str:
    return "result" if kind == "results" else "test"
