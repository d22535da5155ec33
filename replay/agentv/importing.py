"""``evalstore import``: AgentV results into the store as an imported run.

One pass over the source: it validates (a bad line aborts before anything is written, unless
``skip_bad``), building and encoding every result into a temporary spool; then the spool streams into
the store in batches. Memory stays flat: the
readers stream, and a batch is flushed by test count or by bytes. The run id and every event id are
derived from the source's digest, so importing the same bundle twice gives the same run, and an
import killed half-way finishes when run again.

Files the results name that the import may not read (``file_access``) are recorded as refused, and the
import says how many and what would let it read them. An imported run does not change: importing the same
source again with what lets it read files the run refused (``--eval``, ``--files-root``, ``--targets``)
writes a new run, whose id is derived from the source's digest and those files
(:func:`_with_refused_files`), so that import too is the same run each time it is made.
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evalstore import __version__
from evalstore.replay.agentv import ImportedTest, detect_format, read_results
from evalstore.replay.agentv.file_access import (
    MAX_FILE_BYTES_ENV,
    FileAccess,
    eval_search,
    file_access,
    guarded,
    named_eval,
)
from evalstore.replay.agentv.import_check import SUPERSEDED_BY, Checked, check
from evalstore.replay.agentv.import_events import EventIds, RelativeSources
from evalstore.replay.agentv.import_mask import import_mask, masked
from evalstore.replay.agentv.import_write import write_spool
from evalstore.replay.agentv.records import ImportSource
from evalstore.replay.agentv.rows import unique_paths
from evalstore.replay.agentv.sidecars import real_path
from evalstore.replay.errors import ReplayError
from evalstore.replay.evalfile.parser import DEFAULT_THRESHOLD, EVAL_SUFFIXES, load_eval
from evalstore.replay.evalfile.snapshot import snapshot_suite
from evalstore.replay.evalfile.specs import EvalSuite
from evalstore.replay.evalfile.union import covered, union_suite
from evalstore.replay.lost_inputs import workspace_graders
from evalstore.store import EventStore, NewEvent, StoreOrOpener, completed_run, opened
from evalstore.store.events import ArtifactStored, FileSnapshot, LineSkipped, RunStarted, SourceRef

if TYPE_CHECKING:
    from evalstore.replay.targetsfile.redaction import SecretMask

Progress = Callable[[str, int, "int | None"], None]
"""``progress(phase, done, total)``: see :func:`import_results`."""


@dataclass
class ImportOutcome:
    run_id: str
    format: str
    tests: int
    skipped: int
    already_imported: bool
    eval_path: str | None
    warnings: list[str] = field(default_factory=list)
    """What the import left out of results it kept, and why (the first ``import_check.WARNINGS_KEPT``),
    after the eval files the results name that it did not use, and why."""
    warning_count: int = 0
    superseded: int = 0
    """Of ``skipped``, the results a later row of the same test, target and attempt replaced (not bad lines)."""
    evals_not_used: int = 0
    """Eval files the results name, or that came with them, left unused: the first ``warnings`` say why."""
    refused: int = 0
    """Files the results name that the run recorded as refused (they exist, and were not read): a replay
    grades without them. One of ``warnings`` says what would let an import read them."""
    reimport_of: str | None = None
    """The run imported before from the same source, some of whose refused files this run stores."""
    refused_now_stored: int = 0
    """How many of ``reimport_of``'s refused files this run stores."""


def import_results(
    store: StoreOrOpener,
    path: str | Path,
    *,
    eval_path: str | Path | None = None,
    skip_bad: bool = False,
    progress: Progress | None = None,
    targets_path: str | Path | None = None,
    files_roots: Sequence[str | Path] = (),
) -> ImportOutcome:
    """Import AgentV results at ``path`` as a run. ``progress(phase, done, total)`` is called as results are
    checked (phase ``"checking"``, total unknown) and then written (``"importing"``, total known). Given an
    opener (no store yet), the store is opened once the source is checked.

    A source imported before is not imported again, unless this import reads files the run made then
    recorded as refused (given ``eval_path``, ``targets_path`` or ``files_roots``): then it is a new run
    (:func:`_with_refused_files`)."""
    path = Path(path)
    fmt, source, run_id = _opened(path, eval_path)
    if (before := completed_run(store, run_id)) is None:
        with _heap_frozen():
            plan = _plan(path, source, eval_path, targets_path, files_roots)
            prepared = _prepared(path, plan, run_id, skip_bad, progress)
            return _imported(opened(store), path, fmt, run_id, prepared, progress)
    store = opened(store)  # the store that holds it
    earlier = _earlier_import(store, run_id)
    widened = bool(eval_path or targets_path or files_roots)
    if earlier.refused and widened:
        with _heap_frozen():
            plan = _plan(path, source, eval_path, targets_path, files_roots)
            now_read = _now_read(plan, earlier.refused)
            if now_read:
                again = _with_refused_files(source.source_digest, now_read)
                if (before_again := completed_run(store, again)) is None:
                    prepared = _prepared(path, plan, again, skip_bad, progress)
                    outcome = _imported(store, path, fmt, again, prepared, progress)
                    outcome.reimport_of, outcome.refused_now_stored = run_id, len(now_read)
                    return outcome
                return _already(store, fmt, again, before_again, _earlier_import(store, again), widened)
    return _already(store, fmt, run_id, before, earlier, widened)


@dataclass
class _Earlier:
    """What an import made before recorded of its source: the lines it left out, the files it refused."""

    skipped: int = 0
    superseded: int = 0
    refused: list[ArtifactStored] = field(default_factory=list)


def _earlier_import(store: EventStore, run_id: str) -> _Earlier:
    """The lines a run imported before left out and the files it refused, in one read of its stream."""
    earlier = _Earlier()
    for stored in store.read_stream(run_id, types=["line_skipped", "artifact_stored"]):
        ev = stored.event
        if isinstance(ev, LineSkipped):
            earlier.skipped += 1
            earlier.superseded += ev.reason.startswith(SUPERSEDED_BY)
        elif isinstance(ev, ArtifactStored) and ev.status == "refused":
            earlier.refused.append(ev)
    return earlier


def _already(
    store: EventStore, fmt: str, run_id: str, before: Mapping, earlier: _Earlier, widened: bool
) -> ImportOutcome:
    """The outcome of importing again a source already imported as ``run_id``: nothing written. A file the
    run refused is said, with how a new run would store it."""
    tests = len(store.query("results", run_id=run_id))
    outcome = ImportOutcome(
        run_id, fmt, tests, earlier.skipped, True, before["eval_path"], superseded=earlier.superseded
    )
    if earlier.refused:
        n = len(earlier.refused)
        files, them = (
            (f"{n} file its results name was", "it") if n == 1 else (f"{n} files its results name were", "them")
        )
        how = (
            f"and {'it still is' if n == 1 else 'they still are'} with the options given"
            if widened
            else f"and an imported run does not change: importing the results again with what lets the import "
            f"read {them} writes a new run that stores {them}"
        )
        first = earlier.refused[0]
        outcome.warnings.append(f"{files} refused when it was imported, {how} ({first.path}: {first.reason})")
        outcome.warning_count = 1
        outcome.refused = n
    return outcome


_RefusedKey = tuple[str, str, int, str]
"""A file a result names, as the run records it: (test id, target or "", attempt, path as the agent gave it)."""


def _refused_key(test_id: str, target: str | None, attempt: int, path: str) -> _RefusedKey:
    return (test_id, target or "", attempt, path)


def _now_read(plan: _Plan, refused: list[ArtifactStored]) -> list[_RefusedKey]:
    """The files a run imported before refused that this import would read (one pass over the results,
    building nothing; masked as the run recorded them)."""
    wanted = {_refused_key(a.test_id, a.target, a.attempt, a.path) for a in refused}
    found: set[_RefusedKey] = set()
    for item in plan.source.iter_tests(True, None):
        if not isinstance(item, ImportedTest) or not item.files:
            continue
        item = masked(item, plan.mask) if plan.mask else item
        assert isinstance(item, ImportedTest)
        for f in item.files:
            key = _refused_key(item.test_id, item.target, item.attempt, f.path)
            if f.resolved is not None and key in wanted:
                found.add(key)
    return sorted(found)


def _with_refused_files(source_digest: str, now_read: list[_RefusedKey]) -> str:
    """The id of a source's import that stores files its first import refused: the source's digest and
    those files, so the same import made again is the same run."""
    text = json.dumps([source_digest, now_read], ensure_ascii=False)
    return f"imp-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def refused_warning(refused: Mapping[str, int], run_id: str | None = None) -> str | None:
    """One line on the files an import refused (``Checked.refused``), and what lets it read them; None when
    it refused none. ``run_id``: the run that recorded them (an import's, not ``validate``'s)."""
    total = sum(refused.values())
    if not total:
        return None
    them = "it" if total == 1 else "them"
    evals = sorted({a.removeprefix("--eval ") for a in refused if a.startswith("--eval ")})
    if len(evals) == 1:
        reads = f"pass --eval {evals[0]} (AgentV ran the agent in its folder) or --files-root DIR"
    else:
        reads = (
            "pass --eval FILE (the eval file they came from) or --files-root DIR" if evals else "pass --files-root DIR"
        )
    kinds = [
        (n, what, how)
        for n, what, how in (
            (total - refused.get(MAX_FILE_BYTES_ENV, 0), "outside the folders this import may read", reads),
            (refused.get(MAX_FILE_BYTES_ENV, 0), "larger than an import stores", f"raise {MAX_FILE_BYTES_ENV}"),
        )
        if n
    ]
    files = "1 file the results name was" if total == 1 else f"{total} files the results name were"
    if len(kinds) == 1:
        line = f"{files} refused ({kinds[0][1]}), and a replay grades without {them}: {kinds[0][2]}"
    else:
        line = f"{files} refused, and a replay grades without {them}: " + "; ".join(
            f"{n} {what}: {how}" for n, what, how in kinds
        )
    if run_id is None:
        return line
    return (
        f"{line} (importing the results again so writes a new run that stores {them}; "
        f"`evalstore audit {run_id} TEST` says why for each)"
    )


@contextmanager
def _heap_frozen() -> Iterator[None]:
    """The objects that exist when an import starts (modules, schemas, the store: some 60,000, all
    outliving it) frozen out of the cyclic garbage collector's passes while it runs, then returned to
    it (unless the caller had frozen some: ``evalstore``'s own process freezes its imports and never
    thaws them). Every few hundred results the collector's oldest generation was passed over whole,
    freeing nothing: some 0.6 s of a 20,000-row import's main process (bench/import.py), and each pass
    holds the GIL that the writing pass's inserts share. Forked workers inherit the frozen heap, and
    do not copy the pages a pass over it would have written."""
    was_frozen = gc.get_freeze_count()
    gc.freeze()
    try:
        yield
    finally:
        if not was_frozen:
            gc.unfreeze()


def _imported(
    store: EventStore, path: Path, fmt: str, run_id: str, prepared: _Prepared, progress: Progress | None
) -> ImportOutcome:
    """The writing pass over what :func:`_prepared` checked and spooled."""
    checked, plan = prepared.checked, prepared.plan
    assert checked.spool is not None
    try:
        outcome = _write(store, checked, path, fmt, run_id, plan, prepared.root, progress)
    finally:
        checked.spool.close()
    # The eval's own warnings (an ignored `execution.threshold`) are said as `run` and `replay` say them.
    notes = [
        *plan.secret_notes,
        *plan.eval_notes,
        *plan.eval_warnings,
        *_workspace_notes(plan, checked),
        *filter(None, [plan.source.unfinished(checked.tests)]),
    ]
    if refused := refused_warning(checked.refused, run_id):
        notes.append(refused)
    outcome.warnings[:0] = notes
    outcome.warning_count += len(notes)
    outcome.evals_not_used = len(plan.eval_notes)
    outcome.refused = sum(checked.refused.values())
    return outcome


@dataclass
class ImportCheck:
    """What an import of a path would bring in, found with no store (``evalstore validate``)."""

    format: str
    tests: int
    skipped: int
    eval_path: str | None
    warnings: list[str] = field(default_factory=list)


def check_import(
    path: str | Path,
    *,
    eval_path: str | Path | None = None,
    skip_bad: bool = False,
    targets_path: str | Path | None = None,
    files_roots: Sequence[str | Path] = (),
) -> ImportCheck:
    """The import's validation pass on ``path`` with nothing written and no store: every result built and
    encoded as :func:`import_results` would, so a bad line raises here as it would there."""
    path = Path(path)
    fmt, source, run_id = _opened(path, eval_path)
    plan = _plan(path, source, eval_path, targets_path, files_roots)
    checked = _prepared(path, plan, run_id, skip_bad, None).checked
    if checked.spool is not None:
        checked.spool.close()
    refused = refused_warning(checked.refused)
    warnings = [
        *plan.secret_notes,
        *plan.eval_notes,
        *_workspace_notes(plan, checked),
        *filter(None, [plan.source.unfinished(checked.tests)]),
        *([refused] if refused else []),
        *checked.warnings,
    ]
    return ImportCheck(fmt, checked.tests, checked.skipped, plan.eval_file, warnings)


def _opened(path: Path, eval_path: str | Path | None) -> tuple[str, ImportSource, str]:
    """The format, reader and run id of the results at ``path``, after the checks on the paths given."""
    if not path.exists():
        raise ReplayError(f"{path}: no such file or directory")
    if eval_path and not Path(eval_path).is_file():
        what = "not a regular file" if Path(eval_path).exists() else "eval file not found"
        raise ReplayError(f"{eval_path}: {what} (--eval)")
    real_path.cache_clear()  # paths are resolved once per import (a symlink may have moved since the last)
    fmt = detect_format(path)
    source = read_results(path, fmt)
    return fmt, source, f"imp-{source.source_digest[:16]}"


@dataclass
class _Plan:
    """What an import reads, found before anything is built: the eval snapshot, the mask, and the source
    with each result's files resolved and checked as it streams."""

    source: ImportSource
    eval_file: str | None
    snapshot: list[FileSnapshot]
    blobs: dict[str, bytes]
    threshold: float
    eval_notes: list[str]
    eval_warnings: list[str]
    mask: SecretMask
    secret_notes: list[str]
    """Secret-looking variables the run's targets file refers to that are unset here: not masked."""
    workspace_tests: dict[str, list[str]]
    """The suite's tests that run in a workspace, with their graders that work in it (:func:`in_workspaces`)."""


def _plan(  # type: ignore[no-untyped-def]
    path: Path, source: ImportSource, eval_path, targets_path, files_roots
) -> _Plan:
    """The eval snapshot, the mask and the files the import may read."""
    if targets_path is not None and not Path(targets_path).is_file():
        raise ReplayError(f"{targets_path}: targets file not found (--targets)")
    # Only the user's own files widen what may be read: the targets file named, or the one above --eval.
    user_eval = str(eval_path) if eval_path else None
    access = file_access(path, user_eval, Path(targets_path) if targets_path else None, [Path(r) for r in files_roots])
    suite, snapshot, blobs, eval_notes = _eval_snapshot(eval_path, source, path, access)
    eval_file = suite.path if suite else None
    threshold = suite.threshold if suite else DEFAULT_THRESHOLD
    eval_warnings = list(suite.warnings) if suite else []
    mask, secret_notes = import_mask(eval_file, targets_path)
    # Where each result's agent ran (its target's working folder for its eval file) is known once the suite is.
    source = guarded(source, access.for_run(source, path, suite))
    workspaces = in_workspaces(suite) if suite else {}
    return _Plan(
        source, eval_file, snapshot, blobs, threshold, eval_notes, eval_warnings, mask, secret_notes, workspaces
    )


@dataclass
class _Prepared:
    checked: Checked
    plan: _Plan
    root: str


def _prepared(path: Path, plan: _Plan, run_id: str, skip_bad: bool, progress: Progress | None) -> _Prepared:
    """The validation pass: everything an import does before it writes. A source with no result to import is
    refused here."""
    root = str(path.resolve())
    within = RelativeSources(root)
    # The validation pass builds and encodes every result once, with the run's event ids (the run's
    # first event, run_started, takes id 1), and keeps it for the writing pass: raises on the first bad line.
    checked = check(
        plan.source,
        within,
        skip_bad,
        progress,
        ids=EventIds(run_id, n=1),
        threshold=plan.threshold,
        mask=plan.mask,
        watch=frozenset(plan.workspace_tests),
    )
    if checked.tests == 0:  # refused before a store is opened (or made)
        if checked.spool is not None:
            checked.spool.close()
        raise _no_results(path, checked.skipped)
    return _Prepared(checked, plan, root)


def _write(
    store: EventStore,
    checked: Checked,
    path: Path,
    fmt: str,
    run_id: str,
    plan: _Plan,
    root: str,
    progress: Progress | None,
) -> ImportOutcome:
    """The writing pass: the checked results appended in batches, as the validation pass encoded them."""
    tests, skipped = checked.tests, checked.skipped

    started = RunStarted(
        run_id=run_id,
        kind="imported",
        suite=plan.source.suite,
        eval_path=plan.eval_file,
        eval_snapshot=plan.snapshot,
        threshold=plan.threshold,
        source=SourceRef(file=root),
        source_format=fmt,
        source_started_at=checked.started_at,
        source_status="interrupted" if plan.source.unfinished(tests) else None,
        tool_version=__version__,
    )
    ids = EventIds(run_id)
    store.append(run_id, [NewEvent(started, ids.next("started"))], blobs=plan.blobs)
    assert checked.spool is not None
    write_spool(store, run_id, checked.spool, ids, tests=tests, left_out=checked.left_out, progress=progress)
    return ImportOutcome(
        run_id,
        fmt,
        tests,
        skipped,
        False,
        plan.eval_file,
        warnings=checked.warnings,
        warning_count=checked.warning_count,
        superseded=checked.superseded,
    )


def in_workspaces(suite: EvalSuite) -> dict[str, list[str]]:
    """The tests of ``suite`` that run in a workspace, each with its graders that work in it
    (``lost_inputs.workspace_graders``), named as their verdicts are; tests with none left out."""
    return {test.id: list(graders) for test in suite.tests if (graders := workspace_graders(suite, test))}


def _unsnapshotted(tests: dict[str, list[str]]) -> list[str]:
    """The import's warning for results that ran in a workspace with graders working in it: AgentV's results
    keep no snapshot of it, so a replay cannot run those graders (``lost_inputs``)."""
    if not tests:
        return []
    ids = sorted(tests)
    shown = ", ".join(ids[:20]) + (f", and {len(ids) - 20} more" if len(ids) > 20 else "")
    graders = sorted({name for names in tests.values() for name in names})
    many = len(ids) > 1
    return [
        f"{len(ids)} test{'s' if many else ''} ({shown}) ran in a workspace, of which AgentV's results keep no "
        f"snapshot: a replay of this run cannot run {'their' if many else 'its'} graders that work in it "
        f"({', '.join(graders)}), which takes a run recorded with `evalstore run` (it snapshots each test's "
        "workspace); a replay that leaves such a grader unchanged carries its recorded verdict over, one that "
        "changes it records an execution error"
    ]


def _workspace_notes(plan: _Plan, checked: Checked) -> list[str]:
    """The import's warning for the results it holds that ran in a workspace (:func:`_unsnapshotted`)."""
    return _unsnapshotted({t: plan.workspace_tests[t] for t in checked.watched})


def _no_results(path: Path, skipped: int) -> ReplayError:
    if skipped:
        return ReplayError(
            f"{path}: no results to import: all {skipped} line(s) were left out as bad "
            "(without --skip-bad, the first is named with why)"
        )
    return ReplayError(
        f"{path}: no results to import: it holds no result rows (give the results `agentv eval` wrote: "
        "a run folder, its index.jsonl, or a results JSONL)"
    )


def _eval_snapshot(
    eval_path: str | Path | None, source: ImportSource, imported: Path, access: FileAccess
) -> tuple[EvalSuite | None, list[FileSnapshot], dict[str, bytes], list[str]]:
    """The suite the run is graded with, its snapshot, and notes on eval files the results name that were
    not used: ``--eval`` when given, else the union of the results' own eval files (:func:`_own_evals`)."""
    if eval_path:  # the user's: theirs, wherever it is
        suite = load_eval(eval_path)
        snaps, blobs = snapshot_suite(suite)
        return suite, snaps, blobs, []
    parts, notes = _own_evals(source, imported, access)
    if not parts:
        return None, [], {}, notes
    suite = union_suite(parts)
    snaps, blobs = snapshot_suite(suite)
    return suite, snaps, blobs, notes


def _own_evals(source: ImportSource, imported: Path, access: FileAccess) -> tuple[list[EvalSuite], list[str]]:
    """Every result's own eval file: the eval file AgentV ran, when it is readable, else the test's bundled
    copy in the run (``task/EVAL.yaml``, a v5 case's ``test/EVAL.yaml``). A run may cover several eval
    files, and each test has its own copy: the suite is their union, so a replay regrades every test.

    An eval file the results name is data, as any path in them: it is used only when it and every file it
    references lie inside the folders the import may read (``access``). A relative name is AgentV's,
    relative to the repository it ran in: looked for under the imported folder, the current folder and
    the folders above it."""
    root = source.root.resolve()
    rows = list(source.result_eval_hints()) if source.result_eval_hints else [(None, source.eval_path_hints)]
    named = [*source.eval_path_hints, *(hint for _, hints in rows for hint in hints)]
    ran = {test_id for test_id, _ in rows if test_id is not None}
    parts: list[EvalSuite] = []
    notes: list[str] = []
    unloadable: list[str] = []
    used: set[Path] = set()

    def use(candidate: Path, check: bool) -> None:
        real = candidate.resolve()
        if real in used:
            return
        used.add(real)
        if check and not access.allowed_eval(real):
            notes.append(_not_used(candidate, candidate))
            return
        # An eval file found in the current folder's tree, outside the imported folder, is the repository's
        # AgentV ran in, and may name files there; one that came with the results (beside a results file,
        # or the run's copy of a test's eval) is data as they are, and may name no file outside the folders
        # the import may read.
        came_with = not check or access.allowed(real)
        if not came_with and not real.name.lower().endswith(EVAL_SUFFIXES):
            # A name the results chose, outside what was imported: not read unless it can be an eval file.
            notes.append(f"{_eval_named(candidate, came_with)} was not used: an eval file is YAML (.yaml, .yml)")
            return
        try:
            suite = load_eval(candidate)
        except ReplayError as exc:
            if not check and not unloadable:  # the run's own copy: say why its test cannot be regraded
                unloadable.append(f"the run's copy of a test's eval, {candidate}, was not used: {exc}")
            elif check and came_with:
                notes.append(f"{_eval_named(candidate, came_with)} was not used: {exc}")
            elif check:
                # Not the import's own data: why it fails to load may quote the file, which the results chose.
                notes.append(
                    f"{_eval_named(candidate, came_with)} was not used: it does not load as an eval file "
                    f"(`evalstore validate {candidate}` says why)"
                )
            return
        allowed = access.allowed if came_with else access.allowed_eval
        outside = [p for _, p, _ in suite.referenced_files if not allowed(Path(p).resolve())]
        if outside:
            notes.append(_not_used(candidate, Path(outside[0]), came_with=came_with))
            return
        ids = {t.id for t in suite.tests}
        if ran:  # of use only for tests of the run
            ids &= ran
        if ids - covered(parts) or (not parts and not ran):
            parts.append(suite)

    search = eval_search(imported)
    for hint in unique_paths(named):
        found = named_eval(hint, search)
        if found is not None and not found.resolve().is_relative_to(root):
            use(found, check=True)
    for test_id, hints in rows:
        if test_id is not None and test_id in covered(parts):
            continue
        for hint in hints:
            bundled = hint if hint.is_absolute() else root / hint
            if bundled.is_file() and bundled.resolve().is_relative_to(root):
                use(bundled, check=False)  # the run's own file, read like its other files
    return parts, notes + unloadable


def _eval_named(eval_file: Path, came_with: bool) -> str:
    return f"eval file {eval_file}, {'which came with the results' if came_with else 'named by the results'},"


def _not_used(eval_file: Path, outside: Path, *, came_with: bool = False) -> str:
    what = "it is" if outside == eval_file else f"it names {outside}, which is"
    return (
        f"{_eval_named(eval_file, came_with)} was not used: {what} outside the folders this import may read; "
        f"pass --eval {eval_file} if you trust it"
    )
