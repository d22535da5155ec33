"""Which provider runs a target: the one table of providers evalstore runs and of those it refuses.

Names are AgentV 4.42.4's (``providers/index.ts`` registers them, ``targets.ts`` maps the aliases): a
target's ``provider`` is one of its spellings; each maps to the module that runs it (``run``) and checks
its fields before any test does (``validate``). AgentV's providers that load a vendor's SDK into its own
Node.js process, drive VS Code, or are custom TypeScript files are refused before the run starts, each
with what it would need.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec


@dataclass(frozen=True)
class ProviderEntry:
    run: Callable[[RunRequest], TargetOutcome]
    validate: Callable[[TargetSpec, dict[str, Any], Path], None]


def _entries() -> dict[str, ProviderEntry]:
    """Every spelling evalstore runs, to its module (imported when a target needs one)."""
    from evalstore.replay.grading.judge.targets import PI_VENDORS, pi_vendor
    from evalstore.replay.targets import (
        claude_cli,
        cli,
        copilot_cli,
        copilot_log,
        fixtures,
        mock,
        openai,
        pi_ai,
        pi_cli,
    )

    table = {
        "cli": ProviderEntry(cli.run, cli.validate),
        **dict.fromkeys(openai.PROVIDERS, ProviderEntry(openai.run, openai.validate)),
        # anthropic, gemini (google, google-gemini): one runner, each with its vendor's wire format.
        **{
            name: ProviderEntry(partial(pi_ai.run, pi_vendor(name)), partial(pi_ai.validate, pi_vendor(name)))
            for name in PI_VENDORS
        },
        "mock": ProviderEntry(mock.run, mock.validate),
        "replay": ProviderEntry(fixtures.run, fixtures.validate),
        **dict.fromkeys(("claude", "claude-code", "claude-cli"), ProviderEntry(claude_cli.run, claude_cli.validate)),
        "cc-mirror": ProviderEntry(claude_cli.run_cc_mirror, claude_cli.validate_cc_mirror),
        **dict.fromkeys(("copilot", "copilot-cli"), ProviderEntry(copilot_cli.run, copilot_cli.validate)),
        "pi-cli": ProviderEntry(pi_cli.run, pi_cli.validate),
        "copilot-log": ProviderEntry(copilot_log.run, copilot_log.validate),
    }
    return table


# AgentV's providers evalstore does not run, by every spelling ``targets.ts`` accepts: why, and what
# running the target would need.
_IN_PROCESS = "AgentV loads {package} into its own Node.js process; evalstore runs no vendor SDK in-process"
REFUSED = {
    **dict.fromkeys(
        ("codex", "codex-cli"),
        _IN_PROCESS.format(package="@openai/codex-sdk") + "; run Codex as a `cli` target instead",
    ),
    "claude-sdk": _IN_PROCESS.format(package="@anthropic-ai/claude-agent-sdk")
    + "; `provider: claude-cli` runs the same agent as a process",
    **dict.fromkeys(
        ("copilot-sdk", "copilot_sdk"),
        _IN_PROCESS.format(package="@github/copilot-sdk") + "; `provider: copilot-cli` runs Copilot as a process",
    ),
    **dict.fromkeys(
        ("pi", "pi-coding-agent"),
        _IN_PROCESS.format(package="@earendil-works/pi-coding-agent") + "; `provider: pi-cli` runs pi as a process",
    ),
    **dict.fromkeys(
        ("vscode", "vscode-insiders"),
        "AgentV drives Copilot chat in a VS Code window through subagent workspaces; it needs VS Code "
        "and a person's session, which evalstore cannot start",
    ),
    "agentv": "AgentV's built-in `agentv` provider calls pi-ai with the vendor's key from the vendor's own "
    "environment variable; name the vendor's provider instead (anthropic, gemini, openai, azure) with "
    "api_key: ${{ VAR }}",
}


def runners() -> dict[str, Callable[[RunRequest], TargetOutcome]]:
    return {name: entry.run for name, entry in _entries().items()}


def provider_for(spec: TargetSpec) -> ProviderEntry:
    """The provider that runs ``spec``, or a TargetConfigError saying why it cannot run."""
    entries = _entries()
    entry = entries.get(spec.provider)
    if entry is not None:
        return entry
    reason = REFUSED.get(spec.provider)
    if reason is not None:
        raise spec.fail(f"provider '{spec.provider}' is not run by evalstore: {reason}")
    raise spec.fail(
        f"provider '{spec.provider}' is not built in: AgentV 4.42.4 runs it as a custom TypeScript provider "
        f"(.agentv/providers/{spec.provider}.ts through bun), which evalstore does not run; give the target "
        f"`provider: cli` and the command that runs it, or use one of {', '.join(sorted(entries))}"
    )
