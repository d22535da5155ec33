"""The ``evalstore`` command line: a thin click layer over ``replay`` and ``store``."""

from __future__ import annotations

import click

from evalstore.cli.audit import audit
from evalstore.cli.compare import compare
from evalstore.cli.db import db, verify
from evalstore.cli.quickstart import quickstart
from evalstore.cli.regrade import replay
from evalstore.cli.run import run
from evalstore.cli.runs import runs, show
from evalstore.cli.transfer import export, import_

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--db",
    envvar="EVALSTORE_DB",
    metavar="URL",
    help="SQLAlchemy URL of the store (default: sqlite:///.evalstore/evalstore.db; env EVALSTORE_DB).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="evalstore")
@click.pass_context
def main(ctx: click.Context, db: str | None, debug: bool) -> None:
    """Record agent eval runs as immutable events, regrade them without calling the agent,
    compare the regrade with honest statistics, and audit any score down to its bytes."""
    ctx.obj = {"db": db, "debug": debug}


for command in (quickstart, run, import_, export, replay, compare, audit, runs, show, verify, db):
    main.add_command(command)
