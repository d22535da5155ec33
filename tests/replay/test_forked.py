"""Work in parts on forked workers: results in the parts' order, the context inherited (never sent),
an error raised in its turn, and leaving early cancels what has not started."""

from __future__ import annotations

import os
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from evalstore.replay.processes import forked

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="forked workers are used on Linux only")


class Unpicklable:
    """A context no pickle could send: a worker can only have it by inheriting it."""

    def __init__(self, offset: int, folder: Path) -> None:
        self.offset = offset
        self.folder = folder
        self.handle = open(os.devnull)  # noqa: SIM115 (closed by the test)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        raise TypeError("not sent")


def _square_plus(context: Unpicklable, part: int) -> tuple[int, int]:
    # Each part waits (10 s at most) until a second worker has taken one too: a worker that started
    # first could otherwise take every part of so little work.
    (context.folder / str(os.getpid())).touch()
    deadline = time.monotonic() + 10
    while len(list(context.folder.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return part * part + context.offset, os.getpid()


def test_results_come_in_the_parts_order_from_other_processes(tmp_path: Path) -> None:
    context = Unpicklable(1, tmp_path)
    try:
        results = list(forked.in_order(_square_plus, list(range(20)), 3, context))
    finally:
        context.handle.close()
    assert [value for value, _ in results] == [i * i + 1 for i in range(20)]
    pids = {pid for _, pid in results}
    assert os.getpid() not in pids and 1 < len(pids) <= 3


def _taken_before(folder: Path, part: int) -> bool:
    """Whether the caller was done with the part ``held_parts`` before this one when this one started."""
    earlier = part - forked.held_parts(2)
    return earlier < 0 or (folder / f"taken-{earlier}").exists()


def test_a_part_starts_only_once_the_caller_is_done_with_the_part_held_parts_before_it(tmp_path: Path) -> None:
    """What lets part n reuse part n - held_parts's slot of a buffer shared with the workers (exports)."""
    seen = []
    for part, reusable in enumerate(forked.in_order(_taken_before, list(range(30)), 2, tmp_path)):
        seen.append(reusable)
        (tmp_path / f"taken-{part}").touch()
    assert seen == [True] * 30


def _fails_at_five(_context: None, part: int) -> int:
    if part == 5:
        raise ValueError(f"part {part} is bad")
    return part


def test_an_error_is_raised_in_its_turn_after_the_parts_before_it() -> None:
    seen: list[int] = []
    with pytest.raises(ValueError, match="part 5 is bad"):
        for value in forked.in_order(_fails_at_five, list(range(12)), 2, None):
            seen.append(value)
    assert seen == [0, 1, 2, 3, 4]


def _touch(folder: Path, part: int) -> int:
    (folder / str(part)).touch()
    return part


def test_leaving_early_stops_the_parts_not_started(tmp_path: Path) -> None:
    with closing(forked.in_order(_touch, list(range(200)), 2, tmp_path)) as results:
        for value in results:
            if value == 1:
                break
    done = {int(p.name) for p in tmp_path.iterdir()}
    assert {0, 1} <= done and len(done) <= 8  # at most two parts a worker were ever in flight


def _started(context: dict) -> None:
    context["opened"] = os.getpid()


def _opened(context: dict, _part: int) -> int:
    return context["opened"]


def test_start_runs_once_in_each_worker_before_its_parts() -> None:
    context: dict = {}
    opened = list(forked.in_order(_opened, list(range(10)), 2, context, start=_started))
    assert all(pid != os.getpid() for pid in opened) and "opened" not in context


@pytest.mark.parametrize(
    ("parts", "workers", "cores", "expected"),
    [(10, None, 4, 4), (10, None, 1, 0), (1, None, 8, 0), (3, 8, 2, 3), (100, None, 64, 8)],
)
def test_worker_count(monkeypatch, parts: int, workers: int | None, cores: int, expected: int) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(forked.os, "cpu_count", lambda: cores)
    assert forked.worker_count(parts, workers) == expected


_FREED = """
import sys
from evalstore.replay.processes.lifetime import keep_freed_memory
if sys.argv[1] == "keep":
    keep_freed_memory()
def rss():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))
blocks = [b"x" * (1 << 20) for _ in range(64)]
grown = rss()
del blocks
print((grown - rss()) // 1024)
"""


@pytest.mark.parametrize("keep", [True, False])
def test_a_worker_keeps_the_memory_it_frees_for_its_next_part(keep: bool) -> None:
    # A megabyte block is mmapped and unmapped by glibc as it comes and goes: every page of it faulted in
    # again for the next part. A worker's heap keeps them (forked._started); the MB given back is printed.
    import subprocess

    given_back = int(
        subprocess.run(
            [sys.executable, "-c", _FREED, "keep" if keep else "default"], capture_output=True, text=True, check=True
        ).stdout
    )
    assert given_back < 8 if keep else given_back > 32
