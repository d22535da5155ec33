"""``evalstore export RUN --format inspect -o OUT.eval``: an imported Inspect AI log written back, with a
regrade's verdicts as scores and the log's ``results`` computed again.

The log is rebuilt from what the import kept: its header (the run snapshot's ``inspect_header``) and each
sample as Inspect wrote it (``TranscriptRecorded.source_record_sha256``, attachments from their blobs).
For a replay (of an imported log, or of a replay of one), every verdict of the regrade is a score named
after its grader, added with Inspect's own ``edit_score`` so the score's history says where it came from:
author ``evalstore``, a reason naming the replay run, what it swapped, the grader and the value before and
after. A regrade score named as one of the sample's own scores is an edit of that score (Inspect's history
keeps the original). Samples the replay did not grade (outside ``--tests``) keep their scores untouched and
are listed in the log's metadata (``evalstore``, set with ``edit_eval_log``): no silent mixed provenance.

The log's ``results`` (each scorer's metrics) and ``reductions`` are computed again by Inspect's own
``recompute_metrics``, over every sample's scores as they stand: the original scorers after their edits,
and every regrade scorer (with Inspect's default metrics for a score no scorer of the log declares).

An ``.eval`` log is written a sample at a time (:func:`_eval_writer`): samples are read from the store a
window at a time, each written into the zip as Inspect's own recorder writes a re-logged sample, and only
their scores (what the metrics need) are kept until the end. A ``.json`` log is one JSON document, which
Inspect writes whole (``write_eval_log``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple, cast

from evalstore.replay.analysis.views import replay_chain, run_started
from evalstore.replay.errors import ReplayError
from evalstore.replay.inspect import SOURCE_FORMATS, inspect_log_api
from evalstore.replay.inspect.importing import HEADER_ROLE, sample_record
from evalstore.replay.inspect.scores import GRADER_TYPE
from evalstore.replay.regular_files import new_file_mode
from evalstore.store import EventStore
from evalstore.store.events import RunStarted, TranscriptRecorded, VerdictRecorded

AUTHOR = "evalstore"
METADATA_KEY = "evalstore"
WINDOW = 100
"""Samples read from the store at once (their records, attachments and the regrade's verdicts)."""

Key = tuple[str, str, int]
"""(test id, target as the projections keep it: "" for none, attempt)."""


@dataclass
class InspectExport:
    run_id: str
    origin_run_id: str
    samples: int
    regraded: int
    """Samples with at least one score from the regrade."""
    scores_added: int
    scores_edited: int


@dataclass
class _Regrade:
    """What a replay's export adds to each sample: its run, the run it was imported as, what it swapped."""

    run_id: str
    origin_run_id: str
    swapped: str
    regraded: int = 0
    """Samples given a score by the regrade."""
    unregraded: list[dict[str, Any]] = field(default_factory=list)
    """The samples it gave none (``{"id", "epoch"}``)."""
    added: int = 0
    edited: int = 0
    edited_scorers: set[str] = field(default_factory=set)
    """The log's own scorers a regrade score replaced on some sample (their metrics change)."""


def export_inspect(store: EventStore, run_id: str, output: Path) -> InspectExport:
    """Write run ``run_id`` (an imported Inspect log, or a replay of one) as an Inspect log at ``output``
    (``.eval`` or ``.json``), replaced only once it is complete."""
    if output.suffix not in (".eval", ".json"):
        raise ReplayError(f"{output}: an Inspect log is a .eval or .json file; name the output so")
    if output.is_dir():
        raise ReplayError(f"{output}: is a folder; give the log's file name")
    api = inspect_log_api()
    from inspect_ai.log import EvalLog, MetadataEdit, ProvenanceData, edit_eval_log

    started = run_started(store, run_id)
    chain = replay_chain(store, started)
    origin = chain[-1]
    if origin.source_format not in SOURCE_FORMATS:
        raise ReplayError(
            f"run {run_id} was not imported from an Inspect AI log (nor replays one): "
            "--format inspect writes Inspect logs back; use --format json or agentv-jsonl"
        )
    header_snap = next((s for s in origin.eval_snapshot if s.role == HEADER_ROLE and s.sha256), None)
    if header_snap is None or header_snap.sha256 is None:
        raise ReplayError(f"run {origin.run_id} keeps no Inspect log header; import the log again")
    log = EvalLog.model_validate_json(store.get_blob(header_snap.sha256))
    # recompute_metrics writes the reductions again from the samples (it never reads the old ones), and
    # the log's own list, an entry per sample and scorer, held through the whole export was a third of what
    # grew with the samples (~4 KB a sample).
    log.reductions = None
    regrade = _Regrade(run_id, origin.run_id, _swaps(started)) if run_id != origin.run_id else None

    def marked(log: Any) -> Any:
        """The log's metadata saying which samples the regrade scored and which it did not."""
        if regrade is None:
            return log
        marking = {
            "run_id": run_id,
            "imported_run_id": origin.run_id,
            "replays": [s.run_id for s in chain[:-1]],
            "regraded_samples": regrade.regraded,
            "unregraded_samples": regrade.unregraded,
            "note": "scores of the regrade carry evalstore's provenance; unregraded samples keep the log's own scores",
        }
        return edit_eval_log(
            log,
            [MetadataEdit(metadata_set={METADATA_KEY: marking})],
            ProvenanceData(author=AUTHOR, reason=f"evalstore export of replay {run_id} of {origin.run_id}"),
        )

    samples = _samples(store, origin.run_id, log, regrade)
    try:
        fd, tmp = tempfile.mkstemp(dir=output.parent, prefix=f".{output.stem}.", suffix=output.suffix)
    except OSError as exc:  # name the file asked for, not the temporary one (a folder that is not there)
        raise OSError(exc.errno, exc.strerror, str(output)) from None
    os.fchmod(fd, new_file_mode())  # mkstemp makes 0600: the log reads as Inspect's own do
    os.close(fd)
    try:
        count = _write(api, log, samples, marked, Path(tmp), regrade.edited_scorers if regrade else set())
        os.replace(tmp, output)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if regrade is None:
        return InspectExport(run_id, origin.run_id, count, 0, 0, 0)
    return InspectExport(run_id, origin.run_id, count, regrade.regraded, regrade.added, regrade.edited)


def _transcripts(store: EventStore, run_id: str) -> Iterator[list[TranscriptRecorded]]:
    """The run's transcripts, in its order, :data:`WINDOW` results at a time."""
    ends = store.result_ends(run_id, every=WINDOW)
    for after, upto in zip([0, *ends], ends):
        rows = store.stream_payloads(run_id, types=["transcript_recorded"], after=after, upto=upto)
        yield [TranscriptRecorded.model_validate_json(payload) for _, _, payload, _ in rows]


def _samples(store: EventStore, origin_run_id: str, log: Any, regrade: _Regrade | None) -> Iterator[Any]:
    """Every sample of the log (``EvalSample``), a regrade's scores added, a window at a time."""
    from inspect_ai.log import EvalSample

    for window in _transcripts(store, origin_run_id):
        missing = next((t for t in window if t.source_record_sha256 is None), None)
        if missing is not None:
            raise ReplayError(f"test {missing.test_id} keeps no Inspect sample; import the log again")
        digests = [t.source_record_sha256 or "" for t in window]
        digests += [a["sha256"] for t in window for a in t.attachments]
        blobs = store.get_blobs(digests)
        verdicts = _verdicts(store, regrade.run_id, window) if regrade else {}
        for t in window:
            record = sample_record(blobs[t.source_record_sha256 or ""])
            record["attachments"] = {a["id"]: blobs[a["sha256"]].decode("utf-8") for a in t.attachments}
            sample = EvalSample.model_validate(record)
            if regrade is not None:
                mine = verdicts.get((t.test_id, t.target or "", t.attempt))
                if mine:
                    _add_scores(log, sample, mine, regrade)
                    regrade.regraded += 1
                else:
                    regrade.unregraded.append({"id": sample.id, "epoch": sample.epoch})
            yield sample


Graded = tuple[str, str, VerdictRecorded]
"""A verdict with the replay that graded it and when (its event's ``recorded_at``)."""


def _verdicts(store: EventStore, run_id: str, window: list[TranscriptRecorded]) -> dict[Key, list[Graded]]:
    """The replay's verdicts not of Inspect's for a window's results, in the order it recorded them, each
    with the replay that graded it and when (for a carried verdict, the replay it was carried from)."""
    keys = {(t.test_id, t.target or "", t.attempt) for t in window}
    found = sorted(
        (stored.seq, key, stored.event, stored.recorded_at)
        for key, _grader, stored in store.verdict_events(run_id, {t.test_id for t in window})
        if key in keys and stored.type == "verdict_recorded"
    )
    chosen = [(k, v, at) for _, k, v, at in found if isinstance(v, VerdictRecorded) and v.grader_type != GRADER_TYPE]
    carried = {v.carried_from for _, v, _ in chosen if v.origin == "carried" and v.carried_from}
    grading = {eid: (e.stream_id, e.recorded_at) for eid, e in store.get_events(carried).items()} if carried else {}
    out: dict[Key, list[Graded]] = {}
    for key, v, at in chosen:
        grader_run, at = grading.get(v.carried_from or "", (run_id, at)) if v.origin == "carried" else (run_id, at)
        out.setdefault(key, []).append((grader_run, at, v))
    return out


def _add_scores(log: Any, sample: Any, verdicts: list[Graded], regrade: _Regrade) -> None:
    """Each verdict as a score of ``sample`` named after its grader, added or edited with ``edit_score``."""
    from inspect_ai.log import ProvenanceData, edit_score
    from inspect_ai.scorer import ScoreEdit

    single = log.model_copy(update={"samples": [sample]})  # edit_score finds the sample in its log
    keyed = _keyed_scorers(log)
    for grader_run, graded_at, v in verdicts:
        if v.grader in keyed:
            raise ReplayError(
                f"replay {grader_run}: its grader {v.grader} is named as the log's scorer {v.grader}, whose "
                "metrics are per key of a dict value; Inspect cannot compute them over one number: name the "
                "grader otherwise in the eval file and replay again"
            )
        before = sample.scores.get(v.grader) if sample.scores else None
        was = f"{before.value!r} -> " if before is not None else ""
        reason = (
            f"evalstore replay {grader_run} of {regrade.origin_run_id}{regrade.swapped}: grader {v.grader} "
            f"({v.grader_type}) {'regraded score' if before is not None else 'scored'} {v.grader}: "
            f"{was}{v.score!r} ({v.verdict})"
        )
        edit = ScoreEdit(
            value=_value(v, before),
            answer=None if before is None else "UNCHANGED",
            explanation=_explanation(v),
            metadata=_metadata(v, grader_run),
            # When the replay graded it, not when it was exported: the score's history dates the regrade.
            provenance=ProvenanceData(
                timestamp=datetime.fromisoformat(graded_at),
                author=AUTHOR,
                reason=reason,
                metadata={"run_id": grader_run},
            ),
        )
        edit_score(single, sample.id, v.grader, edit, recompute_metrics=False, epoch=sample.epoch)
        if before is None:
            regrade.added += 1
        else:
            regrade.edited += 1
            regrade.edited_scorers.add(v.grader)


def _keyed_scorers(log: Any) -> set[str]:
    """The log's scorers whose metrics are a dict (per key of a dict value): Inspect's metrics refuse a
    score of one number under such a scorer's name (a TypeError, which was the export's exit 3)."""
    return {
        s.name
        for s in log.eval.scorers or []
        if isinstance(s.metrics, dict) or any(isinstance(m, dict) for m in s.metrics or [])
    }


def _definitions(metrics: Any) -> list[Any]:
    """Every metric definition of a scorer's metrics (a list of definitions and dicts of them, or a dict)."""
    items = list(metrics.values()) if isinstance(metrics, dict) else list(metrics or [])
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            out += [m for ms in item.values() for m in ms]
        elif isinstance(item, list):
            out += item
        else:
            out.append(item)
    return out


def _without(metrics: Any, names: set[str]) -> Any:
    """A scorer's metrics without the definitions named in ``names``."""
    if isinstance(metrics, dict):
        return {k: [m for m in ms if m.name not in names] for k, ms in metrics.items()}
    out: list[Any] = []
    for item in metrics or []:
        if isinstance(item, dict):
            out.append({k: [m for m in ms if m.name not in names] for k, ms in item.items()})
        elif item.name not in names:
            out.append(item)
    return out


def _unmade_metrics(log: Any) -> set[str]:
    """The names of the log's scorer metrics Inspect cannot make here: a metric of the task's own file
    (``@metric`` beside the task), registered only once that file is loaded. Inspect's ``recompute_metrics``
    would load (run) the log's ``task_file``, a path the log names relative to where ``inspect eval`` ran:
    elsewhere the whole recompute failed ("tasks.py: No such file or directory"), and where a file of that
    name exists, a log imported from anyone would run it. A file a log names is data, never code to run, so
    these metrics are always left out of the recompute (and kept or marked by :func:`_keep_unmade`)."""
    from inspect_ai._util.registry import registry_lookup

    return {
        m.name
        for s in log.eval.scorers or []
        for m in _definitions(s.metrics)
        if registry_lookup("metric", m.name) is None
    }


def _keep_unmade(log: Any, counted: Any, unmade: set[str], edited: set[str]) -> None:
    """The metrics Inspect could not make here (:func:`_unmade_metrics`) as ``log`` has them, in the
    recomputed ``counted``, for each scorer whose scores the regrade left as they were; for a scorer it
    changed they are left out (their old values would be false), and the results' metadata says so."""
    keys = {name.split("/")[-1] for name in unmade}  # a result names a metric by its unqualified name
    original = {s.name: s for s in (log.results.scores if log.results else [])}
    left_out: dict[str, list[str]] = {}
    for score in counted.results.scores if counted.results else []:
        before = original.get(score.name)
        if before is None:
            continue
        kept = {k: v for k, v in before.metrics.items() if k in keys}
        if not kept:
            continue
        if score.scorer in edited:
            left_out[score.name] = sorted(kept)
            continue
        merged = {**score.metrics, **kept}
        score.metrics = {k: merged[k] for k in [*before.metrics, *score.metrics] if k in merged}
    if left_out:
        note = {
            "metrics_not_recomputed": left_out,
            "why": f"defined in the task's file ({log.eval.task_file}), not found here; the regrade changed these scores",
        }
        counted.results.metadata = {**(counted.results.metadata or {}), METADATA_KEY: note}


def _swaps(started: RunStarted) -> str:
    """What a replay swapped, as its run_started recorded the options it was given."""
    given = {k: v for k, v in (started.overrides or {}).items() if v not in (None, [], {}, False)}
    if not given:
        return ""
    return (
        " ("
        + ", ".join(f"{k}={v if not isinstance(v, list) else ','.join(map(str, v))}" for k, v in sorted(given.items()))
        + ")"
    )


def _explanation(v: VerdictRecorded) -> str | None:
    lines = [f"{'✓' if a.passed else '✗'} {a.text}" + (f": {a.evidence}" if a.evidence else "") for a in v.assertions]
    lines += v.evidence
    return "\n".join(lines) or None


_LETTERS = ("C", "I")
"""Inspect's CORRECT and INCORRECT: the values of ``match``, ``includes``, ``model_graded_qa`` and the like."""


def _value(v: VerdictRecorded, before: Any) -> Any:
    """The regraded score's value: the verdict's score, but C or I (as it passed or failed) where the
    scorer of its name scored the sample C or I. A scorer's values keep their form, as Inspect's viewer
    shows them (C/I, not 1.0/0.0) and its metrics read them (value_to_float: 1, 0); the score itself is in
    the edit's reason."""
    if before is not None and before.value in _LETTERS and v.status == "ok" and v.verdict in ("pass", "fail"):
        return "C" if v.verdict == "pass" else "I"
    return v.score


def _metadata(v: VerdictRecorded, grader_run: str) -> dict[str, Any]:
    return {
        METADATA_KEY: {
            "run_id": grader_run,
            "grader": v.grader,
            "grader_type": v.grader_type,
            "verdict": v.verdict,
            "status": v.status,
            "cache_hit": v.cache_hit,
        }
    }


class _Scored(NamedTuple):
    """What Inspect's ``recompute_metrics`` reads of a sample (and ``sort_samples`` orders it by): kept
    for every sample until the end in place of the sample (an ``EvalSample`` and its transcript), its own
    objects, not copies."""

    id: int | str
    epoch: int
    metadata: dict[str, Any]
    error: Any
    scores: dict[str, Any] | None


def _write(
    api: Any, log: Any, samples: Iterator[Any], marked: Callable[[Any], Any], path: Path, edited: set[str]
) -> int:
    """``log`` with ``samples`` written to ``path``, its results and reductions computed again and
    ``marked`` once every sample is written; the number of samples written. ``edited``: the log's scorers
    a regrade score replaced (filled as the samples are read)."""
    from inspect_ai.log import recompute_metrics
    from inspect_ai.log._log import sort_samples

    scored: list[_Scored] = []

    def kept(sample: Any) -> Any:
        scored.append(_Scored(sample.id, sample.epoch, sample.metadata, sample.error, sample.scores))
        return sample

    def finished() -> Any:
        """The log's header as written at the end: marked, its metrics computed over every sample's scores."""
        # In the order read_eval_log gives samples (epoch, then id), so the reductions list them as
        # Inspect's own recompute_metrics of the written log would.
        sort_samples(cast(Any, scored))  # read by the fields an EvalSample has of the same names
        header = marked(log)
        unmade = _unmade_metrics(header)
        spec = header.eval
        if unmade:  # computed without them, then kept as the log has them where their scores did not change
            scorers = [s.model_copy(update={"metrics": _without(s.metrics, unmade)}) for s in spec.scorers]
            spec = spec.model_copy(update={"scorers": scorers})
        # No task file: with every metric left registered, Inspect has no reason to load one; none, to be sure.
        spec = spec.model_copy(update={"task_file": None})
        counted = header.model_copy(update={"samples": scored, "eval": spec})
        # Inspect warns on every value its metrics cannot read as a number (a list value, an unscored
        # key: one line per sample), as it did when it computed the log's results; the numbers are its own.
        quiet = logging.getLogger("inspect_ai.scorer._metric")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            recompute_metrics(counted)
        finally:
            quiet.setLevel(level)
        if unmade:
            _keep_unmade(log, counted, unmade, edited)
        return counted.model_copy(update={"samples": None, "eval": header.eval})

    writer = _eval_writer() if path.suffix == ".eval" else None
    if writer is None:  # a .json log is one document, written whole
        whole = [kept(s) for s in samples]
        done = finished()
        api.write_eval_log(
            done.model_copy(update={"samples": whole}), str(path), format="json" if path.suffix == ".json" else "eval"
        )
        return len(whole)
    return asyncio.run(writer(log, (kept(s) for s in samples), finished, path))


def _eval_writer() -> Any:
    """An ``.eval`` log written a sample at a time, through Inspect's own recorder (``EvalRecorder``, as
    ``write_eval_log`` uses it): each sample goes into the zip as it comes (``write_through``: Inspect's
    path for re-logging many samples without holding them), the header, summaries and reductions at the
    end. None where this inspect_ai has no such recorder (the log is then written whole)."""
    try:
        from inspect_ai.log import condense_sample
        from inspect_ai.log._recorders.eval import EvalRecorder
    except ImportError:
        return None

    async def write(log: Any, samples: Iterator[Any], finished: Any, path: Path) -> int:
        recorder = EvalRecorder(str(path.parent))
        await recorder.log_init(log.eval, str(path), clean=True)
        await recorder.log_start(log.eval, log.plan)
        zip_log = _zip_log(recorder, log.eval)
        summaries: list[Any] = []
        count = 0
        for sample in samples:
            await recorder.log_sample(log.eval, condense_sample(sample), write_through=True)
            if zip_log is not None:
                # The recorder keeps its summaries in a list it copies whole for each sample it logs, to drop
                # an earlier one of the same (id, epoch): quadratic (24 of 67 s exporting 5,000 samples).
                # A store's samples are unique, so their summaries are kept here and handed back at the end.
                summaries.extend(zip_log._summaries)
                zip_log._summaries = []
            count += 1
        if zip_log is not None:
            zip_log._summaries = summaries
        done = finished()
        await recorder.log_finish(
            done.eval,
            done.status,
            done.stats,
            done.results,
            done.reductions,
            done.error,
            invalidated=done.invalidated,
            log_updates=done.log_updates,
            config_updates=done.config_updates,
        )
        return count

    return write


def _zip_log(recorder: Any, eval: Any) -> Any:
    """The recorder's log file being written, where it keeps its sample summaries in ``_summaries`` (inspect_ai
    0.3.285); None for a recorder that does not (its summaries are then left to it)."""
    try:
        zip_log = recorder.data[recorder._log_file_key(eval)]
    except (AttributeError, KeyError, TypeError):
        return None
    return zip_log if isinstance(getattr(zip_log, "_summaries", None), list) else None
