"""The writing pass of an import, AgentV results and Inspect logs alike: what the validation pass spooled,
appended in batches (``EventStore.append_batches``: each batch written while the next is prepared, the
batches' records and blobs compressed by forked processes), then the run's completion.

Every item comes out of the spool with the run's ids for its place (the validation pass renumbers what
workers built in parts), except the items after a result superseded by a later one: the superseded
result becomes a skipped line, which takes one id instead of its events', so those are renumbered here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import nullcontext

from evalstore.replay.agentv.import_check import Encoded, Spool, placed, spooled
from evalstore.replay.agentv.import_events import EventIds
from evalstore.replay.material import Tally
from evalstore.replay.processes import forked
from evalstore.replay.processes.forked import worker_count
from evalstore.store import EventStore, NewEvent
from evalstore.store.blobs import FileBlob, blob_size
from evalstore.store.codec import canonical_json
from evalstore.store.events import LineSkipped, encode

# Each batch is one append transaction, and each transaction writes out every index page its rows land
# on; event ids and test ids are random keys, so nearly every page of those indexes. Fewer, larger
# transactions write each page fewer times (bench/import.py, 20,000 rows: 1 GB written at 200 tests a
# batch, 0.4 GB at 1,000) for about 15 MB more memory.
BATCH_TESTS = 1000
BATCH_BYTES = 32 * 1024 * 1024

Progress = Callable[[str, int, "int | None"], None]


def write_spool(
    store: EventStore,
    run_id: str,
    spool: Spool,
    ids: EventIds,
    *,
    tests: int,
    left_out: Mapping[tuple, str] | None = None,
    progress: Progress | None = None,
) -> None:
    """Append the spooled items to the run after its first event (``ids`` positioned after it), leaving out
    as skipped lines the results ``left_out`` names (by ``item_key``, with the reason), then
    ``run_completed`` with the results' tally. ``progress("importing", done, tests)`` as batches go."""
    tally = Tally()

    def batches() -> Iterator[tuple[list[Encoded], list[dict | None], dict[str, bytes | FileBlob]]]:
        batch: list[Encoded] = []
        batch_fields: list[dict | None] = []
        batch_blobs: dict[str, bytes | FileBlob] = {}
        batch_bytes = done = 0
        for data, first_n in spool.records():
            item = spooled(data, first_n)
            reason = left_out.get(item.key) if left_out and item.key is not None else None
            if reason:  # superseded by a later result: a skipped line, one id instead of the result's events
                event = LineSkipped(source=item.source, reason=reason)
                batch.append((ids.next("skip"), event.type, event.schema_version, canonical_json(encode(event))))
                batch_fields.append(None)
                continue
            data, first = placed(data, item.renames(), first_n, ids)
            if first != first_n:  # after a superseded result: its events get the ids for their place
                item = spooled(data, first)
            batch.extend(item.events)
            batch_fields.extend(item.fields)
            if item.score is None:
                continue
            for digest, blob in item.blobs.items():
                if digest not in batch_blobs:
                    batch_blobs[digest] = blob
                    batch_bytes += blob_size(blob)
            tally.count(*item.score)
            done += 1
            if done % BATCH_TESTS == 0 or batch_bytes > BATCH_BYTES:
                yield batch, batch_fields, batch_blobs
                batch, batch_fields, batch_blobs, batch_bytes = [], [], {}, 0
                if progress:
                    progress("importing", done, tests)
        if batch:
            yield batch, batch_fields, batch_blobs

    # Forked for two batches or more (none where worker_count says so): a few tests are compressed sooner
    # than a pool starts.
    count = worker_count(tests // BATCH_TESTS + 1)
    with forked.pool(count) if count else nullcontext() as processes:
        store.append_batches(run_id, batches(), processes=processes)
    if progress:
        progress("importing", tests, tests)
    store.append(run_id, [NewEvent(tally.completed(), ids.next("completed"))])
