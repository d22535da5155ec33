"""Signed checkpoints of a store's log: write one, and check a store against one.

A checkpoint commits to the log's first ``size`` events twice over: the RFC 6962 Merkle root of their
hashes (what inclusion proofs are checked against) and the hash-chain hash of event ``seq = size``. The
signed note is printed, written where asked, and recorded in the log itself as ``checkpoint_recorded``
(after the events it covers). The signing key's public half and name are recorded once, as
``key_registered``, before the first checkpoint it signs.

What a checkpoint proves: the log held exactly these ``size`` events when the key's holder signed. A
store that later lost events at its end, had an event rewritten (even with the chain recomputed after it)
or was rebuilt from scratch no longer matches, and :func:`check_checkpoint` says how. It does not prove
that the events were true when written (that an agent's answers or a judge's replies were honest).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from evalstore.replay.attest import note
from evalstore.replay.attest.keys import SigningKey, VerifierKey
from evalstore.replay.attest.note import Checkpoint
from evalstore.replay.errors import AttestationFormatError
from evalstore.store import EventStore
from evalstore.store.codec import GENESIS_HASH
from evalstore.store.events import LOG_STREAM, CheckpointRecorded, KeyRegistered
from evalstore.store.merkle import event_leaf, root_of


@dataclass(frozen=True)
class WrittenCheckpoint:
    checkpoint: Checkpoint
    note: str
    key_name: str


@dataclass(frozen=True)
class CheckpointCheck:
    checkpoint: Checkpoint
    signer: str
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def _leaves(store: EventStore, upto: int | None = None) -> Iterator[tuple[int, str, bytes]]:
    for seq, digest in store.chain_hashes(upto=upto):
        yield seq, digest, event_leaf(digest)


def log_origin(store: EventStore) -> str | None:
    """The origin the store's latest checkpoint named (its name as a log), if it has one."""
    origin = None
    for ev in store.read_stream(LOG_STREAM, types=[CheckpointRecorded.type]):
        origin = ev.payload["origin"]
    return origin


def register_key(store: EventStore, key: VerifierKey) -> bool:
    """Record ``key`` (public half and name) in the store unless it is there; True when it was added."""
    encoded = key.encoded()
    for ev in store.read_stream(LOG_STREAM, types=[KeyRegistered.type]):
        if ev.payload["public_key"] == encoded:
            return False
    store.append(LOG_STREAM, [KeyRegistered(name=key.name, key_id=key.key_id.hex(), public_key=encoded)])
    return True


def write_checkpoint(store: EventStore, key: SigningKey, *, origin: str | None = None) -> WrittenCheckpoint:
    """Sign the log's current head and record the signed note as an event."""
    origin = origin or log_origin(store) or f"evalstore/{uuid.uuid4().hex[:16]}"
    register_key(store, key.verifier)
    leaves, head = [], GENESIS_HASH
    for _, digest, leaf in _leaves(store):
        leaves.append(leaf)
        head = digest
    checkpoint = Checkpoint(origin, len(leaves), root_of(leaves), head)
    signed = note.sign(checkpoint.text(), key)
    store.append(
        LOG_STREAM,
        [
            CheckpointRecorded(
                origin=origin,
                size=checkpoint.size,
                root_hash=checkpoint.root_hash.hex(),
                head_hash=head,
                key_name=key.name,
                key_id=key.key_id.hex(),
                note=signed,
            )
        ],
    )
    return WrittenCheckpoint(checkpoint, signed, key.name)


def read_checkpoint_file(path: Path) -> str:
    """The signed note in ``path``, checked to be a checkpoint (any key's): a file that is not one is
    called that, naming the file, before a key is asked for."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise AttestationFormatError(f"{path}: not a checkpoint (not text)") from None
    try:
        note.parse_checkpoint(note.parse(text).text)
    except AttestationFormatError as exc:
        raise AttestationFormatError(
            f"{path}: not a checkpoint ({exc}); `evalstore checkpoint -o FILE` writes one"
        ) from None
    return text


def check_checkpoint(store: EventStore, signed_note: str, key: VerifierKey) -> CheckpointCheck:
    """Whether ``signed_note`` is ``key``'s signature and the store still holds exactly the prefix it covers.

    A note that is not a checkpoint at all raises :class:`AttestationFormatError`; a check that fails
    returns the first difference, in one line.
    """
    checkpoint, bad_signature = note.open_checkpoint(signed_note, key)
    size = checkpoint.size
    if bad_signature:
        return CheckpointCheck(checkpoint, key.name, f"checkpoint signature: {bad_signature}")
    mine = log_origin(store)
    if mine is not None and mine != checkpoint.origin:  # another store's: its prefix says nothing of this one
        return CheckpointCheck(
            checkpoint,
            key.name,
            f"the checkpoint is of log {checkpoint.origin}; this store is log {mine} (as its own checkpoints "
            "name it): give a checkpoint of this store",
        )
    leaves: list[bytes] = []
    head = GENESIS_HASH
    for seq, digest, leaf in _leaves(store, upto=size):
        if seq != len(leaves) + 1:
            return CheckpointCheck(
                checkpoint,
                key.name,
                f"event seq {len(leaves) + 1} is missing from the log (the checkpoint covers 1..{size})",
            )
        leaves.append(leaf)
        head = digest
    if len(leaves) < size:
        return CheckpointCheck(
            checkpoint,
            key.name,
            f"log truncated: it has {len(leaves)} events, the checkpoint covers {size} (events after seq {len(leaves)} were removed)",
        )
    if head != checkpoint.head_hash:
        return CheckpointCheck(
            checkpoint,
            key.name,
            f"event seq {size} has hash {head[:16]}…, the checkpoint says {checkpoint.head_hash[:16]}…: "
            "the log was rewritten or rebuilt since it was signed",
        )
    if root_of(leaves) != checkpoint.root_hash:
        return CheckpointCheck(
            checkpoint,
            key.name,
            f"the Merkle root of events 1..{size} differs from the checkpoint's: an event before seq {size} was rewritten",
        )
    return CheckpointCheck(checkpoint, key.name)
