"""Regrading at scale on PostgreSQL: one process, ``--shard`` processes, and a local Ray cluster.

Run: ``.venv/bin/python bench/scale.py [--results 100000] [--shards 2] [--ray-cpus 2] [--no-code-grader]
[--db URL] [--skip single,shards,ray,append] [--dir DIR]``. ``--db`` is a PostgreSQL URL (default
``$EVALSTORE_TEST_POSTGRES_URL``, else the local ``postgresql+psycopg://postgres@127.0.0.1:5432/test``); the
benchmark works in a schema of its own, dropped at the end.

Setup (timed, reported, not a target): N synthetic AgentV 4.x result rows, each test graded by two
deterministic assertions (``contains``, ``regex``) and, unless ``--no-code-grader``, a code grader that is a
small ``sh`` script (one process per test, a millisecond or two to start); imported with the v1 eval.

Timed, each a regrade with the v2 eval (the code grader's script changed) and ``--no-cache``, so every
grader runs again:

1. ``single``: ``replay_run`` in this process, ``--concurrency 4`` (the local executor);
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
import random
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

from sqlalchemy import create_engine, text  # noqa: E402

from evalstore.replay.agentv.importing import import_results  # noqa: E402
from evalstore.replay.regrade import ReplayOptions, replay_run  # noqa: E402
from evalstore.store import EventStore  # noqa: E402

LOCAL_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
CHILD_TIMEOUT_S = 4 * 3600
UNIT = 16

GRADER = """\
#!/bin/sh
payload=$(cat)
case "$payload" in
  *"= 1"*) echo '{"score": 1, "assertions": [{"text": "VERSION total starts with 1", "passed": true}]}' ;;
  *) echo '{"score": 0.5, "assertions": [{"text": "VERSION total starts with 1", "passed": false}]}' ;;
esac
"""
EVAL = """\
name: bench-scale
execution:
  threshold: 0.8
tests: ./cases.yaml
assertions:
  - name: contains-total
    type: contains
    value: Total
  - name: has-number
    type: regex
    value: "= [0-9]+"
"""
CODE = """\
  - name: total-check
    type: code-grader
    command: [sh, ../graders/{script}]
"""


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build(workdir: Path, n: int, code: bool) -> tuple[Path, Path, Path]:
    graders, evals = workdir / "graders", workdir / "evals"
    graders.mkdir(parents=True)
    evals.mkdir()
    for version in ("v1", "v2"):
        (graders / f"grade_{version}.sh").write_text(GRADER.replace("VERSION", version))
        body = EVAL + (CODE.format(script=f"grade_{version}.sh") if code else "")
        # v2 differs even without the code grader (its threshold), so the regrade is a new configuration.
        (evals / f"scale.{version}.eval.yaml").write_text(body if version == "v1" else body.replace("0.8", "0.75"))
    rng = random.Random(11)
    cases = []
    results = workdir / "results.jsonl"
    with results.open("w", encoding="utf-8") as fh:
        for i in range(n):
            test_id = f"report-{i:06d}"
            question = f"Write revenue report {i} and state the total."
            cases.append({"id": test_id, "input": question, "criteria": "States a total."})
            terms = [rng.randint(10, 999) for _ in range(rng.randint(2, 4))]
            answer = f"Report {i}.\n\nTotal: {' + '.join(map(str, terms))} = {sum(terms)}"
            scores = [
                {"name": "contains-total", "type": "contains", "score": 1, "weight": 1, "verdict": "pass"},
                {"name": "has-number", "type": "regex", "score": 1, "weight": 1, "verdict": "pass"},
            ]
            if code:
                scores.append(
                    {"name": "total-check", "type": "code-grader", "score": 1, "weight": 1, "verdict": "pass"}
                )
            row = {
                "timestamp": f"2026-03-01T10:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
                "test_id": test_id,
                "suite": "bench-scale",
                "score": 1,
                "target": "default",
                "input": [{"role": "user", "content": question}],
                "output": [{"role": "assistant", "content": answer}],
                "execution_status": "ok",
                "scores": scores,
            }
            fh.write(json.dumps(row) + "\n")
    (evals / "cases.yaml").write_text(json.dumps(cases, indent=0))  # JSON is YAML
    return evals / "scale.v1.eval.yaml", evals / "scale.v2.eval.yaml", results


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


def shards(url: str, parent: str, v2: Path, k: int, n: int, cwd: Path) -> float:
    argv = [str(Path(sys.executable).parent / "evalstore"), "--db", url, "replay", parent, "--eval", str(v2)]
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [*argv, "--no-cache", "--shard", f"{i}/{k}", "--json"],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(1, k + 1)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"a shard failed: {err[-500:]}")
    return time.perf_counter() - started


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
        v1, v2, results = build(workdir, n, args.code_grader)
        store = EventStore.open(url)
        started = time.perf_counter()
        parent = import_results(store, results, eval_path=v1).run_id
        imported = time.perf_counter() - started
        options = ReplayOptions(eval_path=str(v2), no_cache=True)
        load = os.getloadavg()[0]
        lines = [
            f"regrade of {n} results on PostgreSQL: contains + regex"
            + (" + an sh code grader (a process per test)" if args.code_grader else " (no grader processes)"),
            f"  {os.cpu_count()} CPUs; load average {load:.2f} at the start (a shared machine: see docs/scale.md)",
            f"  import (setup): {imported:8.1f} s  {n / imported:8.1f} results/s",
        ]
        first = None
        if "single" not in args.skip:
            first, t = timed_replay(store, parent, options, n, "single process")
            lines.append(f"  single process (--concurrency 4):  {t:8.1f} s  {n / t:8.1f} tests/s")
        if "shards" not in args.skip:
            t = shards(url, parent, v2, args.shards, n, workdir)
            lines.append(
                f"  --shard 1..{args.shards}/{args.shards} processes at once: {t:8.1f} s  {n / t:8.1f} tests/s"
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
            lines.append(
                f"  --executor ray ({args.ray_cpus} CPUs):      {t:8.1f} s  {n / t:8.1f} tests/s  (cluster start {boot:.1f} s apart)"
            )
        if "append" not in args.skip and first is not None:
            tests, t = append_floor(store, first)
            lines.append(
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
        lines.append(
            f"  store: {events} events, {int(size or 0) / 1e6:.0f} MB in tables and indexes, "
            f"{int(size or 0) / results_stored / 1e3:.1f} KB per stored result ({results_stored}: import, replays, appends)"
        )
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        lines.append(f"  this process's peak RSS: {rss:.0f} MB (it loaded the parent run once per replay)")
        lines.append(f"  load average {os.getloadavg()[0]:.2f} at the end")
        store.close()
        print("\n".join(lines))
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
