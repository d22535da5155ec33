"""``EventStore.append_units``: a result's events appended whole, once, whatever its event ids.

What makes a regrade on workers exactly-once (replay/executors/): a test graded twice (a Ray task run again
after its worker died, a resumed driver) has fresh event ids each time, so the id check of ``append`` cannot
tell; the result key can. Runs on SQLite and PostgreSQL (the ``store`` fixture).
"""

from __future__ import annotations

import json

from log_rows import event_count

from evalstore.store import EventStore, NewEvent
from evalstore.store.events import RunStarted, VerdictRecorded
from evalstore.store.events import TestScored as Scored


def _unit(test_id: str, score: float, target: str | None = None) -> list[NewEvent]:
    verdict = VerdictRecorded(
        test_id=test_id, target=target, grader="g", grader_type="contains", score=score, verdict="pass"
    )
    scored = Scored(test_id=test_id, target=target, score=score, passed=score >= 0.5, status="ok", threshold=0.5)
    return [NewEvent(verdict), NewEvent(scored)]


def _encoded(store: EventStore, events: list[NewEvent]) -> list[tuple[str, str, int, str]]:
    return store.encode_events(events)


def test_a_unit_appended_again_with_new_event_ids_is_dropped_whole(store: EventStore) -> None:
    store.append("r", [RunStarted(run_id="r", kind="replay", tool_version="0.1.0")])
    first = store.append_units(
        "r",
        [(("a", None, 1), _encoded(store, _unit("a", 1.0))), (("b", "t", 1), _encoded(store, _unit("b", 0.0, "t")))],
    )
    assert first == {("a", "", 1), ("b", "t", 1)}
    before = event_count(store.engine)

    # The same results graded again (other scores even, other ids), plus one new: only the new one lands.
    again = store.append_units(
        "r",
        [
            (("a", None, 1), _encoded(store, _unit("a", 0.0))),
            (("b", "t", 1), _encoded(store, _unit("b", 1.0, "t"))),
            (("c", None, 1), _encoded(store, _unit("c", 0.5))),
        ],
    )
    assert again == {("c", "", 1)}
    assert event_count(store.engine) == before + 2
    scored = [e.event for e in store.read_stream("r", types=["test_scored"])]
    assert sorted((s.test_id, s.score) for s in scored) == [("a", 1.0), ("b", 0.0), ("c", 0.5)]  # type: ignore[attr-defined]
    assert len(store.query("results", run_id="r")) == 3
    assert store.verify().ok


def test_a_unit_is_kept_per_run_and_attempt(store: EventStore) -> None:
    for run in ("r1", "r2"):
        store.append(run, [RunStarted(run_id=run, kind="replay", tool_version="0.1.0")])
    assert store.append_units("r1", [(("a", None, 1), _encoded(store, _unit("a", 1.0)))]) == {("a", "", 1)}
    # The same test in another run, or another attempt of it, is another result.
    assert store.append_units("r2", [(("a", None, 1), _encoded(store, _unit("a", 1.0)))]) == {("a", "", 1)}
    second = [NewEvent(e.payload.model_copy(update={"attempt": 2})) for e in _unit("a", 1.0)]
    assert store.append_units("r1", [(("a", None, 2), _encoded(store, second))]) == {("a", "", 2)}
    assert len(store.query("results")) == 3


def test_retrying_the_same_encoded_units_is_a_no_op(store: EventStore) -> None:
    store.append("r", [RunStarted(run_id="r", kind="replay", tool_version="0.1.0")])
    units = [(("a", None, 1), _encoded(store, _unit("a", 1.0)))]
    store.append_units("r", units)
    before = event_count(store.engine)
    assert store.append_units("r", units) == set()  # a commit whose answer was lost, sent again
    assert event_count(store.engine) == before


def test_units_given_with_their_payload_dicts_project_as_their_json_does(store: EventStore) -> None:
    """``encode_with_payloads``: the projections read the dicts instead of parsing the JSON again; the rows
    are those the JSON gives (and verify, which folds the log from the JSON, agrees)."""
    for run in ("json", "dicts"):
        store.append(run, [RunStarted(run_id=run, kind="replay", tool_version="0.1.0")])
    events = _unit("a", 0.25, "t")
    with_dicts = store.encode_with_payloads(events)
    plain = store.encode_events(events)
    assert [e[1:4] for e in with_dicts] == [e[1:4] for e in plain]  # the ids are drawn by each
    assert all(json.loads(e[3]) == e[4] for e in with_dicts)
    store.append_units("json", [(("a", "t", 1), plain)])
    store.append_units("dicts", [(("a", "t", 1), with_dicts)])
    for table in ("results", "verdicts"):
        rows = {
            run: [{k: v for k, v in r.items() if k not in ("run", "seq")} for r in store.query(table, run_id=run)]
            for run in ("json", "dicts")
        }
        assert rows["json"] == rows["dicts"] and rows["json"]
    assert store.verify().ok
