"""An import builds its events' payloads without the models (``store.plain_payloads``): the stored bytes are
those the models give, for every result of the committed AgentV fixtures, and a value the models would
convert or refuse still goes through them (the same payload, or the same bad line)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from fixture_paths import FIXTURES_DIR

from evalstore.replay.agentv import ImportedTest, detect_format, import_events, read_results
from evalstore.replay.agentv.import_events import EventIds, RelativeSources, built
from evalstore.replay.agentv.importing import import_results
from evalstore.replay.errors import ReplayError
from evalstore.store.codec import canonical_json
from evalstore.store.events import encode, event_class
from evalstore.store.plain_payloads import NotPlain, plain_payload


def _sources() -> list[Path]:
    """Every AgentV results file, run folder and bundle among the fixtures."""
    found: set[Path] = set()
    for folder in sorted(FIXTURES_DIR.glob("agentv*")):
        found.update(p for p in folder.rglob("*.jsonl") if "outputs" not in p.parts and "transcript" not in p.name)
        found.update(p.parent for p in folder.rglob("index.jsonl"))
        found.update(p.parent for p in folder.rglob("summary.json"))
    sources = []
    for path in sorted(found):
        try:
            detect_format(path)
        except ReplayError:
            continue
        sources.append(path)
    return sources


def _by_models(item: ImportedTest, within: RelativeSources, ids: EventIds) -> list[tuple[str, str, int, str]]:
    """The result's events as the models encode them (the import's way before store.plain_payloads)."""
    events: list = []
    import_events.test_events(item, within(item.source), ids, events, {}, 0.8)
    return [(e.event_id, e.payload.type, e.payload.schema_version, canonical_json(encode(e.payload))) for e in events]


def test_every_fixture_result_is_stored_as_the_models_encode_it() -> None:
    results = types = 0
    seen: set[str] = set()
    for path in _sources():
        source = read_results(path, detect_format(path))
        within = RelativeSources(str(path.resolve()))
        for item in source.iter_tests(True):
            if not isinstance(item, ImportedTest):
                continue
            encoded: list[tuple[str, str, int, str]] = []
            fields: list[dict | None] = []
            built(item, within, EventIds("run", n=1), 0.8, True, check=True, encoded=encoded, fields=fields)
            assert encoded == _by_models(item, within, EventIds("run", n=1)), item.source.location
            seen.update(t for _, t, _, _ in encoded)
            results += 1
    types = len(seen)
    assert results > 100
    assert types == 5, seen  # cases, artifacts, transcripts, verdicts, scores


def test_stored_payloads_are_the_models_bytes(sqlite_store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    checked = 0
    for path in _sources()[:40]:
        try:
            outcome = import_results(sqlite_store, path, skip_bad=True)
        except ReplayError:  # no results to import, or another problem the other tests cover
            continue
        for event in sqlite_store.read_stream(outcome.run_id):
            model = event_class(event.type).model_validate(json.loads(event.payload_json))
            assert canonical_json(encode(model)) == event.payload_json, (path, event.type)
            checked += 1
    assert checked > 500


def _results(folder: Path, score: dict) -> Path:
    path = folder / "results.jsonl"
    row = {"test_id": "t1", "suite": "s", "score": 1, "target": "default", "output": "ok", "scores": [score]}
    path.write_text(json.dumps(row) + "\n")
    return path


def _grader(**extra: object) -> dict:
    return {"name": "g", "type": "contains", "score": 1, "verdict": "pass", "assertions": [], **extra}


def test_a_value_the_models_convert_is_stored_as_they_convert_it(sqlite_store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # NaN in a grader's details: the models store null there, where canonical JSON refuses NaN.
    path = tmp_path / "results.jsonl"
    path.write_text(_results(tmp_path, _grader(details={"x": 1})).read_text().replace('{"x": 1}', '{"x": NaN}'))
    outcome = import_results(sqlite_store, path)
    verdicts = [e for e in sqlite_store.read_stream(outcome.run_id) if e.type == "verdict_recorded"]
    assert json.loads(verdicts[0].payload_json)["details"] == {"x": None}


def test_a_value_the_models_refuse_is_a_bad_line(tmp_path: Path) -> None:
    # The readers clean what they give (an assertion's evidence is a string): a result built by hand.
    path = _results(tmp_path, _grader(assertions=[{"text": "a", "passed": True}]))
    item = next(iter(read_results(path, detect_format(path)).iter_tests()))
    assert isinstance(item, ImportedTest)
    odd = replace(item.verdicts[0], assertions=[{"text": "a", "passed": True, "evidence": 3}])
    item = replace(item, verdicts=[odd])
    with pytest.raises(ReplayError) as exc:
        built(item, RelativeSources(str(path)), EventIds("run"), 0.8, False, check=True)
    assert str(exc.value) == (
        f"{path}:1: cannot be imported: Assertion field evidence: Input should be a valid string "
        "(fix it, or import with --skip-bad to leave it out)"
    )


def test_plain_payload_refuses_what_it_cannot_tell() -> None:
    scored = event_class("test_scored")
    values = {"test_id": "t", "score": 1, "passed": True, "status": "ok", "threshold": 0.5}
    payload = plain_payload(scored, values)
    assert canonical_json(payload) == canonical_json({**values, "score": 1.0})  # 1.0, as the models store it
    for bad in ({"passed": 1}, {"status": "fine"}, {"score": True}, {"unknown": 1}, {"row_fields": {"a": 1}}):
        with pytest.raises(NotPlain):
            plain_payload(scored, {**values, **bad})
    with pytest.raises(NotPlain):
        plain_payload(scored, {"test_id": "t"})  # required fields missing
