"""The LLM judge: targets, the shared HTTP client and concurrency limit, prompts, modes and parsing."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalstore.replay.grading.judge.client import JudgeClient, RetryPolicy
    from evalstore.replay.grading.judge.pool import JudgePool
    from evalstore.replay.grading.judge.targets import JudgeTarget, ResolvedJudge

__all__ = ["JudgeClient", "JudgePool", "JudgeTarget", "ResolvedJudge", "RetryPolicy"]

# Imported on first use: the client loads httpx, which a replay that calls no judge never needs, and
# importing any module of this package (the pool, say) runs this file first.
_HOMES = {
    "JudgeClient": "client",
    "RetryPolicy": "client",
    "JudgePool": "pool",
    "JudgeTarget": "targets",
    "ResolvedJudge": "targets",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
