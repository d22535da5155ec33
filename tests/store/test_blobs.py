"""Content-addressed blobs: stored once, compressed when it pays, refused under a wrong digest."""

from __future__ import annotations

import os

import pytest
from log_rows import event_count
from sample_runs import scalar

from evalstore.store import BlobCorrupt, BlobNotFound, EventStore, StoreError, sha256_hex
from evalstore.store.blobs import COMPRESS_MIN_BYTES
from evalstore.store.events import ArtifactStored


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
    assert event_count(store.engine) == 2


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
    assert len(text_blob) > COMPRESS_MIN_BYTES and stored_size < len(text_blob) / 10
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
    assert event_count(store.engine) == 0
    assert scalar(store.engine, "SELECT count(*) FROM blobs") == 0
    with pytest.raises(StoreError):
        store.put_blobs({wrong: data})


def test_missing_blob(store: EventStore) -> None:
    with pytest.raises(BlobNotFound, match="no blob " + "a" * 64):
        store.get_blob("a" * 64)


# --- compression dictionaries -------------------------------------------------------------------

TEMPLATE = (
    "You are an expert evaluator. Grade the candidate answer against each rubric item and return JSON with "
    "checks, each with an id, whether it is satisfied and a brief reasoning, and an overall reasoning. "
) * 6


def _prompt(i: int) -> bytes:
    """Blobs that begin alike and share most of their text, like one grader template's rendered prompts."""
    return (TEMPLATE + f"[[ ## question {i} ## ]] " + os.urandom(60).hex() + f" [[ ## answer ## ]] {i * 7919}").encode()


def _dictionaries(store: EventStore) -> dict[str, str | None]:
    with store.engine.connect() as conn:
        from sqlalchemy import text

        return dict(conn.execute(text("SELECT sha256, dictionary FROM blobs")).all())


def test_blobs_that_begin_alike_are_compressed_against_the_first(store: EventStore) -> None:
    first, *rest = [_prompt(i) for i in range(6)]
    store.put_blobs({sha256_hex(first): first})
    store.append("r", [_artifact(sha256_hex(b), len(b)) for b in rest[:3]], blobs={sha256_hex(b): b for b in rest[:3]})
    store.put_blobs({sha256_hex(b): b for b in rest[3:]})  # a second transaction, same dictionary
    named = _dictionaries(store)
    assert named[sha256_hex(first)] is None
    assert {named[sha256_hex(b)] for b in rest} == {sha256_hex(first)}

    import zlib

    plain = zlib.compress(rest[0], 6)
    stored = scalar(store.engine, "SELECT length(data) FROM blobs WHERE sha256 = :s", s=sha256_hex(rest[0]))
    assert stored < len(plain) / 2, (stored, len(plain))  # the shared text is not paid for again

    # Any reader decodes from the rows alone: a store opened afresh has no dictionaries in memory.
    fresh = EventStore(store.engine)
    for b in (first, *rest):
        assert fresh.get_blob(sha256_hex(b)) == b
    assert fresh.verify().ok


def test_blobs_that_begin_differently_do_not_share_a_dictionary(store: EventStore) -> None:
    a, b = _prompt(1), b"Another template entirely. " * 40
    store.put_blobs({sha256_hex(a): a})
    store.put_blobs({sha256_hex(b): b})
    assert _dictionaries(store)[sha256_hex(b)] is None


def test_a_failed_append_leaves_no_dictionary_behind(store: EventStore) -> None:
    from evalstore.store import ConcurrencyError

    first, second = _prompt(1), _prompt(2)
    with pytest.raises(ConcurrencyError):
        store.append(
            "r", [_artifact(sha256_hex(first), len(first))], expected_version=7, blobs={sha256_hex(first): first}
        )
    store.put_blobs({sha256_hex(second): second})
    # ``first`` never landed, so nothing may be compressed against it.
    assert _dictionaries(store) == {sha256_hex(second): None}
    assert store.get_blob(sha256_hex(second)) == second


def test_a_blob_stored_against_a_dictionary_never_serves_as_one(store: EventStore) -> None:
    a, b, c, d = (_prompt(i) for i in range(4))
    store.put_blobs({sha256_hex(a): a})
    store.put_blobs({sha256_hex(b): b})
    other = EventStore(store.engine)  # another process: it has not seen ``a``
    other.put_blobs({sha256_hex(b): b, sha256_hex(c): c})
    other.put_blobs({sha256_hex(d): d})
    named = _dictionaries(store)
    assert named[sha256_hex(b)] == sha256_hex(a)
    assert named[sha256_hex(c)] is None  # not against ``b``, which is itself stored against ``a``
    assert named[sha256_hex(d)] == sha256_hex(c)
    assert all(other.get_blob(sha256_hex(x)) == x for x in (a, b, c, d))


def test_a_dictionary_that_was_altered_is_caught(store: EventStore) -> None:
    from sqlalchemy import text

    first, second = _prompt(1), _prompt(2)
    store.put_blobs({sha256_hex(first): first})
    store.put_blobs({sha256_hex(second): second})
    assert _dictionaries(store)[sha256_hex(second)] == sha256_hex(first)
    with store.engine.begin() as conn:
        if store.engine.dialect.name == "sqlite":
            conn.execute(text("DROP TRIGGER blobs_no_update"))
        else:
            conn.execute(text("ALTER TABLE blobs DISABLE TRIGGER blobs_append_only"))
        conn.execute(
            text("UPDATE blobs SET encoding = 'identity', data = :d WHERE sha256 = :s"),
            {"d": b"X" * len(first), "s": sha256_hex(first)},
        )
    fresh = EventStore(store.engine)
    report = fresh.verify()
    # Whichever of the two verify meets first, the problem names the altered dictionary.
    assert not report.ok and sha256_hex(first) in (report.problem or "")
    # A deflate stream names its dictionary's checksum: another dictionary is refused, not misread.
    with pytest.raises(BlobCorrupt, match=f"cannot be decoded against its dictionary, blob {sha256_hex(first)}"):
        fresh.get_blob(sha256_hex(second))


def test_undecodable_rows_raise_blob_corrupt() -> None:
    from evalstore.store.blobs import decode_blob

    with pytest.raises(BlobCorrupt, match=r"cannot be decoded \(zlib: "):
        decode_blob("zlib", b"not zlib at all")
    with pytest.raises(BlobCorrupt, match="cannot be decoded: unknown blob encoding 'zstd'"):
        decode_blob("zstd", b"...")
    # A row edited by hand in SQL (replace(), a string literal) holds text: read as its bytes, so that
    # the digest check names the blob rather than the reader failing.
    assert decode_blob("identity", "tampered") == b"tampered"
    with pytest.raises(BlobCorrupt, match=r"cannot be decoded \(zlib: "):
        decode_blob("zlib", "text, not a deflate stream")


def test_blobs_compressed_on_the_worker_thread_are_the_rows_compressed_inline(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large appends compress on a worker thread, after the dictionaries were chosen in order: same rows."""
    from evalstore.store import recorder

    def append_all(threaded: bool) -> list[tuple]:
        monkeypatch.setattr(recorder, "THREADED_BLOB_BYTES", 0 if threaded else 1 << 62)
        # Another first byte for each run: neither uses the other's dictionary.
        blobs = [(b"T" if threaded else b"I") + _prompt(i) for i in range(6)] + [os.urandom(2000)]
        store.append(
            f"r-{threaded}",
            [_artifact(sha256_hex(b), len(b), f"out/{i}") for i, b in enumerate(blobs)],
            blobs={sha256_hex(b): b for b in blobs},
        )
        for b in blobs:
            assert store.get_blob(sha256_hex(b)) == b
        with store.engine.connect() as conn:
            from sqlalchemy import text

            names = {sha256_hex(b): i for i, b in enumerate(blobs)}
            rows = conn.execute(text("SELECT sha256, size, encoding, dictionary FROM blobs")).all()
            return sorted(
                (names[sha], size, encoding, names.get(dictionary))
                for sha, size, encoding, dictionary in rows
                if sha in names
            )

    inline, threaded = append_all(False), append_all(True)
    assert inline == threaded
    assert [encoding for _, _, encoding, _ in threaded] == ["zlib"] * 6 + ["identity"]
    assert [dictionary for *_, dictionary in threaded] == [None] + [0] * 5 + [None]
    assert store.verify().ok


def test_a_forked_child_compresses_on_a_worker_of_its_own(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A child forked after the parent's compressing thread started has no such thread: it must not wait for it."""
    import multiprocessing

    from evalstore.store import recorder

    monkeypatch.setattr(recorder, "THREADED_BLOB_BYTES", 0)
    url = f"sqlite:///{tmp_path / 'forked.db'}"

    def append_one(store: EventStore, stream: str, data: bytes) -> None:
        store.append(stream, [_artifact(sha256_hex(data), len(data))], blobs={sha256_hex(data): data})

    store = EventStore.open(url)
    append_one(store, "parent", _prompt(0))  # the parent's worker thread now runs
    store.close()
    data = _prompt(1)
    child = multiprocessing.get_context("fork").Process(target=lambda: append_one(EventStore.open(url), "child", data))
    child.start()
    try:
        child.join(60)
        assert child.exitcode == 0
    finally:
        child.kill()
    assert EventStore.open(url).get_blob(sha256_hex(data)) == data
