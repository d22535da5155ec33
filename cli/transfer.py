"""``evalstore import PATH`` (AgentV results in) and ``evalstore export RUN`` (results out)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

import click

from evalstore.cli.attest import checkpoint_option
from evalstore.cli.context import complete_run_id, open_reader, open_store, store_or_opener
from evalstore.cli.errors import finish_with, handle_errors
from evalstore.cli.files import replacing, unwritable
from evalstore.cli.output import echo, json_option, no_cycle_collection, note, plural, print_json, progress_bar
from evalstore.replay.choices import EXPORT_FORMATS

if TYPE_CHECKING:
    from evalstore.replay.agentv.importing import ImportOutcome


@click.command(name="import")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--eval",
    "eval_path",
    type=click.Path(path_type=Path),
    help="The eval file the results came from (default: the one the results name, when it and the files it "
    "references are inside the folders the import may read); the agent's files may be read from its folder "
    "when a cli target without cwd ran there.",
)
@click.option("--skip-bad", is_flag=True, help="Record malformed lines as skipped instead of aborting.")
@click.option(
    "--targets",
    "targets_path",
    type=click.Path(path_type=Path),
    help="Targets file whose target cwd: files may be read from (default: the one above --eval), and whose "
    "targets' secrets are masked wherever the results echo them (default: the one above the eval used, else "
    "the run's bundled task/targets.yaml).",
)
@click.option(
    "--files-root",
    "files_roots",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A folder the agent's files may be read from (repeatable); besides PATH's folder, the target's cwd and "
    "--eval's folder (the current directory only when named: --files-root .).",
)
@json_option
@checkpoint_option
@click.pass_context
@handle_errors
def import_(
    ctx: click.Context,
    path: Path,
    eval_path: Path | None,
    skip_bad: bool,
    targets_path: Path | None,
    files_roots: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Import AgentV results (a v4 run directory, a v5-next bundle, a results JSONL), Inspect AI logs, or an evalstore bundle.

    An Inspect AI log (.eval or .json, or a folder of them: one run per log) needs the inspect extra
    (pip install 'evalstore[inspect]'): each sample and epoch is a result, each score a verdict
    (C 1, P 0.5, I 0; a dict value one verdict per key, SCORER/KEY), each edit of a score an event
    (evalstore audit shows who made it and why).

    A folder written by evalstore export RUN --format bundle is imported as it was (same event ids,
    payloads and blobs), checked whole first. Importing the same results twice gives the same run. A malformed line aborts the import with its
    file and line number and nothing is written, unless --skip-bad. Files the agent wrote are looked
    for where AgentV ran it (a cli target without cwd: the eval file's folder) and read only from PATH
    (the folder of a file), the target's configured cwd, the --eval file's folder for a cli target
    without cwd and each --files-root (the current directory only as --files-root .); a file
    elsewhere is recorded as refused, and the import says how many and what reads them. An imported
    run does not change: importing the same results again with options that read files it refused
    writes a new run that stores them.

    A folder of AgentV runs (AgentV's .agentv/results, or .agentv/results/runs/default where agentv eval writes
    them) imports each run in it as a run of its own, oldest first, as naming each alone would.

    \b
    Example:
      evalstore import .agentv/results/runs/default/2026-02-20T21-40-12-230Z
      evalstore import .agentv/results/runs/default
      evalstore import dataset.eval.baseline.jsonl --eval dataset.eval.yaml
      evalstore import run-bundle/
      evalstore import logs/2026-11-28T09-48-55_arithmetic.eval
    """
    from evalstore.replay.bundle import import_bundle, is_bundle
    from evalstore.replay.errors import ReplayError

    if not path.exists():  # before the store is opened: a mistyped path must not create one
        raise ReplayError(f"{path}: no such file or directory")
    if is_bundle(path):
        if eval_path or skip_bad or targets_path or files_roots:
            raise click.UsageError("--eval, --skip-bad, --targets and --files-root do not apply to an evalstore bundle")
        with _import_hint():
            moved = import_bundle(open_store(ctx), path)
        if as_json:
            print_json(
                {
                    "run_id": moved.run_id,
                    "format": "evalstore-bundle",
                    "runs": moved.streams,
                    "events": moved.events,
                    "blobs": moved.blobs,
                    "already_imported": moved.already_imported,
                    "new_runs": moved.new_runs,
                    "new_events": moved.new_events,
                }
            )
        elif moved.already_imported:
            echo(f"already imported: run {moved.run_id} is in this store; nothing written")
        else:
            new = moved.new_runs or []
            here = len(moved.streams) - len(new)
            echo(
                f"imported run {moved.run_id} from the bundle: {len(new)} new run(s)"
                + (f" ({here} already here)" if here else "")
                + f", {moved.new_events} events written (each new run's followed by a run_moved event), "
                + f"{moved.blobs} blobs"
            )
        return
    if _inspect_logs(path):
        if eval_path or skip_bad or targets_path or files_roots:
            raise click.UsageError("--eval, --skip-bad, --targets and --files-root do not apply to Inspect AI logs")
        _import_inspect(ctx, path, as_json)
        return
    runs = _runs_inside(path)
    if runs:
        _import_runs(ctx, path, runs, eval_path, skip_bad, targets_path, files_roots, as_json)
        return
    info = _import_agentv(ctx, path, eval_path, skip_bad, targets_path, files_roots, as_json)
    if as_json:
        print_json(info)


def _runs_inside(path: Path) -> list[Path]:
    """The AgentV runs in a folder that is none (AgentV's ``.agentv/results``, ``runs/default``); else none."""
    from evalstore.replay.agentv.detect import detect_format, run_folders
    from evalstore.replay.errors import ImportFormatError

    if not path.is_dir():
        return []
    try:
        detect_format(path)
        return []
    except ImportFormatError:
        return run_folders(path)


def _import_runs(  # type: ignore[no-untyped-def]
    ctx: click.Context, path: Path, runs: list[Path], eval_path, skip_bad, targets_path, files_roots, as_json: bool
) -> None:
    """Each AgentV run of a folder imported as its own run, oldest first, as if each were named alone (so a
    second import of the folder writes only the runs AgentV added since). One that fails stops the import:
    those before it stay imported, and importing the folder again goes on from it."""
    from evalstore.replay.errors import ReplayError

    note(f"{path} holds {plural(len(runs), 'AgentV run')}: each is imported as a run of its own, oldest first")
    infos = []
    for done, run in enumerate(runs):
        try:
            infos.append(_import_agentv(ctx, run, eval_path, skip_bad, targets_path, files_roots, as_json, source=run))
        except ReplayError as exc:
            before = f"{plural(done, 'run')} before it imported already; " if done else ""
            raise ReplayError(f"{exc} ({before}importing {path} again imports the rest)") from None
    if as_json:
        print_json(infos)


def _import_agentv(  # type: ignore[no-untyped-def]
    ctx: click.Context,
    path: Path,
    eval_path,
    skip_bad,
    targets_path,
    files_roots,
    as_json: bool,
    source: Path | None = None,
) -> dict[str, object]:
    """One AgentV run (a run folder, a bundle, a results file) imported, said unless ``as_json``; what
    ``--json`` gives of it. ``source``: the run's folder, named in what is said (one run of several)."""
    from evalstore.replay.agentv.importing import import_results

    of = f" from {source}" if source is not None else ""
    with progress_bar("checking") as bar, _import_hint():
        outcome = import_results(
            store_or_opener(ctx),
            path,
            eval_path=eval_path,
            skip_bad=skip_bad,
            progress=bar.show,
            targets_path=targets_path,
            files_roots=files_roots,
        )
    info = {
        "run_id": outcome.run_id,
        "format": outcome.format,
        "tests": outcome.tests,
        "skipped": outcome.skipped,
        "superseded": outcome.superseded,
        "already_imported": outcome.already_imported,
        "eval_path": outcome.eval_path,
        "warnings": outcome.warnings,
        "warning_count": outcome.warning_count,
        "refused_files": outcome.refused,
        "reimport_of": outcome.reimport_of,
        "refused_files_now_stored": outcome.refused_now_stored,
    }
    if as_json:
        return info
    if outcome.already_imported:
        echo(
            f"already imported{of} as run {outcome.run_id} ({plural(outcome.tests, 'result')}"
            + (f", {plural(outcome.skipped, 'line')} left out: {_left_out(outcome)}" if outcome.skipped else "")
            + "); nothing written"
        )
        if eval_path and outcome.eval_path != str(eval_path.resolve()):
            # run_started is immutable: the eval an import snapshotted stays; a replay can take another.
            note(
                f"the run keeps the eval it was imported with ({outcome.eval_path or 'none'}); to grade with "
                f"{eval_path}, use: evalstore replay {outcome.run_id} --eval {eval_path}"
            )
        for warning in outcome.warnings:
            note(f"warning: {warning}")
        return info
    echo(
        f"imported {plural(outcome.tests, 'result')} ({outcome.format}){of} as run {outcome.run_id}"
        + (
            f", {plural(outcome.skipped, 'line')} left out ({_left_out(outcome)}: `evalstore show` lists them)"
            if outcome.skipped
            else ""
        )
    )
    if outcome.reimport_of:
        stored = outcome.refused_now_stored
        note(
            f"a new run: {outcome.reimport_of}, imported from these results before, recorded "
            f"{plural(stored, 'file')} as refused that this run stores (an imported run does not change)"
        )
    for warning in outcome.warnings:
        note(f"warning: {warning}")
    if outcome.warning_count > len(outcome.warnings):
        note(f"... and {outcome.warning_count - len(outcome.warnings)} more warnings like these")
    if outcome.eval_path:
        echo(f"eval snapshot: {outcome.eval_path}")
    else:
        found = (
            f"used (see the warning{'s' if outcome.evals_not_used > 1 else ''} above)"
            if outcome.evals_not_used
            else "found"
        )
        note(
            f"no eval file {found} for these results; to regrade them later, name it: "
            f"evalstore replay {outcome.run_id} --eval FILE"
        )
    return info


def _left_out(outcome: ImportOutcome) -> str:
    """What an import's left-out lines were: bad, or results a later row replaced."""
    bad = outcome.skipped - outcome.superseded
    parts = [f"{bad} bad"] if bad else []
    if outcome.superseded:
        parts.append(f"{outcome.superseded} superseded by a later row of the same test")
    return ", ".join(parts)


def _inspect_logs(path: Path) -> bool:
    """Whether PATH holds Inspect AI logs: a .eval or .json file, or a folder of them that is not an AgentV run."""
    from evalstore.replay.agentv import detect_format
    from evalstore.replay.errors import ImportFormatError
    from evalstore.replay.inspect.importing import is_inspect_log

    if path.is_dir():
        try:
            detect_format(path)
            return False
        except ImportFormatError:
            return is_inspect_log(path)
    return is_inspect_log(path)


@contextmanager
def _import_hint() -> Iterator[None]:
    """On Ctrl-C or a database failure, what becomes of an import: an import is checked whole before
    anything is written, then written in batches (a bundle a run at a time), each batch's event ids derived
    from the source; a run stopped while written is completed by importing the same source again."""
    finish_with("import the same source again: what was written stays, and the import completes it")
    try:
        yield
    except KeyboardInterrupt:
        note("the import stopped; what it wrote stays, and importing the same source again completes it")
        raise


def _import_inspect(ctx: click.Context, path: Path, as_json: bool) -> None:
    from evalstore.cli import frozen_imports
    from evalstore.replay.inspect import inspect_log_api
    from evalstore.replay.inspect.importing import import_logs

    with frozen_imports():  # inspect_ai's classes and schemas: out of the collector's passes over each sample
        inspect_log_api()  # before the store is opened: without inspect_ai, say so and create nothing
    with progress_bar("checking") as bar, _import_hint():
        outcomes = import_logs(store_or_opener(ctx), path, progress=bar.show)
    rows = [
        {
            "run_id": o.run_id,
            "path": o.path,
            "format": o.format,
            "task": o.task,
            "model": o.model,
            "tests": o.tests,
            "already_imported": o.already_imported,
            "warnings": o.warnings,
        }
        for o in outcomes
    ]
    if as_json:
        print_json(rows if path.is_dir() else rows[0])
        return
    for o in outcomes:
        if o.already_imported:
            echo(f"already imported: {o.path} is run {o.run_id} ({plural(o.tests, 'result')}); nothing written")
        else:
            echo(f"imported {plural(o.tests, 'result')} ({o.format}: task {o.task}, model {o.model}) as run {o.run_id}")
        for warning in o.warnings:
            note(f"warning: {warning}")


@click.command()
@click.argument("run", shell_complete=complete_run_id)
@click.option(
    "--format",
    "fmt",
    type=click.Choice((*EXPORT_FORMATS, "bundle", "inspect")),
    default="agentv-jsonl",
    show_default=True,
    help="Output format (each is described above).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(allow_dash=True, path_type=Path),
    help="Write to FILE (replaced only once the export is complete) instead of stdout ('-'); a folder for bundle.",
)
@click.pass_context
@handle_errors
def export(ctx, run: str, fmt: str, output: Path | None) -> None:  # type: ignore[no-untyped-def]
    """Export a run: AgentV 4.x result rows (JSONL), CSV (one row per test and grader), JSON, a bundle, or an Inspect AI log.

    RUN: an id, a unique prefix, or last. Results stream out in the order the run scored them;
    a replay's rows carry the transcript of the run it replayed. Output is UTF-8. On a terminal,
    a progress bar goes to stderr while the rows go to a file or a pipe.

    \b
    agentv-jsonl  one AgentV 4.x result row per (test, target, attempt): test_id, suite, target,
                  category, conversation_id, experiment, score, scores[] (name, type, score, weight, verdict,
                  assertions, input, target, details, token_usage),
                  assertions, execution_status, error, failure_stage, failure_reason_code, token_usage, cost_usd, duration_ms,
                  start_time, end_time, output, input, metadata; sample_index after attempt 1.
                  A run with execution.trials: one row per (test, target), as AgentV writes it, the
                  best trial's row with the trials' aggregate as its score, trials[] and aggregation;
                  an imported row's trials[], aggregation and cost_limited as AgentV wrote them.
    csv           header run_id,test_id,target,attempt,test_score,passed,status,grader,grader_type,
                  grader_score,verdict,weight,assertions_passed,assertions_total,failed_assertions,
                  error; a result without graders has one line with empty grader cells; a text cell
                  starting with = + - @ (a formula to a spreadsheet) gets a leading '.
    json          {"format": "evalstore-export", "version": 3, "run": {...}, "summary": {...},
                  "results": [{test_id, target, attempt, score, passed, status, threshold, error,
                  origin, source, row_fields, timestamp, experiment, verdicts: [...],
                  transcript: {...}|null, case: {...}|null}]}; every key always present (null when
                  unknown); version 2 added experiment (as on the agentv-jsonl row), version 3 the
                  case's origin: recorded, or eval_snapshot (the result recorded no case, as AgentV's
                  rows do not, and this is the test as the run's eval snapshot has it).
    bundle        -o DIR: the run's events (and those of the runs it replays) as stored, every blob
                  they name, and manifest.json with their digests; evalstore import DIR puts the run
                  into another store (SQLite or PostgreSQL) with the same event ids, payloads and blobs.
    inspect       -o LOG.eval (or .json): an imported Inspect AI log written back with inspect_ai
                  (pip install 'evalstore[inspect]'); for a replay of one, each of the regrade's verdicts
                  is a score named after its grader (an edit, with evalstore's provenance, of a score
                  of that name), and the samples it did not regrade are listed in the log's metadata.

    \b
    Example:
      evalstore export last --format csv -o results.csv
      evalstore export imp-5159 > rows.jsonl
      evalstore export last --format bundle -o run-bundle
      evalstore export rpl-20261128 --format inspect -o regraded.eval
    """
    from evalstore.cli import frozen_imports

    with frozen_imports():  # the store's modules (sqlalchemy, the event models): no collector passes over them
        from evalstore.replay.agentv.export import export_run
        from evalstore.replay.analysis.views import resolve_run, run_summary

    if fmt == "bundle" and (output is None or str(output) == "-"):
        raise click.UsageError("--format bundle writes a folder: give it with -o DIR")
    if fmt == "inspect" and (output is None or str(output) == "-"):
        raise click.UsageError("--format inspect writes a log file: give it with -o LOG.eval (or .json)")
    # Here, not as the option's callback: whether -o names a file or a folder (bundle) depends on --format.
    problem = unwritable(output) if output is not None and str(output) != "-" and fmt != "bundle" else None
    if problem is not None:
        raise click.BadParameter(f"{output}: {problem}", param_hint="'-o' / '--output'")
    # The row formats read through SqliteReads on a SQLite file (no SQLAlchemy); a bundle or an Inspect log
    # the full store.
    store = open_reader(ctx) if fmt in EXPORT_FORMATS else open_store(ctx, create=False)
    run_id = resolve_run(store, run)
    if fmt == "inspect":
        from evalstore.replay.inspect.export import export_inspect

        assert output is not None  # checked above
        done = export_inspect(store, run_id, output)
        note(
            f"wrote run {run_id} to {output}: {plural(done.samples, 'sample')}"
            + (
                f", {done.regraded} regraded ({done.scores_added} scores added, {done.scores_edited} edited), "
                f"{done.samples - done.regraded} not regraded (listed in the log's metadata)"
                if done.run_id != done.origin_run_id
                else ""
            )
        )
        return
    if fmt == "bundle":
        from evalstore.replay.bundle import export_bundle

        assert output is not None  # checked above
        written = export_bundle(store, run_id, output)
        note(
            f"wrote run {run_id} to {output}: {len(written.streams)} run(s), {written.events} events, "
            f"{written.blobs} blobs"
        )
        return
    to_file = output is not None and str(output) != "-"
    # A bar on stderr, unless the rows themselves go to the terminal (they would run through it).
    bar = progress_bar("exporting") if to_file or not sys.stdout.isatty() else None
    # The run's counts, for the bar's total (a query over its results, read before the workers start: only
    # for a bar on a terminal; a JSON head's are read by export_run otherwise). The results written are the
    # ones they count, whatever an import still writing into the run adds meanwhile.
    summary = run_summary(store, run_id) if bar is not None and bar.visible else None
    total = summary.tests + summary.not_regradable if summary is not None else None
    try:
        with (
            replacing(output) if to_file else _utf8_stdout() as fh,  # type: ignore[arg-type]
            no_cycle_collection(),
            bar or contextlib.nullcontext(),
        ):
            count = export_run(
                store,
                run_id,
                fmt,
                fh,
                progress=(lambda done: bar.show("exporting", done, total)) if bar else None,
                summary=summary,
            )
    except BrokenPipeError:
        _reader_gone()
    status = summary.status if summary is not None else store.query("runs", run_id=run_id)[0]["status"]
    if status != "completed":
        note(f"run {run_id} is not complete ({status}): only the results it scored were exported")
    if to_file:
        note(f"wrote {plural(count, 'line' if fmt == 'csv' else 'result')} to {output}")


@contextmanager
def _utf8_stdout() -> Iterator[IO[str]]:
    """stdout as UTF-8 without newline translation, whatever the locale: an export is data, and CSV's
    quoted newlines must reach the file as written."""
    sys.stdout.flush()
    fh = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="")
    try:
        yield fh
    finally:
        try:
            fh.flush()
        finally:
            fh.detach()


def _reader_gone() -> None:
    """The reader went away (``export ... | head``): the export stops quietly and, as for every command, a
    closed stdout does not change the exit code (``cli/pipes.py``)."""
    try:  # later flushes of stdout (at exit) must not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass
