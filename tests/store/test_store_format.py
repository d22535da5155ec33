"""docs/store-format.md's standalone checker, run as a user would run it, on real stores: it agrees with
``evalstore verify`` on a sound store and names what was altered in a tampered one."""

from __future__ import annotations

import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from log_rows import payload_at, record_span, rewrite_event
from sample_runs import drop_append_only_triggers, execute, populate, scalar

from evalstore.store import EventStore, sha256_hex
from evalstore.store.blobs import CHUNK_BYTES

DOC = Path(__file__).resolve().parents[2] / "docs" / "store-format.md"


def _checker(tmp_path: Path) -> Path:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Checking a store without evalstore") :]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    path = tmp_path / "check_store.py"
    path.write_text(code, encoding="utf-8")
    return path


def _check(tmp_path: Path, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", str(_checker(tmp_path)), str(db)], capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def filled(sqlite_store: EventStore) -> EventStore:
    populate(sqlite_store)
    template = ("The rendered grader prompt template, the same for every test of the suite. " * 12).encode()
    prompts = [template + f"question {i}".encode() for i in range(3)]  # compressed against a dictionary
    large = bytes(range(256)) * (CHUNK_BYTES // 256 + 100)  # stored as chunks
    sqlite_store.put_blobs({sha256_hex(b): b for b in [*prompts, large]})
    return sqlite_store


def _db(store: EventStore) -> Path:
    return Path(store.engine.url.database or "")


def test_the_checker_agrees_with_verify_on_a_sound_store(filled: EventStore, tmp_path: Path) -> None:
    engine = filled.engine
    assert scalar(engine, "SELECT count(*) FROM blobs WHERE dictionary IS NOT NULL") >= 2
    assert scalar(engine, "SELECT count(*) FROM blobs WHERE encoding = 'chunks'") == 1
    report = filled.verify()
    head = bytes(scalar(engine, "SELECT hash FROM records ORDER BY seq DESC LIMIT 1")).hex()
    done = _check(tmp_path, _db(filled))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"ok: {report.events} events, {report.blobs} blobs; head {head}\n"


def test_the_checker_names_an_altered_event(filled: EventStore, tmp_path: Path) -> None:
    drop_append_only_triggers(filled.engine)
    rewrite_event(filled.engine, 7, payload=payload_at(filled.engine, 7).replace("paris", "lyon"))
    assert "lyon" in payload_at(filled.engine, 7)
    first, last = record_span(filled.engine, 7)
    assert first < 7 <= last  # an event inside its record, not its first or the record's own row
    done = _check(tmp_path, _db(filled))
    assert done.returncode == 1
    span = f"event seq {first}" if first == last else f"events seq {first}-{last}"
    assert done.stderr == f"{_db(filled)}: record seq {first} ({span}) does not match the chain\n"


def test_the_checker_names_an_altered_blob(filled: EventStore, tmp_path: Path) -> None:
    drop_append_only_triggers(filled.engine)
    key = scalar(filled.engine, "SELECT min(sha256) FROM blobs WHERE encoding = 'identity'")
    execute(filled.engine, "UPDATE blobs SET data = CAST('forged' AS BLOB) WHERE sha256 = :k", k=key)
    done = _check(tmp_path, _db(filled))
    assert done.returncode == 1
    assert done.stderr == f"{_db(filled)}: blob {key} does not match its key\n"


def test_the_checker_names_a_record_whose_body_a_flipped_byte_spoils(filled: EventStore, tmp_path: Path) -> None:
    """A raw deflate stream has no checksum: a flipped byte may inflate to events without their four fields
    (found here by trying each byte of a record), which the checker names in one line, exit 1."""
    drop_append_only_triggers(filled.engine)
    with filled.engine.connect() as conn:
        dictionaries = dict(conn.exec_driver_sql("SELECT id, data FROM dictionaries").fetchall())
        rows = conn.exec_driver_sql("SELECT seq, dictionary, body FROM records ORDER BY seq").fetchall()

    def unfielded(dictionary: int | None, body: bytes) -> bool:
        try:
            inflate = zlib.decompressobj(-15, zdict=dictionaries[dictionary]) if dictionary else zlib.decompressobj(-15)
            events = inflate.decompress(body).decode().partition("\x1d")[2]
        except (zlib.error, UnicodeDecodeError):
            return False
        return any(len(line.split("\x1f", 3)) != 4 for line in events.split("\x1e"))

    seq, flipped = next(
        (seq, spoilt)
        for seq, dictionary, body in rows
        for offset in range(len(body))
        if unfielded(dictionary, spoilt := body[:offset] + bytes([body[offset] ^ 0x01]) + body[offset + 1 :])
    )
    execute(filled.engine, "UPDATE records SET body = :b WHERE seq = :s", b=flipped, s=seq)
    done = _check(tmp_path, _db(filled))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"{_db(filled)}: record seq {seq} cannot be read ("), done.stderr
