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


class NoJudgeError(JudgeConfigError):
    """No judge target to be found for an LLM grader: none chosen, or the name chosen is not defined. AgentV
    then has no grader provider (``llm-grader.ts``: "No grader provider available for LLM grading"); ``run``
    records that as AgentV does, a replay refuses. ``grader_target`` is the grader's own ``target:`` when
    that is the name not defined (AgentV's message differs: ``builtin-graders.ts``)."""

    def __init__(self, message: str, *, grader_target: str | None = None) -> None:
        super().__init__(message)
        self.grader_target = grader_target


class JudgeProviderError(JudgeConfigError):
    """A judge target whose provider evalstore cannot ask as a judge (an agent, which AgentV asks in its
    delegate mode): the target exists, so this is no :class:`NoJudgeError`."""


class ServiceError(ReplayError):
    """A service the command called refused or failed once the command's work had begun (a judge provider's
    batch API answering HTTP 429): no fault of the input, so the CLI says how to finish the work (its
    ``--resume``) and exits as for a check that failed, not as for bad usage."""


class CompareError(ReplayError):
    """Two runs cannot be compared as asked (an unknown test id, an unknown regression mode)."""


class NotFoundError(ReplayError):
    """A run, test or grader the store does not hold."""


class EvalFileError(ReplayError):
    """An eval file (or a file it references) that cannot be parsed as configured.

    The message is ``FILE:LINE: field `path.to[0].field`: what is wrong and what to do``.
    """

    def __init__(self, file: str, line: int | None, field: str | None, problem: str) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.problem = " ".join(problem.split())
        location = f"{file}:{line}" if line is not None else file
        subject = f" field `{field}`:" if field else ""
        super().__init__(f"{location}:{subject} {self.problem}")


class ReferenceNotFoundError(ReplayError):
    """A file reference (prompt, script, converter, tests file) that no search root holds."""

    def __init__(self, ref: str, attempted: list[str], folder: str | None = None) -> None:
        self.ref = ref
        self.attempted = attempted
        self.folder = folder
        """A folder that a search root holds under ``ref``, when no root holds a file: "not found, looked
        in ..." would send the user looking for a file that is there, as a folder."""
        super().__init__(
            f"`{ref}` is a folder, not a file ({folder}); name a file"
            if folder is not None
            else f"`{ref}` not found; looked in: {', '.join(attempted) or '(no search roots)'}"
        )


class PreflightError(ReplayError):
    """``workspace.env`` requirements that this machine does not meet (every missing item, in one line)."""

    def __init__(self, message: str, missing_commands: list[str], missing_modules: list[str]) -> None:
        self.missing_commands = missing_commands
        self.missing_modules = missing_modules
        super().__init__(message)


class PromptTemplateError(ReplayError):
    """A grader prompt file that cannot be used (missing, unreadable, or without {{output}}/{{expected_output}})."""


class SigningKeyError(ReplayError):
    """A signing or verifier key that cannot be created, read or used (``FILE: reason``)."""


class AttestationFormatError(ReplayError):
    """A checkpoint or attestation file that is not in the format it claims (not a failed check: that exits 1)."""


class AttestationError(ReplayError):
    """A run that cannot be attested as asked (no checkpoint covers it, or the log no longer matches one)."""
