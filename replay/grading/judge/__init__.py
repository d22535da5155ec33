"""The LLM judge: targets, the shared HTTP client and concurrency limit, prompts, modes and parsing."""

from evalstore.replay.grading.judge.client import JudgeClient, RetryPolicy
from evalstore.replay.grading.judge.pool import JudgePool
from evalstore.replay.grading.judge.targets import JudgeTarget, ResolvedJudge

__all__ = ["JudgeClient", "JudgePool", "JudgeTarget", "ResolvedJudge", "RetryPolicy"]
