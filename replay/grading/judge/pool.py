"""The judges a grading run may call, one shared HTTP client, and the limit on calls in flight.

The engine grades tests in a thread pool; every LLM grader in every thread goes through the same
:class:`JudgePool`, so the concurrency limit (a semaphore held for each HTTP request) bounds the whole
run, and all requests share one connection pool.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from evalstore.replay.errors import JudgeConfigError, NoJudgeError, ReplayError
from evalstore.replay.grading.judge.targets import DEFAULT_TIMEOUT, JUDGE_PROVIDERS, JudgeTarget, ResolvedJudge
from evalstore.replay.reply_cap import max_reply_bytes
from evalstore.replay.targetsfile.loader import TargetEntry, TargetsFile

if TYPE_CHECKING:
    import httpx

    from evalstore.replay.grading.graders.base import GradingContext
    from evalstore.replay.grading.judge.client import JudgeClient, RetryPolicy

DEFAULT_CONCURRENCY = 8
ENV_TARGET_NAME = "judge"
"""Name of the judge configured through ``EVALSTORE_JUDGE_*`` variables."""


class JudgePool:
    def __init__(
        self,
        targets: Mapping[str, JudgeTarget] | None = None,
        *,
        default: str | None = None,
        targets_file: TargetsFile | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        retry: RetryPolicy | None = None,
        env: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if concurrency < 1:
            raise JudgeConfigError(f"judge concurrency must be at least 1, not {concurrency}")
        self.targets = dict(targets or {})
        self.default = default
        self.targets_file = targets_file
        self.concurrency = concurrency
        self._env = env
        self.max_reply = max_reply_bytes(self.env)
        """The largest judge reply read (``EVALSTORE_MAX_REPLY_BYTES``), the setting checked before any call."""
        self._transport = transport
        self._retry = retry
        self._http: httpx.Client | None = None
        self._client: JudgeClient | None = None
        self._client_lock = threading.Lock()
        self._release: Callable[[], None] | None = None
        self._withheld: frozenset[str] = frozenset()

    @property
    def client(self) -> JudgeClient:
        """The shared client, made on the first judge call: httpx and the HTTP transport it builds (httpcore)
        take 0.1-0.2 s to load, which a run or replay without LLM graders, or whose judge replies are all
        reused, never needs."""
        import httpx

        from evalstore.replay.bounded_http import deadline_client
        from evalstore.replay.grading.judge.client import JudgeClient, RetryPolicy

        with self._client_lock:
            if self._client is None:
                limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
                given = {"transport": self._transport} if self._transport else {}
                self._http = deadline_client(timeout=DEFAULT_TIMEOUT, limits=limits, **given)
                self._client = JudgeClient(
                    self._http,
                    threading.BoundedSemaphore(self.concurrency),
                    self._retry or RetryPolicy(),
                    max_reply=self.max_reply,
                )
            return self._client

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kwargs: Any) -> JudgePool:
        """A pool with one judge from ``EVALSTORE_JUDGE_BASE_URL``, ``EVALSTORE_JUDGE_MODEL`` and
        ``EVALSTORE_JUDGE_API_KEY_ENV`` (the *name* of the variable holding the key; default none).
        ``EVALSTORE_JUDGE_CONCURRENCY`` and ``EVALSTORE_JUDGE_TIMEOUT`` are optional. With no base URL
        set the pool has no judges, and an LLM grader reports that as its execution error."""
        env = os.environ if env is None else env
        judge = _env_judge(env)
        targets = {ENV_TARGET_NAME: judge} if judge else {}
        kwargs.setdefault("concurrency", _env_number(env, "EVALSTORE_JUDGE_CONCURRENCY", int, DEFAULT_CONCURRENCY))
        return cls(targets, default=ENV_TARGET_NAME if targets else None, env=env, **kwargs)

    @classmethod
    def from_targets_file(cls, targets_file: TargetsFile, *, default: str | None = None, **kwargs: Any) -> JudgePool:
        """A pool over a targets file. Entries become judges when first asked for, so a file whose
        agent targets use providers that cannot grade still loads. A judge configured through
        ``EVALSTORE_JUDGE_*`` is the default when nothing more specific names one (unless the file
        defines a target of the same name, which wins)."""
        env = kwargs.get("env")
        judge = _env_judge(os.environ if env is None else env)
        targets = {ENV_TARGET_NAME: judge} if judge and ENV_TARGET_NAME not in targets_file.targets else {}
        if default is None and targets:
            default = ENV_TARGET_NAME
        return cls(targets, default=default, targets_file=targets_file, **kwargs)

    # -- use ----------------------------------------------------------------------------------

    @property
    def env(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    def target(
        self,
        *,
        grader_target: str | None = None,
        run_target: str | None = None,
        override_target: str | None = None,
        override_model: str | None = None,
    ) -> JudgeTarget:
        """The judge for one grader: the CLI override, else the grader's ``target:``, else the run
        target's ``grader_target``, else the pool default, else the run target itself when it can grade
        (AgentV: ``graderTarget ?? name``), else the pool's only judge."""
        run_entry = self._run_entry(run_target)
        # AgentV: a run target that can grade is its own judge when it names none, or names one not defined.
        itself = run_entry.name if run_entry and run_entry.provider.lower() in JUDGE_PROVIDERS else None
        name = (
            override_target
            or grader_target
            or (run_entry.grader_target if run_entry else None)
            or self.default
            or itself
        )
        if name is None:
            # The only target that can grade; the agent under test is never offered as its own judge.
            graders = self.judges(excluding=run_target)
            if len(graders) == 1:
                name = graders[0]
            else:
                raise NoJudgeError(
                    "no judge target chosen: set the grader's target:, the run target's grader_target, "
                    "--judge-target, or EVALSTORE_JUDGE_BASE_URL"
                    + (f" (judges available: {', '.join(graders)})" if graders else "")
                )
        try:
            judge = self._lookup(name, run_target)
        except NoJudgeError as exc:
            if name == override_target:  # a name given on the command line: the user's to fix, not a verdict
                raise JudgeConfigError(str(exc)) from None
            if name == grader_target:
                raise NoJudgeError(str(exc), grader_target=name) from None
            if itself is None:
                raise
            judge = self._lookup(itself, run_target)
        return judge.with_model(override_model)

    def for_grader(self, ctx: GradingContext, grader_target: str | None) -> JudgeTarget:
        """The judge of one grader (its ``target:``) of the test ``ctx`` grades, with the run's overrides."""
        return self.target(
            grader_target=grader_target,
            run_target=ctx.target or ctx.test.target or ctx.suite.target,
            override_target=ctx.options.judge_target,
            override_model=ctx.options.judge_model,
        )

    def judges(self, *, excluding: str | None = None) -> list[str]:
        """The targets that can grade (providers that speak Chat Completions), but ``excluding``."""
        return [n for n in self._known() if n != excluding and self._can_grade(n)]

    def variables(self, *, excluding: Iterable[str] = ()) -> set[str]:
        """The environment variables only the judges' targets reference (each ``${{ VAR }}``, the API key's
        variable), not those a target of the run (``excluding``: every target its tests ran against) references
        too: what no child of the run, or of a replay of it, is given (``processes.children.withhold``)."""
        from evalstore.replay.targetsfile.loader import references

        own = set(excluding)
        names: set[str] = set()
        for name in self.judges():
            if name in own:
                continue
            judge = self.targets.get(name)
            if judge is not None and judge.api_key_env:
                names.add(judge.api_key_env)
            if self.targets_file is not None and name in self.targets_file.targets:
                names.update(references(self.targets_file.targets[name].fields))
        for name in own:
            if self.targets_file is not None and name in self.targets_file.targets:
                names.difference_update(references(self.targets_file.targets[name].fields))
        return names

    def resolve(self, target: JudgeTarget) -> ResolvedJudge:
        return target.resolve(self.env)

    def resolve_or_cache_only(self, target: JudgeTarget) -> tuple[ResolvedJudge, JudgeConfigError | None]:
        """``target`` resolved for calling, or, when it cannot be called (its key is unset), resolved without
        the key, with why: recorded replies can still be reused. Anything else that is wrong raises, with the
        same error either way (the key is checked last)."""
        try:
            return self.resolve(target), None
        except JudgeConfigError as exc:
            return target.resolve(self.env, require_key=False), exc

    def withhold_variables(self, names: Iterable[str]) -> JudgePool:
        """Keep ``names`` (:meth:`variables`, of this pool or of the run's targets file) from every child
        process until this pool is closed (a replay: its graders never see the judges' keys)."""
        from evalstore.replay.processes.children import withhold

        if self._release is None:
            self._withheld = frozenset(names)
            self._release = withhold(self._withheld)
        return self

    def close(self) -> None:
        with self._client_lock:
            if self._http is not None:
                self._http.close()
            if self._release is not None:
                self._release()
                self._release = None

    def __getstate__(self) -> dict[str, Any]:
        """A pool sent to another process (a Ray worker) carries its configuration, never a client, a
        transport or the environment: the receiving process makes its own client on its first judge call
        and reads keys from its own environment, so no secret travels with the work."""
        if self._transport is not None:
            raise JudgeConfigError("a judge pool with a custom HTTP transport cannot be sent to another process")
        state = dict(self.__dict__)
        state.update(_http=None, _client=None, _client_lock=None, _env=None, _release=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        from evalstore.replay.processes.children import withhold

        self.__dict__.update(state)
        self._client_lock = threading.Lock()
        if self._withheld:  # what the sender kept from its graders, the receiver keeps from its own
            self._release = withhold(self._withheld)

    def __enter__(self) -> JudgePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def named(self, name: str) -> JudgeTarget:
        """The judge target of this name (a batch of its requests is read back by the target's name)."""
        return self._lookup(name)

    def _lookup(self, name: str, run_target: str | None = None) -> JudgeTarget:
        if name in self.targets:
            return self.targets[name]
        if self.targets_file is not None and name in self.targets_file.targets:
            # A name may stand for another target (``use_target``), resolved in this environment as AgentV's
            # runtime resolves a grader target; when no grader asks for it, an unset variable stops nothing.
            try:
                entry = self.targets_file.delegate(name, self.env)
            except ReplayError as exc:
                raise JudgeConfigError(str(exc)) from None
            assert entry is not None
            judge = JudgeTarget.from_entry(entry)
            self.targets[name] = judge
            return judge
        known = ", ".join(self.judges(excluding=run_target)) or "none"
        raise NoJudgeError(f"judge target {name!r} is not defined (judges available: {known})")

    def _run_entry(self, run_target: str | None) -> TargetEntry | None:
        """The run target's entry in the targets file, its ``use_target`` chain followed as ``agentv eval``
        follows it; None when the file does not define it (or it cannot be resolved here)."""
        if self.targets_file is None or run_target is None or run_target not in self.targets_file.targets:
            return None
        try:
            return self.targets_file.select(run_target, self.env)
        except ReplayError:
            return None

    def _can_grade(self, name: str) -> bool:
        if name in self.targets or self.targets_file is None:
            return True
        try:
            entry = self.targets_file.delegate(name, self.env)
        except ReplayError:
            return False
        return entry is not None and entry.provider.lower() in JUDGE_PROVIDERS

    def _known(self) -> list[str]:
        names = set(self.targets)
        if self.targets_file is not None:
            names.update(self.targets_file.targets)
        return sorted(names)


def _env_judge(env: Mapping[str, str]) -> JudgeTarget | None:
    """The judge ``EVALSTORE_JUDGE_BASE_URL``/``_MODEL``/``_API_KEY_ENV``/``_TIMEOUT`` configure, if any."""
    base_url = env.get("EVALSTORE_JUDGE_BASE_URL")
    if not base_url:
        return None
    return JudgeTarget(
        name=ENV_TARGET_NAME,
        provider="openai-compatible",
        base_url=base_url,
        model=env.get("EVALSTORE_JUDGE_MODEL", ""),
        api_key_env=env.get("EVALSTORE_JUDGE_API_KEY_ENV") or None,
        timeout=_env_number(env, "EVALSTORE_JUDGE_TIMEOUT", float, DEFAULT_TIMEOUT),
    )


def _env_number(env: Mapping[str, str], name: str, kind: type, default: Any) -> Any:
    raw = env.get(name)
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise JudgeConfigError(f"environment variable {name} must be a number, not {raw!r}") from None
