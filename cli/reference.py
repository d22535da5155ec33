"""The CLI reference page, generated from every command's ``--help``.

``python -m evalstore.cli.reference > docs/cli.md`` rewrites it; ``tests/cli/test_cli_help.py``
fails when the page in the repository is not what this prints (so it cannot go stale)."""

from __future__ import annotations

from collections.abc import Iterator

import click

WIDTH = 100
"""Help is rendered at this width whatever the terminal, so the page is the same on every machine."""

HEADER = """# evalstore command reference

Generated from `--help` by `python -m evalstore.cli.reference > docs/cli.md`; a test fails when this
page is out of date. Every command that takes a run accepts a full run id, a unique prefix of one, or
`last` (the most recently started run).

Exit codes, the same for every command: 0 success; 1 a check or gate failed (a test below the pass
mark in `run` and `replay`, `--fail-on-regression` in `compare` and `replay`, a digest mismatch in
`audit` and `verify`); 2 bad input (one `Error: ...` line on stderr, nothing written); 3 an internal
error; 130 interrupted. A closed stdout (`| head`) does not change the code.
"""


def commands(ctx: click.Context) -> Iterator[tuple[click.Context, click.Command]]:
    """The root and every command under it, each with a context named as the user types it."""
    command = ctx.command
    yield ctx, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                yield from commands(click.Context(sub, info_name=name, parent=ctx))


def root_context() -> click.Context:
    """The root context as ``evalstore`` makes it (its settings: ``-h`` too), at the page's fixed width."""
    from evalstore.cli import main

    settings = {**main.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    return click.Context(main, info_name="evalstore", **settings)


def render() -> str:
    parts = [HEADER]
    for ctx, command in commands(root_context()):
        parts.append(f"## {ctx.command_path}\n\n```text\n{command.get_help(ctx).rstrip()}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    import sys

    sys.stdout.write(render())
