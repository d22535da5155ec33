"""The LLM judge: targets, the shared HTTP client and concurrency limit, prompts, modes and parsing."""

from .client import JudgeClient, RetryPolicy
from .pool import JudgePool
from .targets import JudgeTarget, ResolvedJudge

__all__ = ["JudgeClient", "JudgePool", "JudgeTarget", "ResolvedJudge", "RetryPolicy"]
