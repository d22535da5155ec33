"""A replay reads its parent run a window of results at a time (``material.RunWindows``): what it holds is
a few windows' material, not the run's, and what it writes is what reading the run whole wrote."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
from scale_runs import build, scored_keys, verdicts

from evalstore.replay import material
from evalstore.replay.regrade import ReplayOptions, replay_run, resume_replay
from evalstore.store import EventStore

N = 120
WINDOW = 10


def test_a_replay_holds_a_few_windows_of_its_parent_and_grades_as_one_that_reads_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = EventStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    run = build(tmp_path / "suite", store, N)
    options = ReplayOptions(eval_path=str(run.v2))
    whole = replay_run(store, run.run_id, options)  # one window: the default holds 2,000 results

    made: list[weakref.ref[material.TestMaterial]] = []
    most = [0]
    read = material._read

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        gc.collect()
        most[0] = max(most[0], sum(1 for ref in made if ref() is not None))
        started, tests, completed = read(*args, **kwargs)
        made.extend(weakref.ref(t) for t in tests.values())
        return started, tests, completed

    monkeypatch.setattr(material, "WINDOW_RESULTS", WINDOW)
    monkeypatch.setattr(material, "_read", counted)
    windowed = replay_run(store, run.run_id, options)
    assert 0 < most[0] <= 3 * WINDOW  # the two windows kept and the one being graded, never the run's N
    assert verdicts(store, windowed.run_id) == verdicts(store, whole.run_id)
    assert scored_keys(store, windowed.run_id) == scored_keys(store, whole.run_id)
    assert [s.test_id for s in windowed.results] == [s.test_id for s in whole.results]
    assert windowed.complete and store.verify().ok


def test_a_resumed_replay_reads_what_it_did_from_the_results_and_grades_the_rest_in_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = EventStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    run = build(tmp_path / "suite", store, N)
    monkeypatch.setattr(material, "WINDOW_RESULTS", WINDOW)
    graded = [0]

    def stop_midway(_scored) -> None:  # type: ignore[no-untyped-def]
        graded[0] += 1
        if graded[0] == N // 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        replay_run(store, run.run_id, ReplayOptions(eval_path=str(run.v2)), concurrency=1, progress=stop_midway)
    [replay] = [r for r in store.query("runs") if r["kind"] == "replay"]
    done = len(store.query("results", run_id=replay["run_id"]))
    assert 0 < done < N
    resumed = resume_replay(store, replay["run_id"])
    assert len(resumed.results) == N - done and resumed.complete
    assert len(set(scored_keys(store, replay["run_id"]))) == len(scored_keys(store, replay["run_id"])) == N
    assert store.verify().ok


def test_a_run_of_one_window_of_results_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The windows end at every window's last result and at the run's last, so the events after that (its
    ``run_completed``) made a window of their own: a run of 300 tests was read as two windows, its keys first
    and its material then, and its transcripts a third time for the replay's checks (10% of an unchanged
    replay of 300 tests)."""
    store = EventStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    run = build(tmp_path / "suite", store, N)
    reads: list[tuple] = []
    read = material._read
    transcripts_alone: list[str] = []
    read_stream = EventStore.read_stream

    def counted(store_: EventStore, run_id: str, after: int = 0, upto: int | None = None):  # type: ignore[no-untyped-def]
        reads.append((run_id, after, upto))
        return read(store_, run_id, after, upto)

    def watched(self: EventStore, stream_id: str, **kwargs):  # type: ignore[no-untyped-def]
        if kwargs.get("types") == ["transcript_recorded"]:
            transcripts_alone.append(stream_id)
        return read_stream(self, stream_id, **kwargs)

    monkeypatch.setattr(material, "_read", counted)
    monkeypatch.setattr(EventStore, "read_stream", watched)
    replayed = replay_run(store, run.run_id, ReplayOptions(eval_path=str(run.v2)))
    assert replayed.complete and len(replayed.results) == N
    assert reads == [(run.run_id, 0, None)] and transcripts_alone == []

    reads.clear()
    monkeypatch.setattr(material, "WINDOW_RESULTS", WINDOW)
    windowed = replay_run(store, run.run_id, ReplayOptions(eval_path=str(run.v2)))
    assert verdicts(store, windowed.run_id) == verdicts(store, replayed.run_id)
    assert len(reads) == N // WINDOW and reads[-1][2] is None  # the last window runs to the stream's end
