"""Every committed Inspect fixture log imports to the events it imported to before the import was made
faster (replay/inspect/importing.py, reading.py): the same event types and payloads in the same order,
ids aside (each event's id, where a payload names it, as its position). tests/fixtures/inspect/import_events.json
holds them, one line per event (its type and the digest of its payload), as main's import wrote them
when they were recorded; a change to what an import stores fails here, event by event.

To record them again after a deliberate change of what the import stores (say why in the commit):
``python tests/replay/test_inspect_import_stable.py`` from the repository's root.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
RECORDED = FIXTURES / "inspect" / "import_events.json"


def fixture_logs() -> list[Path]:
    """Every log of the Inspect fixtures (``.eval`` and ``.json``; not Inspect's manifests)."""
    from evalstore.replay.inspect.importing import NOT_LOGS

    return sorted(
        p
        for p in FIXTURES.glob("inspect*/logs/**/*")
        if p.suffix in (".eval", ".json") and p.name not in NOT_LOGS and p.is_file()
    )


def imported_events(log: Path) -> list[str]:
    """``TYPE DIGEST`` of each event the import of ``log`` stores into a fresh SQLite store, but the first and
    last (run_started and run_completed: the time, the log's absolute path); every event id a payload
    names replaced by the event's position before the digest is taken."""
    from evalstore.replay.inspect.importing import import_log
    from evalstore.store import EventStore, make_engine

    with tempfile.TemporaryDirectory() as tmp:
        store = EventStore(make_engine(f"sqlite:///{tmp}/s.db"))
        try:
            run_id = import_log(store, log).run_id
            events = list(store.read_stream(run_id))[1:-1]
        finally:
            store.close()
    positions = {e.event_id: f"@{i}" for i, e in enumerate(events)}
    out = []
    for event in events:
        payload = event.payload_json
        for event_id, position in positions.items():
            payload = payload.replace(event_id, position)
        out.append(f"{event.type} {hashlib.sha256(payload.encode()).hexdigest()[:20]}")
    return out


def _name(log: Path) -> str:
    return log.relative_to(FIXTURES).as_posix()


LOGS = fixture_logs()


@pytest.mark.parametrize("log", LOGS, ids=_name)
def test_the_import_stores_the_events_it_stored_when_they_were_recorded(log: Path) -> None:
    pytest.importorskip("inspect_ai.log")
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    assert _name(log) in recorded, f"{_name(log)}: no events recorded for it (see this module's docstring)"
    assert imported_events(log) == recorded[_name(log)]


def test_every_fixture_log_is_recorded() -> None:
    assert sorted(json.loads(RECORDED.read_text(encoding="utf-8"))) == sorted(_name(log) for log in LOGS)


if __name__ == "__main__":
    RECORDED.write_text(
        json.dumps({_name(log): imported_events(log) for log in LOGS}, indent=1) + "\n", encoding="utf-8"
    )
    print(f"wrote {RECORDED}", file=sys.stderr)
