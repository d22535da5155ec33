"""Workspace preflight: every missing command and Python module is reported in one message."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from evalstore.replay.errors import PreflightError
from evalstore.replay.evalfile.parser import load_eval_text
from evalstore.replay.evalfile.preflight import preflight


def suite_with(tmp_path: Path, env: str, test_env: str = "{}"):
    text = textwrap.dedent(
        f"""
        workspace:
          env: {env}
        tests:
          - id: t
            input: x
            criteria: c
            workspace: {{env: {test_env}}}
        """
    )
    return load_eval_text(text, tmp_path / "suite.eval.yaml")


def test_preflight_lists_every_missing_command_and_module(tmp_path: Path) -> None:
    suite = suite_with(
        tmp_path,
        "{required_commands: [sh, nonexistent_cmd_xyz_abc], required_python_modules: [json, no_such_module_q]}",
        "{required_commands: [also_missing_cmd_q], required_python_modules: [no_such_pkg_q.sub]}",
    )
    assert suite.workspace_env.required_commands == ["sh", "nonexistent_cmd_xyz_abc", "also_missing_cmd_q"]
    with pytest.raises(PreflightError) as err:
        preflight(suite)
    message = str(err.value)
    assert err.value.missing_commands == ["nonexistent_cmd_xyz_abc", "also_missing_cmd_q"]
    assert err.value.missing_modules == ["no_such_module_q", "no_such_pkg_q.sub"]
    assert "missing commands (not on PATH): nonexistent_cmd_xyz_abc, also_missing_cmd_q" in message
    assert "no_such_module_q, no_such_pkg_q.sub" in message
    assert sys.executable in message
    assert message.startswith(str(tmp_path / "suite.eval.yaml"))
    assert "\n" not in message


def test_preflight_passes_when_everything_is_present(tmp_path: Path) -> None:
    preflight(suite_with(tmp_path, "{required_commands: [sh], required_python_modules: [json, email.mime]}"))


def test_preflight_uses_the_current_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = tmp_path / "bin" / "my-tool-q"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    suite = suite_with(tmp_path, "{required_commands: [my-tool-q]}")
    with pytest.raises(PreflightError, match="my-tool-q"):
        preflight(suite)
    monkeypatch.setenv("PATH", str(tool.parent))
    preflight(suite)


def test_only_modules_missing_names_the_interpreter(tmp_path: Path) -> None:
    with pytest.raises(PreflightError) as err:
        preflight(suite_with(tmp_path, "{required_python_modules: [no_such_module_q]}"))
    assert "missing commands" not in str(err.value)
    assert f"not importable by {sys.executable}" in str(err.value)
    assert err.value.missing_commands == []
