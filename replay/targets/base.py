"""Running a target for one test: the one entry point, :func:`run_target`, and what it returns.

Only the recording runner may import this package. Replay of stored runs never reaches target code,
so a regrade can never call the agent again.

Agent failures (a command that does not exist, hangs, exits non-zero, an endpoint that errors) are
results, not exceptions: they come back as a :class:`TargetOutcome` with ``status`` ``error`` or
``timeout``. Bad configuration (unknown provider, no command, an unset ``${{ ENV }}`` variable) is the
user's to fix and raises :class:`evalstore.replay.errors.TargetConfigError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from evalstore.replay.content import Message
from evalstore.replay.errors import TargetConfigError
from evalstore.replay.evalfile.specs import EvalTest
from evalstore.replay.targets.secrets import redact, resolve, target_mask, unresolve
from evalstore.replay.targetsfile.loader import TargetEntry
from evalstore.replay.targetsfile.redaction import SecretMask, environment_mask

TargetStatus = Literal["ok", "error", "timeout"]


@dataclass
class TargetOutcome:
    """What one target run produced for one test."""

    messages: list[Message]
    """The assistant reply messages; a plain-text answer becomes one assistant message."""
    output_text: str = ""
    """The final answer as text."""
    exit_code: int | None = None
    status: TargetStatus = "ok"
    error: str | None = None
    duration_ms: float | None = None
    start_time: str | None = None
    end_time: str | None = None
    token_usage: dict[str, Any] | None = None
    cost_usd: float | None = None
    stderr: str = ""
    """The tail of the agent's stderr (cli targets), for diagnosis."""
    cwd: Path | None = None
    """Where the agent ran (cli targets): relative file paths it names are looked up there too, for
    the reason a file outside the workspace is refused."""
    file_changes: str | None = None
    """What the provider reports the agent wrote outside the workspace (AgentV's ``fileChanges``: a Copilot
    session's ``files/`` as synthetic diffs), appended to the workspace's ``file_changes``."""
    output_mask: SecretMask = field(default_factory=lambda: SecretMask({}), repr=False, compare=False)
    """The mask :func:`run_target` gave the answer, for the rest of what the agent made, which is as much its
    output: the files it wrote (captured, in the workspace snapshot, in ``file_changes``). Never stored."""


@dataclass(frozen=True)
class TargetSpec:
    """A target as this package sees it: a name, a provider and its fields, still unresolved."""

    name: str
    provider: str
    fields: dict[str, Any] = field(default_factory=dict)
    """Every field of the target entry as written (``${{ ENV }}`` references intact)."""
    source: str | None = None
    """The targets file it came from, for error messages."""

    def fail(self, reason: str) -> TargetConfigError:
        where = f"{self.source}: " if self.source else ""
        return TargetConfigError(f"{where}target '{self.name}': {reason}")


@dataclass(frozen=True)
class RunRequest:
    """Everything a provider needs to run one test, with the target's secrets resolved."""

    spec: TargetSpec
    config: dict[str, Any]
    """``spec.fields`` with every ``${{ ENV }}`` reference replaced; never stored."""
    test: EvalTest
    workspace: Path
    eval_dir: Path
    timeout: float | None
    suite: str | None = None
    """The eval suite's name (AgentV's ``evalCase.suite``), for providers that look a test up."""
    eval_path: str | None = None
    """The eval file's absolute path (AgentV's ``evalFilePath``)."""
    workspace_configured: bool = True
    """Whether the eval configures a workspace: AgentV starts a coding agent there only then (else in
    the target's ``cwd`` or its own folder)."""
    attempt: int = 0
    """Which call of the target for this test, counted from 0 (AgentV's provider ``request.attempt``): raised
    when a failed call is tried again (``call_with_retries``); a cli command's ``{ATTEMPT}``, a replay
    fixture's lookup key."""


Provider = Callable[[RunRequest], TargetOutcome]


def as_target_spec(target: Any, *, source: str | Path | None = None) -> TargetSpec:
    """Normalise a target (a :class:`~evalstore.replay.targetsfile.loader.TargetEntry`, a mapping as in the targets file,
    or a pydantic model of one) into a :class:`TargetSpec`."""
    if isinstance(target, TargetSpec):
        return target if source is None else replace(target, source=str(source))
    if isinstance(target, TargetEntry):
        fields = {**target.fields, "name": target.name, "provider": target.provider}
        source = source if source is not None else target.source or None
    elif isinstance(target, Mapping):
        fields = dict(target)
    elif hasattr(target, "model_dump"):
        fields = target.model_dump(mode="python", exclude_none=True)
    else:
        raise TypeError(f"cannot read a target from {type(target).__name__}")
    # AgentV HEAD nests provider fields under ``config:`` (``{id, provider, config: {...}}``); fields
    # beside it win.
    nested = fields.get("config")
    if isinstance(nested, Mapping):
        fields = {**nested, **{k: v for k, v in fields.items() if k != "config"}}
    src = source if source is not None else getattr(target, "source", None) or fields.pop("source", None)
    name = fields.get("name") or fields.get("id") or fields.get("label")
    where = f"{src}: " if src else ""
    if not isinstance(name, str) or not name:
        raise TargetConfigError(f"{where}a target has no name; give it `name:`")
    provider = fields.get("provider")
    if not isinstance(provider, str) or not provider:
        raise TargetConfigError(f"{where}target '{name}': no `provider:`; use one of {', '.join(sorted(_providers()))}")
    return TargetSpec(name=name, provider=provider.strip().lower(), fields=fields, source=str(src) if src else None)


def check_target(target: Any, *, eval_dir: Path, targets_file: str | Path | None = None) -> TargetSpec:
    """Everything about ``target`` that can fail before a test runs: a known provider, every
    ``${{ ENV }}`` reference set, the provider's own fields (and a cli ``healthcheck``).

    Raises :class:`TargetConfigError`; the runner calls this before recording the run, so bad
    configuration never leaves a half-started run behind.
    """
    from evalstore.replay.targets.registry import provider_for

    spec = as_target_spec(target, source=targets_file)
    entry = provider_for(spec)
    config = resolve(spec.fields, target=spec.name, source=spec.source)
    with _unresolved_errors(spec):
        entry.validate(spec, config, Path(eval_dir))
    return spec


def exchange_masks(spec: TargetSpec, config: Mapping[str, Any] | None = None) -> tuple[SecretMask, SecretMask]:
    """(what an exchange with the target leaves in errors and logs, what its answer and files may keep): the
    target's secrets by the one rule (:func:`~evalstore.replay.targets.secrets.target_mask`; the answer's
    keeps to secret-looking references, as a plain ``${{ GREETING }}`` may rightly be part of it) and
    evalstore's own environment's, which the agent inherits. ``config``: the resolved one (its URLs'
    passwords), resolved here when not given."""
    if config is None:
        try:
            config = resolve(spec.fields, target=spec.name, source=spec.source)
        except TargetConfigError:  # an unset variable: checked before anything runs; its value is no secret
            config = None
    env_mask = environment_mask()
    return (
        target_mask(spec.fields, config) | env_mask,
        target_mask(spec.fields, config, secrets_only=True) | env_mask,
    )


def run_target(
    target: Any,
    test: EvalTest,
    *,
    workspace: Path,
    eval_dir: Path,
    timeout: float | None = None,
    targets_file: str | Path | None = None,
    suite: str | None = None,
    eval_path: str | Path | None = None,
    workspace_configured: bool = True,
    attempt: int = 0,
) -> TargetOutcome:
    """Run ``target`` on ``test`` in ``workspace`` and return what it answered.

    ``timeout`` (seconds) overrides the target's own ``timeout_seconds``. ``targets_file`` names the
    file the target came from in error messages, when the target object does not carry it. ``suite``
    and ``eval_path`` (the eval's name and file) are what a provider that looks tests up keys on;
    ``workspace_configured`` says whether ``workspace`` is one the eval asked for; ``attempt`` which call of
    the target this is (:attr:`RunRequest.attempt`).
    """
    spec = as_target_spec(target, source=targets_file)
    provider = _provider(spec)
    if timeout is not None and timeout <= 0:
        raise spec.fail(f"timeout must be positive, got {timeout}")
    config = resolve(spec.fields, target=spec.name, source=spec.source)
    workspace = Path(workspace)
    workspace.mkdir(parents=True, exist_ok=True)
    request = RunRequest(
        spec=spec,
        config=config,
        test=test,
        workspace=workspace,
        eval_dir=Path(eval_dir),
        timeout=timeout,
        suite=suite,
        eval_path=None if eval_path is None else str(eval_path),
        workspace_configured=workspace_configured,
        attempt=attempt,
    )
    started_wall = _now_iso()
    started = time.monotonic()
    with _unresolved_errors(spec):
        outcome = provider(request)
    # Everything kept from the exchange passes the one redaction rule: an agent or endpoint echoing its
    # key (in its answer, an error, stderr) is stored with the reference where the key stood.
    # And evalstore's own environment's secrets and URL passwords, which the agent inherits (as AgentV's do).
    # The answer's mask goes with the outcome: the files the agent wrote are its answer too.
    mask, answer_mask = exchange_masks(spec, config)
    return replace(
        outcome,
        messages=[Message.model_validate(answer_mask.value(m.model_dump(exclude_none=True))) for m in outcome.messages],
        output_text=answer_mask.text(outcome.output_text),
        error=None if outcome.error is None else mask.text(outcome.error),
        stderr=mask.text(outcome.stderr),
        file_changes=None if outcome.file_changes is None else answer_mask.text(outcome.file_changes),
        output_mask=answer_mask,
        # The agent's own times when it reports them (AgentV keeps the provider's startTime/endTime).
        start_time=outcome.start_time or started_wall,
        end_time=outcome.end_time or _now_iso(),
        # The agent's own duration when it reports one (AgentV: ``parsed.durationMs ?? measuredDurationMs``);
        # measured, whole milliseconds as AgentV's ``Date.now() - startTime`` gives them (a latency grader's
        # "Duration 128ms" and the exported row's ``duration_ms`` read as AgentV's do).
        duration_ms=outcome.duration_ms
        if outcome.duration_ms is not None
        else round((time.monotonic() - started) * 1000.0),
    )


DEFAULT_MAX_RETRIES = 2
"""``agentv eval --max-retries``'s default (run-eval.ts): a failed call is tried twice more."""


def retry_wait(attempt: int) -> float:
    """Seconds to wait after failed call ``attempt`` (from 0) before the next: AgentV's ``retryBackoffMs``,
    ``2^attempt`` seconds capped at 30 (1 s, 2 s, 4 s, ...)."""
    return min(2.0**attempt, 30.0)


def call_with_retries(
    call: Callable[[int], TargetOutcome],
    max_retries: int,
    failed: Callable[[TargetOutcome, int, float], None],
) -> tuple[TargetOutcome, int]:
    """AgentV's retry of a failed target call (orchestrator.ts ``runEvalCase``, ``attemptBudget``): ``call(n)``
    (``n`` the call, from 0) until one answers or ``max_retries`` more have failed, waiting :func:`retry_wait`
    between them. Every failure is retried, whatever it is (AgentV retries whatever the provider throws: an
    HTTP error pi-ai gave up on, a timeout, a non-zero exit, an unreadable answer); an answer, even an empty
    one, is not. ``failed(outcome, n, wait)`` hears of each failed call that is tried again, before the wait.
    Returns the last outcome and its call number."""
    attempt = 0
    while True:
        outcome = call(attempt)
        if outcome.status == "ok" or attempt >= max_retries:
            return outcome, attempt
        wait = retry_wait(attempt)
        failed(outcome, attempt, wait)
        time.sleep(wait)
        attempt += 1


def stored_config(target: Any, *, source: str | Path | None = None) -> dict[str, Any]:
    """The target's configuration as it may be stored (``RunStarted.target``): references kept,
    literal secrets redacted."""
    return redact(as_target_spec(target, source=source).fields)


@contextmanager
def _unresolved_errors(spec: TargetSpec) -> Iterator[None]:
    """Providers work on the resolved config, so their errors may quote a resolved secret (a URL, a
    command line); re-raised with every resolved value shown as its ``${{ NAME }}`` reference."""
    try:
        yield
    except TargetConfigError as exc:
        message = str(exc)
        masked = unresolve(message, spec.fields)
        if masked == message:
            raise
        raise TargetConfigError(masked) from None


def positive_seconds(spec: TargetSpec, value: Any, key: str) -> float | None:
    """A configured duration in seconds, validated; None when not set."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise spec.fail(f"`{key}` must be a positive number of seconds, got {value!r}")
    return float(value)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _providers() -> dict[str, Provider]:
    from evalstore.replay.targets.registry import runners

    return runners()


def _provider(spec: TargetSpec) -> Provider:
    from evalstore.replay.targets.registry import provider_for

    return provider_for(spec).run
