"""The command line loads commands on first use: ``--help`` and ``--version`` import almost nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from evalstore import cli

HEAVY = ("sqlalchemy", "pydantic", "rich", "alembic", "httpx", "yaml", "evalstore.store", "evalstore.replay")


def _modules_loaded_by(*args: str) -> set[str]:
    code = (
        "import sys\n"
        "from evalstore.cli import main\n"
        "try:\n"
        f"    main({list(args)!r}, prog_name='evalstore')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('\\n'.join(sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return set(out.stderr.split())


@pytest.mark.parametrize("args", [["--version"], ["--help"], []])
def test_help_and_version_import_no_heavy_module(args: list[str]) -> None:
    loaded = _modules_loaded_by(*args)
    assert not {m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY)}


def test_a_command_loads_when_it_runs() -> None:
    loaded = _modules_loaded_by("runs", "--help")
    assert "evalstore.cli.runs" in loaded and "evalstore.cli.audit" not in loaded


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_listed_summary_is_the_commands_own(name: str) -> None:
    command = cli.main.get_command(click.Context(cli.main), name)
    assert command is not None and command.help
    assert cli.COMMANDS[name][1] == command.get_short_help_str(limit=10_000)  # click's summary of the docstring


def test_plain_evalstore_prints_help_and_succeeds() -> None:
    out = subprocess.run([sys.executable, "-m", "evalstore"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Commands:" in out.stdout and "replay" in out.stdout and out.stderr == ""


def test_version_is_the_packages() -> None:
    from importlib.metadata import version

    out = subprocess.run([sys.executable, "-m", "evalstore", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"evalstore, version {version('evalstore')}"


def test_listing_runs_of_a_current_store_loads_no_sqlalchemy_alembic_pydantic_or_rich(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A SQLite store at this evalstore's schema is read through the standard library's sqlite3
    (store/sqlite_reads.py): SQLAlchemy, which creating the store loads, is not loaded to list its runs."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    created = _modules_loaded_by("--db", url, "db", "upgrade")
    assert "alembic" in created and "sqlalchemy" in created  # creating the store migrates it
    loaded = _modules_loaded_by("--db", url, "runs")
    assert "evalstore.cli.runs" in loaded and "evalstore.store.sqlite_reads" in loaded  # the command's imports
    assert not {m for m in loaded if m.split(".")[0] in {"sqlalchemy", "alembic", "pydantic", "rich", "psycopg"}}


def test_reading_a_run_out_loads_neither_the_graders_nor_the_eval_file_models(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``show``, ``export`` and ``compare`` read stored runs: the grader and eval-file modules (a tenth of
    their start, bench/read.py) are not theirs to load."""
    from evalstore.replay.agentv.importing import import_results
    from evalstore.store import EventStore

    rows = tmp_path / "a.jsonl"
    row = {
        "test_id": "t-1",
        "score": 0.0,
        "scores": [{"name": "g", "type": "code-grader", "score": 0.0, "verdict": "fail"}],
    }
    rows.write_text(json.dumps(row) + "\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore.open(url)
    run = import_results(store, rows).run_id
    store.close()
    for args in (
        ["show", run, "--json"],
        ["export", run],
        ["export", run, "--format", "json"],
        ["compare", run, run, "--json"],
    ):
        loaded = _modules_loaded_by("--db", url, *args)
        assert "evalstore.store.sqlite_reads" in loaded  # the check sees the command's imports
        assert "sqlalchemy" not in loaded, args  # a SQLite store is read through sqlite3 alone (store/sqlite_reads.py)
        assert not {
            m
            for m in loaded
            if m.startswith(("evalstore.replay.evalfile", "evalstore.replay.grading.graders.composite"))
        }, args


_PROGRESS = (
    "import sys\n"
    "from evalstore.cli.output import progress_bar\n"
    "with progress_bar('regrading') as bar:\n"
    "    bar.start(2); bar.advance(); bar.show('writing', 1, 1)\n"
    "print('rich.progress' in sys.modules)\n"
)


@pytest.mark.parametrize(("env", "shown"), [({}, False), ({"FORCE_COLOR": "1"}, True)])
def test_a_progress_bar_loads_rich_progress_only_for_a_terminal(env: dict[str, str], shown: bool) -> None:
    """Scripts (stderr not a terminal) get no bar and do not pay for rich's progress module; a terminal
    (here one rich is told to treat stderr as) gets the bar."""
    import os

    environ = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")} | env
    out = subprocess.run(
        [sys.executable, "-c", _PROGRESS], capture_output=True, text=True, timeout=60, check=True, env=environ
    )
    assert out.stdout.strip() == str(shown)
    assert ("regrading" in out.stderr and "writing" in out.stderr) is shown


LIGHT_REPLAY = {"evalstore.replay", "evalstore.replay.choices"}
"""What a command's --help may load of the layers: the package (a docstring) and the option values."""


STILL_EAGER: dict[str, str] = {}


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([name], marks=pytest.mark.xfail(strict=True, reason=STILL_EAGER[name]))
        if name in STILL_EAGER
        else [name]
        for name in cli.COMMANDS
    ]
    + [["db", "upgrade"], ["keys", "init"], ["labels", "import"], ["examples", "copy"]],
    ids=lambda args: " ".join(args),
)
def test_every_commands_help_imports_no_heavy_module(args: list[str]) -> None:
    """A command's --help imports its module and click, not SQLAlchemy, pydantic or the layers (0.34-0.51 s
    before; bench/startup.py measures it against `python -c pass`)."""
    loaded = _modules_loaded_by(*args, "--help")
    assert f"evalstore.cli.{cli.COMMANDS[args[0]][0].split(':')[0].rsplit('.', 1)[1]}" in loaded
    heavy = {m for m in loaded if (m.split(".")[0] in HEAVY or m.startswith(HEAVY)) and m not in LIGHT_REPLAY}
    assert not heavy, sorted(heavy)[:10]


def test_replay_imports_the_store_and_the_grading_engine_with_the_collector_off(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``replay`` imports its layers inside the command (its --help loads neither): those imports run without
    the cyclic collector and are frozen out of its passes (``frozen_imports``), which otherwise went over
    them again and again while each test was graded (bench/agentv_peer.py's unchanged replay)."""
    code = (
        "import atexit, gc, sys\n"
        "seen = {}\n"
        "def hook(event, args):\n"
        "    if event == 'import' and args[0] in ('sqlalchemy', 'evalstore.replay.regrade'):\n"
        "        seen.setdefault(args[0], gc.isenabled())\n"
        "sys.addaudithook(hook)\n"
        "atexit.register(lambda: print(sorted(seen.items()), file=sys.stderr))\n"
        "from evalstore.cli import entry\n"
        f"sys.argv = ['evalstore', '--db', 'sqlite:///{tmp_path / 'none.db'}', 'replay', 'RUN']\n"
        "entry()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "no store" in out.stderr  # the imports come first, then the store is looked for
    assert out.stderr.splitlines()[-1] == "[('evalstore.replay.regrade', False), ('sqlalchemy', False)]", out.stderr


def test_what_is_alive_when_a_command_ends_is_frozen_out_of_the_collectors_last_pass() -> None:
    # Registered before entry(), so it runs after entry's own exit handler (atexit runs them last first);
    # --version imports no command module, so only that handler can have frozen anything.
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, file=sys.stderr))\n"
        "from evalstore.cli import entry\n"
        "sys.argv = ['evalstore', '--version']\n"
        "entry()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr.strip() == "frozen True", out.stderr


_PLUGIN_SCANS = """\
import atexit, sys
import pydantic.plugin._loader as loader
scans = []
real = loader.entry_points
def counted(*args, **kwargs):
    scans.append(kwargs.get("group"))
    return real(*args, **kwargs)
loader.entry_points = counted
atexit.register(lambda: print("scans", scans.count("pydantic"), file=sys.stderr))
from evalstore.cli import entry, main
argv = ["--db", sys.argv[1], "export", "last", "--format", "agentv-jsonl"]
if sys.argv[2] == "entry":
    sys.argv = ["evalstore", *argv]
    entry()
main(argv, prog_name="evalstore", standalone_mode=False)
"""


@pytest.mark.parametrize("how", ["entry", "in-process"])
def test_the_command_lines_own_process_looks_up_no_pydantic_plugins(tmp_path, how: str) -> None:  # type: ignore[no-untyped-def]
    """``evalstore`` as a command (``entry``) validates only its own models: once it has opened the store,
    pydantic does not scan the installed distributions for plugins (``no_pydantic_plugins``). Called in
    another program's process, the library leaves pydantic's lookup as it is."""
    from evalstore.replay.agentv.importing import import_results
    from evalstore.store import EventStore

    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"test_id": "t1", "score": 1.0, "target": "default", "scores": []}) + "\n")
    db = f"sqlite:///{tmp_path / 's.db'}"
    store = EventStore.open(db)
    import_results(store, results)
    store.close()
    out = subprocess.run(
        [sys.executable, "-c", _PLUGIN_SCANS, db, how], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert f"scans {0 if how == 'entry' else 1}" in out.stderr.splitlines()
