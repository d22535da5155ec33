"""Content-addressed blobs: stored once, compressed when it pays, refused under a wrong digest."""

from __future__ import annotations

import os

import pytest
from sample_runs import scalar

from store import BlobNotFound, EventStore, StoreError, sha256_hex
from store.blobs import COMPRESS_MIN_BYTES
from store.events import ArtifactStored


def _artifact(sha: str, size: int, path: str = "out/a.bin") -> ArtifactStored:
    return ArtifactStored(test_id="t", path=path, sha256=sha, size=size)


def _rows(store: EventStore) -> list[tuple]:
    with store.engine.connect() as conn:
        from sqlalchemy import text

        return [tuple(r) for r in conn.execute(text("SELECT sha256, size, encoding FROM blobs ORDER BY sha256"))]


def test_same_bytes_are_stored_once(store: EventStore) -> None:
    data = b"the same report, twice\n" * 3
    sha = sha256_hex(data)
    store.append("r", [_artifact(sha, len(data))], blobs={sha: data})
    store.append("r", [_artifact(sha, len(data), "out/copy.bin")], blobs={sha: data})
    store.put_blobs({sha: data})
    assert _rows(store) == [(sha, len(data), "identity")]
    assert store.get_blob(sha) == data
    assert scalar(store.engine, "SELECT count(*) FROM events") == 2


def test_compressible_blobs_are_compressed_and_round_trip(store: EventStore) -> None:
    text_blob = ("A long transcript line that repeats. " * 200).encode()
    random_blob = os.urandom(4096)  # incompressible: kept as it is
    small = b"\x00\x01tiny"
    blobs = {sha256_hex(b): b for b in (text_blob, random_blob, small)}
    store.put_blobs(blobs)
    encodings = {sha: enc for sha, _size, enc in _rows(store)}
    assert encodings == {
        sha256_hex(text_blob): "zlib",
        sha256_hex(random_blob): "identity",
        sha256_hex(small): "identity",
    }
    stored_size = scalar(store.engine, "SELECT length(data) FROM blobs WHERE sha256 = :s", s=sha256_hex(text_blob))
    assert COMPRESS_MIN_BYTES < len(text_blob) and stored_size < len(text_blob) / 10
    for sha, data in blobs.items():
        assert store.get_blob(sha) == data
    assert store.has_blobs([*blobs, "f" * 64]) == set(blobs)
    assert store.verify().ok


def test_a_blob_under_the_wrong_digest_is_refused_with_its_events(store: EventStore) -> None:
    data = b"real bytes"
    wrong = sha256_hex(b"other bytes")
    with pytest.raises(StoreError, match=f"blob given as {wrong} has digest {sha256_hex(data)}"):
        store.append("r", [_artifact(wrong, len(data))], blobs={wrong: data})
    # The append is one transaction: the event that referenced the bad blob did not land either.
    assert scalar(store.engine, "SELECT count(*) FROM events") == 0
    assert scalar(store.engine, "SELECT count(*) FROM blobs") == 0
    with pytest.raises(StoreError):
        store.put_blobs({wrong: data})


def test_missing_blob(store: EventStore) -> None:
    with pytest.raises(BlobNotFound, match="no blob " + "a" * 64):
        store.get_blob("a" * 64)
