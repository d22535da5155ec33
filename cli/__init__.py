"""The ``evalstore`` command line: a thin click layer over ``evalstore.replay`` and ``evalstore.store``.

Commands load on first use (click's lazy subcommands): ``evalstore --version`` and ``--help`` import
click and this module, not SQLAlchemy, pydantic or the domain. ``COMMANDS`` is the one list of commands.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import re
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import click
from click.core import ParameterSource

from evalstore import __version__

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 110}

# name -> ("module:attribute", the summary `evalstore --help` lists). tests/cli/test_cli_lazy.py checks
# that each summary is the first paragraph of the command's own help, so the two cannot drift.
COMMANDS: dict[str, tuple[str, str]] = {
    "quickstart": (
        "evalstore.cli.quickstart:quickstart",
        "Record the bundled example suite, regrade it with a changed converter and grader without calling the "
        "agent, compare the two runs and audit one test.",
    ),
    "run": (
        "evalstore.cli.run:run",
        "Run EVAL_FILE's tests against a target, capture every file the agent wrote, grade, and store it all.",
    ),
    "validate": (
        "evalstore.cli.validate:validate",
        "Check eval, targets and results files as run and import would load them, running nothing.",
    ),
    "import": (
        "evalstore.cli.transfer:import_",
        "Import AgentV results (a v4 run directory, a v5-next bundle, a results JSONL), Inspect AI logs, or an evalstore bundle.",
    ),
    "export": (
        "evalstore.cli.transfer:export",
        "Export a run: AgentV 4.x result rows (JSONL), CSV (one row per test and grader), JSON, a bundle, or an Inspect AI log.",
    ),
    "replay": (
        "evalstore.cli.regrade:replay",
        "Regrade RUN with swapped converters, prompts, rubrics or judge, never calling the agent.",
    ),
    "compare": (
        "evalstore.cli.compare:compare",
        "Compare run B against run A, test by test and grader by grader, with paired statistics.",
    ),
    "audit": (
        "evalstore.cli.audit:audit",
        "Trace every verdict of TEST_ID in RUN back to its judge calls or grader processes, conversions, "
        "artifacts, transcript and run, checking each digest against the blob store (exit 1 on a mismatch).",
    ),
    "assert": (
        "evalstore.cli.grader_dev:assert_",
        "Run one code grader on one answer and print its result as JSON; exit 0 if the score is at least 0.5.",
    ),
    "label": (
        "evalstore.cli.labels:label",
        "Record a human label for TEST's answer in RUN (it applies to every regrade of that answer).",
    ),
    "labels": (
        "evalstore.cli.labels:labels",
        "Human labels: list a run's (labels RUN), import them from CSV or JSONL, export them all.",
    ),
    "agreement": (
        "evalstore.cli.labels:agreement",
        "How well each grader of each RUN agrees with the human labels, and the pass rate corrected for its errors.",
    ),
    "runs": ("evalstore.cli.runs:runs", "List runs: kind, parent, test count, mean score, when started."),
    "show": ("evalstore.cli.runs:show", "One run's summary and its results (per-grader scores)."),
    "verify": ("evalstore.cli.db:verify", "Recompute the hash chain, every blob digest and the projections."),
    "db": ("evalstore.cli.db:db", "Schema migrations and projection maintenance."),
    "keys": ("evalstore.cli.attest:keys", "Create and show the Ed25519 key that signs checkpoints."),
    "checkpoint": (
        "evalstore.cli.attest:checkpoint",
        "Sign a checkpoint of the log's head (C2SP signed note), record it as an event, and print it.",
    ),
    "attest": (
        "evalstore.cli.attest:attest",
        "Write an attestation of RUN's results that anyone can check offline with its signer's public key.",
    ),
    "verify-attestation": (
        "evalstore.cli.attest:verify_attestation",
        "Check an attestation FILE offline, with no store: signature, event hashes, inclusion proofs, claims.",
    ),
    "examples": (
        "evalstore.cli.examples:examples",
        "List the bundled example suites (what each shows), or copy them into a folder to read and change.",
    ),
    "view": (
        "evalstore.cli.view:view",
        "Serve a read-only web viewer of the store: runs and their regrades, results, transcripts, artifacts, "
        "verdicts and comparisons.",
    ),
}


class OneLineUsageError(click.UsageError):
    """A usage error shown as every other error is, on one line: ``Error: ... (see 'evalstore CMD --help')``
    instead of click's usage, hint and blank line before it. Exits 2."""

    def show(self, file: IO[Any] | None = None) -> None:
        hint = f" (see '{self.ctx.command_path} --help')" if self.ctx is not None else ""
        click.echo(f"Error: {self.format_message()}{hint}", file=file, err=file is None)


_FREEZE_IMPORTS = False
"""Set by :func:`entry`: this process exists to run one command (see :func:`_imported`)."""


def _imported(module: str) -> Any:
    """A command's module, imported with the cyclic garbage collector off (:func:`frozen_imports`)."""
    with frozen_imports():
        return importlib.import_module(module)


@contextmanager
def frozen_imports() -> Iterator[None]:
    """Imports made with the cyclic garbage collector off. When this process exists for the command
    (:func:`entry`), the objects the imports made (classes, functions, schemas: they live as long as the
    process) are then frozen out of the collector's later passes, and out of the pass at exit: a
    command's imports make some hundred thousand objects, and the passes over them, which never free
    anything, were a sixth of a short command's time (bench/agentv_peer.py's unchanged replay);
    ``import inspect_ai.log`` alone makes 100,000. A command invoked in-process (tests, ``CliRunner``) leaves the collector as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _FREEZE_IMPORTS:
            gc.freeze()
        if enabled:
            gc.enable()


def no_pydantic_plugins() -> None:
    """In a process that exists for the command (:func:`entry`): pydantic looks for no plugins. The first
    model it validates otherwise scans every installed distribution's entry points for them, 17-22 ms of
    an export or a ``show`` (bench/read.py); a pydantic plugin is for a program's own models, and this
    process validates only evalstore's. A grader or an agent it starts is a process of its own, as ever.
    Called once the store is open (``cli.context``): by then ``importlib.metadata`` is loaded."""
    if not _FREEZE_IMPORTS:
        return
    try:
        from pydantic.plugin import _loader
    except ImportError:  # pydantic moved it: its lookup stays as it is
        return
    if getattr(_loader, "_plugins", ()) is None:  # not looked up yet
        _loader._plugins = {}


def _one_line(exc: click.UsageError) -> click.UsageError:
    # A bare `evalstore db` shows the group's help (NoArgsIsHelpError): that one stays as it is.
    if isinstance(exc, OneLineUsageError | click.exceptions.NoArgsIsHelpError):
        return exc
    return OneLineUsageError(exc.format_message(), exc.ctx)


class LazyGroup(click.Group):
    """A group whose subcommands are imported when invoked (or asked for their full help). Usage errors
    of the group and of every command under it are shown on one line (:class:`OneLineUsageError`)."""

    def __init__(self, *args, lazy: dict[str, tuple[str, str]], **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*self.lazy, *(name for name in super().list_commands(ctx) if name not in self.lazy)]

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attribute = self.lazy[cmd_name][0].partition(":")
            self.add_command(_taking_db(getattr(_imported(module), attribute)), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The listing needs only each command's summary: take it from COMMANDS instead of importing.
        limit = formatter.width - 6 - max(len(name) for name in self.lazy)
        rows = [
            (name, click.Command(name, help=summary).get_short_help_str(limit))
            for name, (_, summary) in self.lazy.items()
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


DB_HELP = (
    "SQLAlchemy URL of the store, or a SQLite file path (env EVALSTORE_DB). Default: the nearest "
    ".evalstore/evalstore.db in this folder or a parent; commands that write create one here when there is none."
)


_IN_MEMORY = re.compile(r"(?:sqlite(?:\+\w+)?://(?:/(?::memory:)?)?|:memory:)(?:\?.*)?", re.DOTALL)
"""An in-memory SQLite database (``sqlite://``, ``:memory:``): the library can use one, a command cannot."""


def _checked_db(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--db`` (or ``EVALSTORE_DB``) refused when it names an in-memory database, gone when the command ends
    with whatever it recorded: ``runs`` said "no runs yet", ``run`` asked the agent every test first, and an
    import failed with a traceback after its first write."""
    if value is not None and _IN_MEMORY.fullmatch(value.strip()):
        raise click.BadParameter(
            f"{value!r} is an in-memory SQLite database, gone when the command ends with all it recorded: "
            "give a file (a path or sqlite:///PATH) or a database server's URL (--db or EVALSTORE_DB)",
            ctx,
            param,
        )
    return value


def _db_after_command(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``--db`` given after the command (``evalstore import RUN --db s.db``), where people type it as often
    as before: the same store as ``evalstore --db``. It overrides ``EVALSTORE_DB``; given both ways with two
    different values, it is a usage error rather than a guess."""
    if _checked_db(ctx, param, value) is None:
        return
    root = ctx.find_root()
    before = root.params.get("db")
    if before is not None and before != value and root.get_parameter_source("db") == ParameterSource.COMMANDLINE:
        raise click.UsageError(f"--db is given twice, as {before} and as {value}: give it once")
    root.params["db"] = value
    if root.obj is not None:
        root.obj["db"] = value


def _taking_db(command: click.Command) -> click.Command:
    """A command (and, for a group, each command under it) with ``--db`` among its own options too."""
    if not any("--db" in p.opts for p in command.params if isinstance(p, click.Option)):
        command.params.append(
            click.Option(
                ["--db"],
                metavar="URL",
                expose_value=False,
                callback=_db_after_command,
                help="The store (a SQLAlchemy URL or SQLite file path), as given before the command.",
            )
        )
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _taking_db(sub)
    return command


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings=CONTEXT_SETTINGS, invoke_without_command=True)
@click.option(
    "--db",
    envvar="EVALSTORE_DB",
    metavar="URL",
    callback=_checked_db,
    help=DB_HELP + " Also taken after the command.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(__version__, prog_name="evalstore")
@click.pass_context
def main(ctx: click.Context, db: str | None, debug: bool) -> None:
    """Record agent eval runs as immutable events, regrade them without calling the agent,
    compare the regrade with honest statistics, and audit any score down to its bytes.

    Exit codes: 0 ok, 1 a check or gate failed, 2 bad input, 3 internal error. Shell completion (run
    and test ids too): eval "$(_EVALSTORE_COMPLETE=bash_source evalstore)" in ~/.bashrc (zsh_source,
    fish_source for zsh and fish).

    \b
    Example:
      evalstore quickstart
      evalstore run evals/report.eval.yaml && evalstore replay last --fail-on-regression flip
    """
    from evalstore.cli.pipes import guard_stdout

    guard_stdout()
    ctx.obj = {"db": db, "debug": debug}
    if ctx.invoked_subcommand is None:  # plain `evalstore`: the help, and success
        click.echo(ctx.get_help())


YOUNG_GENERATION = 10_000
"""Allocations between two collections of the youngest generation in a command's process (Python's
default is 700): a command makes and drops objects by the hundred thousand (a replay's events, an
export's rows), and collecting them every 700 found nothing most times (bench/agentv_peer.py's
unchanged replay: 5% of its time)."""


def _library_warnings_to_stderr() -> None:
    """The library's warnings (``logging``, as a library gives them) printed as the command's other notes:
    one line each on stderr, stored text kept on one line. ``logging`` is loaded here, not at import:
    ``evalstore --version`` does without it."""
    import logging

    class Notes(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            from evalstore.cli.output import note

            note(record.getMessage())

    library = logging.getLogger("evalstore")
    library.addHandler(Notes(logging.WARNING))
    library.propagate = False


def entry() -> None:
    """The ``evalstore`` console script and ``python -m evalstore``: :data:`main` in a process that ends
    with the command."""
    global _FREEZE_IMPORTS
    _FREEZE_IMPORTS = True
    gc.set_threshold(YOUNG_GENERATION, *gc.get_threshold()[1:])
    # Python's exit runs one last pass of the cyclic collector over every object still alive, even with
    # the collector off: over what a command imported or built after its module was frozen (the store's
    # modules, imported inside the command) it was a tenth of `show --json`'s CPU (bench/read.py's run,
    # 0.08 of 0.9 s). What is alive when the command ends lives until the process does.
    atexit.register(gc.freeze)
    _library_warnings_to_stderr()
    signal.signal(signal.SIGTERM, _terminated)
    keep_interrupts()
    try:
        main(prog_name="evalstore")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            _end(exc.code or 0)
        raise


def _end(code: int) -> None:
    """End the process with ``code`` as Python's exit would, without the interpreter's teardown (every
    module and object freed one by one, which nothing reads: the files a command writes and the store
    are closed by then): 18 ms of an unchanged replay's CPU, 6 this way (bench/agentv_peer.py's store).
    The exit handlers run and the standard streams are flushed (one that cannot be is exit code 120, as
    Python makes it). While a thread that Python's exit would wait for still runs, that exit does it all."""
    import threading

    current = threading.current_thread()
    if any(t is not current and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # any failure: Python's exit says no more than 120 either
            code = 120
    os._exit(code)


def keep_interrupts() -> None:
    """A Ctrl-C (or SIGTERM) that lands while Python runs a finalizer or a weakref callback (a pass of the
    garbage collector over SQLAlchemy's event registry, say) is raised there, printed as "Exception ignored"
    and dropped, and the command runs on to its end: an import stopped while it writes completed instead
    (CI, 2026-11-29). Such an interrupt is sent again, from another thread, so that it reaches the command's
    own code: a moment later, since one raised in the hook itself would be dropped too (and one that lands in
    a finalizer again is sent again)."""
    import threading

    def unraisable(info: Any) -> None:
        if isinstance(info.exc_value, KeyboardInterrupt):
            again = threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGINT))
            again.daemon = True
            again.start()
            return
        sys.__unraisablehook__(info)

    sys.unraisablehook = unraisable


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (``kill PID``, a supervisor, a CI job's timeout) stops a command as Ctrl-C does: the
    graders, converters and agents it started are killed and a run says how to resume. By default the
    process would just end, and the children it was supervising (each in its own process group, bounded
    only by the timeouts this process enforces) would run on."""
    raise KeyboardInterrupt
