"""Proving the log to others: signing keys, signed checkpoints of the log head, run attestations.

``keys`` (Ed25519 keys in the signed-note key encodings), ``note`` (the C2SP signed-note and
tlog-checkpoint text formats), ``checkpoint`` (writing a checkpoint of a store and checking a store
against one), ``attestation`` (an in-toto Statement about one run with inclusion proofs, checked offline).
The Merkle tree is a property of the log and lives in ``evalstore.store.merkle``.
"""
