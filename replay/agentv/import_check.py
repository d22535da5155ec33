"""The import's validation pass: every result built as it will be written, and repeats resolved.

A bad line aborts the import here, before anything is written (or, with ``--skip-bad``, is left out).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime

from evalstore.replay.agentv import ImportedTest, ImportSource, SkippedLine, bad_line
from evalstore.replay.agentv.import_events import EventIds, RelativeSources, built
from evalstore.replay.evalfile.parser import DEFAULT_THRESHOLD
from evalstore.store.events import SourceRef

_SUPERSEDED = "AgentV keeps the last result of a test and target (deduplicateByTestIdTarget)"


@dataclass
class Checked:
    tests: int
    skipped: int
    left_out: dict[tuple, str]
    """Results the writing pass leaves out (repeats, results that cannot be built), with the reason; by item_key."""
    started_at: str | None = None
    """The earliest ``start_time`` or row ``timestamp`` of the results, as UTC ISO 8601: when the AgentV run began."""


def item_key(item: ImportedTest) -> tuple:
    return (item.source.file, item.source.line, item.test_id, item.target, item.attempt)


PROGRESS_EVERY = 200


def check(
    source: ImportSource,
    within: RelativeSources,
    skip_bad: bool,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> Checked:
    """The validation pass: every result is turned into its events exactly as the import will write them
    (so nothing can fail half-way through the writes), and repeated results are resolved.

    A repeat of (test, target, attempt) is what a resumed or re-run AgentV run leaves; like AgentV, the last
    one wins. Two results that only share the key (another suite, another variant) cannot both be held, and
    are a bad line.
    """
    with closing(_Repeats()) as repeats:
        return _check_with(repeats, source, within, skip_bad, progress)


def _check_with(
    repeats: _Repeats,
    source: ImportSource,
    within: RelativeSources,
    skip_bad: bool,
    progress: Callable[[str, int, int | None], None] | None,
) -> Checked:
    ids = EventIds("check")
    tests = skipped = 0
    left_out: dict[tuple, str] = {}
    earliest: datetime | None = None
    for item in source.iter_tests(skip_bad):
        if isinstance(item, ImportedTest):
            for moment in (_instant(item.start_time), _instant(item.raw_row.get("timestamp"))):
                if moment is not None and (earliest is None or moment < earliest):
                    earliest = moment
            outcome = built(item, within, ids, DEFAULT_THRESHOLD, skip_bad, check=True)
            if isinstance(outcome, SkippedLine):
                left_out[item_key(item)] = outcome.reason
                item = outcome
            else:
                earlier = repeats.earlier(item)
                if earlier is not None and not earlier[1]:
                    reason = left_out[item_key(item)] = (
                        f"test {item.test_id!r} (target {item.target!r}, attempt {item.attempt}) is also the result "
                        f"at {earlier[0].location} of another suite or variant; evalstore keeps one result per "
                        "test, target and attempt: import them separately"
                    )
                    item = bad_line(item.source, reason, skip_bad)
                else:
                    if earlier is not None:
                        superseded = (earlier[0].file, earlier[0].line, item.test_id, item.target, item.attempt)
                        left_out[superseded] = f"superseded by {item.source.location}: {_SUPERSEDED}"
                        tests -= 1
                        skipped += 1
                    repeats.remember(item)
        if isinstance(item, SkippedLine):
            skipped += 1
        else:
            tests += 1
        if progress and (tests + skipped) % PROGRESS_EVERY == 0:
            progress("checking", tests + skipped, None)
    started_at = earliest.isoformat(timespec="microseconds") if earliest else None
    return Checked(tests, skipped, left_out, started_at)


def _instant(value: object) -> datetime | None:
    """An ISO 8601 time in UTC (a time without a zone is taken as UTC); anything else is no time."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _digest64(value: object) -> int:
    """A signed 64-bit digest (SQLite's INTEGER) of a small value's repr."""
    digest = hashlib.blake2b(repr(value).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class _Repeats:
    """The results seen so far by (test, target, attempt): where each was and what it belonged to.

    Kept in a private temporary SQLite file, not a dict: an import streams files of any size, and even
    a hundred bytes per result would make memory grow with the file. Keys and identities are digests.
    """

    def __init__(self) -> None:
        self._db = sqlite3.connect("")  # "": a private on-disk temporary database, removed on close
        self._db.execute("CREATE TABLE seen (key INTEGER PRIMARY KEY, identity INTEGER, file TEXT, line INTEGER)")

    def close(self) -> None:
        self._db.close()

    @staticmethod
    def _key(item: ImportedTest) -> int:
        return _digest64((item.test_id, item.target, item.attempt))

    @staticmethod
    def _identity(item: ImportedTest) -> int:
        return _digest64((item.suite, item.raw_row.get("variant"), item.raw_row.get("prompt_id")))

    def earlier(self, item: ImportedTest) -> tuple[SourceRef, bool] | None:
        """Where an earlier result with the same key was, and whether it had the same identity."""
        row = self._db.execute("SELECT identity, file, line FROM seen WHERE key = ?", (self._key(item),)).fetchone()
        if row is None:
            return None
        return SourceRef(file=row[1], line=row[2]), row[0] == self._identity(item)

    def remember(self, item: ImportedTest) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO seen VALUES (?, ?, ?, ?)",
            (self._key(item), self._identity(item), item.source.file, item.source.line),
        )
