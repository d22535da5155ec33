"""``show``, ``export`` and ``compare`` on two imported runs, against the time to ``json.loads`` their JSONL.

Run: ``.venv/bin/python bench/read.py [--results 20000] [--big 100000] [--seed S] [--dir DIR]``
(``--big 0`` skips the 100,000-result memory check).

Setup (not timed): two AgentV 4.x results JSONL files of N rows in ``bench/import.py``'s shape (a
rubric LLM grader with its rendered prompt in ``scores[].input``, a code grader, assertions with
evidence); run B is run A with 10% of the rubric verdicts moved. Both are imported into a fresh SQLite
store.

The floor: ``json.loads`` of every line of both files (and of one file, for the one-run commands).
Each command runs as ``python -m evalstore ...`` in a child process, stdout to /dev/null, after a
warm-up; the figure is its wall time over the floor of what it reads (one run for ``show``/``export``,
both for ``compare``). On a shared machine the speed changes from one minute to the next (the floor
alone varied from 0.51 to 0.85 s in one run), so the two are measured in turns, three times, and each
is the best of its three. Target: each within 3x.

Then, with ``--big N``, the same two runs at N results and ``compare`` (table, ``--json``, ``--html``)
alone: the child's peak RSS (its ``VmHWM``, and its forked workers' where it has any). Target: under 200 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# ``python bench/X.py`` puts bench/ first on sys.path, where bench/replay.py would shadow the package.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from bench.store_size import import_bench  # noqa: E402
from bench.user_env import USER_ENV  # noqa: E402

TIME_TARGET = 3.0
RSS_TARGET_MB = 200.0


def write_runs(workdir: Path, n: int, seed: int) -> tuple[Path, Path]:
    """Run A's rows, and run B: A with 10% of the rubric verdicts moved (score and verdict)."""
    rows = import_bench()
    rng, moved = random.Random(seed), random.Random(seed + 1)
    path_a, path_b = workdir / f"a-{n}.jsonl", workdir / f"b-{n}.jsonl"
    with path_a.open("w", encoding="utf-8") as fa, path_b.open("w", encoding="utf-8") as fb:
        for i in range(n):
            row = rows.make_row(i, rng)
            fa.write(json.dumps(row, ensure_ascii=False) + "\n")
            if moved.random() < 0.1:
                rubric = row["scores"][0]
                rubric["score"] = round(1 - rubric["score"], 4)
                rubric["verdict"] = "pass" if rubric["score"] >= rows.VERDICT_THRESHOLD else "fail"
                row["score"] = round((rubric["score"] + row["scores"][1]["score"]) / 2, 4)
                row["execution_status"] = "ok" if row["score"] >= rows.VERDICT_THRESHOLD else "quality_failure"
            fb.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path_a, path_b


def floor(paths: list[Path], rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for path in paths:
            with path.open(encoding="utf-8") as fh:
                for line in fh:
                    json.loads(line)
        best = min(best, time.perf_counter() - started)
    return best


# ``python -m evalstore`` as it runs (cli.entry), reporting at exit the peak RSS of its own memory
# (``VmHWM``) and of the workers it forked (an export's): wait4's ``ru_maxrss`` would also count the
# memory of this process, which a child's exec inherits as its starting peak.
_MEASURED = """\
import atexit, resource, sys
_report = sys.argv[1]
def _peak():
    own = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with open(_report, "w") as fh:
        fh.write(str(max(own, workers)))
atexit.register(_peak)
from evalstore.cli import entry
sys.argv = ["evalstore", *sys.argv[2:]]
entry()
"""


def run_child(args: list[str], db: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``python -m evalstore --db DB ARGS``."""
    with tempfile.NamedTemporaryFile(mode="r", suffix=".rss") as peak, open(os.devnull, "w") as devnull:
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", _MEASURED, peak.name, "--db", db, *args],
            stdout=devnull,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=USER_ENV,
        )
        elapsed = time.perf_counter() - started
        err = proc.stderr.decode()
        if proc.returncode not in (0, 1):
            raise SystemExit(f"evalstore {' '.join(args)} failed ({proc.returncode}): {err}")
        return elapsed, int(peak.read() or 0) / 1024


def import_runs(db: str, paths: tuple[Path, Path]) -> tuple[str, str]:
    from evalstore.replay.agentv.importing import import_results
    from evalstore.store import EventStore

    store = EventStore.open(db)
    try:
        return import_results(store, paths[0]).run_id, import_results(store, paths[1]).run_id
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=20_000)
    parser.add_argument("--big", type=int, default=100_000, help="results per run for the RSS check (0: skip)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, help="work directory (default: a fresh temp dir, removed after)")
    args = parser.parse_args()
    if args.dir:
        args.dir.mkdir(parents=True)
        return measure(args, args.dir)
    with tempfile.TemporaryDirectory(prefix="evalstore-bench-read-") as tmp:
        return measure(args, Path(tmp))


def measure(args: argparse.Namespace, workdir: Path) -> int:
    n = args.results
    print(f"[{n}] writing and importing two runs", file=sys.stderr, flush=True)
    paths = write_runs(workdir, n, args.seed)
    db = f"sqlite:///{workdir / 'store.db'}"
    a, b = import_runs(db, paths)
    one, both = [paths[0]], list(paths)
    html = str(workdir / "report.html")
    commands = [
        ("show A", ["show", a], one),
        ("show A --json", ["show", a, "--json"], one),
        ("show A --all", ["show", a, "--all"], one),
        ("export A --format agentv-jsonl", ["export", a, "--format", "agentv-jsonl"], one),
        ("export A --format csv", ["export", a, "--format", "csv"], one),
        ("export A --format json", ["export", a, "--format", "json"], one),
        ("compare A B", ["compare", a, b], both),
        ("compare A B --json", ["compare", a, b, "--json"], both),
        ("compare A B --html", ["compare", a, b, "--html", html], both),
    ]
    worst = 0.0
    print(f"{'command':<34} {'seconds':>8} {'floor':>7} {'x floor':>8} {'peak RSS':>9}")
    for label, argv, read in commands:
        run_child(argv, db)  # warm-up: page cache, .pyc
        # Floor and command in turns, the best of each: both see the machine of the same minute.
        base, seconds, rss = float("inf"), float("inf"), 0.0
        for _ in range(3):
            base = min(base, floor(read, rounds=1))
            seconds, rss = min((seconds, rss), run_child(argv, db))
        ratio = seconds / base
        worst = max(worst, ratio)
        print(f"{label:<34} {seconds:>8.2f} {base:>6.2f}s {ratio:>7.1f}x {rss:>6.0f} MB", flush=True)
    print(f"worst x floor: {worst:.1f}x (target <= {TIME_TARGET:.0f}x): {'met' if worst <= TIME_TARGET else 'MISSED'}")
    if args.big:
        big = args.big
        print(f"[{big}] writing and importing two runs", file=sys.stderr, flush=True)
        paths = write_runs(workdir, big, args.seed)
        db = f"sqlite:///{workdir / 'big.db'}"
        a, b = import_runs(db, paths)
        peak = 0.0
        big_html = str(workdir / "big-report.html")
        for label, argv in (
            ("compare A B", ["compare", a, b]),
            ("compare A B --json", ["compare", a, b, "--json"]),
            ("compare A B --html", ["compare", a, b, "--html", big_html]),
        ):
            seconds, rss = run_child(argv, db)
            peak = max(peak, rss)
            print(f"{label} on two runs of {big} results: {seconds:.1f} s, peak RSS {rss:.0f} MB", flush=True)
        print(
            f"compare peak RSS: {peak:.0f} MB (target < {RSS_TARGET_MB:.0f} MB): {'met' if peak < RSS_TARGET_MB else 'MISSED'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
