"""``SqliteReads``: a SQLite store read through the standard library's sqlite3 gives what the full store
gives (every method it defines, on the same file), hands every other request to the full store, and
opens only a store at this evalstore's schema (anything else is the full store's to open or refuse)."""

from __future__ import annotations

import io
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sample_runs import append_many_results, populate

from evalstore.store import EventStore, StoredEvent, make_engine, sha256_hex
from evalstore.store.blobs import CHUNK_BYTES
from evalstore.store.sqlite_reads import SqliteReads, open_reads

RUNS = ("run-a", "run-b", "run-a-replay", "run-many")


def _event(ev: StoredEvent) -> tuple:
    return (
        ev.seq,
        ev.event_id,
        ev.stream_id,
        ev.stream_version,
        ev.type,
        ev.schema_version,
        ev.payload_json,
        ev.recorded_at,
        ev.prev_hash,
        ev.hash,
    )


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The sample runs, a run compressed against a records dictionary, and blobs of every encoding (plain,
    zlib, zlib against a dictionary, chunks): the full store and the reads on the one file."""
    path = tmp_path_factory.mktemp("reads") / "store.db"
    full = EventStore(make_engine(f"sqlite:///{path}"))
    populate(full)
    append_many_results(full)
    rng = random.Random(7)
    template = b"You are a grader. " * 40
    blobs = {f"small {n}".encode(): None for n in range(3)}
    blobs |= {template + f"answer {n} ".encode() * 30: None for n in range(5)}  # share a dictionary
    blobs[rng.randbytes(CHUNK_BYTES + 1000)] = None  # stored in chunks
    full.put_blobs({sha256_hex(data): data for data in blobs})
    reads = open_reads(path, lambda: EventStore(make_engine(f"sqlite:///{path}")))
    assert isinstance(reads, SqliteReads)
    yield full, reads, [sha256_hex(data) for data in blobs]
    reads.close()
    full.close()


def test_projection_reads_are_the_full_stores(stores: Any) -> None:
    full, reads, _ = stores
    assert reads.run_ids() == full.run_ids()
    assert reads.query("runs") == full.query("runs")
    assert reads.result_counts() == full.result_counts()
    for run in RUNS:
        assert reads.query("runs", run_id=run) == full.query("runs", run_id=run)
        assert reads.result_counts(run) == full.result_counts(run)
        assert list(reads.results_with_verdicts(run)) == list(full.results_with_verdicts(run))
        last = full.result_counts(run)[run]["last_seq"]
        for every in (1, 2, 5):
            assert reads.result_ends(run, every=every) == full.result_ends(run, every=every)
            assert reads.result_ends(run, every=every, upto_seq=last - 1) == full.result_ends(
                run, every=every, upto_seq=last - 1
            )
    assert reads.result_ends("no-such-run", every=1) == full.result_ends("no-such-run", every=1) == []


@pytest.mark.parametrize(
    "bounds",
    [{}, {"types": ["test_scored"]}, {"limit": 1}, {"after": 2}, {"after": 3, "upto": 9}, {"upto": 4, "limit": 2}],
)
def test_stream_reads_are_the_full_stores_with_their_hashes(stores: Any, bounds: dict[str, Any]) -> None:
    full, reads, _ = stores
    for run in RUNS:
        expected = [_event(ev) for ev in full.read_stream(run, **bounds)]
        assert [_event(ev) for ev in reads.read_stream(run, **bounds)] == expected
        assert expected or bounds.get("limit") == 0
        window = {k: v for k, v in bounds.items() if k in ("after", "upto")}
        for types in (["test_scored"], ["run_started", "verdict_recorded"]):
            assert list(reads.stream_payloads(run, types=types, **window)) == list(
                full.stream_payloads(run, types=types, **window)
            )


def test_verdict_events_are_the_full_stores(stores: Any) -> None:
    full, reads, _ = stores
    for run in RUNS:
        tests = [result[0] for result, _ in full.results_with_verdicts(run)]
        for asked in (tests, tests[:1], ["no-such-test"]):
            expected = [(key, grader, _event(ev)) for key, grader, ev in full.verdict_events(run, asked)]
            assert [(key, grader, _event(ev)) for key, grader, ev in reads.verdict_events(run, asked)] == expected
            assert expected or asked == ["no-such-test"] or run == "run-many"


def test_events_by_seq_are_the_full_stores(stores: Any) -> None:
    full, reads, _ = stores
    seqs = [ev.seq for ev in full.read_all()]
    picked = [*seqs[::3], seqs[-1], 10**9]  # one no event has
    assert {k: _event(v) for k, v in reads.events_at(picked).items()} == {
        k: _event(v) for k, v in full.events_at(picked).items()
    }
    assert len(reads.events_at(seqs)) == len(seqs)


def test_events_by_id_are_the_full_stores(stores: Any) -> None:
    """Ids of their own (through ``event_ids``: the sample runs give theirs) and derived ids (``run-many``'s
    events bring none), with ids no event has."""
    full, reads, _ = stores
    ids = [ev.event_id for ev in full.read_all()]
    from evalstore.store.records import derived_id, split_derived

    derived = [i for i in ids if split_derived(i) is not None]
    assert derived and len(derived) < len(ids)  # both kinds asked for
    asked = [*ids[::2], derived[-1], derived_id("no-such-stream", 1), derived_id("run-a", 10**6), "not-an-id"]
    got = reads.get_events(asked)
    assert {k: _event(v) for k, v in got.items()} == {k: _event(v) for k, v in full.get_events(asked).items()}
    assert len(got) == len(set(ids[::2]) | {derived[-1]})


def test_blobs_of_every_encoding_are_the_full_stores(stores: Any) -> None:
    full, reads, digests = stores
    assert reads.get_blobs(digests) == full.get_blobs(digests)
    for digest in digests:
        assert reads.get_blob(digest) == full.get_blob(digest)
        assert b"".join(reads.blob_pieces(digest)) == full.get_blob(digest)
    from evalstore.store.errors import BlobNotFound

    with pytest.raises(BlobNotFound):
        reads.get_blobs([*digests, "0" * 64])


def test_what_it_does_not_read_itself_the_full_store_does(stores: Any) -> None:
    full, reads, _ = stores
    # results rows hold booleans, which the full store converts: handed over, as is every other method
    assert reads.query("results", run_id="run-a") == full.query("results", run_id="run-a")
    assert reads.query("results", run_id="run-a")[0]["passed"] in (True, False)
    assert reads.stream_version("run-a") == full.stream_version("run-a")
    assert reads.verify().ok


def test_it_never_writes(stores: Any) -> None:
    _, reads, _ = stores
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reads._conn().execute("DELETE FROM runs")


def test_an_export_through_it_is_byte_for_byte_the_full_stores_with_forked_workers(stores: Any) -> None:
    from evalstore.replay.agentv.export import EXPORT_FORMATS, export_run

    full, reads, _ = stores
    for fmt in EXPORT_FORMATS:
        for run in RUNS:
            expected, got = io.StringIO(), io.StringIO()
            export_run(full, run, fmt, expected, workers=1)
            export_run(reads, run, fmt, got, workers=2)  # type: ignore[arg-type]
            assert got.getvalue() == expected.getvalue(), (fmt, run)


def _stamp(path: Path, revision: Any) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE alembic_version SET version_num = ?", (revision,))
    conn.close()


def test_only_a_store_at_this_schema_is_opened(tmp_path: Path) -> None:
    from sample_runs import populated_sqlite

    path = tmp_path / "store.db"
    populated_sqlite(path)
    never = lambda: pytest.fail("the full store is not opened to decide")  # noqa: E731
    assert isinstance(open_reads(path, never), SqliteReads)
    for revision in ("0004", "9999", b"0005"):  # older, newer, retyped as a BLOB
        _stamp(path, revision)
        assert open_reads(path, never) is None, revision
    (tmp_path / "not-a-db").write_bytes(b"hello, this is no database file at all" * 100)
    (tmp_path / "empty.db").write_bytes(b"")
    for other in (tmp_path / "not-a-db", tmp_path / "empty.db", tmp_path / "missing.db", tmp_path):
        assert open_reads(other, never) is None, other


def test_a_command_on_another_revision_says_what_the_full_store_says(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from sample_runs import populated_sqlite

    from evalstore import cli

    path = tmp_path / "store.db"
    populated_sqlite(path)
    _stamp(path, "0004")
    for args in (["show", "run-a"], ["export", "run-a"], ["runs"]):
        out = CliRunner().invoke(cli.main, ["--db", str(path), *args])
        assert out.exit_code == 2, out.output
        assert "this evalstore needs 0005: run `evalstore db upgrade`" in out.output
