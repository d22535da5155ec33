"""Eval snapshots: the bytes of an eval file and every file it references, kept with the run.

A run can then be regraded after those files change, and :func:`drift` says which ones did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.evalfile.search_roots import FileResolver, SnapshotResolver
from evalstore.replay.evalfile.specs import EvalSuite
from evalstore.replay.evalfile.union import union_suite
from evalstore.store.codec import sha256_hex
from evalstore.store.events import FileSnapshot


def snapshot_suite(
    suite: EvalSuite, read_from: Mapping[str, str] | None = None
) -> tuple[list[FileSnapshot], dict[str, bytes]]:
    """Snapshots of the eval file and its referenced files, and the blobs holding their bytes; ``read_from``
    maps a path to where its bytes are now (a file gone from disk, restored elsewhere for a replay)."""
    files: list[tuple[str, str, str | None]] = [("eval", suite.path, None), *suite.referenced_files]
    snaps: list[FileSnapshot] = []
    blobs: dict[str, bytes] = {}
    seen: set[tuple[str, str]] = set()
    for role, path, ref in files:
        if (role, path) in seen:
            continue
        seen.add((role, path))
        try:
            data = Path((read_from or {}).get(path, path)).read_bytes()
        except OSError:
            snaps.append(FileSnapshot(role=role, path=path, ref=ref, sha256=None))
            continue
        digest = sha256_hex(data)
        blobs[digest] = data
        snaps.append(FileSnapshot(role=role, path=path, ref=ref, sha256=digest, size=len(data)))
    return snaps, blobs


def snapshot_eval(
    snapshot: Sequence[FileSnapshot],
    read_blob: Callable[[str], bytes],
    *,
    fallback: FileResolver | None = None,
    run_tests: Callable[[], Sequence[dict[str, Any]]] | None = None,
) -> EvalSuite | None:
    """The suite a run's eval snapshot holds, parsed from the recorded bytes (``read_blob``: a blob by
    digest): the union of its eval files (``evalfile/union.py``: a plain import may snapshot several).
    None when the snapshot holds no eval file (an import without its eval). ``fallback`` answers for
    the files the snapshot does not hold (a replay takes them from the disk; a reader does not);
    ``run_tests`` as :func:`~evalstore.replay.evalfile.parser.load_eval_text` takes it."""
    evals = [s for s in snapshot if s.role == "eval" and s.sha256]
    if not evals:
        return None
    files = {s.path: read_blob(s.sha256) for s in snapshot if s.sha256}
    resolver = SnapshotResolver(files, fallback=fallback)
    return union_suite([load_eval(s.path, file_resolver=resolver, run_tests=run_tests) for s in evals])


@dataclass(frozen=True)
class Drift:
    role: str
    path: str
    recorded: str | None
    current: str | None
    restored: bool = False
    """Gone, and run from the bytes the run recorded (``replay/restored.py``)."""

    def describe(self) -> str:
        if self.current is None and self.restored:
            return (
                f"{self.role} {self.path} is gone: run from the bytes recorded with the run ({str(self.recorded)[:12]})"
            )
        if self.current is None:
            return f"{self.role} {self.path} is gone (recorded {str(self.recorded)[:12]})"
        if self.recorded is None:
            return f"{self.role} {self.path} was unreadable when the run was recorded"
        return (
            f"{self.role} {self.path} changed since the run was recorded ({self.recorded[:12]} -> {self.current[:12]})"
        )


def drift(
    snapshot: list[FileSnapshot], roles: tuple[str, ...] = ("grader_script", "converter", "prompt")
) -> list[Drift]:
    """Files of the given roles whose bytes on disk differ from the snapshot."""
    out = []
    for snap in snapshot:
        if snap.role not in roles:
            continue
        try:
            current: str | None = sha256_hex(Path(snap.path).read_bytes())
        except OSError:
            current = None
        if current != snap.sha256:
            out.append(Drift(snap.role, snap.path, snap.sha256, current))
    return out
