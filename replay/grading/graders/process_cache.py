"""Reusing a recorded code-grader execution instead of running the process again.

A code grader is a function of what it is given, like a judge of its prompt: when everything the
process sees is byte-identical to a recorded execution, its recorded stdout, stderr and exit code stand
in for running it. The cache key (:func:`process_cache_key`) is the SHA-256 of:

* the argv and the digest of the script's bytes (so editing the script re-runs it);
* the stdin payload, with the private temporary folder's path written as ``$TMP`` (it differs on every
  run; the files in it are named by their digests, which the payload carries);
* the digests of files the payload only names (a long answer goes to ``output.json``);
* the working directory;
* the environment the process sees, without secret-looking variables (``*_KEY``, ``*TOKEN*``, passwords:
  the redaction rule's names) and without the shell's own bookkeeping (``_``, ``SHLVL``, ``OLDPWD``; and
  ``PWD``, which the process gets set to its working directory, already in the key: ``children.run_child``);
  evalstore's own ``EVALSTORE_*`` settings are not passed to it at all (``processes.children``).

A grader that works in a live workspace (a run, not a replay: ``workspace_path`` is set) reads files
no digest covers, so it is never reused; nor is a grader with ``cache: false``, nor anything under
``--no-cache``. Only executions that ended ``ok`` (a score was read, pass or fail) are reused: an
execution error or a timeout runs again.

Recorded as for judges: the reuse is a ``grader_called`` event of its own, ``cache_hit`` and
``reused_from`` naming the execution it reused, and the verdict is marked ``cache_hit``. The reuse index
is the ``judge_cache`` projection (every successful call with a cache key); ``process-v1`` inside the
hashed material keeps process keys apart from judge keys, and a hit is reused only for a process call.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from evalstore.replay.targetsfile.redaction import looks_secret
from evalstore.store.codec import sha256_hex
from evalstore.store.events import DomainEvent, GraderCalled

KEY_VERSION = "process-v1"
VOLATILE_ENV = frozenset(
    {"_", "SHLVL", "PWD", "OLDPWD", "PS1", "PS2", "PROMPT_COMMAND", "COLUMNS", "LINES", "TERM_SESSION_ID"}
)
"""Variables a shell changes on its own, which no grader should read: left out of the key."""
_looks_secret = lru_cache(maxsize=4096)(looks_secret)  # the same few dozen names, on every execution


def cache_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The part of a grader's environment that is in its cache key."""
    return {k: v for k, v in env.items() if k not in VOLATILE_ENV and not _looks_secret(k)}


def process_cache_key(
    *,
    argv: list[str],
    script_sha256: str | None,
    stdin: bytes,
    tmp_path: str | None,
    cwd: str | None,
    env: Mapping[str, str],
    side_files: list[str] | None = None,
) -> str:
    """The digest of everything a code-grader process is given (see the module docstring)."""
    stable_stdin = stdin
    if tmp_path:  # created only when the process gets files
        stable_stdin = stdin.replace(json.dumps(tmp_path, ensure_ascii=False)[1:-1].encode("utf-8"), b"$TMP")
    where = os.path.abspath(cwd) if cwd else os.getcwd()
    head = _material_head(tuple(argv), script_sha256, tuple(side_files or ()), where, tuple(env.items()))
    return sha256_hex(f'{head}"{sha256_hex(stable_stdin)}"}}'.encode())


def _material(
    argv: tuple[str, ...], script_sha256: str | None, side_files: tuple[str, ...], cwd: str, env: Mapping[str, str]
) -> dict[str, Any]:
    """What the key hashes, but for the stdin's digest (the one part that differs between the graders
    of a replay): its JSON has sorted keys, so ``stdin_sha256`` comes last."""
    return {
        "key": KEY_VERSION,
        "argv": list(argv),
        "script_sha256": script_sha256,
        "side_files": list(side_files),
        "cwd": cwd,
        "env": sorted(cache_environment(env).items()),
    }


@lru_cache(maxsize=256)
def _material_head(
    argv: tuple[str, ...],
    script_sha256: str | None,
    side_files: tuple[str, ...],
    cwd: str,
    env: tuple[tuple[str, str], ...],
) -> str:
    """The key's JSON (``json.dumps(..., sort_keys=True, ensure_ascii=False)``) up to the stdin digest's
    value: the same for every execution of a grader in one environment, and filtering, sorting and
    encoding the environment for each was a tenth of a replay whose executions are all reused."""
    text = json.dumps(
        {**_material(argv, script_sha256, side_files, cwd, dict(env)), "stdin_sha256": ""},
        sort_keys=True,
        ensure_ascii=False,
    )
    assert text.endswith('"stdin_sha256": ""}')  # the last key in sorted order
    return text[: -len('""}')]


def reusable_process_call(event: DomainEvent, cache_key: str) -> bool:
    """A code-grader execution whose output may stand in for running the same process on the same input."""
    return (
        isinstance(event, GraderCalled)
        and event.call == "process"
        and event.cache_key == cache_key
        and event.outcome == "ok"
        and event.reply_sha256 is not None
        and not event.cache_hit
    )
