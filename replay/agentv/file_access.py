"""Which files an import may read: AgentV's resolution order, and the roots the user controls.

AgentV resolves a relative ContentFile path against the workspace path, else the target's configured
``cwd``, else the process cwd (agentv-formats §3.3). An import looks in the same places (after the
sidecar folders of the run), but reads a file only when it resolves, symlinks followed, inside a root the
user chose: the imported path, the current directory, the configured ``cwd`` of the run's target (from the
user's own targets file) and every ``--files-root``. Paths named inside the imported files
(``workspace_path``, absolute paths, ``file://`` URLs) are data, not permission: a file they point at
outside the roots is recorded as refused, with the reason and the flag that would allow it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from evalstore.replay.agentv.records import ImportedFile, ImportedTest
from evalstore.replay.errors import ReplayError
from evalstore.replay.targetsfile.loader import find_targets_file, load_targets_file

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]+://")
REFUSED_HINT = "pass --files-root DIR to allow files under DIR"


@dataclass
class FileAccess:
    roots: list[Path]
    """Resolved folders a file must be inside to be read."""
    target_cwds: dict[str, Path] = field(default_factory=dict)
    """Each target's configured ``cwd``, resolved, from the user's targets file."""
    cwd: Path = field(default_factory=Path.cwd)

    def allowed(self, real: Path) -> bool:
        return any(real.is_relative_to(root) for root in self.roots)

    def resolve(self, f: ImportedFile, workspace: str | None, target: str | None) -> ImportedFile:
        """The file re-resolved in AgentV's order, and refused when it lies outside every root."""
        found = f.resolved.resolve() if f.resolved is not None else None
        if found is None:
            found = self._find(f.path, workspace, target)
        if found is None:
            return replace(f, resolved=None)
        if not self.allowed(found):
            reason = f"{found} is outside the folders this import may read; {REFUSED_HINT}"
            return replace(f, resolved=None, refused=reason)
        return replace(f, resolved=found)

    def _find(self, ref: str, workspace: str | None, target: str | None) -> Path | None:
        if ref.startswith("file://"):
            candidates = [Path(unquote(urlparse(ref).path))]
        elif _SCHEME.match(ref):
            return None  # a remote URL: nothing to read (AgentV cannot preprocess it either)
        elif Path(ref).is_absolute():
            candidates = [Path(ref)]
        else:
            bases = [Path(workspace)] if workspace else []
            if target in self.target_cwds:
                bases.append(self.target_cwds[target])
            bases.append(self.cwd)
            candidates = [base / ref for base in bases]
        for candidate in candidates:
            try:
                real = candidate.resolve()
            except (OSError, RuntimeError):
                continue
            if real.is_file():
                return real
        return None

    def guard(self, item: ImportedTest) -> ImportedTest:
        files = [self.resolve(f, item.workspace_path, item.target) for f in item.files]
        return replace(item, files=files)


def file_access(
    imported: Path, eval_file: str | None, targets_path: Path | None, files_roots: Sequence[Path]
) -> FileAccess:
    """The roots of one import: the imported path, the cwd, the targets' configured ``cwd`` and ``--files-root``."""
    for root in files_roots:
        if not root.is_dir():
            raise ReplayError(f"{root}: not a directory (--files-root)")
    cwd = Path.cwd().resolve()
    base = imported if imported.is_dir() else imported.parent
    roots = [base.resolve(), cwd, *(r.resolve() for r in files_roots)]
    target_cwds: dict[str, Path] = {}
    if targets_path is None and eval_file:
        targets_path = find_targets_file(Path(eval_file).parent)
    if targets_path is not None:
        targets = load_targets_file(targets_path)
        eval_dir = Path(eval_file).parent if eval_file else Path(targets_path).parent
        for name, entry in targets.targets.items():
            raw = entry.fields.get("cwd")
            if isinstance(raw, str) and raw and "${{" not in raw:
                folder = Path(raw).expanduser()
                folder = (folder if folder.is_absolute() else eval_dir / folder).resolve()
                if folder.is_dir():
                    target_cwds[name] = folder
    roots.extend(target_cwds.values())
    return FileAccess(roots=roots, target_cwds=target_cwds, cwd=cwd)


class GuardedSource:
    """An import source whose results have their files resolved and checked by ``access``."""

    def __init__(self, source: Any, access: FileAccess) -> None:
        self._source = source
        self._access = access

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    def iter_tests(self, skip_bad: bool) -> Iterator[Any]:
        for item in self._source.iter_tests(skip_bad):
            yield self._access.guard(item) if isinstance(item, ImportedTest) else item
