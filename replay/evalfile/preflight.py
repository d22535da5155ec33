"""Workspace preflight: check ``workspace.env`` before anything runs, and report every gap at once.

Commands are looked up on PATH (``shutil.which``); Python modules are looked up in the interpreter
running evalstore, which is named in the message because a grader run by another interpreter may
see different modules.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys

from evalstore.replay.errors import PreflightError
from evalstore.replay.evalfile.specs import EvalSuite, WorkspaceEnv


def missing_commands(env: WorkspaceEnv) -> list[str]:
    return [command for command in env.required_commands if shutil.which(command) is None]


def missing_python_modules(env: WorkspaceEnv) -> list[str]:
    return [module for module in env.required_python_modules if not _importable(module)]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        # A dotted name whose parent package is missing, or an invalid name.
        return False


def preflight(suite: EvalSuite) -> None:
    """Raise :class:`PreflightError` naming every missing command and module, or return quietly."""
    commands = missing_commands(suite.workspace_env)
    modules = missing_python_modules(suite.workspace_env)
    if not commands and not modules:
        return
    parts = []
    if commands:
        parts.append(f"missing commands (not on PATH): {', '.join(commands)}")
    if modules:
        version = ".".join(str(v) for v in sys.version_info[:3])
        parts.append(
            f"missing python modules (not importable by {sys.executable}, Python {version}): {', '.join(modules)}"
        )
    message = (
        f"{suite.path}: workspace preflight failed: {'; '.join(parts)}; install them or remove them from workspace.env"
    )
    raise PreflightError(message, commands, modules)
