"""Large blobs are streamed (issue 29 item 11): a file past a chunk is hashed, compressed and stored a chunk
at a time, as chunk rows and a row naming them, read back and written to a file a chunk at a time, and
``verify`` checks the whole digest. The chunk size is lowered here so that small files exercise it
(``bench/large_artifact.py`` measures a gigabyte)."""

from __future__ import annotations

import hashlib
import json
import random
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner
from sample_runs import drop_append_only_triggers, execute, populate, scalar
from starlette.testclient import TestClient

from evalstore import cli
from evalstore.store import EventStore, make_engine
from evalstore.store import blobs as store_blobs
from evalstore.store.blobs import CHUNKS, FileBlob
from evalstore.store.errors import StoreError
from evalstore.viewer import create_app

CHUNK = 1024


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(store_blobs, "CHUNK_BYTES", CHUNK)
    return CHUNK


def _content(size: int, seed: int = 29) -> bytes:
    # Random bytes (zlib gains nothing) then a run of zeros (chunks that repeat, and compress).
    half = size // 2
    return random.Random(seed).randbytes(half) + bytes(size - half)


def _file(tmp_path: Path, data: bytes, name: str = "artifact.bin") -> FileBlob:
    path = tmp_path / name
    path.write_bytes(data)
    return FileBlob(str(path), len(data))


def test_a_large_file_is_stored_in_chunks_and_read_back(store: EventStore, tmp_path: Path, small_chunks: int) -> None:
    data = _content(10 * CHUNK + 17)
    digest = hashlib.sha256(data).hexdigest()
    store.put_blobs({digest: _file(tmp_path, data)})
    encoding, size, listed = _row(store, digest)
    assert (encoding, size) == (CHUNKS, len(data))
    assert len(listed) == 32 * 11  # the chunks' digests, in order
    pieces = list(store.blob_pieces(digest))
    assert b"".join(pieces) == data and max(len(p) for p in pieces) == CHUNK
    assert store.get_blob(digest) == data and store.get_blobs([digest]) == {digest: data}
    # The repeated chunk of zeros is one row; every row is a blob keyed by the digest of what it holds.
    chunk_rows = scalar(store.engine, "SELECT count(*) FROM blobs WHERE sha256 <> :d", d=digest)
    assert chunk_rows == len({data[i : i + CHUNK] for i in range(0, len(data), CHUNK)})
    report = store.verify()
    assert report.ok and report.blobs == chunk_rows + 1
    store.put_blobs({digest: _file(tmp_path, data, "again.bin")})  # content-addressed: stored once
    assert scalar(store.engine, "SELECT count(*) FROM blobs") == chunk_rows + 1


def test_large_bytes_are_stored_in_chunks_too(store: EventStore, small_chunks: int) -> None:
    data = _content(3 * CHUNK)
    digest = hashlib.sha256(data).hexdigest()
    store.put_blobs({digest: data})
    assert _row(store, digest)[0] == CHUNKS and store.get_blob(digest) == data and store.verify().ok


def test_a_file_that_changed_since_it_was_hashed_is_refused_whole(
    store: EventStore, tmp_path: Path, small_chunks: int
) -> None:
    claimed = hashlib.sha256(_content(5 * CHUNK)).hexdigest()
    changed = _file(tmp_path, _content(5 * CHUNK, seed=30))
    with pytest.raises(StoreError, match=r"artifact\.bin changed while it was stored: its bytes have digest"):
        store.put_blobs({claimed: changed})
    assert scalar(store.engine, "SELECT count(*) FROM blobs") == 0  # no chunk left behind


def test_verify_checks_a_large_blob_through_its_chunks(store: EventStore, tmp_path: Path, small_chunks: int) -> None:
    populate(store)
    data = _content(6 * CHUNK)
    digest = hashlib.sha256(data).hexdigest()
    store.put_blobs({digest: _file(tmp_path, data)})
    assert store.verify().ok
    drop_append_only_triggers(store.engine)
    first = bytes(_row(store, digest)[2][:32]).hex()
    # A chunk row removed: the large blob can no longer be read whole, and verify names both.
    execute(store.engine, "DELETE FROM blobs WHERE sha256 = :c", c=first)
    assert store.verify().problem == f"blob {digest}: cannot be read: its chunk {first} is missing"
    # The list of chunks altered (a digest swapped for another chunk's): the whole no longer hashes.
    store.put_blobs({first: data[:CHUNK]})
    listed = bytearray(_row(store, digest)[2])
    listed[0:32], listed[32:64] = listed[32:64], listed[0:32]
    execute(store.engine, "UPDATE blobs SET data = :d WHERE sha256 = :s", d=bytes(listed), s=digest)
    assert store.verify().problem == f"blob {digest}: bytes do not match their digest"


def _row(store: EventStore, digest: str) -> tuple[str, int, bytes]:
    with store.engine.connect() as conn:
        from sqlalchemy import text

        row = conn.execute(text("SELECT encoding, size, data FROM blobs WHERE sha256 = :d"), {"d": digest}).one()
    return row[0], row[1], bytes(row[2])


# --- an import of a large artifact, end to end ---------------------------------------------------------


def _results_naming(folder: Path, artifact: Path) -> Path:
    row = {
        "timestamp": "2026-11-28T12:00:00.000Z",
        "test_id": "large",
        "suite": "s",
        "score": 1.0,
        "target": "default",
        "scores": [],
        "output": [{"role": "assistant", "content": [{"type": "file", "path": str(artifact)}]}],
    }
    path = folder / "results.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return path


def test_an_imported_artifact_is_streamed_end_to_end(store_url: str, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # 8 MiB in chunks of 64 KiB: what Python holds at its peak stays a few chunks (measured: 1.5 MiB,
    # most of it the command's own), far below the file (held whole, as before, twice its size).
    chunk, size = 64 * 1024, 8 * 1024 * 1024
    monkeypatch.setattr(store_blobs, "CHUNK_BYTES", chunk)
    monkeypatch.setenv("EVALSTORE_MAX_FILE_BYTES", str(size))
    artifact = tmp_path / "artifact.bin"
    with artifact.open("wb") as fh:
        rng = random.Random(11)
        for _ in range(size // chunk):
            fh.write(rng.randbytes(chunk))
    digest = hashlib.sha256(artifact.read_bytes()).hexdigest()
    results = _results_naming(tmp_path, artifact)
    runner = CliRunner()
    runner.invoke(cli.main, ["--db", store_url, "runs"])  # the store's schema made before measuring
    # Every module an import and an export load, loaded before measuring: an import of a small artifact.
    warm = tmp_path / "warm"
    warm.mkdir()
    (warm / "small.bin").write_bytes(b"small")
    warm_db = f"sqlite:///{warm / 'warm.db'}"
    runner.invoke(cli.main, ["--db", warm_db, "import", str(_results_naming(warm, warm / "small.bin"))])
    runner.invoke(cli.main, ["--db", warm_db, "export", "last", "--format", "bundle", "-o", str(warm / "b")])
    tracemalloc.start()
    try:
        imported = runner.invoke(cli.main, ["--db", store_url, "import", str(results), "--json"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert imported.exit_code == 0, imported.output
    assert peak < size / 2, f"import peaked at {peak / 2**20:.1f} MiB of Python memory for an 8 MiB file"
    run_id = json.loads(imported.stdout)["run_id"]
    assert runner.invoke(cli.main, ["--db", store_url, "verify"]).exit_code == 0
    audit = runner.invoke(cli.main, ["--db", store_url, "audit", run_id, "large"])
    assert audit.exit_code == 0 and "all match" in audit.stdout, audit.output
    bundle = tmp_path / "bundle"
    tracemalloc.start()
    try:
        exported = runner.invoke(
            cli.main, ["--db", store_url, "export", run_id, "--format", "bundle", "-o", str(bundle)]
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert exported.exit_code == 0, exported.output
    assert peak < size / 2, f"export peaked at {peak / 2**20:.1f} MiB of Python memory"
    assert (bundle / "blobs" / digest).read_bytes() == artifact.read_bytes()
    # The viewer serves it a chunk at a time.
    viewed = EventStore(make_engine(store_url, create=False), create=False)
    try:
        page = TestClient(create_app(viewed), base_url="http://127.0.0.1").get(f"/runs/{run_id}/artifacts/{digest}")
        assert page.status_code == 200 and page.headers["content-length"] == str(size)
        assert hashlib.sha256(page.content).hexdigest() == digest
    finally:
        viewed.close()
    # The bundle imports into another store, the large blob read from it a chunk at a time.
    other = f"sqlite:///{tmp_path / 'other.db'}"
    again = runner.invoke(cli.main, ["--db", other, "import", str(bundle)])
    assert again.exit_code == 0, again.output
    moved = EventStore(make_engine(other))
    try:
        assert moved.verify().ok
        assert hashlib.sha256(b"".join(moved.blob_pieces(digest))).hexdigest() == digest
    finally:
        moved.close()
