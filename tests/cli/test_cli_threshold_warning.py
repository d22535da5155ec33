"""An eval file's invalid ``execution.threshold`` (AgentV 4.42.4: "Invalid execution.threshold: 5. Must be a
number between 0 and 1. Ignoring.") is a warning from every command that loads the file, which then goes on
with the default pass mark, as AgentV's run does; it used to refuse the whole file."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from evalstore import cli

SUITE = """\
name: th
execution:
  target: echo
  threshold: ${{ EVALSTORE_TEST_THRESHOLD }}
tests:
  - id: t1
    input: hello
    assertions: [{type: contains, value: hello}]
"""
TARGETS = "targets:\n  - name: echo\n    provider: cli\n    command: \"sh -c 'cat {PROMPT_FILE} > {OUTPUT_FILE}'\"\n"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli.main, list(args))


@pytest.mark.parametrize(("value", "shown"), [("", ""), ("5", "5")])
def test_validate_run_replay_and_import_warn_and_use_the_default_pass_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, shown: str
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".agentv").mkdir()
    (tmp_path / ".agentv" / "targets.yaml").write_text(TARGETS)
    eval_file = tmp_path / "th.eval.yaml"
    eval_file.write_text(SUITE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALSTORE_TEST_THRESHOLD", value)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    warning = (
        f"{eval_file}:4: field `execution.threshold`: Invalid execution.threshold: {shown}. "
        "Must be a number between 0 and 1. Ignoring."
    )

    validated = run("validate", str(eval_file))
    assert validated.exit_code == 0 and warning in validated.stdout, validated.output

    recorded = run("--db", db, "run", str(eval_file))
    assert recorded.exit_code == 0, recorded.output
    assert f"warning: {warning}" in recorded.stderr
    assert "1/1 passed (threshold 0.8)" in recorded.stdout

    replayed = run("--db", db, "replay", "last")
    assert replayed.exit_code == 0 and f"warning: {warning}" in replayed.stderr, replayed.output

    rows = tmp_path / "rows.jsonl"
    assert run("--db", db, "export", "last", "--format", "agentv-jsonl", "-o", str(rows)).exit_code == 0
    other = f"sqlite:///{tmp_path / 'other.db'}"
    imported = run("--db", other, "import", str(rows), "--eval", str(eval_file))
    assert imported.exit_code == 0 and f"warning: {warning}" in imported.stderr, imported.output
