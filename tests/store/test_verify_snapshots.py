"""`verify` covers workspace snapshots: every file blob a snapshot's manifest names must be stored."""

from __future__ import annotations

from evalstore.store import EventStore
from evalstore.store.codec import sha256_hex
from evalstore.store.events import RunStarted, WorkspaceEntry, WorkspaceSnapshotted


def test_verify_names_a_snapshot_file_whose_blob_is_missing(store_url: str) -> None:
    store = EventStore.open(store_url)
    kept, lost = b"print('kept')\n", b"print('lost')\n"
    snapshot = WorkspaceSnapshotted(
        test_id="t",
        root="/ws",
        entries=[
            WorkspaceEntry(path="a.py", mode=0o644, size=len(kept), sha256=sha256_hex(kept)),
            WorkspaceEntry(path="b.py", mode=0o644, size=len(lost), sha256=sha256_hex(lost)),
            WorkspaceEntry(path="link", kind="symlink", target="a.py"),
        ],
        file_count=2,
        total_bytes=len(kept) + len(lost),
    )
    store.append(
        "rec-1", [RunStarted(run_id="rec-1", kind="recorded", tool_version="t")], blobs={sha256_hex(kept): kept}
    )
    report = store.verify()
    assert report.ok, report
    store.append("rec-1", [snapshot], blobs={sha256_hex(kept): kept})
    report = store.verify()
    assert not report.ok
    assert f"blob {sha256_hex(lost)} it refers to is missing" in str(report.problem)
    store.close()
