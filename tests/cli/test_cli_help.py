"""Help for people: every option described, examples everywhere, run ids explained, no stray markup,
and docs/cli.md generated from it and current. Shell completion offers run and test ids."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from evalstore.cli.reference import commands, render, root_context

REPO = Path(__file__).resolve().parents[2]
ALL = [(ctx.command_path, ctx, command) for ctx, command in commands(root_context())]
RUN_ARGUMENTS = {"run", "run_a", "run_b"}


@pytest.mark.parametrize(("path", "ctx", "command"), ALL, ids=[a[0] for a in ALL])
def test_every_command_is_described_with_an_example_and_no_markup(
    path: str, ctx: click.Context, command: click.Command
) -> None:
    text = command.get_help(ctx)
    assert "`" not in text, f"{path}: literal backticks in help"
    assert "Example:" in text or "Examples:" in text, f"{path}: no example"
    for param in command.params:
        if isinstance(param, click.Option) and param.name != "help":
            assert param.help, f"{path} {param.opts[0]}: no description"
    if RUN_ARGUMENTS & {p.name for p in command.params if isinstance(p, click.Argument)}:
        assert "a unique prefix, or last" in " ".join(text.split()), f"{path}: does not say RUN may be last or a prefix"


def test_the_cli_reference_page_is_current() -> None:
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page == render(), "docs/cli.md is stale: python -m evalstore.cli.reference > docs/cli.md"
    for path, _, _ in ALL:
        assert f"## {path}\n" in page


def _complete(cwd: Path, words: str, index: int) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "EVALSTORE_DB"}
    env.update({"COMP_WORDS": words, "COMP_CWORD": str(index), "_EVALSTORE_COMPLETE": "bash_complete"})
    script = Path(sys.executable).parent / "evalstore"
    out = subprocess.run([str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [line.split(",", 1)[1] for line in out.stdout.splitlines()]


def test_run_ids_and_test_ids_complete_from_the_store(tmp_path: Path) -> None:
    from fixture_paths import AGENTV_FIXTURES

    baseline = AGENTV_FIXTURES / "v4" / "rubric" / "dataset.eval.baseline.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "EVALSTORE_DB"}
    script = Path(sys.executable).parent / "evalstore"
    imported = subprocess.run(
        [str(script), "import", str(baseline)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90
    )
    assert imported.returncode == 0, imported.stderr
    run_id = imported.stdout.split(" as run ")[1].split()[0].rstrip(",")
    assert _complete(tmp_path, "evalstore show ", 2) == ["last", run_id]
    assert _complete(tmp_path, f"evalstore show {run_id[:6]}", 2) == [run_id]
    test_ids = _complete(tmp_path, f"evalstore audit {run_id} ", 3)
    rows = [line for line in baseline.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(test_ids) == len(rows) and test_ids == sorted(test_ids)
    # No store: no suggestions, and none created.
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    assert _complete(empty, "evalstore show ", 2) == [] or (tmp_path / ".evalstore").exists()
    assert not (empty / ".evalstore").exists()


@pytest.mark.parametrize(
    "args,command,message",
    [
        (["--bogus"], "evalstore", "No such option '--bogus'"),
        (["nosuchcmd"], "evalstore", "No such command 'nosuchcmd'"),
        (["export", "last", "--format", "xml"], "evalstore export", "Invalid value for '--format'"),
        (["labels", "import"], "evalstore labels import", "Missing argument 'FILE'"),
        (["label", "last", "t", "--pass", "--fail"], "evalstore label", "--pass and --fail contradict each other"),
    ],
)
def test_usage_errors_are_one_line_naming_the_help_to_read(tmp_path: Path, args, command, message) -> None:  # type: ignore[no-untyped-def]
    """Click's own usage errors (parsing, of the group and of nested commands) and the commands' own, alike."""
    from click.testing import CliRunner

    from evalstore.cli import main

    result = CliRunner().invoke(main, ["--db", str(tmp_path / "none.db"), *args], prog_name="evalstore")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"Error: {message}") and lines[0].endswith(f"(see '{command} --help')")


def test_a_group_without_a_command_still_shows_its_help() -> None:
    from click.testing import CliRunner

    from evalstore.cli import main

    result = CliRunner().invoke(main, ["db"])
    assert "Schema migrations" in result.output and "Commands:" in result.output


def test_a_run_compared_with_itself_is_said_so(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from evalstore.cli import main

    db = str(tmp_path / "q.db")
    assert CliRunner().invoke(main, ["--db", db, "quickstart", "--json"]).exit_code == 0
    same = CliRunner().invoke(main, ["--db", db, "compare", "last", "last"])
    assert same.exit_code == 0 and "is given more than once: it is compared with itself" in same.stderr
