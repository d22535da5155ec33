"""``evalstore examples``: list the bundled examples, and copy them out of the installed package."""

from __future__ import annotations

from pathlib import Path

import click

from evalstore.cli.errors import handle_errors
from evalstore.cli.output import echo, json_option, print_json, print_table

TRY = "try (in DIR, after evalstore examples copy DIR)"


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
@handle_errors
def examples(ctx: click.Context, as_json: bool) -> None:
    """List the bundled example suites (what each shows), or copy them into a folder to read and change.

    The examples are the suites the quickstart and the walkthroughs run; they are installed with
    evalstore, so a wheel user has them too. "evalstore examples copy DIR" copies them into DIR.

    \b
    Example:
      evalstore examples
      evalstore examples copy my-examples
      evalstore examples copy my-examples quickstart
    """
    if ctx.invoked_subcommand is not None:
        return
    from evalstore.replay.examples import EXAMPLES
    from evalstore.replay.quickstart import examples_dir

    where = examples_dir()
    if as_json:
        print_json(
            {
                "installed_at": str(where),
                "examples": [
                    {"name": e.name, "shows": e.shows, "try": e.try_it, "needs": list(e.needs)} for e in EXAMPLES
                ],
            }
        )
        return
    print_table(
        f"bundled examples (installed at {where})",
        ["example", "what it shows", TRY],
        [(e.name, e.shows, e.try_it) for e in EXAMPLES],
        ids=["example"],
        optional=[TRY],
    )
    echo("copy them out: evalstore examples copy DIR [NAME...]")


@examples.command("copy")
@click.argument("dest", metavar="DIR", type=click.Path(path_type=Path))
@click.argument("names", metavar="[NAME]...", nargs=-1)
@handle_errors
def copy(dest: Path, names: tuple[str, ...]) -> None:
    """Copy the bundled examples (all, or those NAMEd) into DIR, a new or empty folder: one folder each.

    An example whose files reference another's (the quickstart runs the preprocessors' converters) is
    copied with it, so the copies run as they are.

    \b
    Example:
      evalstore examples copy my-examples
      evalstore examples copy my-examples quickstart
    """
    from evalstore.replay.examples import copy_examples

    for folder in copy_examples(dest, list(names)):
        echo(f"copied {folder.name} to {folder}")
