"""Regrading at scale on PostgreSQL: one process, ``--shard`` processes, and a local Ray cluster.

Run: ``.venv/bin/python bench/scale.py [--results 100000] [--shards 2] [--ray-cpus 2] [--no-code-grader]
[--db URL] [--skip single,shards,ray,append] [--dir DIR]``. ``--db`` is a PostgreSQL URL (default
``$EVALSTORE_TEST_POSTGRES_URL``, else the local ``postgresql+psycopg://postgres@127.0.0.1:5432/test``); the
benchmark works in a schema of its own, dropped at the end.

Setup (timed, reported, not a target): N synthetic AgentV 4.x result rows, each test graded by two
deterministic assertions (``contains``, ``regex``) and, unless ``--no-code-grader``, a code grader that is a
small ``sh`` script (one process per test, a millisecond or two to start); imported with the v1 eval. The
run is the one the executor tests regrade (``tests/replay/scale_runs.py``: one place for both).

Timed, each a regrade with the v2 eval (the code grader's script changed) and ``--no-cache``, so every
grader runs again:

1. ``single``: one ``evalstore replay --concurrency 4`` process (the local executor), its peak RSS read
   with ``wait4`` (the replay's alone: what reading the parent run in windows keeps flat);
2. ``shards``: ``--shards K`` processes ``evalstore replay --shard k/K`` at once on the same store;
3. ``ray``: ``replay_run`` with ``RayExecutor`` on a local cluster of ``--ray-cpus`` CPUs (the cluster's
   start is timed apart);
4. ``append``: the driver's write path alone: replay 1's events, per test, appended again to a new stream
   with ``EventStore.append_units`` in units of 16 tests (a Ray task's), as the Ray driver appends them.

Each line gives tests/s. What limits throughput: compare 4 (the store's write ceiling for one driver)
with 1-3; with the code grader off, 1-3 measure grading and appending without processes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

# The package installs as ``evalstore``: keep the repository's top-level folders (store/, replay/) and bench/
# off sys.path, as tests/conftest.py does, so nothing imports a second copy of a module by its bare name.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() not in (ROOT, ROOT / "bench")]
sys.path.insert(0, str(ROOT / "tests" / "replay"))  # the synthetic run, shared with the executor tests

from scale_runs import write  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from evalstore.replay.agentv.importing import import_results  # noqa: E402
from evalstore.replay.regrade import ReplayOptions, replay_run  # noqa: E402
from evalstore.store import EventStore  # noqa: E402

LOCAL_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
CHILD_TIMEOUT_S = 4 * 3600
UNIT = 16


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def emit(line: str) -> None:
    """A figure, printed as soon as it is measured (a later step that fails loses none), with the load then."""
    print(f"{line}  [load {os.getloadavg()[0]:.1f}]", flush=True)


def timed_replay(
    store: EventStore, parent: str, options: ReplayOptions, n: int, label: str, **kwargs
) -> tuple[str, float]:  # type: ignore[no-untyped-def]
    step = max(1, n // 10)
    done = [0]

    def progress(_scored) -> None:  # type: ignore[no-untyped-def]
        done[0] += 1
        if done[0] % step == 0:
            say(f"  {label}: {done[0]}/{n}")

    started = time.perf_counter()
    outcome = replay_run(store, parent, options, progress=progress, **kwargs)
    elapsed = time.perf_counter() - started
    if not outcome.complete or len(outcome.results) != n:
        raise SystemExit(f"{label}: replay incomplete ({len(outcome.results)} of {n})")
    return outcome.run_id, elapsed


def replays(url: str, parent: str, v2: Path, shards: list[str | None], cwd: Path) -> tuple[float, list[float], str]:
    """``evalstore replay`` processes run at once, one per shard (``[None]``: one process, every test):
    seconds, each one's peak RSS in MB (``wait4``: the replay's own), and the replay's id."""
    argv = [str(Path(sys.executable).parent / "evalstore"), "--db", url, "replay", parent, "--eval", str(v2)]
    argv += ["--no-cache", "--concurrency", "4", "--json"]
    started = time.perf_counter()
    procs = []
    for i, shard in enumerate(shards):
        out, err = cwd / f"replay-{i}.out", cwd / f"replay-{i}.err"
        with out.open("w") as stdout, err.open("w") as stderr:
            procs.append(
                (
                    subprocess.Popen(
                        [*argv, *(["--shard", shard] if shard else [])], cwd=cwd, stdout=stdout, stderr=stderr
                    ),
                    out,
                    err,
                )
            )
    peaks, run_id = [], ""
    for proc, out, err in procs:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        if proc.returncode not in (0, 1):
            raise SystemExit(f"a replay failed: {err.read_text()[-500:]}")
        peaks.append(usage.ru_maxrss / 1024)
        run_id = json.loads(out.read_text())["run_id"]
    return time.perf_counter() - started, peaks, run_id


def append_floor(store: EventStore, run_id: str) -> tuple[int, float]:
    """Replay ``run_id``'s events again, test by test, into a new stream through ``append_units`` in units of
    UNIT tests: what a driver's writes cost alone. Returns (tests, seconds)."""
    units: dict[tuple, list] = {}
    for stored in store.read_stream(run_id):
        payload = stored.event
        key = getattr(payload, "test_id", None)
        if key is None:
            continue
        k = (payload.test_id, getattr(payload, "target", None) or "", getattr(payload, "attempt", 1))
        units.setdefault(k, []).append((stored.type, stored.schema_version, stored.payload_json))
    stream = f"bench-append-{uuid.uuid4().hex[:8]}"
    keys = list(units)
    started = time.perf_counter()
    for i in range(0, len(keys), UNIT):
        batch = [
            (key, [(str(uuid.uuid4()), type_, version, payload) for type_, version, payload in units[key]])
            for key in keys[i : i + UNIT]
        ]
        store.append_units(stream, batch)
    return len(keys), time.perf_counter() - started


def run(args: argparse.Namespace, workdir: Path) -> None:
    base = args.db or os.environ.get("EVALSTORE_TEST_POSTGRES_URL") or LOCAL_PG
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema}"
    try:
        n = args.results
        say(f"building {n} results and importing them into PostgreSQL (schema {schema})")
        suite = write(workdir, n, code=args.code_grader)
        v1, v2, results = suite.v1, suite.v2, workdir / "results.jsonl"
        store = EventStore.open(url)
        started = time.perf_counter()
        parent = import_results(store, results, eval_path=v1).run_id
        imported = time.perf_counter() - started
        options = ReplayOptions(eval_path=str(v2), no_cache=True)
        load = os.getloadavg()[0]
        header = [
            f"regrade of {n} results on PostgreSQL: contains + regex"
            + (" + an sh code grader (a process per test)" if args.code_grader else " (no grader processes)"),
            f"  {os.cpu_count()} CPUs; load average {load:.2f} at the start (a shared machine: see docs/scale.md)",
            f"  import (setup): {imported:8.1f} s  {n / imported:8.1f} results/s",
        ]
        for line in header:
            emit(line)
        first = None
        if "single" not in args.skip:
            say("  single process: `evalstore replay --concurrency 4`")
            t, [peak], first = replays(url, parent, v2, [None], workdir)
            emit(f"  single process (--concurrency 4):  {t:8.1f} s  {n / t:8.1f} tests/s  (peak RSS {peak:.0f} MB)")
        if "shards" not in args.skip:
            say(f"  {args.shards} shards at once")
            t, peaks, _ = replays(url, parent, v2, [f"{i}/{args.shards}" for i in range(1, args.shards + 1)], workdir)
            emit(
                f"  --shard 1..{args.shards}/{args.shards} processes at once: {t:8.1f} s  {n / t:8.1f} tests/s"
                f"  (peak RSS {', '.join(f'{p:.0f}' for p in peaks)} MB)"
            )
        if "ray" not in args.skip:
            import ray

            from evalstore.replay.executors.ray import RayExecutor

            started = time.perf_counter()
            ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
            boot = time.perf_counter() - started
            try:
                run_id, t = timed_replay(store, parent, options, n, "ray", executor=RayExecutor())
            finally:
                ray.shutdown()
            first = first or run_id
            emit(
                f"  --executor ray ({args.ray_cpus} CPUs):      {t:8.1f} s  {n / t:8.1f} tests/s  (cluster start {boot:.1f} s apart)"
            )
        if "append" not in args.skip and first is not None:
            tests, t = append_floor(store, first)
            emit(
                f"  driver appends alone (append_units, {UNIT} tests a transaction): {t:8.1f} s  {tests / t:8.1f} tests/s"
            )
        with admin.connect() as conn:
            events = conn.execute(text(f'SELECT count(*) FROM "{schema}".events')).scalar() or 0
            results_stored = conn.execute(text(f'SELECT count(*) FROM "{schema}".results')).scalar() or 1
            size = conn.execute(
                text(
                    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace "
                    "WHERE s.nspname = :schema AND c.relkind = 'r'"
                ),
                {"schema": schema},
            ).scalar()
        emit(
            f"  store: {events} events, {int(size or 0) / 1e6:.0f} MB in tables and indexes, "
            f"{int(size or 0) / results_stored / 1e3:.1f} KB per stored result ({results_stored}: import, replays, appends)"
        )
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        emit(f"  this process's peak RSS: {rss:.0f} MB (the import and the Ray driver)")
        emit(f"  load average {os.getloadavg()[0]:.2f} at the end")
        store.close()

    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--ray-cpus", type=int, default=2)
    parser.add_argument("--code-grader", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--db", help="a PostgreSQL URL (default: $EVALSTORE_TEST_POSTGRES_URL, else the local one)")
    parser.add_argument("--skip", type=lambda v: set(v.split(",")), default=set(), help="single,shards,ray,append")
    parser.add_argument("--dir", type=Path, help="work directory (default: a fresh temp dir, removed after)")
    args = parser.parse_args()
    if args.dir:
        args.dir.mkdir(parents=True, exist_ok=False)
        run(args, args.dir)
    else:
        with tempfile.TemporaryDirectory(prefix="evalstore-bench-scale-") as tmp:
            run(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
