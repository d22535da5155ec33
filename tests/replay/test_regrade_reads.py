"""How a replay reads what it grades: the transcripts' blobs a window at a time."""

from __future__ import annotations

import pytest

from evalstore.replay.executors.local import TranscriptBlobs
from evalstore.store.errors import BlobNotFound


def test_transcripts_are_read_a_window_at_a_time_and_a_missing_one_fails_alone() -> None:
    class Blobs:
        def __init__(self, data: dict[str, bytes]) -> None:
            self.data, self.queries = data, 0

        def get_blobs(self, digests: list[str]) -> dict[str, bytes]:
            self.queries += 1
            if any(d not in self.data for d in digests):
                raise BlobNotFound("no blob")
            return {d: self.data[d] for d in digests}

        def get_blob(self, digest: str) -> bytes:
            self.queries += 1
            if digest not in self.data:
                raise BlobNotFound(f"no blob {digest}")
            return self.data[digest]

    data = {f"d{i}": f"messages {i}".encode() for i in range(100)}
    order = [f"d{i}" for i in range(100)] + ["d5"]  # two tests with the same transcript
    store = Blobs(data)
    blobs = TranscriptBlobs(store, order)  # type: ignore[arg-type]
    assert [blobs.get(d) for d in order] == [data[d] for d in order]
    assert store.queries == 3  # two windows of 64, and the shared blob asked for again

    del data["d3"]
    store = Blobs(data)
    blobs = TranscriptBlobs(store, order)  # type: ignore[arg-type]
    assert blobs.get("d0") == data["d0"] and blobs.get("d1") == data["d1"]
    with pytest.raises(BlobNotFound, match="d3"):
        blobs.get("d3")
    assert blobs.get("d4") == data["d4"]
