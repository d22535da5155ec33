"""``evalstore export RUN --format bundle`` and ``evalstore import DIR``: a run moved between stores as it is."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from e2e_helpers import EVALSTORE, Recorded, cli, ok_json, one_line_error, verdict_signature
from judge_server import JudgeServer

from evalstore.store import EventStore
from evalstore.store.verify import blob_refs


def _streams(db: str, run_ids: list[str]) -> dict[str, list[tuple[str, str, int, str]]]:
    store = EventStore.open(db)
    try:
        return {
            run: [(e.event_id, e.type, e.schema_version, e.payload_json) for e in store.read_stream(run)]
            for run in run_ids
        }
    finally:
        store.close()


def _blobs(db: str, streams: dict[str, list[tuple[str, str, int, str]]]) -> dict[str, bytes]:
    store = EventStore.open(db)
    try:
        digests = {d for events in streams.values() for *_, p in events for d in blob_refs(json.loads(p))}
        return {d: store.get_blob(d) for d in sorted(digests)}
    finally:
        store.close()


def _copied(streams: dict[str, list[tuple[str, str, int, str]]], original: dict[str, list]) -> dict[str, int]:
    """Per stream, how many run_moved follow its original events, which must be there as they were."""
    moves = {}
    for run, events in streams.items():
        assert events[: len(original[run])] == original[run]
        after = events[len(original[run]) :]
        assert {type_ for _, type_, _, _ in after} <= {"run_moved"}
        moves[run] = len(after)
    return moves


def _started(db: str) -> dict[str, str]:
    return {r["run_id"]: r["started_at"] for r in ok_json(cli(db, "runs", "--json"))}


def _export(db: str, run: str, folder: Path) -> None:
    result = cli(db, "export", run, "--format", "bundle", "-o", str(folder))
    assert result.exit_code == 0, result.stderr
    assert (folder / "manifest.json").is_file() and not list(folder.parent.glob(f".{folder.name}.*"))


def test_a_bundle_moves_a_run_from_sqlite_to_postgresql_and_back(
    recorded: Recorded, recorded_db: str, postgres_url: str, tmp_path: Path, judge: JudgeServer, key_env: dict
) -> None:
    # A replay with a swap, so the bundle carries the recorded run it replays, too.
    replay = ok_json(cli(recorded_db, "replay", recorded.run_id, "--judge-model", "judge-model-2", "--json"), 0, 1)[
        "run_id"
    ]
    chain = [recorded.run_id, replay]
    original = _streams(recorded_db, chain)
    blobs = _blobs(recorded_db, original)
    assert any(b"xl/workbook" in data or data[:2] == b"PK" for data in blobs.values())  # the agent's xlsx

    there = tmp_path / "to-postgres"
    _export(recorded_db, replay, there)
    manifest = json.loads((there / "manifest.json").read_text("utf-8"))
    assert [s["stream_id"] for s in manifest["streams"]] == chain
    assert {b["sha256"] for b in manifest["blobs"]} == set(blobs)

    out = ok_json(cli(postgres_url, "import", str(there), "--json"))
    assert (out["run_id"], out["runs"], out["already_imported"]) == (replay, chain, False)
    # The same event ids, types, versions and payload bytes, each stream followed by the run_moved that
    # keeps the times the run had in the store it came from.
    assert _copied(_streams(postgres_url, chain), original) == dict.fromkeys(chain, 1)
    assert _blobs(postgres_url, original) == blobs
    assert _started(postgres_url) == _started(recorded_db)
    assert ok_json(cli(postgres_url, "verify", "--json"))["ok"] is True
    # Its results export as they did, rows' timestamps too (when each was graded, not when it was copied).
    for run in chain:
        exported = [cli(db, "export", run) for db in (recorded_db, postgres_url)]
        assert exported[0].stdout and exported[0].stdout == exported[1].stdout
    again = ok_json(cli(postgres_url, "import", str(there), "--json"))
    assert again["already_imported"] is True

    # A replay there gives the same verdicts, its judge replies from the bundle: not one request.
    asked = len(judge.requests)
    regraded = ok_json(cli(postgres_url, "replay", replay, "--json"), 0, 1)["run_id"]
    assert len(judge.requests) == asked
    assert verdict_signature(postgres_url, regraded) == verdict_signature(recorded_db, replay)

    # And back: PostgreSQL -> a new SQLite store.
    back = tmp_path / "to-sqlite"
    _export(postgres_url, replay, back)
    assert (back / "events.jsonl").read_bytes() != b""
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    ok_json(cli(fresh, "import", str(back), "--json"))
    assert _copied(_streams(fresh, chain), original) == dict.fromkeys(chain, 2)  # moved twice
    assert _blobs(fresh, original) == blobs
    assert _started(fresh) == _started(recorded_db)
    assert ok_json(cli(fresh, "verify", "--json"))["ok"] is True
    assert verdict_signature(fresh, replay) == verdict_signature(recorded_db, replay)


@pytest.mark.parametrize(
    "damage",
    ["blob", "event", "manifest", "missing-blob", "fifo-blob", "fifo-events", "device-blob"],
)
def test_a_damaged_bundle_is_refused_and_nothing_is_written(
    recorded: Recorded, recorded_db: str, tmp_path: Path, damage: str
) -> None:
    folder = tmp_path / "bundle"
    _export(recorded_db, recorded.run_id, folder)
    blob = sorted((folder / "blobs").iterdir())[0]
    if damage == "blob":
        blob.write_bytes(blob.read_bytes() + b"!")
        expected = "do not match the manifest"
    elif damage == "missing-blob":
        blob.unlink()
        expected = "cannot be read"
    elif damage.startswith("fifo"):  # opened, it would wait for a writer: the import would hang
        fifo = blob if damage == "fifo-blob" else folder / "events.jsonl"
        fifo.unlink()
        os.mkfifo(fifo)
        expected = "not a regular file"
    elif damage == "device-blob":  # read, it would never end
        blob.unlink()
        blob.symlink_to("/dev/zero")
        expected = "a symbolic link"  # refused before it is opened
    elif damage == "event":
        events = folder / "events.jsonl"
        events.write_bytes(events.read_bytes().replace(b'\\"score\\":', b'\\"score\\": ', 1))
        expected = "events_sha256"
    else:
        manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
        manifest["version"] = 99
        (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        expected = "bundle version 99"
    other = f"sqlite:///{tmp_path / 'other.db'}"
    assert expected in one_line_error(cli(other, "import", str(folder)))
    assert ok_json(cli(other, "runs", "--json")) == []


def test_bundle_needs_a_new_folder(recorded: Recorded, recorded_db: str, tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x", encoding="utf-8")
    error = one_line_error(
        cli(recorded_db, "export", recorded.run_id, "--format", "bundle", "-o", str(tmp_path / "full"))
    )
    assert "not an empty folder" in error
    usage = cli(recorded_db, "export", recorded.run_id, "--format", "bundle")
    assert usage.exit_code == 2 and "Error: --format bundle writes a folder: give it with -o DIR" in usage.stderr


def test_a_bundle_whose_parent_is_already_here_counts_only_what_it_writes(
    recorded: Recorded, recorded_db: str, tmp_path: Path, judge: JudgeServer, key_env: dict
) -> None:
    replay = ok_json(cli(recorded_db, "replay", recorded.run_id, "--json"), 0, 1)["run_id"]
    other = f"sqlite:///{tmp_path / 'other.db'}"
    _export(recorded_db, recorded.run_id, tmp_path / "parent")
    ok_json(cli(other, "import", str(tmp_path / "parent"), "--json"))
    _export(recorded_db, replay, tmp_path / "both")
    out = ok_json(cli(other, "import", str(tmp_path / "both"), "--json"))
    replay_events = len(_streams(recorded_db, [replay])[replay])
    assert (out["runs"], out["new_runs"], out["new_events"]) == ([recorded.run_id, replay], [replay], replay_events + 1)
    said = cli(other, "import", str(tmp_path / "both"))
    assert said.stdout.startswith("already imported")


def test_the_documented_move_of_a_whole_store_moves_runs_and_labels(
    recorded: Recorded, recorded_db: str, postgres_url: str, tmp_path: Path, judge: JudgeServer, key_env: dict
) -> None:
    """docs/usage.md's "Moving a whole store", run as written (only the two store URLs are this test's)."""
    ok_json(cli(recorded_db, "replay", recorded.run_id, "--json"), 0, 1)
    assert cli(recorded_db, "label", recorded.run_id, "q1-report", "--fail", "--by", "ann").exit_code == 0
    usage = (Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text(encoding="utf-8")
    section = usage.split("### Moving a whole store", 1)[1]
    script = section.split("```bash\n", 1)[1].split("```", 1)[0]
    script = script.replace("sqlite:///.evalstore/store.db", recorded_db).replace(
        "postgresql+psycopg://team@db/evals", postgres_url
    )
    env = {**os.environ, "PATH": f"{EVALSTORE.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-euc", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _started(postgres_url) == _started(recorded_db)  # every run, with its start
    labels = [json.loads(line) for line in cli(postgres_url, "labels", "export").stdout.splitlines()]
    assert [(label["test_id"], label["verdict"], label["by"]) for label in labels] == [("q1-report", "fail", "ann")]


@pytest.mark.parametrize("planted", ["label-stream", "label-in-run"])
def test_a_bundle_that_carries_what_is_not_its_run_is_refused(
    recorded: Recorded, recorded_db: str, tmp_path: Path, planted: str
) -> None:
    """A bundle moves a run's chain: a label (people's judgement, each store's own) slipped into one, as its
    own stream or inside the run's, with the digests made to match, would be imported as if it were true."""
    own = f"sqlite:///{tmp_path / 'own.db'}"
    (tmp_path / "own.db").write_bytes(recorded.db_file.read_bytes())
    labelled = cli(own, "label", recorded.run_id, "q1-report", "--fail", "--note", "forged", "--by", "alice")
    assert labelled.exit_code == 0, labelled.stderr
    folder = tmp_path / "bundle"
    _export(own, recorded.run_id, folder)
    store = EventStore.open(own)
    try:
        (label,) = store.read_stream(f"lbl-{recorded.run_id}")
    finally:
        store.close()
    manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
    stream, version = f"lbl-{recorded.run_id}", 1
    if planted == "label-in-run":
        stream, version = recorded.run_id, manifest["streams"][-1]["events"] + 1
        manifest["streams"][-1]["events"] = version
    else:
        manifest["streams"].append({"stream_id": stream, "events": 1})
    line = {
        "event_id": label.event_id,
        "stream_id": stream,
        "stream_version": version,
        "type": label.type,
        "schema_version": label.schema_version,
        "recorded_at": label.recorded_at,
        "payload": label.payload_json,
    }
    events = folder / "events.jsonl"
    events.write_bytes(events.read_bytes() + json.dumps(line).encode("utf-8") + b"\n")
    manifest["events_sha256"] = hashlib.sha256(events.read_bytes()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")

    other = f"sqlite:///{tmp_path / 'other.db'}"
    line_out = one_line_error(cli(other, "import", str(folder)))
    assert ("is not a run" if planted == "label-stream" else "label_recorded event is not part of a run") in line_out
    assert ok_json(cli(other, "runs", "--json")) == []
