"""``evalstore view``: serve the web viewer over the store: read-only, or with ``--label-as NAME`` able to
record that person's labels from the test pages."""

from __future__ import annotations

import socket
import webbrowser

import click

from evalstore.cli.context import open_store
from evalstore.cli.errors import handle_errors
from evalstore.cli.output import echo, note


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise click.UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


@click.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (another than loopback shows every run to anyone who can reach it).",
)
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="Port; 0 picks a free one.")
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in the default web browser.")
@click.option(
    "--label-as",
    metavar="NAME",
    help="Let the test pages record human labels, as NAME (blind: verdicts hidden until labelled). "
    "Without it the viewer changes nothing.",
)
@click.pass_context
@handle_errors
def view(ctx: click.Context, host: str, port: int, open_browser: bool, label_as: str | None) -> None:
    """Serve a read-only web viewer of the store: runs and their regrades, results, transcripts, artifacts, verdicts and comparisons.

    With --label-as NAME, each test page also has a form that records NAME's label for the answer
    (pass, fail or skip, a grader, a note), as evalstore label does, with the run's verdicts hidden
    until the answer is labelled, and a link to the next unlabelled test.

    \b
    Examples:
      evalstore view --open
      evalstore view --label-as alice --open
    """
    import uvicorn

    from evalstore.viewer import create_app
    from evalstore.viewer.security import is_local

    if label_as is not None and not label_as.strip():
        raise click.UsageError("--label-as: give the labeller's name")
    store = open_store(ctx, create=False)  # the viewer only reads: never a new empty store
    local = is_local(host)
    if not local:
        note(
            f"warning: listening on {host}, not on loopback: anyone who can reach this address can read every run, "
            "transcript and artifact in the store (there is no login)"
            + (f", and record labels as {label_as}" if label_as else "")
        )
    sock = _bind(host, port)
    bound_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound_port}/"
    mode = f"labelling as {label_as.strip()}" if label_as else "read-only"
    echo(f"evalstore view: {url} ({mode}; Ctrl-C stops)", nl=True)
    app = create_app(store, allowed_hosts=None if local else ["*"], label_as=label_as)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    if open_browser:
        webbrowser.open(url)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
