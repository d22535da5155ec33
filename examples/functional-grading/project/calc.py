"""A tiny calculator with a bug for the agent to fix."""


def add(a: int, b: int) -> int:
    return a - b
