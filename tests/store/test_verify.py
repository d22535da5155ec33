"""``verify`` recomputes the chain and the blob digests and names the first thing that does not match.

The tamper tests first drop the append-only triggers, as someone with write access to the database
file or server could; the hash chain is the second line of defence.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from log_rows import altered_problem, delete_record, event_count, payload_at, record_span, rewrite_event
from sample_runs import drop_append_only_triggers, execute, populate, scalar

from evalstore import cli
from evalstore.store import EventStore, sha256_hex


@pytest.fixture
def filled(store: EventStore) -> EventStore:
    populate(store)
    return store


def _cli_verify(url: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli.main, ["--db", url, "verify", *args])


def test_a_sound_store_verifies(filled: EventStore, store_url: str) -> None:
    report = filled.verify()
    n_events = event_count(filled.engine)
    n_blobs = scalar(filled.engine, "SELECT count(*) FROM blobs")
    assert (report.ok, report.events, report.blobs, report.problem) == (True, n_events, n_blobs, None)
    result = _cli_verify(store_url)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"ok: {n_events} events, {n_blobs} blobs verified\n"


def test_an_altered_payload_is_caught_at_its_record(filled: EventStore, store_url: str) -> None:
    drop_append_only_triggers(filled.engine)
    payload = payload_at(filled.engine, 7)
    forged = payload.replace('"score":0.5', '"score":1.0')
    assert forged != payload
    rewrite_event(filled.engine, 7, payload=forged)
    assert record_span(filled.engine, 7) == (2, 8)  # paris's events, from the case to its score

    report = filled.verify()
    assert not report.ok
    assert (
        report.problem
        == "record seq 2 (events seq 2-8): content does not match its hash (altered after it was written)"
    )
    assert report.problem == altered_problem(filled.engine, 7)
    assert report.events == 1  # the run's start, in the record before

    result = _cli_verify(store_url)
    assert result.exit_code == 1
    assert "record seq 2 (events seq 2-8)" in result.stderr and "Traceback" not in result.output
    as_json = _cli_verify(store_url, "--json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["problem"].startswith("record seq 2 (events seq 2-8):")


def test_an_altered_record_of_one_event_is_named_by_its_seq(filled: EventStore) -> None:
    drop_append_only_triggers(filled.engine)
    assert record_span(filled.engine, 23) == (23, 23)  # run-a's run_completed, an append of its own
    rewrite_event(filled.engine, 23, payload=payload_at(filled.engine, 23).replace('"tests":3', '"tests":4'))
    report = filled.verify()
    assert (
        report.problem == "record seq 23 (event seq 23): content does not match its hash (altered after it was written)"
    )
    assert report.events == 22


def test_a_rehashed_forgery_breaks_the_link_to_the_next_record(filled: EventStore) -> None:
    # Recomputing the altered record's own hash is not enough: the next record's chain starts from the old one.
    drop_append_only_triggers(filled.engine)
    payload = payload_at(filled.engine, 3)
    forged = payload.replace("paris", "lyon")
    assert forged != payload
    rewrite_event(filled.engine, 3, payload=forged, rehash=True)
    report = filled.verify()
    assert record_span(filled.engine, 9) == (9, 15)
    assert (
        report.problem
        == "record seq 9 (events seq 9-15): content does not match its hash (altered after it was written)"
    )
    assert report.events == 8


def test_a_deleted_record_is_caught(filled: EventStore) -> None:
    drop_append_only_triggers(filled.engine)
    assert delete_record(filled.engine, 12) == (9, 15)
    assert filled.verify().problem == "event seq 9 is missing (next is 16)"


def test_altered_blob_bytes_are_caught_by_digest(filled: EventStore, store_url: str) -> None:
    drop_append_only_triggers(filled.engine)
    # An uncompressed blob, so the forgery still decodes and only its digest gives it away.
    digest = scalar(filled.engine, "SELECT sha256 FROM blobs WHERE encoding = 'identity' ORDER BY sha256 LIMIT 1")
    original = filled.get_blob(digest)
    forged = original[:-1] + bytes([original[-1] ^ 1])
    execute(filled.engine, "UPDATE blobs SET data = :d WHERE sha256 = :s", d=forged, s=digest)

    report = filled.verify()
    assert report.problem == f"blob {digest}: bytes do not match their digest"
    assert sha256_hex(filled.get_blob(digest)) != digest

    result = _cli_verify(store_url)
    assert result.exit_code == 1
    assert f"blob {digest}" in result.stderr


def test_a_corrupt_compressed_blob_is_caught(filled: EventStore) -> None:
    drop_append_only_triggers(filled.engine)
    digest = scalar(filled.engine, "SELECT sha256 FROM blobs WHERE encoding = 'zlib' ORDER BY sha256 LIMIT 1")
    assert digest, "the sample runs store at least one compressed blob"
    execute(filled.engine, "UPDATE blobs SET data = :d WHERE sha256 = :s", d=b"not zlib", s=digest)
    problem = filled.verify().problem
    assert problem is not None and problem.startswith(f"blob {digest}: cannot be decoded")
