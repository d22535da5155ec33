"""``evalstore export RUN --format inspect -o OUT.eval``: an imported Inspect AI log written back, with a
regrade's verdicts as scores.

The log is rebuilt from what the import kept: its header (the run snapshot's ``inspect_header``) and each
sample as Inspect wrote it (``TranscriptRecorded.source_record_sha256``, attachments from their blobs),
then written with ``inspect_ai.log.write_eval_log``. For a replay (of an imported log, or of a replay of
one), every verdict of the regrade is a score named after its grader, added with Inspect's own
``edit_score`` so the score's history says where it came from: author ``evalstore``, a reason naming the
replay run, what it swapped, the grader and the value before and after. A regrade score named as one of
the sample's own scores is an edit of that score (Inspect's history keeps the original). Samples the
replay did not grade (outside ``--tests``, or whose model failed) keep their scores untouched and are
listed in the log's metadata (``evalstore``, set with ``edit_eval_log``): no silent mixed provenance.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstore.replay.analysis.views import replay_chain
from evalstore.replay.errors import ReplayError
from evalstore.replay.inspect import SOURCE_FORMATS, inspect_log_api
from evalstore.replay.inspect.importing import HEADER_ROLE
from evalstore.replay.inspect.scores import GRADER_TYPE
from evalstore.replay.material import RunMaterial, TestMaterial, load_run
from evalstore.store import EventStore
from evalstore.store.events import RunStarted, VerdictRecorded

AUTHOR = "evalstore"
METADATA_KEY = "evalstore"


@dataclass
class InspectExport:
    run_id: str
    origin_run_id: str
    samples: int
    regraded: int
    """Samples with at least one score from the regrade."""
    scores_added: int
    scores_edited: int


def export_inspect(store: EventStore, run_id: str, output: Path) -> InspectExport:
    """Write run ``run_id`` (an imported Inspect log, or a replay of one) as an Inspect log at ``output``
    (``.eval`` or ``.json``), replaced only once it is complete."""
    if output.suffix not in (".eval", ".json"):
        raise ReplayError(f"{output}: an Inspect log is a .eval or .json file; name the output so")
    api = inspect_log_api()
    from inspect_ai.log import EvalLog, EvalSample, MetadataEdit, ProvenanceData, edit_eval_log, edit_score
    from inspect_ai.scorer import ScoreEdit

    run = load_run(store, run_id)
    chain = replay_chain(store, run.started)
    origin_started = chain[-1]
    if origin_started.source_format not in SOURCE_FORMATS:
        raise ReplayError(
            f"run {run_id} was not imported from an Inspect AI log (nor replays one): "
            "--format inspect writes Inspect logs back; use --format json or agentv-jsonl"
        )
    origin = run if origin_started.run_id == run_id else load_run(store, origin_started.run_id)
    header_snap = next((s for s in origin_started.eval_snapshot if s.role == HEADER_ROLE and s.sha256), None)
    if header_snap is None or header_snap.sha256 is None:
        raise ReplayError(f"run {origin.run_id} keeps no Inspect log header; import the log again")
    log = EvalLog.model_validate_json(store.get_blob(header_snap.sha256))
    regrade = run.run_id != origin.run_id
    swapped = _swaps(run.started) if regrade else ""
    carried_from = _grading_runs(store, run) if regrade else {}

    samples = []
    regraded_keys: list[dict[str, Any]] = []
    unregraded: list[dict[str, Any]] = []
    added = edited = 0
    for key in origin.order:
        material = origin.tests[key]
        sample = EvalSample.model_validate(_sample_record(store, material))
        samples.append(sample)
        if not regrade:
            continue
        mine = run.tests.get(key)
        verdicts = [(eid, v) for eid, v in (mine.verdicts.values() if mine else []) if v.grader_type != GRADER_TYPE]
        where = {"id": sample.id, "epoch": sample.epoch}
        if not verdicts:
            unregraded.append(where)
            continue
        regraded_keys.append(where)
        single = log.model_copy(update={"samples": [sample]})  # edit_score finds the sample in its log
        for eid, v in verdicts:
            grader_run = carried_from.get(eid, run.run_id)
            before = sample.scores.get(v.grader) if sample.scores else None
            was = f"{before.value!r} -> " if before is not None else ""
            reason = (
                f"evalstore replay {grader_run} of {origin.run_id}{swapped}: grader {v.grader} ({v.grader_type}) "
                f"{'regraded score' if before is not None else 'scored'} {v.grader}: {was}{v.score!r} ({v.verdict})"
            )
            edit = ScoreEdit(
                value=v.score,
                answer=None if before is None else "UNCHANGED",
                explanation=_explanation(v),
                metadata=_metadata(v, grader_run),
                provenance=ProvenanceData(author=AUTHOR, reason=reason, metadata={"run_id": grader_run}),
            )
            edit_score(single, sample.id, v.grader, edit, recompute_metrics=False, epoch=sample.epoch)
            if before is None:
                added += 1
            else:
                edited += 1
    log = log.model_copy(update={"samples": samples})
    if regrade:
        marking = {
            "run_id": run.run_id,
            "imported_run_id": origin.run_id,
            "replays": [s.run_id for s in chain[:-1]],
            "regraded_samples": len(regraded_keys),
            "unregraded_samples": unregraded,
            "note": "scores of the regrade carry evalstore's provenance; unregraded samples keep the log's own scores",
        }
        log = edit_eval_log(
            log,
            [MetadataEdit(metadata_set={METADATA_KEY: marking})],
            ProvenanceData(author=AUTHOR, reason=f"evalstore export of replay {run.run_id} of {origin.run_id}"),
        )
    _write(api, log, output)
    return InspectExport(run.run_id, origin.run_id, len(samples), len(regraded_keys), added, edited)


def _sample_record(store: EventStore, material: TestMaterial) -> dict[str, Any]:
    """The sample as Inspect wrote it, its attachments put back."""
    if material.transcript is None or material.transcript[1].source_record_sha256 is None:
        raise ReplayError(f"test {material.key[0]} keeps no Inspect sample; import the log again")
    transcript = material.transcript[1]
    record = json.loads(store.get_blob(transcript.source_record_sha256 or ""))
    blobs = store.get_blobs([a["sha256"] for a in transcript.attachments]) if transcript.attachments else {}
    record["attachments"] = {a["id"]: blobs[a["sha256"]].decode("utf-8") for a in transcript.attachments}
    return record


def _grading_runs(store: EventStore, run: RunMaterial) -> dict[str, str]:
    """For each carried verdict of ``run``, the replay that graded it (the stream of the verdict it copies)."""
    carried = {
        eid: v.carried_from
        for m in run.tests.values()
        for eid, v in m.verdicts.values()
        if v.origin == "carried" and v.carried_from and v.grader_type != GRADER_TYPE
    }
    found = store.get_events(carried.values())
    return {eid: found[src].stream_id for eid, src in carried.items() if src in found}


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


def _write(api: Any, log: Any, output: Path) -> None:
    """``write_eval_log`` to a temporary file beside ``output``, then the rename: a failed export leaves no
    half log (and the previous file, if any, as it was)."""
    if output.is_dir():
        raise ReplayError(f"{output}: is a folder; give the log's file name")
    fd, tmp = tempfile.mkstemp(dir=output.parent, prefix=f".{output.stem}.", suffix=output.suffix)
    os.close(fd)
    try:
        api.write_eval_log(log, tmp, format="json" if output.suffix == ".json" else "eval")
        os.replace(tmp, output)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
