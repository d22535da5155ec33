"""``verify`` recomputes the chain and the blob digests and names the first thing that does not match.

The tamper tests first drop the append-only triggers, as someone with write access to the database
file or server could; the hash chain is the second line of defence.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sample_runs import drop_append_only_triggers, execute, populate, scalar

from evalstore import cli
from evalstore.store import EventStore, sha256_hex
from evalstore.store.codec import event_hash


@pytest.fixture
def filled(store: EventStore) -> EventStore:
    populate(store)
    return store


def _cli_verify(url: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli.main, ["--db", url, "verify", *args])


def test_a_sound_store_verifies(filled: EventStore, store_url: str) -> None:
    report = filled.verify()
    n_events = scalar(filled.engine, "SELECT count(*) FROM events")
    n_blobs = scalar(filled.engine, "SELECT count(*) FROM blobs")
    assert (report.ok, report.events, report.blobs, report.problem) == (True, n_events, n_blobs, None)
    result = _cli_verify(store_url)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"ok: {n_events} events, {n_blobs} blobs verified\n"


def test_an_altered_payload_is_caught_at_its_seq(filled: EventStore, store_url: str) -> None:
    drop_append_only_triggers(filled.engine)
    payload = scalar(filled.engine, "SELECT payload FROM events WHERE seq = 7")
    forged = payload.replace('"score":0.5', '"score":1.0')
    assert forged != payload
    execute(filled.engine, "UPDATE events SET payload = :p WHERE seq = 7", p=forged)

    report = filled.verify()
    assert not report.ok
    assert report.problem == "event seq 7: content does not match its hash (altered after it was written)"
    assert report.events == 6

    result = _cli_verify(store_url)
    assert result.exit_code == 1
    assert "event seq 7" in result.stderr and "Traceback" not in result.output
    as_json = _cli_verify(store_url, "--json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["problem"].startswith("event seq 7:")


def test_a_rehashed_forgery_breaks_the_link_to_the_next_event(filled: EventStore) -> None:
    # Recomputing the altered event's own hash is not enough: the next event still points at the old one.
    drop_append_only_triggers(filled.engine)
    ev = next(e for e in filled.read_all() if e.seq == 3)
    forged = ev.payload_json.replace("paris", "lyon")
    assert forged != ev.payload_json
    new_hash = event_hash(
        ev.prev_hash, seq=ev.seq, event_id=ev.event_id, stream_id=ev.stream_id, stream_version=ev.stream_version,
        type=ev.type, schema_version=ev.schema_version, payload=forged, recorded_at=ev.recorded_at,
    )  # fmt: skip
    execute(filled.engine, "UPDATE events SET payload = :p, hash = :h WHERE seq = 3", p=forged, h=new_hash)
    report = filled.verify()
    assert report.problem == "event seq 4: prev_hash does not match the hash of seq 3"


def test_a_deleted_event_is_caught(filled: EventStore) -> None:
    drop_append_only_triggers(filled.engine)
    execute(filled.engine, "DELETE FROM events WHERE seq = 12")
    assert filled.verify().problem == "event seq 12 is missing (next is 13)"


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
