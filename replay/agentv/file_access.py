"""Which files an import may read: where AgentV's agent wrote them, and the roots the user controls.

Where to look. AgentV resolves a relative ContentFile path against the test's workspace, else the
target's working folder, else its own working directory (agentv-formats §3.3). The working folder is the
one AgentV 4.42.4 gives the target (``targets.ts``): for a ``cli`` target, and a custom provider (which
AgentV runs as one), its ``cwd`` relative to the eval file's folder, and the eval file's folder itself
when it has no ``cwd`` (``normalizeCliTargetInput``, ``resolveDiscoveredProviderConfig``); for AgentV's
other agent providers, a ``cwd`` relative to where AgentV ran (the current directory stands in for it).
A test that runs in a workspace runs there whatever its target says (``request.cwd ?? config.cwd``). The
eval file is the one given with ``--eval``, else the one the result names where it is found (its row's
``projection_identity`` eval path, else the run's: ``benchmark.json``'s ``eval_file``, a results file's
``X.eval.yaml`` beside it), never AgentV's copy of it in the run; the targets file is ``--targets``,
else the one AgentV finds above that eval file, else AgentV's copy in the run (the row's
``targets_path``). An import looks in the same places (after the sidecar folders of the run), then in
the current directory.

What may be read. A file is read only when it resolves, symlinks followed, inside a root the user chose:
the imported path (the folder of an imported file), every ``--files-root``, and the folders that follow
from the user's own files alone: the ``cwd`` of each target of the user's targets file (``--targets``, or
the one above ``--eval``), when absolute or resolved against ``--eval``'s folder, and, for a result whose
cli target has no ``cwd``, the folder of the ``--eval`` file. A folder that follows from a path named
inside the imported files (an eval file the results name, a targets file found from it or copied into the
run, ``workspace_path``, absolute paths, ``file://`` URLs) is where to look, not permission: a file found
there outside the roots is recorded as refused, with the reason and the flag that would allow it
(``--eval FILE`` for the folder a cli target ran in for that eval file: it vouches for the suite;
``--files-root DIR`` for any folder). The current directory is where a relative path is looked for, not a
root: importing a foreign results file from one's home folder must not store ``.ssh/id_rsa`` because a
row names it (``--files-root .`` allows it when meant).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from evalstore.replay.agentv.records import ImportedFile, ImportedTest, ImportSource, SkippedLine, Span
from evalstore.replay.agentv.rows import eval_hints, resolve_path, unique_paths
from evalstore.replay.errors import ReplayError
from evalstore.replay.evalfile.specs import EvalSuite
from evalstore.replay.reply_cap import byte_cap
from evalstore.replay.targetsfile.loader import (
    USE_TARGET_REFERENCE,
    TargetsFile,
    find_targets_file,
    load_targets_file,
    runs_in_eval_folder,
)

REFUSED_HINT = "pass --files-root DIR to allow files under DIR"
MAX_FILE_BYTES_ENV = "EVALSTORE_MAX_FILE_BYTES"
DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024 * 1024
"""The largest file an import stores: what one artifact may add to the store (memory does not grow with a
file: one past a chunk is read, hashed and stored a chunk at a time, ``store/blobs.py``). A larger one is
recorded as refused, saying how to raise the cap."""


DEFAULT_MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
"""The largest JSON document an import reads whole (an Inspect ``.eval`` log's sample or header member, a
``.json`` log): parsing one takes three to four times its size in memory, and a member compresses a
thousandfold, so a log of a megabyte asked for 3 GB under the 2 GiB file cap. ``EVALSTORE_MAX_FILE_BYTES``,
when set, caps these too."""


def max_document_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The cap on one JSON document an import reads whole: ``EVALSTORE_MAX_FILE_BYTES`` when set, else
    :data:`DEFAULT_MAX_DOCUMENT_BYTES`."""
    raw = (os.environ if environ is None else environ).get(MAX_FILE_BYTES_ENV)
    return max_file_bytes(environ) if raw is not None and raw.strip() else DEFAULT_MAX_DOCUMENT_BYTES


def max_file_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The cap on one imported file: ``EVALSTORE_MAX_FILE_BYTES`` (bytes), else :data:`DEFAULT_MAX_FILE_BYTES`."""
    return byte_cap(MAX_FILE_BYTES_ENV, DEFAULT_MAX_FILE_BYTES, "the largest file to import", environ)


@dataclass(frozen=True)
class AgentFolder:
    """Where a result's agent ran: its target's working folder, as AgentV gave it."""

    path: Path
    granted: bool
    """A root for the result's files: the folder follows from the user's own files alone."""
    vouch: Path | None = None
    """The eval file whose ``--eval`` would grant the folder (for the refusal's hint), when it would."""
    default: bool = False
    """AgentV's default for a cli target without ``cwd``: the eval file's folder."""


@dataclass(frozen=True)
class _Targets:
    """A targets file a result's target is looked up in, and how far the user stands behind it."""

    file: TargetsFile
    trusted: bool
    """``--targets``, or the one above ``--eval``: the user's own."""
    vouchable: bool
    """The user's own once the result's eval file is: ``--targets``, or the one above that eval file."""


def target_folder(
    targets: TargetsFile, name: str, eval_file: Path | None, *, trusted: bool, vouchable: bool, eval_trusted: bool
) -> AgentFolder | None:
    """The working folder AgentV 4.42.4 runs target ``name`` of ``targets`` in for ``eval_file`` (outside a
    workspace), or None when it names none that exists (or AgentV would run it in its own working
    directory). ``trusted``: the targets file is the user's; ``eval_trusted``: so is ``eval_file``;
    ``vouchable``: ``--eval eval_file`` would make the targets file the user's."""
    try:
        entry = targets.select(name, os.environ)
    except ReplayError:
        return None
    cli = runs_in_eval_folder(entry.provider)
    raw = entry.fields.get("cwd")
    if isinstance(raw, str) and (reference := USE_TARGET_REFERENCE.match(raw.strip())):
        raw = os.environ.get(reference.group(1)) or ""  # AgentV's optionalEnv: unset or empty is no cwd
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        if not cli or eval_file is None:
            return None
        # AgentV's default: the eval file's folder.
        folder, granted, vouch, default = eval_file.parent, eval_trusted, None if eval_trusted else eval_file, True
    elif not isinstance(raw, str) or "${{" in raw:
        return None  # AgentV passes a reference inside a longer value on as written: no such folder
    else:
        default = False
        folder = Path(raw).expanduser()
        if folder.is_absolute():
            granted, vouch = trusted, eval_file if vouchable and not trusted else None
        elif cli and eval_file is not None:
            folder = eval_file.parent / folder
            granted = trusted and eval_trusted
            vouch = eval_file if vouchable and not granted else None
        elif cli:
            return None  # relative to an eval file not known
        else:
            # AgentV's other agents resolve it from where AgentV ran, which the import does not know.
            folder, granted, vouch = Path.cwd() / folder, False, None
    try:
        folder = folder.resolve()
        if not folder.is_dir():
            return None
    except (OSError, RuntimeError, ValueError):
        return None
    return AgentFolder(folder, granted, vouch, default)


@dataclass
class AgentFolders:
    """Each result's :class:`AgentFolder`, from its row, the run and the user's own files (module docstring)."""

    run_root: Path
    """The imported source's own files (a run folder, a bundle, a results file): an eval file or targets
    file in there is AgentV's copy, not where the agent ran."""
    run_dir: Path
    """The folder a row's relative paths are relative to."""
    run_evals: list[Path]
    """The eval files the run as a whole names (``ImportSource.eval_path_hints``)."""
    search: list[Path]
    """Where a relative eval file name is looked for (:func:`named_eval`)."""
    user_eval: Path | None
    user_targets: Path | None
    suite: EvalSuite | None
    """The suite the import grades with: which tests ran in a workspace."""
    _evals: dict[tuple[Path, ...], Path | None] = field(default_factory=dict)
    _files: dict[Path, TargetsFile | None] = field(default_factory=dict)
    _above: dict[Path, Path | None] = field(default_factory=dict)
    _folders: dict[tuple[Path, Path, bool, bool, str], AgentFolder | None] = field(default_factory=dict)
    _tests: dict[str, bool] | None = None

    def of(self, item: ImportedTest) -> AgentFolder | None:
        """Where ``item``'s agent ran outside a workspace; None when it ran in one, or no folder is known."""
        if item.workspace_path or not item.target or self._in_workspace(item.test_id):
            return None
        eval_file = self._eval_of(item)
        if eval_file is None:
            return None
        found = self._targets_of(eval_file, item)
        if found is None:
            return None
        eval_trusted = eval_file == self.user_eval
        key = (eval_file, Path(found.file.path), found.trusted, eval_trusted, item.target)
        if key not in self._folders:
            self._folders[key] = target_folder(
                found.file,
                item.target,
                eval_file,
                trusted=found.trusted,
                vouchable=found.vouchable,
                eval_trusted=eval_trusted,
            )
        return self._folders[key]

    def _in_workspace(self, test_id: str) -> bool:
        if self.suite is None:
            return False
        if self._tests is None:
            self._tests = {t.id: self.suite.workspace_for(t).configured for t in self.suite.tests}
        return self._tests.get(test_id, self.suite.workspace.configured)

    def _eval_of(self, item: ImportedTest) -> Path | None:
        """The eval file AgentV ran ``item`` for: ``--eval``, else the first the row or the run names that is
        found outside the run's own files."""
        if self.user_eval is not None:
            return self.user_eval
        names = tuple(unique_paths([*eval_hints(item.raw_row, self.run_dir), *self.run_evals]))
        if names not in self._evals:
            self._evals[names] = next(
                (
                    real
                    for name in names
                    if (found := named_eval(name, self.search)) is not None
                    and not (real := found.resolve()).is_relative_to(self.run_root)
                ),
                None,
            )
        return self._evals[names]

    def _targets_of(self, eval_file: Path, item: ImportedTest) -> _Targets | None:
        """``--targets``, else the targets file AgentV finds above ``eval_file``, else AgentV's copy in the run."""
        if self.user_targets is not None:
            loaded = self._load(self.user_targets)
            return _Targets(loaded, True, True) if loaded else None
        if eval_file not in self._above:
            self._above[eval_file] = find_targets_file(eval_file)
        above = self._above[eval_file]
        if above is not None:
            loaded = self._load(above)
            return _Targets(loaded, eval_file == self.user_eval, True) if loaded else None
        for key in ("targets_path", "providers_path"):
            named = item.raw_row.get(key)
            if isinstance(named, str) and named:
                copy = (self.run_dir / named).resolve()
                if copy.is_relative_to(self.run_root) and copy.is_file() and (loaded := self._load(copy)):
                    return _Targets(loaded, False, False)
        return None

    def _load(self, path: Path) -> TargetsFile | None:
        if path not in self._files:
            try:
                self._files[path] = load_targets_file(path)
            except ReplayError:  # not the user's concern here: a folder not known, the file looked up in the cwd
                self._files[path] = None
        return self._files[path]


def named_eval(name: Path, search: Sequence[Path]) -> Path | None:
    """The eval file a result names, where it is: an absolute name as it is, a relative one (AgentV's,
    relative to where it ran) under the first of ``search`` that has it."""
    candidates = [name] if name.is_absolute() else [base / name for base in search]
    for candidate in candidates:
        try:
            if candidate.is_file():
                return candidate
        except (OSError, ValueError):
            continue
    return None


def eval_search(imported: Path) -> list[Path]:
    """Where a relative eval file name the results give is looked for: the imported folder, the current
    folder and the folders above it."""
    base = imported if imported.is_dir() else imported.parent
    return [base, Path.cwd(), *Path.cwd().parents]


@dataclass
class FileAccess:
    roots: list[Path]
    """Resolved folders a file must be inside to be read."""
    cwd: Path = field(default_factory=Path.cwd)
    max_bytes: int = DEFAULT_MAX_FILE_BYTES
    """Larger files are refused (:func:`max_file_bytes`)."""
    user_eval: Path | None = None
    """``--eval``, resolved."""
    user_targets: Path | None = None
    """``--targets``, resolved."""
    folders: AgentFolders | None = None
    """Where each result's agent ran (:meth:`for_run`); None: only the row's workspace and the cwd."""

    def allowed(self, real: Path) -> bool:
        return any(real.is_relative_to(root) for root in self.roots)

    def allowed_eval(self, real: Path) -> bool:
        """An eval file the results name, outside the imported folder (and the files it references), may
        also lie under the current directory: AgentV names it relative to the repository it ran in, which
        one imports from. It is used only when it loads as an eval file; a file a row names as the agent's
        is not read there, nor one named by an eval file that came with the results (``_own_evals``)."""
        return self.allowed(real) or real.is_relative_to(self.cwd)

    def for_run(self, source: ImportSource, imported: Path, suite: EvalSuite | None) -> FileAccess:
        """This access, knowing where each result of ``source`` ran (graded with ``suite``)."""
        root = source.root.resolve()
        folders = AgentFolders(
            run_root=root,
            run_dir=root if root.is_dir() else root.parent,
            run_evals=list(source.eval_path_hints),
            search=eval_search(imported),
            user_eval=self.user_eval,
            user_targets=self.user_targets,
            suite=suite,
        )
        return replace(self, folders=folders)

    def resolve(self, f: ImportedFile, workspace: str | None, folder: AgentFolder | None = None) -> ImportedFile:
        """The file resolved in AgentV's order (``resolved`` is real already: symlinks followed), and refused
        when it lies outside every root."""
        found = f.resolved
        if found is None:
            found = self._find(f.path, workspace, folder)
        if found is None:
            return replace(f, resolved=None)
        inside = folder is not None and found.is_relative_to(folder.path)
        if not (self.allowed(found) or (inside and folder is not None and folder.granted)):
            vouch = folder.vouch if inside and folder is not None else None
            hint = (
                f"pass --eval {vouch} to read the folder AgentV ran the agent in for that eval file, or --files-root "
                "DIR to allow files under DIR"
                if vouch is not None
                else REFUSED_HINT
            )
            return replace(
                f,
                resolved=None,
                refused=f"{found} is outside the folders this import may read; {hint}",
                allow_with=f"--eval {vouch}" if vouch is not None else "--files-root",
            )
        try:
            size = found.stat().st_size
        except OSError:
            return replace(f, resolved=None)
        if size > self.max_bytes:
            reason = (
                f"{found} is {size} bytes, more than an import stores ({self.max_bytes}); "
                f"set {MAX_FILE_BYTES_ENV} to a larger number of bytes to import it"
            )
            return replace(f, resolved=None, refused=reason, allow_with=MAX_FILE_BYTES_ENV)
        return replace(f, resolved=found)

    def _find(self, ref: str, workspace: str | None, folder: AgentFolder | None) -> Path | None:
        bases = [Path(workspace)] if workspace else []
        if folder is not None:
            bases.append(folder.path)
        bases.append(self.cwd)
        return resolve_path(ref, bases)

    def guard(self, item: ImportedTest) -> ImportedTest:
        if not item.files:  # most results name no file: copying the result would be most of the guard's cost
            return item
        folder = self.folders.of(item) if self.folders is not None else None
        files = [self.resolve(f, item.workspace_path, folder) for f in item.files]
        return replace(item, files=files)


def file_access(
    imported: Path, eval_file: str | None, targets_path: Path | None, files_roots: Sequence[Path]
) -> FileAccess:
    """The roots of one import: the imported path, ``--files-root`` and the working folders of the user's
    own targets file (``targets_path``, else the one above ``eval_file``, the user's ``--eval``) that follow
    from the user's files alone (not the current directory, which is only where relative paths are looked
    for). :meth:`FileAccess.for_run` adds where each result ran."""
    for root in files_roots:
        if not root.is_dir():
            raise ReplayError(f"{root}: not a directory (--files-root)")
    cwd = Path.cwd().resolve()
    base = imported if imported.is_dir() else imported.parent
    roots = [base.resolve(), *(r.resolve() for r in files_roots)]
    user_eval = Path(eval_file).resolve() if eval_file else None
    user_targets = Path(targets_path).resolve() if targets_path is not None else None
    found = user_targets if user_targets is not None else (find_targets_file(user_eval) if user_eval else None)
    if found is not None:
        targets = load_targets_file(found)
        for name in targets.targets:
            folder = target_folder(targets, name, user_eval, trusted=True, vouchable=False, eval_trusted=True)
            # A cli target's default, the eval file's folder, is granted to its own results only (AgentFolders).
            if folder is not None and folder.granted and not folder.default and folder.path not in roots:
                roots.append(folder.path)
    return FileAccess(roots=roots, cwd=cwd, max_bytes=max_file_bytes(), user_eval=user_eval, user_targets=user_targets)


def guarded(source: ImportSource, access: FileAccess) -> ImportSource:
    """The same source, its results' files resolved and checked by ``access`` as they stream."""

    def iterate(skip_bad: bool, span: Span | None) -> Iterator[ImportedTest | SkippedLine]:
        for item in source.iter_tests(skip_bad, span):
            yield access.guard(item) if isinstance(item, ImportedTest) else item

    return replace(source, _iterate=iterate)
