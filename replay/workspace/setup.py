"""Preparing the agent's workspace for a run: AgentV's ``workspace.template``, ``path``, ``isolation``,
``repos`` and ``hooks`` (agentv-formats.md §7.1a).

``shared`` isolation (AgentV's default) makes one workspace for the run, reused by every test, so one
test's edits are seen by the next; tests then run one at a time. ``per_test`` makes a fresh copy of the
template (and clones of the repos) for each test. A static ``path`` is used as it is (shared only).

``before_all`` runs once, after the shared workspace is made; with ``per_test`` it runs in each new
workspace (each is a fresh copy that needs the same setup) and ``after_all`` runs in none, as AgentV
4.42.4 does. ``after_each`` runs after the agent and before the graders (they see what it leaves).
``before_each``'s ``reset`` restores the shared workspace to its state after setup first, ``after_each``'s
restores the test's workspace to its state before the agent: ``fast`` puts back changed and deleted files and removes
new ones, except under the snapshot's excluded folders (``node_modules``, ...); ``strict`` removes those
too. (AgentV resets through git; evalstore restores the recorded state, so no ``.git`` is needed.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evalstore.replay import failures
from evalstore.replay.errors import ReplayError
from evalstore.replay.evalfile.specs import EvalSuite, RepoSpec, WorkspaceSpec
from evalstore.replay.workspace.changes import FolderState, folder_state
from evalstore.replay.workspace.snapshot import excluded

if TYPE_CHECKING:
    from evalstore.replay.targetsfile.redaction import SecretMask

GIT_TIMEOUT = 300
REMOTE_CHECK_TIMEOUT = 30


class WorkspaceSetupError(ReplayError):
    """The workspace cannot be prepared: a template that is not there, a repository that cannot be reached."""


def check_workspace(spec: WorkspaceSpec) -> None:
    """Before a run starts: every source is there (local) or answers (remote)."""
    if spec.template and not Path(spec.template).is_dir():
        raise WorkspaceSetupError(f"workspace.template {spec.template} is not a folder")
    if spec.path and Path(spec.path).exists() and not Path(spec.path).is_dir():
        raise WorkspaceSetupError(f"workspace.path {spec.path} is not a folder")
    for repo in spec.repos:
        if repo.local:
            if not Path(repo.repo).is_dir():
                raise WorkspaceSetupError(f"workspace.repos[{repo.path}]: local repository {repo.repo} is not a folder")
            continue
        if shutil.which("git") is None:
            raise WorkspaceSetupError(f"workspace.repos[{repo.path}]: {repo.repo} needs git, which is not installed")
        try:
            done = subprocess.run(
                ["git", "ls-remote", "--exit-code", "--", repo.repo, "HEAD"],
                capture_output=True,
                timeout=REMOTE_CHECK_TIMEOUT,
                env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise WorkspaceSetupError(
                f"workspace.repos[{repo.path}]: {repo.repo} did not answer within {REMOTE_CHECK_TIMEOUT} s"
            ) from None
        if done.returncode != 0:
            reason = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
            raise WorkspaceSetupError(
                f"workspace.repos[{repo.path}]: cannot reach {repo.repo}"
                + (f" ({reason[-1]})" if reason else f" (git ls-remote exited {done.returncode})")
            )


def check_workspaces(suite: EvalSuite) -> None:
    """``check_workspace`` for each distinct workspace the suite's tests run under."""
    seen: set[str] = set()
    for spec in [suite.workspace_for(t) for t in suite.tests] or [suite.workspace]:
        key = spec.model_dump_json()
        if spec.configured and key not in seen:
            seen.add(key)
            check_workspace(spec)


def populate(spec: WorkspaceSpec, folder: Path) -> None:
    """Copy the template and clone the repositories into ``folder`` (made if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    if spec.template:
        shutil.copytree(spec.template, folder, symlinks=True, dirs_exist_ok=True)
    for repo in spec.repos:
        _clone(repo, folder)


def _clone(repo: RepoSpec, folder: Path) -> None:
    dest = folder / repo.path
    if repo.local and not (Path(repo.repo) / ".git").exists():
        # A plain folder: copied as it is.
        shutil.copytree(repo.repo, dest, symlinks=True, dirs_exist_ok=True)
        return
    steps = [["git", "clone", "--quiet", "--no-checkout", "--", repo.repo, str(dest)]]
    steps.append(["git", "-C", str(dest), "checkout", "--quiet", "--detach", repo.commit or "HEAD"])
    for argv in steps:
        done = subprocess.run(
            argv, capture_output=True, timeout=GIT_TIMEOUT, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"}, check=False
        )
        if done.returncode != 0:
            reason = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
            raise WorkspaceSetupError(
                f"workspace.repos[{repo.path}]: {' '.join(argv[:3])} failed" + (f": {reason[-1]}" if reason else "")
            )


@dataclass
class SharedState:
    """The shared workspace's state right after setup, for ``before_each``'s ``reset``."""

    state: FolderState = field(default_factory=dict)


def reset(folder: Path, spec: WorkspaceSpec, saved: FolderState, mode: str) -> None:
    """Put ``folder`` back to ``saved`` (see the module's note on ``fast`` and ``strict``)."""
    if mode == "none":
        return
    keep_excluded = mode == "fast"
    for root, dirs, files in os.walk(folder, topdown=True):
        rel_root = os.path.relpath(root, folder)
        rel_root = "" if rel_root == "." else rel_root.replace(os.sep, "/")
        kept_dirs = []
        for d in dirs:
            rel = f"{rel_root}/{d}" if rel_root else d
            path = Path(root) / d
            if excluded(rel, spec.snapshot.exclude):
                if not keep_excluded:
                    shutil.rmtree(path, ignore_errors=True)
                continue
            if path.is_symlink():
                if rel not in saved:
                    path.unlink()
                continue
            kept_dirs.append(d)
        dirs[:] = kept_dirs
        for f in files:
            rel = f"{rel_root}/{f}" if rel_root else f
            if rel not in saved and not (keep_excluded and excluded(rel, spec.snapshot.exclude)):
                (Path(root) / f).unlink()
    for rel, (mode_bits, data) in saved.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if mode_bits == 0o120000:
            if path.is_symlink() and os.readlink(path) == data:
                continue
            if path.is_symlink() or path.exists():
                path.unlink()
            os.symlink(str(data), path)
            continue
        assert isinstance(data, bytes)
        if path.is_symlink():
            path.unlink()
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
        os.chmod(path, mode_bits & 0o777)


def saved_state(folder: Path, spec: WorkspaceSpec) -> FolderState:
    return folder_state(folder, spec.snapshot)


@dataclass
class TestWorkspace:
    """One test's workspace during a run: the folder, the hook executions so far, a setup error."""

    folder: Path
    events: list = field(default_factory=list)
    error: str | None = None
    failure: dict[str, str] = field(default_factory=dict)
    """AgentV's failure labels of ``error`` (``replay/failures.py``)."""
    baseline: FolderState | None = None


class RunWorkspaces:
    """The workspaces of one recorded run: made, set up by hooks, reset, torn down.

    A test's own ``workspace`` is merged into the suite's (``EvalTest.workspace``), and the run is set up
    as AgentV 4.42.4 sets it up (``prepareSharedWorkspaceSetup``, workspace/setup.ts:282): the first
    test's workspace decides whether there is one shared workspace, and makes it (template, repos,
    ``before_all``, ``after_all``); every test then runs its own ``before_each``/``after_each`` (and
    resets) in it. Without a shared workspace each test gets a fresh one from its own template and
    repos, with its own ``before_all``."""

    def __init__(self, suite: EvalSuite, workdir: Path, run_id: str, mask: SecretMask | None = None) -> None:
        import threading

        self.suite = suite
        self.spec = suite.workspace_for(suite.tests[0]) if suite.tests else suite.workspace
        self.workdir = workdir
        self.run_id = run_id
        self.mask = mask
        """What the hooks' output is masked with (the run's target's secrets: ``run_hook``)."""
        self.shared = self.spec.configured and self.spec.isolation == "shared"
        self.lock = threading.Lock()
        self._saved: FolderState | None = None

    @property
    def shared_folder(self) -> Path:
        return Path(self.spec.path) if self.spec.path else self.workdir / "shared"

    def start(self) -> list:
        """Make the shared workspace and run ``before_all`` in it; a failure raises with the events."""
        if not self.shared:
            return []
        folder = self.shared_folder
        self._populate(folder)
        events, error = self._setup_hook(self.spec, "before_all", folder, None, None)
        if error:
            raise HookFailed(error, events)
        if any(self._resets(self.suite.workspace_for(t), "before_each") for t in self.suite.tests):
            self._saved = saved_state(folder, self.spec)
        return events

    @staticmethod
    def _resets(spec: WorkspaceSpec, name: str) -> bool:
        hook = spec.hook(name)
        return hook is not None and hook.reset != "none"

    def finish(self) -> list:
        """``after_all``, once, in the shared workspace (per test: in none; it has no single workspace)."""
        hook = self.spec.hook("after_all")
        if hook is None or not hook.command or not self.shared:
            return []
        from evalstore.replay.workspace.hooks import run_hook

        return [run_hook(hook, str(self.shared_folder), run_id=self.run_id, mask=self.mask)]

    def _populate(self, folder: Path) -> None:
        if self.spec.path:
            folder.mkdir(parents=True, exist_ok=True)
            for repo in self.spec.repos:
                if not (folder / repo.path).exists():
                    _clone(repo, folder)
            return
        populate(self.spec, folder)

    def _setup_hook(  # type: ignore[no-untyped-def]
        self, spec: WorkspaceSpec, name: str, folder: Path, test, target: str | None
    ) -> tuple[list, str | None]:
        from evalstore.replay.content import question_text
        from evalstore.replay.workspace.hooks import run_hook, setup_error

        hook = spec.hook(name)
        if hook is None or not hook.command:  # `{reset: fast}` alone: nothing to run
            return [], None
        ran = run_hook(
            hook,
            str(folder),
            run_id=self.run_id,
            test_id=test.id if test is not None else None,
            target=target,
            case_input=question_text(list(test.input)) if test is not None else None,
            case_metadata=test.metadata if test is not None else None,
            mask=self.mask,
        )
        return [ran], (setup_error(ran) if ran.outcome != "ok" else None)

    def prepare(self, test, target: str | None, default_folder: Path) -> TestWorkspace:  # type: ignore[no-untyped-def]
        """The test's workspace, set up: the shared one (reset), or a per-test copy of the test's template
        and repos (+ its ``before_all``); then the test's ``before_each``, then the baseline
        ``file_changes`` is measured against."""
        spec = self.suite.workspace_for(test)
        if self.shared:
            tw = TestWorkspace(self.shared_folder)
            hook = spec.hook("before_each")
            if self._saved is not None and hook is not None:
                reset(tw.folder, spec, self._saved, hook.reset)
        elif not spec.configured:
            default_folder.mkdir(parents=True, exist_ok=True)
            return TestWorkspace(default_folder)
        else:
            tw = TestWorkspace(default_folder)
            if default_folder.exists():
                shutil.rmtree(default_folder)
            try:
                populate(spec, default_folder)
            except WorkspaceSetupError as exc:
                tw.error, tw.failure = f"setup error: {exc}", failures.REPOS  # what populate refuses: a clone
                return tw
            tw.events, tw.error = self._setup_hook(spec, "before_all", tw.folder, test, target)
            if tw.error:
                tw.failure = failures.HOOK
                return tw
        events, tw.error = self._setup_hook(spec, "before_each", tw.folder, test, target)
        tw.events += events
        if tw.error is not None:
            tw.failure = failures.HOOK
        if tw.error is None:
            tw.baseline = folder_state(tw.folder, spec.snapshot)
        return tw

    def after_each(self, tw: TestWorkspace, test, target: str | None) -> list:  # type: ignore[no-untyped-def]
        """After the agent, before the graders (AgentV's order): ``reset`` back to the test's baseline,
        then the command; a failure is recorded and changes nothing else."""
        spec = self.suite.workspace_for(test)
        hook = spec.hook("after_each")
        if hook is not None and hook.reset != "none" and tw.baseline is not None:
            reset(tw.folder, spec, tw.baseline, hook.reset)
        events, _ = self._setup_hook(spec, "after_each", tw.folder, test, target)
        return events


class HookFailed(WorkspaceSetupError):
    """A ``before_all`` hook of a shared workspace failed: the run cannot start its tests."""

    def __init__(self, message: str, events: list) -> None:
        super().__init__(message)
        self.events = events
