"""Domain exceptions of the replay layer; the CLI maps each to one ``Error: ...`` line.

Each message is one line naming the file, line or field at fault and what to do about it.
"""

from __future__ import annotations


class ReplayError(Exception):
    """Base of every error the replay layer raises on bad input."""


class ImportFormatError(ReplayError):
    """An AgentV result file or run directory that cannot be read (``FILE:LINE: reason``)."""


class TargetConfigError(ReplayError):
    """A target that cannot be run as configured (``TARGETS_FILE: target 'NAME': reason``)."""


class UnsafePathError(ReplayError):
    """A file path from a transcript that would read or write outside the workspace (``..``, an absolute
    path elsewhere, a symlink pointing out). Preprocessing turns it into a warning, never a crash."""


class TargetsFileError(ReplayError):
    """A ``.agentv/targets.yaml`` that cannot be read (``FILE:LINE: target 'NAME': field: reason``)."""


class JudgeConfigError(ReplayError):
    """A judge target that cannot be called as configured (unknown target, unset env var, bad provider)."""


class CompareError(ReplayError):
    """Two runs cannot be compared as asked (an unknown test id, an unknown regression mode)."""
