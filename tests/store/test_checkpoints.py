"""Signed checkpoints catch what the hash chain alone cannot: a log cut short, rewritten, or rebuilt.

Each attack first drops the append-only triggers (as someone with write access to the database could)
and leaves a log that ``evalstore verify`` alone passes; the checkpoint then fails, naming what differs.
Every test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from log_rows import event_count, payload_at, record_span, rewrite_event, set_record, stored_hash, truncate_log
from sample_runs import drop_append_only_triggers, execute, populate, populated_sqlite, restore_append_only_triggers

from evalstore import cli
from evalstore.replay.attest.checkpoint import check_checkpoint, register_key
from evalstore.replay.attest.keys import create_key_file, load_signing_key, load_verifier_key
from evalstore.store import EventStore, make_engine, schema
from evalstore.store.events import LOG_STREAM
from evalstore.store.guards import APPEND_ONLY


def _cli(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli.main, ["--db", url, *args])


@pytest.fixture
def signed(store: EventStore, store_url: str, tmp_path: Path) -> tuple[EventStore, Path, Path, Path]:
    """A populated store with one checkpoint: (store, key file, public key file, checkpoint file)."""
    populate(store)
    key, pub, cp = tmp_path / "signing.key", tmp_path / "evalstore.pub", tmp_path / "checkpoint.txt"
    init = _cli(store_url, "keys", "init", "--key", str(key), "--name", "ci.example.com/evals")
    assert init.exit_code == 0, init.output
    pub.write_text(init.stdout)
    result = _cli(store_url, "checkpoint", "--key", str(key), "-o", str(cp))
    assert result.exit_code == 0, result.output
    assert result.stdout == cp.read_text()
    return store, key, pub, cp


def _verify(url: str, cp: Path, pub: Path, *extra: str) -> Result:
    return _cli(url, "verify", "--checkpoint", str(cp), "--pubkey", str(pub), *extra)


def test_a_checkpoint_signs_the_head_and_is_recorded_with_the_key(signed, store_url: str) -> None:  # type: ignore[no-untyped-def]
    store, _, pub, cp = signed
    n = event_count(store.engine)
    text = cp.read_text()
    origin, size, _root, head = text.split("\n")[:4]
    assert int(size) == n - 1  # the checkpoint event itself comes after the events it covers
    assert head == "evalstore-head " + stored_hash(store.engine, n - 1)
    assert text.split("\n\n")[1].startswith("— ci.example.com/evals ")
    log = [(e.type, e.payload) for e in store.read_stream(LOG_STREAM)]
    assert [t for t, _ in log] == ["key_registered", "checkpoint_recorded"]
    assert log[0][1]["public_key"] == pub.read_text().strip()
    assert "PRIVATE" not in json.dumps(log)  # the store never holds the private key
    assert log[1][1]["note"] == text and log[1][1]["origin"] == origin

    ok = _verify(store_url, cp, pub)
    assert ok.exit_code == 0, ok.output
    assert (
        ok.stdout.splitlines()[1]
        == f"ok: checkpoint {origin} of {n - 1} events signed by ci.example.com/evals matches the log"
    )
    # Later events do not break it: the log still begins with exactly the signed prefix.
    populate_more = _cli(store_url, "checkpoint", "--key", str(signed[1]))
    assert populate_more.exit_code == 0 and populate_more.stdout.startswith(origin + "\n")  # the log keeps its name
    assert _verify(store_url, cp, pub).exit_code == 0
    as_json = json.loads(_verify(store_url, cp, pub, "--json").stdout)
    assert as_json["ok"] and as_json["checkpoint"] == {
        "origin": origin,
        "size": n - 1,
        "signer": "ci.example.com/evals",
        "problem": None,
    }


def test_another_stores_checkpoint_is_said_to_be_of_another_log(signed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Not a truncation of this log (the other store may hold more events, or fewer): a checkpoint of another."""
    _, key, pub, cp = signed
    other_url = populated_sqlite(tmp_path / "other.db")
    theirs = _cli(other_url, "checkpoint", "--key", str(key))
    assert theirs.exit_code == 0, theirs.output
    result = _verify(other_url, cp, pub)
    assert result.exit_code == 1
    assert result.stderr == (
        f"FAILED: the checkpoint is of log {cp.read_text().split(chr(10))[0]}; this store is log "
        f"{theirs.stdout.split(chr(10))[0]} (as its own checkpoints name it): give a checkpoint of this store\n"
    )


def test_a_truncated_log_fails(signed, store_url: str) -> None:  # type: ignore[no-untyped-def]
    store, _, pub, cp = signed
    size = int(cp.read_text().split("\n")[1])
    drop_append_only_triggers(store.engine)
    assert record_span(store.engine, size - 3)[1] > size - 3  # the cut falls inside a record: it is shortened
    truncate_log(store.engine, size - 3)
    store.rebuild_projections()
    restore_append_only_triggers(store.engine)  # the attacker puts the guards back
    assert store.verify().ok  # the chain alone cannot tell
    result = _verify(store_url, cp, pub)
    assert result.exit_code == 1
    assert result.stderr == (
        f"FAILED: log truncated: it has {size - 3} events, the checkpoint covers {size} "
        f"(events after seq {size - 3} were removed)\n"
    )


def test_a_rewritten_event_with_the_chain_recomputed_fails(signed, store_url: str) -> None:  # type: ignore[no-untyped-def]
    store, _, pub, cp = signed
    size = int(cp.read_text().split("\n")[1])
    drop_append_only_triggers(store.engine)
    payload = payload_at(store.engine, 7)
    forged = payload.replace('"score":0.5', '"score":1.0')
    assert forged != payload
    rewrite_event(store.engine, 7, payload=forged, rechain=True)  # every later record's hash recomputed
    store.rebuild_projections()
    restore_append_only_triggers(store.engine)
    assert store.verify().ok
    result = _verify(store_url, cp, pub)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"FAILED: event seq {size} has hash ")
    assert result.stderr.endswith("the log was rewritten or rebuilt since it was signed\n")


def test_a_rebuilt_log_of_the_same_size_fails(signed, store_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store, key, pub, cp = signed
    size = int(cp.read_text().split("\n")[1])
    drop_append_only_triggers(store.engine)
    for table in (*APPEND_ONLY, *(t.name for t in schema.PROJECTION_TABLES)):
        execute(store.engine, f"DELETE FROM {table}")
    rebuilt = EventStore(make_engine(store_url))  # a new process: nothing remembered from the old log
    populate(rebuilt)  # the same runs, appended again
    restore_append_only_triggers(store.engine)
    register_key(rebuilt, load_signing_key(key).verifier)
    assert event_count(store.engine) == size and rebuilt.verify().ok
    rebuilt.close()
    result = _verify(store_url, cp, pub)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"FAILED: event seq {size} has hash ")


def test_an_earlier_event_altered_behind_an_intact_head_fails_on_the_root(signed) -> None:  # type: ignore[no-untyped-def]
    store, _, pub, cp = signed
    drop_append_only_triggers(store.engine)
    first, last = record_span(store.engine, 3)
    assert first < 3 < last  # the event's hash is not stored: its record's is, and all after it follow from it
    set_record(store.engine, first, hash=b"\xff" * 32)
    check = check_checkpoint(store, cp.read_text(), load_verifier_key(pub))
    size = check.checkpoint.size
    assert check.problem == (
        f"the Merkle root of events 1..{size} differs from the checkpoint's: an event before seq {size} was rewritten"
    )


def test_an_altered_checkpoint_or_another_key_fails_and_a_malformed_one_is_bad_input(
    signed, store_url, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    _, _, pub, cp = signed
    text = cp.read_text()
    size = text.split("\n")[1]
    forged = tmp_path / "forged.txt"
    forged.write_text(text.replace(f"\n{size}\n", f"\n{int(size) - 1}\n", 1))
    result = _verify(store_url, forged, pub)
    assert result.exit_code == 1
    assert result.stderr == (
        "FAILED: checkpoint signature: signature by ci.example.com/evals does not match the text "
        "(the checkpoint was altered after signing)\n"
    )
    other_key = tmp_path / "other.key"
    create_key_file(other_key, "someone-else")
    other_pub = tmp_path / "other.pub"
    other_pub.write_text(_cli(store_url, "keys", "show", "--key", str(other_key)).stdout)
    result = _verify(store_url, cp, other_pub)
    assert result.exit_code == 1 and "not by key someone-else" in result.stderr
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("hello\n")
    result = _verify(store_url, garbage, pub)
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: {garbage}: not a checkpoint (not a signed note: no blank line before the signatures); "
        "`evalstore checkpoint -o FILE` writes one\n"
    )


def test_verifying_someone_elses_checkpoint_without_pubkey_asks_for_it(signed, store_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, _, _, cp = signed
    nobody = {"XDG_CONFIG_HOME": str(tmp_path / "no-config")}  # no local signing key
    result = CliRunner(env=nobody).invoke(cli.main, ["--db", store_url, "verify", "--checkpoint", str(cp)])
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"Error: --checkpoint {cp}: give the signer's public key with --pubkey FILE")
    assert "keys init" not in line
    # A file that is not a checkpoint is called that first, whatever the keys.
    notes = tmp_path / "notes.txt"
    notes.write_text("meeting notes\n")
    result = CliRunner(env=nobody).invoke(cli.main, ["--db", store_url, "verify", "--checkpoint", str(notes)])
    assert result.exit_code == 2 and result.stderr.startswith(f"Error: {notes}: not a checkpoint (")


def test_without_a_key_checkpoint_is_one_error_line(store: EventStore, store_url: str, tmp_path: Path) -> None:
    missing = tmp_path / "none.key"
    result = _cli(store_url, "checkpoint", "--key", str(missing))
    assert result.exit_code == 2
    assert result.stderr == f"Error: {missing}: no signing key there; create one with `evalstore keys init`\n"
    assert list(store.read_stream(LOG_STREAM)) == []


def test_a_store_whose_record_cannot_be_read_fails_as_plain_verify_does(signed, store_url: str) -> None:  # type: ignore[no-untyped-def]
    """With --checkpoint too: exit 1 naming the record, not an error asking to run verify."""
    store, _, pub, cp = signed
    drop_append_only_triggers(store.engine)
    seq = record_span(store.engine, 5)[0]
    set_record(store.engine, seq, body=b"\x00 not deflate at all")
    plain = _cli(store_url, "verify")
    assert plain.exit_code == 1 and plain.stderr.startswith(f"FAILED: record seq {seq}"), plain.output
    result = _verify(store_url, cp, pub)
    assert (result.exit_code, result.stderr) == (1, plain.stderr)
