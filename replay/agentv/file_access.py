"""Which files an import may read: AgentV's resolution order, and the roots the user controls.

AgentV resolves a relative ContentFile path against the workspace path, else the target's configured
``cwd``, else the process cwd (agentv-formats §3.3). An import looks in the same places (after the
sidecar folders of the run), but reads a file only when it resolves, symlinks followed, inside a root the
user chose: the imported path (the folder of an imported file), the configured ``cwd`` of the run's target
(from the user's own targets file) and every ``--files-root``. The current directory is where a relative
path is looked for, not a root: importing a foreign results file from one's home folder must not store
``.ssh/id_rsa`` because a row names it (``--files-root .`` allows it when meant). Paths named inside the imported files
(``workspace_path``, absolute paths, ``file://`` URLs) are data, not permission: a file they point at
outside the roots is recorded as refused, with the reason and the flag that would allow it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from evalstore.replay.agentv.records import ImportedFile, ImportedTest, ImportSource, SkippedLine, Span
from evalstore.replay.agentv.rows import resolve_path
from evalstore.replay.errors import ReplayError
from evalstore.replay.reply_cap import byte_cap
from evalstore.replay.targetsfile.loader import find_targets_file, load_targets_file

REFUSED_HINT = "pass --files-root DIR to allow files under DIR"
MAX_FILE_BYTES_ENV = "EVALSTORE_MAX_FILE_BYTES"
DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024 * 1024
"""The largest file an import stores: what one artifact may add to the store (memory does not grow with a
file: one past a chunk is read, hashed and stored a chunk at a time, ``store/blobs.py``). A larger one is
recorded as refused, saying how to raise the cap."""


DEFAULT_MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
"""The largest JSON document an import reads whole (an Inspect log's sample or header member): parsing one
takes three to four times its size in memory, and it compresses a thousandfold, so a log of a megabyte
asked for 3 GB under the 2 GiB file cap. ``EVALSTORE_MAX_FILE_BYTES``, when set, caps these too."""


def max_document_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The cap on one JSON document an import reads whole: ``EVALSTORE_MAX_FILE_BYTES`` when set, else
    :data:`DEFAULT_MAX_DOCUMENT_BYTES`."""
    raw = (os.environ if environ is None else environ).get(MAX_FILE_BYTES_ENV)
    return max_file_bytes(environ) if raw is not None and raw.strip() else DEFAULT_MAX_DOCUMENT_BYTES


def max_file_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The cap on one imported file: ``EVALSTORE_MAX_FILE_BYTES`` (bytes), else :data:`DEFAULT_MAX_FILE_BYTES`."""
    return byte_cap(MAX_FILE_BYTES_ENV, DEFAULT_MAX_FILE_BYTES, "the largest file to import", environ)


@dataclass
class FileAccess:
    roots: list[Path]
    """Resolved folders a file must be inside to be read."""
    target_cwds: dict[str, Path] = field(default_factory=dict)
    """Each target's configured ``cwd``, resolved, from the user's targets file."""
    cwd: Path = field(default_factory=Path.cwd)
    max_bytes: int = DEFAULT_MAX_FILE_BYTES
    """Larger files are refused (:func:`max_file_bytes`)."""

    def allowed(self, real: Path) -> bool:
        return any(real.is_relative_to(root) for root in self.roots)

    def allowed_eval(self, real: Path) -> bool:
        """An eval file the results name, outside the imported folder (and the files it references), may
        also lie under the current directory: AgentV names it relative to the repository it ran in, which
        one imports from. It is used only when it loads as an eval file; a file a row names as the agent's
        is not read there, nor one named by an eval file that came with the results (``_own_evals``)."""
        return self.allowed(real) or real.is_relative_to(self.cwd)

    def resolve(self, f: ImportedFile, workspace: str | None, target: str | None) -> ImportedFile:
        """The file resolved in AgentV's order (``resolved`` is real already: symlinks followed), and refused
        when it lies outside every root."""
        found = f.resolved
        if found is None:
            found = self._find(f.path, workspace, target)
        if found is None:
            return replace(f, resolved=None)
        if not self.allowed(found):
            reason = f"{found} is outside the folders this import may read; {REFUSED_HINT}"
            return replace(f, resolved=None, refused=reason)
        try:
            size = found.stat().st_size
        except OSError:
            return replace(f, resolved=None)
        if size > self.max_bytes:
            reason = (
                f"{found} is {size} bytes, more than an import stores ({self.max_bytes}); "
                f"set {MAX_FILE_BYTES_ENV} to a larger number of bytes to import it"
            )
            return replace(f, resolved=None, refused=reason)
        return replace(f, resolved=found)

    def _find(self, ref: str, workspace: str | None, target: str | None) -> Path | None:
        bases = [Path(workspace)] if workspace else []
        if target in self.target_cwds:
            bases.append(self.target_cwds[target])
        bases.append(self.cwd)
        return resolve_path(ref, bases)

    def guard(self, item: ImportedTest) -> ImportedTest:
        if not item.files:  # most results name no file: copying the result would be most of the guard's cost
            return item
        files = [self.resolve(f, item.workspace_path, item.target) for f in item.files]
        return replace(item, files=files)


def file_access(
    imported: Path, eval_file: str | None, targets_path: Path | None, files_roots: Sequence[Path]
) -> FileAccess:
    """The roots of one import: the imported path, the targets' configured ``cwd`` and ``--files-root``
    (not the current directory, which is only where relative paths are looked for)."""
    for root in files_roots:
        if not root.is_dir():
            raise ReplayError(f"{root}: not a directory (--files-root)")
    cwd = Path.cwd().resolve()
    base = imported if imported.is_dir() else imported.parent
    roots = [base.resolve(), *(r.resolve() for r in files_roots)]
    target_cwds: dict[str, Path] = {}
    if targets_path is None and eval_file:
        targets_path = find_targets_file(eval_file)
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
    return FileAccess(roots=roots, target_cwds=target_cwds, cwd=cwd, max_bytes=max_file_bytes())


def guarded(source: ImportSource, access: FileAccess) -> ImportSource:
    """The same source, its results' files resolved and checked by ``access`` as they stream."""

    def iterate(skip_bad: bool, span: Span | None) -> Iterator[ImportedTest | SkippedLine]:
        for item in source.iter_tests(skip_bad, span):
            yield access.guard(item) if isinstance(item, ImportedTest) else item

    return replace(source, _iterate=iterate)
