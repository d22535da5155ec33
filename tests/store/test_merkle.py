"""The RFC 6962 Merkle tree over event hashes: roots, inclusion proofs, and their verification."""

from __future__ import annotations

import hashlib
import math

import pytest

from evalstore.store.merkle import MerkleTree, leaf_hash, node_hash, root_from_inclusion, root_of, verify_inclusion

# The leaves and tree heads of RFC 6962's reference test data (certificate-transparency merkle tests).
CT_LEAVES = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    b"\x50\x51\x52\x53\x54\x55\x56\x57",
    b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
]
CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


def _mth(data: list[bytes]) -> bytes:
    """RFC 6962 section 2.1, as written: split at the largest power of two below n."""
    if not data:
        return hashlib.sha256(b"").digest()
    if len(data) == 1:
        return leaf_hash(data[0])
    k = 1 << (len(data) - 1).bit_length() - 1
    return node_hash(_mth(data[:k]), _mth(data[k:]))


def _path(m: int, data: list[bytes]) -> list[bytes]:
    """RFC 6962 section 2.1.1's PATH(m, D[n])."""
    if len(data) == 1:
        return []
    k = 1 << (len(data) - 1).bit_length() - 1
    if m < k:
        return [*_path(m, data[:k]), _mth(data[k:])]
    return [*_path(m - k, data[k:]), _mth(data[:k])]


def test_tree_heads_match_the_rfc_6962_reference_data() -> None:
    for n in range(1, len(CT_LEAVES) + 1):
        leaves = [leaf_hash(d) for d in CT_LEAVES[:n]]
        assert MerkleTree(leaves).root.hex() == CT_ROOTS[n - 1]
        assert root_of(leaves).hex() == CT_ROOTS[n - 1]
    assert root_of([]) == MerkleTree([]).root == hashlib.sha256(b"").digest()


def test_roots_and_paths_equal_the_recursive_definition_for_every_size_and_leaf() -> None:
    for n in range(1, 70):
        data = [n.to_bytes(2, "big") + i.to_bytes(2, "big") for i in range(n)]
        tree = MerkleTree([leaf_hash(d) for d in data])
        assert tree.root == _mth(data)
        for m in range(n):
            proof = tree.inclusion_proof(m)
            assert proof == _path(m, data)
            assert len(proof) <= math.ceil(math.log2(n)) if n > 1 else proof == []
            assert verify_inclusion(leaf_hash(data[m]), m, n, proof, tree.root)


def test_a_proof_fails_for_another_leaf_index_or_altered_sibling() -> None:
    data = [bytes([i]) for i in range(13)]
    tree = MerkleTree([leaf_hash(d) for d in data])
    proof = tree.inclusion_proof(5)
    assert verify_inclusion(leaf_hash(data[5]), 5, 13, proof, tree.root)
    assert not verify_inclusion(leaf_hash(data[6]), 5, 13, proof, tree.root)  # another leaf
    assert not verify_inclusion(leaf_hash(data[5]), 4, 13, proof, tree.root)  # another position
    forged = [proof[0][:-1] + bytes([proof[0][-1] ^ 1]), *proof[1:]]
    assert not verify_inclusion(leaf_hash(data[5]), 5, 13, forged, tree.root)
    assert root_from_inclusion(leaf_hash(data[5]), 5, 13, proof[:-1]) is None  # too short for the position
    assert root_from_inclusion(leaf_hash(data[5]), 5, 13, [*proof, proof[0]]) is None  # too long
    assert root_from_inclusion(leaf_hash(data[5]), 13, 13, proof) is None  # outside the tree
    with pytest.raises(IndexError):
        tree.inclusion_proof(13)
