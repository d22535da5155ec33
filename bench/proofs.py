"""Inclusion proofs against a checkpoint: size and verification time at 10^4, 10^5 and 10^6 events.

Run: ``.venv/bin/python bench/proofs.py [--sizes 10000,100000,1000000] [--proofs 2000] [--seed S]``

Setup (timed, but not a target): N synthetic event hashes (SHA-256 of the index, as a store's chain
hashes are SHA-256 digests), their RFC 6962 leaves, and the tree (``evalstore.store.merkle.MerkleTree``)
a store builds when it attests a run. Then, for ``--proofs`` random events: the inclusion proof (taken
from the tree) and its verification (``verify_inclusion``: what ``evalstore verify-attestation`` does
per event, offline).

Floor, measured in the same run: one leaf hash (SHA-256 of 33 bytes). A verification costs about one
node hash per proof entry, so verify/floor tracks the proof's length, log2(N), not N.

Targets: from 10^4 to 10^6 events (100x), the mean proof size and the mean verification time grow by
at most 2x (log2 grows 1.5x; anything linear would grow 100x).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from evalstore.store.merkle import MerkleTree, leaf_hash, verify_inclusion  # noqa: E402


def floor_seconds(reps: int = 200_000) -> float:
    data = b"\x00" * 32
    start = time.perf_counter()
    for _ in range(reps):
        leaf_hash(data)
    return (time.perf_counter() - start) / reps


def measure(n: int, proofs: int, rng: random.Random) -> dict[str, float]:
    start = time.perf_counter()
    leaves = [leaf_hash(hashlib.sha256(i.to_bytes(8, "big")).digest()) for i in range(n)]
    tree = MerkleTree(leaves)
    build = time.perf_counter() - start
    indices = [rng.randrange(n) for _ in range(proofs)]
    start = time.perf_counter()
    paths = [tree.inclusion_proof(i) for i in indices]
    prove = (time.perf_counter() - start) / proofs
    root = tree.root
    start = time.perf_counter()
    ok = all(verify_inclusion(leaves[i], i, n, p, root) for i, p in zip(indices, paths))
    verify = (time.perf_counter() - start) / proofs
    if not ok:
        raise SystemExit(f"a proof failed to verify at n={n}")
    hashes = sum(len(p) for p in paths) / proofs
    return {"build": build, "prove": prove, "verify": verify, "hashes": hashes, "bytes": hashes * 32}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--proofs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = random.Random(args.seed)
    floor = floor_seconds()
    print(f"floor: one leaf hash {floor * 1e6:.2f} us")
    results = {}
    for n in sizes:
        print(f"building a tree of {n:,} leaves ...", file=sys.stderr)
        r = results[n] = measure(n, args.proofs, rng)
        print(
            f"N={n:>9,}: proof {r['hashes']:.1f} hashes = {r['bytes']:.0f} bytes (log2 N = {math.log2(n):.1f}); "
            f"verify {r['verify'] * 1e6:.1f} us = {r['verify'] / floor:.1f}x floor; prove {r['prove'] * 1e6:.1f} us; "
            f"tree built in {r['build']:.2f} s"
        )
    small, large = results[min(sizes)], results[max(sizes)]
    growth = max(sizes) / min(sizes)
    for what in ("bytes", "verify"):
        ratio = large[what] / small[what]
        name = "proof size" if what == "bytes" else "verification time"
        verdict = "met" if ratio <= 2.0 else "MISSED"
        print(
            f"{name}: {ratio:.2f}x from N={min(sizes):,} to N={max(sizes):,} ({growth:.0f}x the events; "
            f"log2 ratio {math.log2(max(sizes)) / math.log2(min(sizes)):.2f}); target <= 2x: {verdict}"
        )


if __name__ == "__main__":
    main()
