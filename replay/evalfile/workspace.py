"""A ``workspace`` block (the suite's, or a test's merged into it): template, path, isolation, repos, hooks, snapshot.

AgentV 4.42.4's semantics (agentv-formats.md §7.1a, checked against the real CLI): ``isolation`` is
``shared`` (the default) or ``per_test``; a static ``path`` cannot be combined with ``per_test``; a hook
is ``{command, timeout_ms, cwd}`` whose cwd defaults to the eval file's folder, with a 60 s timeout
(``after_*``: 30 s); a string command is split on whitespace and run without a shell, as AgentV does;
``before_each`` and ``after_each`` also take ``reset: none|fast|strict``; ``hooks.enabled: false`` turns
them all off.
``snapshot`` is evalstore's: what of the finished workspace is stored so functional graders replay.
``workspace: FILE`` names a YAML file holding that object (not under a ``workspace:`` key), read with
``${{ VAR }}`` filled in; paths in it are relative to its folder (``yaml-parser.ts``
``resolveWorkspaceConfig``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalstore.replay.evalfile.fields import (
    ParseContext,
    expect_list,
    expect_mapping,
    opt_bool,
    opt_number,
    opt_str,
    req_str,
    str_list,
    warn_unknown,
)
from evalstore.replay.evalfile.interpolation import with_env
from evalstore.replay.evalfile.source import Where, load_yaml
from evalstore.replay.evalfile.specs import HookSpec, RepoSpec, SnapshotSpec, WorkspaceSpec

HOOK_NAMES = ("before_all", "before_each", "after_each", "after_all")
WORKSPACE_FILE_KEYS = ("template", "isolation", "repos", "hooks", "mode", "path", "docker", "env")
"""What makes an external workspace file's object a workspace to AgentV (``parseWorkspaceConfig``)."""
HOOK_KEYS = ("command", "script", "timeout_ms", "cwd", "reset")
REPO_KEYS = ("path", "repo", "commit", "base_commit", "ancestor", "sparse", "source")
SNAPSHOT_KEYS = ("max_bytes", "max_files", "max_file_bytes", "exclude")
_URL = re.compile(r"^([a-z][a-z0-9+.-]*://|git@[^:]+:)", re.I)
_GITHUB_SHORTHAND = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def parse_workspace(raw: Any, where: Where, ctx: ParseContext, base: Path | None = None) -> WorkspaceSpec:
    """The workspace an object describes; its relative paths from ``base`` (the eval file's folder, or an
    external workspace file's: AgentV resolves ``template``, ``path``, hook ``cwd`` and local repos there)."""
    if raw is None:
        return WorkspaceSpec()
    return workspace_spec(workspace_layer(raw, where, ctx, base), where, ctx)


@dataclass(frozen=True)
class WorkspaceLayer:
    """The keys one ``workspace`` block gives (the suite's or a test's), parsed, before the test's is merged
    into the suite's: what was not written is None, so the merge can tell "not given" from a default."""

    template: str | None = None
    path: str | None = None
    isolation: str | None = None
    repos: list[RepoSpec] | None = None
    hooks_enabled: bool | None = None
    hooks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per hook name, the fields it gives: ``command`` (argv), ``timeout_ms``, ``cwd`` (absolute), ``reset``."""
    snapshot: SnapshotSpec | None = None
    file_dir: Path | None = None
    """An external workspace file's folder: the hooks' default cwd (AgentV's ``workspaceFileDir``)."""


def workspace_layer(raw: Any, where: Where, ctx: ParseContext, base: Path | None = None) -> WorkspaceLayer:
    """What one ``workspace`` object gives, its relative paths from ``base`` (see ``parse_workspace``)."""
    if raw is None:
        return WorkspaceLayer()
    obj = expect_mapping(raw, where, "an object")
    isolation = opt_str(obj, "isolation", where)
    if isolation not in (None, "shared", "per_test"):
        raise where.key("isolation").error(f"`{isolation}` is not an isolation; use shared or per_test")
    path = opt_str(obj, "path", where)
    if path is not None:
        path = str(((base or ctx.eval_dir) / Path(path).expanduser()).resolve())
    hooks_enabled, hooks = _hooks(obj.get("hooks"), where.key("hooks"), ctx, base or ctx.eval_dir)
    layer = WorkspaceLayer(
        template=_folder(obj, "template", where, ctx, base or ctx.eval_dir),
        path=path,
        isolation=isolation,
        repos=_repos(obj["repos"], where.key("repos"), ctx, base or ctx.eval_dir)
        if obj.get("repos") is not None
        else None,
        hooks_enabled=hooks_enabled,
        hooks=hooks,
        snapshot=_snapshot(obj.get("snapshot"), where.key("snapshot"), ctx)
        if obj.get("snapshot") is not None
        else None,
        file_dir=base if base is not None and base != ctx.eval_dir else None,
    )
    _check(layer, where)
    return layer


def merge_layers(suite: WorkspaceLayer, test: WorkspaceLayer) -> WorkspaceLayer:
    """A test's workspace merged into the suite's as AgentV 4.42.4 merges them (``mergeWorkspaceConfigs``,
    yaml-parser.ts:1317): each key the test gives replaces the suite's (``repos`` whole, never
    concatenated); hooks merge per hook, the test's fields over the suite's (a test's ``before_each:
    {timeout_ms}`` keeps the suite's command); ``hooks.enabled`` is the test's, else the suite's."""
    hooks = {name: {**suite.hooks.get(name, {}), **test.hooks.get(name, {})} for name in HOOK_NAMES}
    return WorkspaceLayer(
        template=test.template if test.template is not None else suite.template,
        path=test.path if test.path is not None else suite.path,
        isolation=test.isolation if test.isolation is not None else suite.isolation,
        repos=test.repos if test.repos is not None else suite.repos,
        hooks_enabled=test.hooks_enabled if test.hooks_enabled is not None else suite.hooks_enabled,
        hooks={name: fields for name, fields in hooks.items() if fields},
        snapshot=test.snapshot if test.snapshot is not None else suite.snapshot,
        file_dir=test.file_dir if test.file_dir is not None else suite.file_dir,
    )


def _check(layer: WorkspaceLayer, where: Where) -> None:
    if layer.path is None:
        return
    if layer.isolation == "per_test":
        raise where.key("path").error("a static workspace `path` cannot be combined with `isolation: per_test`")
    if layer.template:
        raise where.key("path").error("give `template` or `path`, not both")


def workspace_spec(layer: WorkspaceLayer, where: Where, ctx: ParseContext) -> WorkspaceSpec:
    """The workspace a (merged) layer describes: AgentV's defaults filled in (isolation ``shared``; a hook's
    timeout by its kind, its cwd the workspace file's folder, else the eval file's)."""
    _check(layer, where)
    hooks = []
    if layer.hooks_enabled is not False:
        for name in HOOK_NAMES:
            fields = layer.hooks.get(name)
            if not fields or ("command" not in fields and fields.get("reset", "none") == "none"):
                continue
            hooks.append(
                HookSpec(
                    name=name,
                    command=fields.get("command", []),  # `{reset: fast}` alone: a reset without a command
                    timeout_ms=fields.get("timeout_ms", default_timeout_ms(name)),
                    cwd=fields.get("cwd", str(layer.file_dir or ctx.eval_dir)),
                    reset=fields.get("reset", "none"),
                )
            )
    return WorkspaceSpec(
        template=layer.template,
        path=layer.path,
        isolation=layer.isolation or "shared",  # type: ignore[arg-type]
        repos=layer.repos or [],
        hooks=hooks,
        snapshot=layer.snapshot or SnapshotSpec(),
    )


def _folder(obj: dict[str, Any], key: str, where: Where, ctx: ParseContext, base: Path) -> str | None:
    ref = opt_str(obj, key, where)
    if ref is None:
        return None
    folder = (base / Path(ref).expanduser()).resolve()
    if not folder.is_dir():
        # A warning here: a replay parses the eval without needing the template; `run` refuses before starting.
        ctx.warn(where.key(key), f"workspace {key} `{ref}` is not a folder ({folder})")
    return str(folder)


def _hooks(raw: Any, where: Where, ctx: ParseContext, base: Path) -> tuple[bool | None, dict[str, dict[str, Any]]]:
    """``hooks.enabled`` and, per hook, the fields it gives (a command as argv, a cwd made absolute)."""
    if raw is None:
        return None, {}
    obj = expect_mapping(raw, where, "an object {before_all, before_each, after_each, after_all, enabled}")
    warn_unknown(ctx, obj, (*HOOK_NAMES, "enabled"), where)
    enabled = opt_bool(obj, "enabled", where)
    hooks: dict[str, dict[str, Any]] = {}
    for name in HOOK_NAMES:
        if obj.get(name) is None:
            continue
        at = where.key(name)
        hook = expect_mapping(obj[name], at, "an object {command, timeout_ms, cwd}")
        warn_unknown(ctx, hook, HOOK_KEYS, at)
        key = "command" if hook.get("command") is not None else "script"
        command = hook.get(key)
        reset = opt_str(hook, "reset", at)
        if reset is not None:
            if reset not in ("none", "fast", "strict"):
                raise at.key("reset").error(f"`{reset}` is not a reset; use none, fast or strict")
            if reset != "none" and name not in ("before_each", "after_each"):
                raise at.key("reset").error("`reset` applies to before_each and after_each only")
        if command is None:
            # AgentV keeps a hook without a command only for its reset (and then nothing else of it).
            if reset is None:
                ctx.warn(at, "the hook has no `command` (or `reset`); AgentV ignores it, and so does evalstore")
            else:
                hooks[name] = {"reset": reset}
            continue
        # AgentV splits a string on whitespace and runs it without a shell.
        argv = (
            command.split()
            if isinstance(command, str)
            else str_list(command, at.key(key), "a command: an argv list or a string")
        )
        if not argv:
            raise at.key(key).error("the command is empty")
        fields: dict[str, Any] = {"command": argv}
        timeout = opt_number(hook, "timeout_ms", at, low=0, low_open=True)
        if timeout is not None:
            fields["timeout_ms"] = int(timeout)
        cwd = opt_str(hook, "cwd", at)
        if cwd:
            fields["cwd"] = str((base / cwd).resolve())
        if reset is not None:
            fields["reset"] = reset
        hooks[name] = fields
    return enabled, hooks


def default_timeout_ms(hook: str) -> int:
    """AgentV's defaults: 60 s for a setup hook (``before_*``, whose failure fails the test), 30 s for a
    ``after_*`` hook (whose failure is only a warning)."""
    return 60_000 if hook.startswith("before_") else 30_000


def _repos(raw: Any, where: Where, ctx: ParseContext, base: Path) -> list[RepoSpec]:
    if raw is None:
        return []
    repos = []
    for i, item in enumerate(expect_list(raw, where, "a list of {path, repo, commit}")):
        at = where.index(i)
        obj = expect_mapping(item, at, "an object {path, repo, commit}")
        warn_unknown(ctx, obj, REPO_KEYS, at)
        path = req_str(obj, "path", at, "where in the workspace the repository goes")
        if Path(path).is_absolute() or ".." in Path(path).parts:
            raise at.key("path").error("must be a relative path inside the workspace")
        source = obj.get("repo")
        if source is None and isinstance(obj.get("source"), dict):  # {source: {type: local, path}} spelling
            src = obj["source"]
            source = src.get("path") or src.get("url")
        if not isinstance(source, str) or not source.strip():
            raise at.key("repo").error("expected the repository: a local folder or a clone URL")
        commit = opt_str(obj, "commit", at) or opt_str(obj, "base_commit", at)
        if _URL.match(source) or (_GITHUB_SHORTHAND.match(source) and not (base / source).exists()):
            url = f"https://github.com/{source}.git" if _GITHUB_SHORTHAND.match(source) else source
            repos.append(RepoSpec(path=path, repo=url, commit=commit, local=False))
            continue
        folder = (base / Path(source).expanduser()).resolve()
        if not folder.is_dir():
            ctx.warn(at.key("repo"), f"local repository `{source}` is not a folder ({folder})")
        repos.append(RepoSpec(path=path, repo=str(folder), commit=commit, local=True))
    return repos


def _snapshot(raw: Any, where: Where, ctx: ParseContext) -> SnapshotSpec:
    if raw is None:
        return SnapshotSpec()
    obj = expect_mapping(raw, where, "an object {max_bytes, max_files, exclude}")
    warn_unknown(ctx, obj, SNAPSHOT_KEYS, where)
    values: dict[str, Any] = {}
    for key in ("max_bytes", "max_files", "max_file_bytes"):
        number = opt_number(obj, key, where, low=0)
        if number is not None:
            values[key] = int(number)
    if obj.get("exclude") is not None:
        values["exclude"] = str_list(obj["exclude"], where.key("exclude"))
    return SnapshotSpec(**values)


def external_workspace(ref: str, where: Where, ctx: ParseContext) -> tuple[dict[str, Any], Where, Path]:
    """The object an external workspace file holds, where it stands, and its folder; refused, with AgentV's
    reasons, when the file is missing, not a mapping, or wraps the object in ``workspace:``."""
    path = Path(os.path.normpath(ctx.eval_dir / ref))
    if not ctx.resolver.is_file(path):
        raise where.error(f"workspace file not found: {ref} (resolved to {path})")
    ctx.reference("workspace", path, ref)
    data, lines = load_yaml(ctx.read_text(path, where), str(path), ctx.warnings)
    at = Where(str(path), lines)
    if not isinstance(data, dict):
        raise at.error(f"invalid workspace file format: {path} (expected a YAML object)")
    if isinstance(data.get("workspace"), dict) and not any(k in data for k in WORKSPACE_FILE_KEYS):
        raise at.key("workspace").error(
            "external workspace files must contain the workspace config object directly; remove the top-level "
            "`workspace:` wrapper"
        )
    return with_env(data, ctx.env), at, path.parent
