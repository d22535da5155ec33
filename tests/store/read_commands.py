"""Every read command on a store that may be damaged: each prints what it reads or stops with one
``Error:`` line and exit 2 (``audit``, which checks digests, may exit 1), never exit 3 (an internal
error) or a traceback (issue 29 item 3). Shared by the tamper loops of ``test_verify_damage.py`` and
``test_verify_tamper.py``, over :func:`sample_runs.populate`."""

from __future__ import annotations

from click.testing import CliRunner
from starlette.testclient import TestClient

from evalstore import cli
from evalstore.store import EventStore, make_engine
from evalstore.viewer import create_app

COMMANDS = (
    ("runs",),
    ("runs", "--json"),
    ("show", "run-a"),
    ("show", "run-a", "--json"),
    ("show", "run-a-replay", "--all"),
    ("export", "run-a"),
    ("export", "run-a-replay", "--format", "json"),
    ("export", "run-a", "--format", "csv"),
    ("compare", "run-a", "run-a-replay"),
    ("compare", "run-a", "run-a-replay", "--json"),
    ("audit", "run-a", "paris"),
    ("audit", "run-a-replay", "rome", "--json"),
)
PAGES = (
    "/",
    "/runs",
    "/runs/run-a",
    "/runs/run-a-replay/compare",
    "/runs/run-a/tests/paris",
    "/compare/run-a/run-a-replay",
)


def failures(url: str, *, pages: bool = True) -> list[str]:
    """What went wrong reading ``url``: each command that crashed (exit 3, a traceback, an error of more
    than one line) and each viewer page whose handler raised. Empty when every read answered."""
    found = []
    for args in COMMANDS:
        result = CliRunner().invoke(cli.main, ["--db", url, *args])
        stderr = result.stderr
        if result.exit_code not in (0, 1, 2) or "Traceback" in result.output or "internal error" in stderr:
            found.append(f"{' '.join(args)}: exit {result.exit_code}: {stderr.strip() or result.exception!r}")
        elif result.exit_code == 2 and not (stderr.startswith("Error: ") and stderr.count("\n") == 1):
            found.append(f"{' '.join(args)}: exit 2 without one Error line: {stderr!r}")
    if pages:
        store = EventStore(make_engine(url, create=False), create=False)
        try:
            client = TestClient(create_app(store), base_url="http://127.0.0.1")
            for page in PAGES:
                try:
                    client.get(page)  # any status the viewer chose; an exception it did not catch is the failure
                except Exception as exc:
                    found.append(f"GET {page}: {type(exc).__name__}: {str(exc)[:200]}")
        finally:
            store.close()
    return found
