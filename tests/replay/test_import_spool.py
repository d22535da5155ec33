"""The import builds each result once (the validation pass spools it) and still writes the ids it always did.

A result superseded by a later one becomes a skipped line, which takes one id instead of its events'; the
results after it are renumbered, so the n-th event of the run keeps the id ``EventIds(run).id(n, kind)``.
"""

from __future__ import annotations

import json
from pathlib import Path

from evalstore.replay.agentv.import_check import KIND_OF_TYPE
from evalstore.replay.agentv.import_events import EventIds
from evalstore.replay.agentv.importing import import_results


def _row(i: int, score: float = 1.0) -> str:
    return json.dumps(
        {
            "test_id": f"t{i}",
            "suite": "spool",
            "score": score,
            "target": "default",
            "output": [{"role": "assistant", "content": f"answer {i}"}],
            "scores": [{"name": "g", "type": "contains", "score": score, "verdict": "pass", "assertions": []}],
        }
    )


def test_superseded_results_and_bad_lines_keep_positional_ids(store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lines = [_row(i) for i in range(6)]
    lines.insert(2, '{"test_id": broken')  # a bad line, skipped
    lines.append(_row(1, 0.5))  # t1 again: the earlier row is superseded
    lines.append(_row(4, 0.25))
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join(lines) + "\n")

    outcome = import_results(store, path, skip_bad=True)
    assert (outcome.tests, outcome.skipped) == (6, 3)
    events = list(store.read_stream(outcome.run_id))
    ids = EventIds(outcome.run_id)
    kinds = {"run_started": "started", "run_completed": "completed", **KIND_OF_TYPE}
    assert [e.event_id for e in events] == [ids.id(e.stream_version, kinds[e.type]) for e in events]

    transcripts = {e.event_id: e.payload["test_id"] for e in events if e.type == "transcript_recorded"}
    verdicts = [e.payload for e in events if e.type == "verdict_recorded"]
    assert len(verdicts) == 6
    assert all(transcripts[v["transcript_event_id"]] == v["test_id"] for v in verdicts)
    reasons = [e.payload["reason"] for e in events if e.type == "line_skipped"]
    assert sum("superseded" in r for r in reasons) == 2
    scores = {r["test_id"]: r["score"] for r in store.query("results", run_id=outcome.run_id)}
    assert scores == {"t0": 1.0, "t1": 0.5, "t2": 1.0, "t3": 1.0, "t4": 0.25, "t5": 1.0}

    again = import_results(store, path, skip_bad=True)
    assert again.already_imported and again.run_id == outcome.run_id


def test_event_ids_are_uuid5_of_the_run_position_and_kind() -> None:
    """Imported ids are uuid5 names: stores written before ids were computed without ``uuid.uuid5`` hold them."""
    import uuid

    for run_id in ("imp-5159723ac5725084", "check", "imp-é"):
        ids = EventIds(run_id)
        for n in (0, 1, 9, 10, 12345, 10**9):
            for kind in ("started", "case", "artifact", "transcript", "verdict", "scored", "skip", "completed"):
                assert ids.id(n, kind) == str(uuid.uuid5(uuid.NAMESPACE_URL, f"evalstore:{run_id}:{n}:{kind}"))
