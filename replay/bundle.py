"""A run moved between stores as it is: ``evalstore export RUN --format bundle`` and its import.

A bundle is a folder:

- ``events.jsonl``: one line per event, oldest stream first (the run that holds the transcripts, then
  each replay down to RUN), each as the store holds it: ``event_id``, ``stream_id``, ``stream_version``,
  ``type``, ``schema_version``, ``recorded_at`` and ``payload`` (the canonical JSON text, byte for byte);
- ``blobs/<sha256>``: the raw bytes of every blob those events name;
- ``manifest.json``: ``{"format": "evalstore-bundle", "version": 1, "run_id", "streams": [{"stream_id",
  "events"}], "events_sha256", "blobs": [{"sha256", "size"}], "tool_version"}``.

Importing checks everything before writing: the manifest, the events file's digest, each blob's digest
and size, that every blob an event names is in the bundle, that each payload is canonical JSON of a known
event type, that the streams are the run's chain (each a run: ``run_started`` first, no label or log
events; each after the first a replay of the one before; the manifest's run last), and that a stream
already in the store holds exactly these events. Then each stream is
appended as it was (same event ids and payloads, blobs by digest); seq, the hash chain and
``recorded_at`` are the receiving log's own, so each copied stream ends with a ``run_moved`` event that
keeps the times the run had where it came from (``evalstore runs`` lists those). Importing a bundle again
writes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from evalstore import __version__
from evalstore.replay.analysis.views import replay_chain, run_started
from evalstore.replay.errors import ReplayError
from evalstore.replay.jsontext import decode_problem
from evalstore.store import EventStore, StoredEvent, canonical_json, projections, sha256_hex
from evalstore.store.blobs import FileBlob, file_digest, is_large_size
from evalstore.store.errors import DatabaseFailure, StoreError
from evalstore.store.events import (
    LOG_STREAM,
    CheckpointRecorded,
    KeyRegistered,
    LabelRecorded,
    RunMoved,
    RunStarted,
    decode,
    encode,
)
from evalstore.store.verify import blob_refs

FORMAT, VERSION = "evalstore-bundle", 1
MANIFEST, EVENTS, BLOBS = "manifest.json", "events.jsonl", "blobs"
EVENT_FIELDS = ("event_id", "stream_id", "stream_version", "type", "schema_version", "recorded_at", "payload")


class BundleError(ReplayError):
    """A bundle that cannot be written or read as it is."""


@dataclass
class BundleOutcome:
    run_id: str
    streams: list[str]
    events: int
    blobs: int
    already_imported: bool = False
    new_runs: list[str] | None = None
    """The runs this import wrote (the others were in the store already); None for an export."""
    new_events: int = 0
    """Events written: the new runs' own, and each one's ``run_moved``."""


def is_bundle(path: Path) -> bool:
    """A folder holding a bundle manifest (what ``evalstore import`` checks before AgentV formats)."""
    return path.is_dir() and (path / MANIFEST).is_file()


def run_chain(store: EventStore, run_id: str) -> list[str]:
    """The run and every run it replays, down to the one holding the transcripts; oldest first."""
    return [started.run_id for started in reversed(replay_chain(store, run_started(store, run_id)))]


def export_bundle(store: EventStore, run_id: str, directory: Path) -> BundleOutcome:
    """Write RUN (with the runs it replays) as a bundle folder; the folder appears only once complete."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise BundleError(f"{directory}: exists and is not an empty folder; give a new folder to write the bundle to")
    parent = directory.resolve().parent
    if not parent.is_dir():
        raise BundleError(f"{parent}: no such folder (-o)")
    streams = run_chain(store, run_id)
    work = Path(tempfile.mkdtemp(dir=parent, prefix=f".{directory.name}.", suffix=".tmp"))
    try:
        (work / BLOBS).mkdir()
        counts: list[dict[str, Any]] = []
        digests: dict[str, int] = {}
        with (work / EVENTS).open("wb") as fh:
            for stream_id in streams:
                n = 0
                for stored in store.read_stream(stream_id):
                    fh.write(_event_line(stored))
                    n += 1
                    for digest in blob_refs(stored.payload):
                        if digest not in digests:
                            digests[digest] = _write_blob(store, digest, work / BLOBS / digest)
                counts.append({"stream_id": stream_id, "events": n})
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "run_id": run_id,
            "streams": counts,
            "events_sha256": sha256_hex((work / EVENTS).read_bytes()),
            "blobs": [{"sha256": d, "size": digests[d]} for d in sorted(digests)],
            "tool_version": __version__,
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if directory.exists():
            directory.rmdir()  # empty (checked above): replaced by the finished bundle
        os.replace(work, directory)
    finally:
        if work.exists():
            shutil.rmtree(work)
    return BundleOutcome(run_id, streams, sum(c["events"] for c in counts), len(digests))


def _event_line(stored: StoredEvent) -> bytes:
    row = {
        "event_id": stored.event_id,
        "stream_id": stored.stream_id,
        "stream_version": stored.stream_version,
        "type": stored.type,
        "schema_version": stored.schema_version,
        "recorded_at": stored.recorded_at,
        "payload": stored.payload_json,
    }
    return (json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


# -- import --------------------------------------------------------------------------------------


def import_bundle(store: EventStore, directory: Path) -> BundleOutcome:
    """Append a bundle's streams to ``store`` as they were; checked whole before anything is written."""
    manifest = _manifest(directory)
    if (directory / BLOBS).is_symlink():
        raise BundleError(f"{directory / BLOBS}: a symbolic link; a bundle holds its blobs in a folder of its own")
    events_path = directory / EVENTS
    raw = _read(events_path)
    if sha256_hex(raw) != manifest["events_sha256"]:
        raise BundleError(f"{events_path}: its sha256 is not the manifest's events_sha256 (altered or truncated)")
    by_stream = _events(events_path, raw, manifest)
    blobs = _blobs(directory, manifest)
    for rows in by_stream.values():
        for line, _, refs in rows:
            missing = refs - blobs.keys()
            if missing:
                raise BundleError(f"{events_path}:{line}: names blob {sorted(missing)[0]}, which the bundle lacks")
    present = [s for s in by_stream if store.stream_version(s) > 0]
    for stream_id in present:
        rows = by_stream[stream_id]
        # The store's stream begins with the bundle's events: its run_moved (and anything done to the run
        # since) follows them.
        stored = [(e.event_id, e.payload_json) for e in store.read_stream(stream_id, limit=len(rows))]
        if stored != [(row["event_id"], row["payload"]) for _, row, _ in rows]:
            raise BundleError(
                f"run {stream_id} is already in this store with other events; the bundle cannot be imported here"
            )
    try:
        for stream_id, rows in by_stream.items():
            if stream_id in present:
                continue
            needed = {d for _, _, refs in rows for d in refs}
            copies = [(row["event_id"], row["type"], row["schema_version"], row["payload"]) for _, row, _ in rows]
            store.append_copies(
                stream_id, [*copies, _moved(stream_id, rows, manifest)], blobs={d: blobs[d] for d in needed}
            )
    except DatabaseFailure:
        raise  # the database, not the bundle: importing it again completes it
    except StoreError as exc:
        raise BundleError(f"{directory}: {exc}") from None
    new_runs = [s for s in by_stream if s not in present]
    return BundleOutcome(
        manifest["run_id"],
        list(by_stream),
        sum(len(r) for r in by_stream.values()),
        len(blobs),
        already_imported=not new_runs,
        new_runs=new_runs,
        new_events=sum(len(by_stream[s]) + 1 for s in new_runs),
    )


def _moved(stream_id: str, rows: list[EventRow], manifest: dict[str, Any]) -> tuple[str, str, int, str]:
    """The ``run_moved`` that follows a copied stream: its start and end as the store it came from listed
    them (the projection of its events at their own ``recorded_at``). Its id is derived from the stream's
    last event, so copying the same bundle again is the same event."""
    state: dict[str, dict[tuple, dict]] = {}
    projections.fold(state, [_as_stored(row) for _, row, _ in rows])
    there = state.get("runs", {}).get((stream_id,))
    if there is None:  # a stream without run_started (the log's own keys and checkpoints): nothing to list
        there = {"started_at": rows[0][1]["recorded_at"], "ended_at": None}
    moved = RunMoved(
        started_at=there["started_at"],
        ended_at=there["ended_at"],
        from_tool_version=manifest.get("tool_version") if isinstance(manifest.get("tool_version"), str) else None,
    )
    event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"evalstore:{stream_id}:moved:{rows[-1][1]['event_id']}"))
    return event_id, RunMoved.type, RunMoved.schema_version, canonical_json(encode(moved))


def _as_stored(row: dict[str, Any]) -> StoredEvent:
    """A bundle's event row as the store it came from held it (no seq or hashes: the fold reads neither)."""
    fields = {k: v for k, v in row.items() if k != "payload"}
    return StoredEvent(seq=0, payload_json=row["payload"], **fields)


def _manifest(directory: Path) -> dict[str, Any]:
    path = directory / MANIFEST
    try:
        manifest = json.loads(_read(path))
    except ValueError as exc:
        raise BundleError(f"{path}: not JSON ({decode_problem(exc)})") from None
    except RecursionError:
        raise BundleError(f"{path}: not an evalstore bundle manifest (nested too deep to read)") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{path}: not an evalstore bundle manifest (format must be {FORMAT!r})")
    if manifest.get("version") != VERSION:
        raise BundleError(f"{path}: bundle version {manifest.get('version')!r}; this evalstore reads version {VERSION}")
    for key, kind in (("run_id", str), ("streams", list), ("events_sha256", str), ("blobs", list)):
        if not isinstance(manifest.get(key), kind):
            raise BundleError(f"{path}: {key} is missing or not a {kind.__name__}")
    return manifest


EventRow = tuple[int, dict[str, Any], set[str]]
"""An event line of a bundle: (line number, the event's fields, the blobs its payload names)."""


def _events(path: Path, raw: bytes, manifest: dict[str, Any]) -> dict[str, list[EventRow]]:
    """Each stream's event rows, every payload parsed (and its blobs found) once, here."""
    by_stream: dict[str, list[EventRow]] = {}
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise BundleError(f"{path}: not UTF-8 (byte {exc.start})") from None
    for line, text in enumerate(lines, start=1):
        where = f"{path}:{line}"
        try:
            row = json.loads(text)
        except ValueError as exc:
            raise BundleError(f"{where}: not JSON ({decode_problem(exc)})") from None
        except RecursionError:
            raise BundleError(f"{where}: not an event line (nested too deep to read)") from None
        if not isinstance(row, dict) or set(row) != set(EVENT_FIELDS):
            raise BundleError(f"{where}: an event line has exactly the fields {', '.join(EVENT_FIELDS)}")
        rows = by_stream.setdefault(row["stream_id"], [])
        if row["stream_version"] != len(rows) + 1:
            raise BundleError(f"{where}: stream {row['stream_id']} version {row['stream_version']} out of order")
        try:
            payload = json.loads(row["payload"])
            if canonical_json(payload) != row["payload"]:
                raise BundleError(f"{where}: the payload is not canonical JSON")
            decode(row["type"], row["schema_version"], payload)
        except BundleError:
            raise
        except (TypeError, ValueError, StoreError, RecursionError) as exc:
            reason = "nested too deep to read" if isinstance(exc, RecursionError) else str(exc).splitlines()[0]
            raise BundleError(f"{where}: not a valid {row['type']!r} event ({reason})") from None
        rows.append((line, row, blob_refs(payload)))
    expected = [(s.get("stream_id"), s.get("events")) for s in manifest["streams"] if isinstance(s, dict)]
    if expected != [(s, len(r)) for s, r in by_stream.items()]:
        raise BundleError(f"{path}: its streams and event counts are not the manifest's")
    if manifest["run_id"] not in by_stream:
        raise BundleError(f"{path}: holds no events of run {manifest['run_id']}")
    _check_chain(path, by_stream, manifest["run_id"])
    return by_stream


NOT_OF_A_RUN = frozenset({LabelRecorded.type, KeyRegistered.type, CheckpointRecorded.type})
"""Events a run's stream never holds: people's labels (``lbl-RUN``) and the log's keys and checkpoints
(``log``) are each store's own, and a bundle does not carry them."""


def _check_chain(path: Path, by_stream: dict[str, list[EventRow]], run_id: str) -> None:
    """The streams are what :func:`export_bundle` writes: the chain of runs ending with ``run_id``, oldest
    first. Anything else (another stream id, a label, a checkpoint) is refused, so a bundle cannot add to
    a store what is not the run it says it moves."""
    parent: str | None = None
    for stream_id, rows in by_stream.items():
        line, first, _ = rows[0]
        started = json.loads(first["payload"]) if first["type"] == RunStarted.type else None
        if stream_id == LOG_STREAM or started is None or started.get("run_id") != stream_id:
            raise BundleError(
                f"{path}:{line}: stream {stream_id} is not a run (a run's stream begins with its run_started)"
            )
        if parent is not None and (started.get("kind") != "replay" or started.get("parent_run_id") != parent):
            raise BundleError(
                f"{path}:{line}: run {stream_id} is not a replay of {parent}, the run before it in the bundle"
            )
        for line, row, _ in rows:
            if row["type"] in NOT_OF_A_RUN:
                raise BundleError(
                    f"{path}:{line}: a {row['type']} event is not part of a run; a bundle moves runs only"
                )
        parent = stream_id
    if parent != run_id:
        raise BundleError(f"{path}: run {run_id} is not the last of its streams")


def _write_blob(store: EventStore, digest: str, path: Path) -> int:
    """A blob written to ``path`` a chunk at a time (a large one is never held whole); its size."""
    size = 0
    with path.open("wb") as fh:
        for piece in store.blob_pieces(digest):
            fh.write(piece)
            size += len(piece)
    return size


def _blobs(directory: Path, manifest: dict[str, Any]) -> dict[str, bytes | FileBlob]:
    """Each blob's bytes, checked against the manifest; one larger than a chunk as the file itself,
    hashed here a chunk at a time and read again so when it is stored."""
    blobs: dict[str, bytes | FileBlob] = {}
    for entry in _entries(manifest["blobs"], directory):
        digest, size = entry
        path = directory / BLOBS / digest
        if is_large_size(size):
            _check_regular(path, size)
            found, found_size = file_digest(str(path))
            blobs[digest] = FileBlob(str(path), found_size)
        else:
            data = _read(path, size)
            found, found_size = sha256_hex(data), len(data)
            blobs[digest] = data
        if found != digest or found_size != size:
            raise BundleError(f"{path}: its bytes do not match the manifest's sha256 and size (altered)")
    return blobs


def _read(path: Path, size: int | None = None) -> bytes:
    """A bundle file's bytes. Only a regular file inside the bundle is read: not a symbolic link (it would
    read outside the bundle, and whether the import went through would tell whether a file out there has
    a guessed content), not a FIFO (it would block the import), not a device such as /dev/zero (it would
    never end); and a blob only at the size the manifest gives it, before it is read."""
    with _open_regular(path, size) as fh:
        return fh.read()


def _check_regular(path: Path, size: int) -> None:
    """:func:`_read`'s refusals for a blob read later, a chunk at a time."""
    with _open_regular(path, size):
        pass


def _open_regular(path: Path, size: int | None) -> BinaryIO:
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)  # a FIFO must not wait for a writer
    if path.is_symlink():
        raise BundleError(f"{path}: a symbolic link; a bundle holds only regular files")
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise BundleError(f"{path}: cannot be read ({exc.strerror})") from None
    fh = os.fdopen(fd, "rb")
    info = os.fstat(fh.fileno())
    if not stat.S_ISREG(info.st_mode):
        fh.close()
        raise BundleError(f"{path}: not a regular file; a bundle holds only files")
    if size is not None and info.st_size != size:
        fh.close()
        raise BundleError(f"{path}: its bytes do not match the manifest's sha256 and size (altered)")
    return fh


def _entries(entries: list[Any], directory: Path) -> Iterator[tuple[str, int]]:
    for entry in entries:
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        size = entry.get("size") if isinstance(entry, dict) else None
        if not isinstance(digest, str) or len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise BundleError(f"{directory / MANIFEST}: a blob entry without a sha256 digest: {entry!r}")
        if not isinstance(size, int):
            raise BundleError(f"{directory / MANIFEST}: blob {digest} has no size")
        yield digest, size
