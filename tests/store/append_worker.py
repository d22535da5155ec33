"""One of several processes appending to the same store at once (run by test_concurrency.py).

Usage: ``python append_worker.py URL WORKER GO_FILE BATCHES``. Waits for GO_FILE so all workers start
together, then interleaves appends to its own stream with optimistic appends to a shared stream
(re-reading and retrying on ConcurrencyError), each own append with blobs. Prints a JSON summary on stdout.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from evalstore.store import ConcurrencyError, EventStore, NewEvent, make_engine, sha256_hex
from evalstore.store.events import LineSkipped, SourceRef

# Every blob begins alike, so the workers compress against dictionaries while racing to store them;
# the "shared" ones are the same bytes in every worker.
TEMPLATE = b"A rendered grader prompt template, identical for every test of the suite. " * 10


def blobs_for(worker: str, batch: int) -> dict[str, bytes]:
    bodies = [TEMPLATE + b"shared %d" % batch, TEMPLATE + f"{worker} {batch}".encode()]
    return {sha256_hex(b): b for b in bodies}


def main(url: str, worker: str, go_file: str, batches: int) -> None:
    store = EventStore(make_engine(url))
    deadline = time.monotonic() + 60
    while not Path(go_file).exists():
        if time.monotonic() > deadline:
            raise SystemExit("GO file never appeared")
        time.sleep(0.005)
    ids: list[str] = []
    conflicts = 0
    own = f"worker-{worker}"
    for b in range(batches):
        batch = [
            NewEvent(
                LineSkipped(source=SourceRef(file=f"{worker}.jsonl", line=b * 3 + i), reason="x" * 200),
                f"{worker}-{b}-{i}",
            )
            for i in range(3)
        ]
        store.append(own, batch, expected_version=b * 3, blobs=blobs_for(worker, b))
        ids += [e.event_id for e in batch]
        if b % 2 == 0:
            event = NewEvent(
                LineSkipped(source=SourceRef(file="shared.jsonl", line=b), reason=worker), f"{worker}-shared-{b}"
            )
            while True:
                try:
                    store.append("shared", [event], expected_version=store.stream_version("shared"))
                    break
                except ConcurrencyError:
                    conflicts += 1
            ids.append(event.event_id)
    store.close()
    print(json.dumps({"ids": ids, "conflicts": conflicts}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
