"""The ids of events that bring none: version 7 UUIDs, unique, sorting by when they were made (so an
append's ids land together in the event-id index), and different in a forked child."""

from __future__ import annotations

import os
import sys
import time
import uuid

import pytest

from evalstore.store.envelope import new_event_id


def test_ids_are_version_7_uuids_and_unique() -> None:
    ids = [new_event_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    for text in ids[:100]:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant, str(parsed)) == (7, uuid.RFC_4122, text)


def test_ids_made_later_sort_later() -> None:
    first = new_event_id()
    time.sleep(0.002)
    second = new_event_id()
    assert first < second
    made = int(uuid.UUID(second).hex[:12], 16)  # the first 48 bits: milliseconds since the epoch
    assert abs(made - time.time() * 1000) < 5_000


@pytest.mark.skipif(sys.platform == "win32", reason="no fork")
def test_a_forked_child_makes_other_ids() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids, through the pipe
        os.write(write, " ".join(new_event_id() for _ in range(50)).encode())
        os._exit(0)
    os.close(write)
    ours = {new_event_id() for _ in range(50)}
    with os.fdopen(read) as fh:
        theirs = set(fh.read().split())
    os.waitpid(pid, 0)
    assert len(theirs) == 50 and not ours & theirs
