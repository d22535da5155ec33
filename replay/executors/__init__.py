"""Who grades a replay's tests: threads of this process (``local``), or tasks on a Ray cluster (``ray``).

Every executor runs the same per-test grading (``ReplayJob.grade``, the one path ``--shard`` processes and
resumes take too) and hands each finished test's events to this process, the driver, which is the only
writer to the store: a worker never opens a transaction, so a SQLite store works as well as PostgreSQL, and
whatever a worker did that its task's retry does again is appended once (``EventStore.append_units``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from evalstore.replay.errors import ReplayError

if TYPE_CHECKING:
    from evalstore.replay.material import ResultKey, TestMaterial
    from evalstore.replay.regrade import ReplayJob
    from evalstore.store import EventStore
    from evalstore.store.events import TestScored

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Work:
    """One test to grade: its key, the parent run's material for it, and the material holding its
    transcript (the parent's, or for a replay of a replay the run that recorded it)."""

    key: ResultKey
    parent: TestMaterial
    source: TestMaterial


Done = Callable[["ResultKey", "TestScored"], None]
"""Told of each test once its events are in the store."""


class Executor(Protocol):
    remote: bool
    """Whether tests leave this process (then the cheap ones, carried over, are still done here)."""

    def session(self, store: EventStore) -> AbstractContextManager[None]:
        """What the executor needs, found and reached (Ray installed, its cluster answering) before the replay
        writes anything, as a missing judge is: a replay that cannot grade leaves no empty run behind for
        ``last`` to name. ``grade`` runs inside it."""
        ...

    def grade(
        self, job: ReplayJob, store: EventStore, work: Iterable[Sequence[Work]], *, concurrency: int, done: Done
    ) -> None:
        """Grade every test of ``work`` and append each one's events whole, exactly once. ``work`` comes in
        windows, each read from the store when its turn comes (a replay holds a window, not the run)."""
        ...


def executor_for(name: str, *, ray_address: str | None = None) -> Executor:
    if name == "local":
        if ray_address:
            raise ReplayError("--ray-address is for --executor ray")
        from evalstore.replay.executors.local import LocalExecutor

        return LocalExecutor()
    if name == "ray":
        from evalstore.replay.executors.ray import RayExecutor

        return RayExecutor(ray_address)
    raise ReplayError(f"--executor {name!r}: expected one of {', '.join(EXECUTORS)}")
