"""The suite's ``workspace`` block: template, path, isolation, repos, hooks and snapshot limits.

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
    base = base or ctx.eval_dir
    obj = expect_mapping(raw, where, "an object")
    isolation = opt_str(obj, "isolation", where) or "shared"
    if isolation not in ("shared", "per_test"):
        raise where.key("isolation").error(f"`{isolation}` is not an isolation; use shared or per_test")
    template = _folder(obj, "template", where, ctx, base)
    path = opt_str(obj, "path", where)
    if path is not None:
        path = str((base / Path(path).expanduser()).resolve())
        if isolation == "per_test":
            raise where.key("path").error("a static workspace `path` cannot be combined with `isolation: per_test`")
        if template:
            raise where.key("path").error("give `template` or `path`, not both")
    return WorkspaceSpec(
        template=template,
        path=path,
        isolation=isolation,  # type: ignore[arg-type]
        repos=_repos(obj.get("repos"), where.key("repos"), ctx, base),
        hooks=_hooks(obj.get("hooks"), where.key("hooks"), ctx, base),
        snapshot=_snapshot(obj.get("snapshot"), where.key("snapshot"), ctx),
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


def _hooks(raw: Any, where: Where, ctx: ParseContext, base: Path) -> list[HookSpec]:
    if raw is None:
        return []
    obj = expect_mapping(raw, where, "an object {before_all, before_each, after_each, after_all, enabled}")
    warn_unknown(ctx, obj, (*HOOK_NAMES, "enabled"), where)
    if opt_bool(obj, "enabled", where) is False:
        return []
    hooks = []
    for name in HOOK_NAMES:
        if obj.get(name) is None:
            continue
        at = where.key(name)
        hook = expect_mapping(obj[name], at, "an object {command, timeout_ms, cwd}")
        warn_unknown(ctx, hook, HOOK_KEYS, at)
        key = "command" if hook.get("command") is not None else "script"
        command = hook.get(key)
        if command is None and hook.get("reset") not in (None, "none"):
            argv: list[str] = []  # `{reset: fast}` alone: a reset without a command, as AgentV allows
        elif isinstance(command, str):
            # AgentV splits a string on whitespace and runs it without a shell.
            argv = command.split()
            if not argv:
                raise at.key(key).error("the command is empty")
        else:
            argv = str_list(command, at.key(key), "a command: an argv list or a string")
            if not argv:
                raise at.key(key).error("the command is empty")
        timeout = opt_number(hook, "timeout_ms", at, low=0, low_open=True)
        cwd = opt_str(hook, "cwd", at)
        reset = opt_str(hook, "reset", at) or "none"
        if reset not in ("none", "fast", "strict"):
            raise at.key("reset").error(f"`{reset}` is not a reset; use none, fast or strict")
        if reset != "none" and name not in ("before_each", "after_each"):
            raise at.key("reset").error("`reset` applies to before_each and after_each only")
        hooks.append(
            HookSpec(
                name=name,
                command=argv,
                timeout_ms=int(timeout) if timeout is not None else default_timeout_ms(name),
                cwd=str((base / cwd).resolve()) if cwd else str(base),
                reset=reset,  # type: ignore[arg-type]
            )
        )
    return hooks


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
