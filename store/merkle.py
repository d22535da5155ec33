"""The log as an RFC 6962 Merkle tree over its event hashes (leaf ``i`` = the hash of event ``seq = i + 1``).

Hashing follows RFC 6962 (and RFC 9162, section 2.1): a leaf is ``SHA-256(0x00 || data)``, an interior
node ``SHA-256(0x01 || left || right)``, and a tree of ``n`` leaves splits at the largest power of two
below ``n``. Built level by level, that is the same tree: pair neighbours, and carry an odd last node up
unchanged. The leaf data is the 32 raw bytes of an event's chain hash.

A signed checkpoint commits to the root of the first ``size`` leaves; an inclusion proof (the sibling
hashes on one leaf's path, ``ceil(log2 size)`` at most) shows that one event is in that tree without the
rest of the log. :func:`verify_inclusion` is RFC 9162's algorithm (2.1.3.2) and needs nothing but hashlib.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

_sha256 = hashlib.sha256


def leaf_hash(data: bytes) -> bytes:
    return _sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return _sha256(b"\x01" + left + right).digest()


def event_leaf(event_hash_hex: str) -> bytes:
    """The leaf hash of an event, from its hex chain hash."""
    return leaf_hash(bytes.fromhex(event_hash_hex))


def _level_above(below: list[bytes]) -> list[bytes]:
    """The next level up: neighbours paired, an odd last node carried up unchanged."""
    above = [node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
    if len(below) % 2:
        above.append(below[-1])
    return above


class MerkleTree:
    """Every level of the tree over ``leaves`` (leaf hashes), kept for proofs: about 2n hashes of 32 bytes."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        levels = [list(leaves)]
        while len(levels[-1]) > 1:
            levels.append(_level_above(levels[-1]))
        self.levels = levels

    @property
    def size(self) -> int:
        return len(self.levels[0])

    @property
    def root(self) -> bytes:
        """The tree head; the hash of the empty string for an empty tree (RFC 6962)."""
        return self.levels[-1][0] if self.size else _sha256(b"").digest()

    def inclusion_proof(self, index: int) -> list[bytes]:
        """The audit path of leaf ``index`` (0-based), bottom up."""
        if not 0 <= index < self.size:
            raise IndexError(f"leaf {index} is outside a tree of {self.size}")
        proof = []
        for level in self.levels[:-1]:
            sibling = index ^ 1
            if sibling < len(level):
                proof.append(level[sibling])
            index //= 2
        return proof


def root_of(leaves: Sequence[bytes]) -> bytes:
    """The root alone, keeping only one level at a time."""
    level = list(leaves)
    if not level:
        return _sha256(b"").digest()
    while len(level) > 1:
        level = _level_above(level)
    return level[0]


def root_from_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes | None:
    """The root that ``proof`` leads to from ``leaf`` at ``index`` in a tree of ``size``; None when the proof
    has the wrong length for that position (RFC 9162, 2.1.3.2)."""
    if not 0 <= index < size:
        return None
    fn, sn = index, size - 1
    r = leaf
    for p in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return r if sn == 0 else None


def verify_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> bool:
    return root_from_inclusion(leaf, index, size, proof) == root
