"""Workspace hooks (``before_all``, ``before_each``, ``after_each``, ``after_all``), run as AgentV runs them.

A hook gets ``{workspace_path, test_id, eval_run_id, case_input, case_metadata}`` on stdin (a shared
workspace's ``before_all``/``after_all``: test id ``__before_all__``/``__after_all__``, no input, as
AgentV 4.42.4 sends), the same values in ``{{name}}`` placeholders of its arguments, runs in its ``cwd``
(default: the eval file's folder) with a timeout (``timeout_ms``, the process group killed), and
each execution is recorded as a ``workspace_hook_ran`` event: argv, cwd, exit code, duration and the
tails of stdout and stderr. A setup hook (``before_all``, ``before_each``) that fails is a setup error
naming the hook; a failing ``after_*`` hook is recorded and does not change the score.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from evalstore.replay.evalfile.specs import HookSpec
from evalstore.replay.processes.children import run_child
from evalstore.store.events import WorkspaceHookRan

if TYPE_CHECKING:
    from evalstore.replay.targetsfile.redaction import SecretMask

TAIL_CHARS = 4_000
MAX_OUTPUT_BYTES = 5_000_000


def run_hook(
    hook: HookSpec,
    workspace: str,
    *,
    run_id: str,
    test_id: str | None = None,
    target: str | None = None,
    case_input: Any = None,
    case_metadata: dict[str, Any] | None = None,
    mask: SecretMask | None = None,
) -> WorkspaceHookRan:
    """Run ``hook`` and say how it went. What it printed passes the environment's mask (``run_child``) and
    ``mask``, the run's target's (``targets.base.exchange_masks``): a hook sees the same environment as the
    agent, and prints its key as readily."""
    case_metadata = case_metadata or None  # AgentV sends null for a test without metadata
    payload_test_id = test_id if test_id is not None else f"__{hook.name}__"  # a shared workspace's suite hook
    stdin = json.dumps(
        {
            "workspace_path": workspace,
            "test_id": payload_test_id,
            "eval_run_id": run_id,
            "case_input": case_input,
            "case_metadata": case_metadata,
        }
    ).encode("utf-8")
    argv = interpolate(
        hook.command,
        workspace_path=workspace,
        test_id=payload_test_id,
        eval_run_id=run_id,
        case_input=case_input if isinstance(case_input, str) else "" if case_input is None else json.dumps(case_input),
        case_metadata=json.dumps(case_metadata, separators=(",", ":"), ensure_ascii=False) if case_metadata else "",
    )
    child = run_child(
        argv,
        stdin,
        timeout=hook.timeout_ms / 1000,
        max_output_bytes=MAX_OUTPUT_BYTES,
        cwd=hook.cwd,
        env=_env(workspace),
    )
    if child.spawn_error:
        outcome, error = "error", f"cannot start: {child.spawn_error}"
    elif child.timed_out:
        outcome, error = "timeout", f"timed out after {hook.timeout_ms} ms (timeout_ms); its process group was killed"
    elif child.exit_code != 0:
        outcome, error = "error", f"exited with code {child.exit_code}"
    else:
        outcome, error = "ok", None
    return WorkspaceHookRan(
        hook=hook.name,
        test_id=test_id,
        target=target,
        argv=argv,
        cwd=hook.cwd,
        workspace_path=workspace,
        exit_code=child.exit_code,
        duration_ms=child.duration_ms,
        outcome=outcome,  # type: ignore[arg-type]
        error=error,
        stdout_tail=_tail(child.stdout.decode("utf-8", errors="replace"), mask),
        stderr_tail=_tail(child.stderr_text(), mask),
    )


def _tail(text: str, mask: SecretMask | None) -> str | None:
    # Masked whole, then cut: a secret across the cut would otherwise keep its end.
    return (mask.text(text) if mask else text)[-TAIL_CHARS:] or None


_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


def interpolate(command: list[str], **values: str) -> list[str]:
    """AgentV's hook argument placeholders: ``{{workspace_path}}``, ``{{test_id}}``, ``{{eval_run_id}}``,
    ``{{case_input}}`` and ``{{case_metadata}}`` (compact JSON) in each argument; other names stay as written."""
    return [_PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), arg) for arg in command]


def setup_error(ran: WorkspaceHookRan) -> str:
    """The one line a failed setup hook becomes."""
    tail = (ran.stderr_tail or ran.stdout_tail or "").strip().splitlines()
    last = f": {tail[-1][:300]}" if tail else ""
    return f"setup error: {ran.hook} hook {json.dumps(ran.argv)} {ran.error}{last}"


def _env(workspace: str) -> dict[str, str]:
    import os

    return {**os.environ, "AGENTV_WORKSPACE_PATH": workspace}
