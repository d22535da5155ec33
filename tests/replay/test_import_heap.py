"""An import freezes the heap it starts with out of the cyclic garbage collector's passes, and thaws it after."""

from __future__ import annotations

import gc
import json
from pathlib import Path

from evalstore.replay.agentv.importing import import_results


def _results(folder: Path, tests: int) -> Path:
    path = folder / "results.jsonl"
    rows = [
        {
            "test_id": f"t{i}",
            "score": 1.0,
            "scores": [{"name": "g", "type": "contains", "score": 1.0, "verdict": "pass"}],
        }
        for i in range(tests)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_the_heap_is_frozen_while_an_import_runs_and_thawed_after(store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    seen: list[int] = []

    def progress(phase: str, done: int, total: int | None) -> None:
        seen.append(gc.get_freeze_count())

    assert gc.get_freeze_count() == 0  # pytest's process never freezes
    outcome = import_results(store, _results(tmp_path, 3), progress=progress)
    assert outcome.tests == 3
    assert seen and min(seen) > 0
    assert gc.get_freeze_count() == 0


def test_a_heap_the_caller_froze_stays_frozen(store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gc.freeze()
    try:
        import_results(store, _results(tmp_path, 2))
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
