"""Reading the hook logs of tests/fixtures/agentv-real/project/hooks/*.py into a comparable form.

Paths differ between AgentV and evalstore (``~/.agentv/workspaces/UUID/<name>`` against
``.evalstore/workspaces/RUN/<name>``; the project's checkout), so each is replaced by a label:
a workspace by ``<ws:NAME>`` (NAME its last component: ``shared`` or the test id, the same in both),
the project's folder by ``<project>``, the run id by ``<run>``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_WS = re.compile(r"(/[^\s\"']*?/(?:\.agentv|\.evalstore)/workspaces/[^/\s\"']+/([^/\s\"']+))")


def _label(text: str, project: str, run_ids: set[str]) -> str:
    text = _WS.sub(lambda m: f"<ws:{m.group(2)}>", text)
    text = text.replace(project, "<project>")
    for run in run_ids:
        text = text.replace(run, "<run>")
    return text


def _walk(value: Any, project: str, run_ids: set[str]) -> Any:
    if isinstance(value, str):
        return _label(value, project, run_ids)
    if isinstance(value, list):
        return [_walk(v, project, run_ids) for v in value]
    if isinstance(value, dict):
        return {k: _walk(v, project, run_ids) for k, v in value.items()}
    return value


def read_log(path: Path, project: Path) -> list[dict[str, Any]]:
    """The log's entries in order, paths and run ids labelled."""
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    run_ids = {e["stdin"]["eval_run_id"] for e in entries if isinstance(e.get("stdin"), dict)}
    return [_walk(e, str(project), run_ids) for e in entries]


def comparable(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What must agree between AgentV and evalstore: everything but the environment of hooks and the agent
    (evalstore also exports AGENTV_WORKSPACE_PATH to them; AgentV only to code graders) and the grader's
    payload keys (compared by the payload tests)."""
    out = []
    for e in entries:
        e = dict(e)
        if e["role"] != "grader":
            e.pop("env_workspace", None)
        e.pop("keys", None)
        out.append(e)
    return out
