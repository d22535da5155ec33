"""Open the viewer's pages of a run of 100,000 results, against the time to read that run whole.

Run: ``.venv/bin/python bench/view.py [--results N] [--dir DIR]``

Setup (not timed): an AgentV results JSONL file of N rows, three graders each (the rows of
``bench/compare.py``), imported into a fresh SQLite store (``import_results``).

Timed, each three times after one untimed warm-up, through the viewer's web application (Starlette's
test client: routing, the read model, Jinja2 rendering, the response), best of three:

* the run page as opened from the runs list (first 100 results, grader means, histogram, snapshot);
* the run page sorted by score, descending, across all results;
* the run page filtered to one grader's failures, and its 100th page;
* the runs page.

The floor, measured in the same run: reading the run's results whole (``views.run_results``, what
``evalstore show`` reads). Targets: every page under 1 s, and no page more than 0.5x the floor (a page
reads one page of results, not the run).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
warnings.filterwarnings("ignore", category=DeprecationWarning)

from starlette.testclient import TestClient  # noqa: E402

from evalstore.replay.agentv.importing import import_results  # noqa: E402
from evalstore.replay.analysis.views import run_results  # noqa: E402
from evalstore.store import EventStore  # noqa: E402
from evalstore.viewer import create_app  # noqa: E402

GRADERS = (("exact", "code-grader", 1), ("rubric", "rubrics", 4), ("judge", "llm-grader", 100))
THRESHOLD = 0.8


def _row(i: int, rng: random.Random) -> dict:
    entries = []
    scores = []
    for name, kind, levels in GRADERS:
        score = rng.randint(0, levels) / levels
        scores.append(score)
        passed = score >= THRESHOLD
        entries.append(
            {
                "name": name,
                "type": kind,
                "score": score,
                "weight": 1,
                "verdict": "pass" if passed else "fail",
                "assertions": [{"text": f"{name} check", "passed": passed}],
            }
        )
    score = round(sum(scores) / len(scores), 6)
    return {
        "timestamp": "2026-03-01T00:00:00.000Z",
        "test_id": f"test-{i:06d}",
        "suite": "bench-view",
        "score": score,
        "target": "default",
        "execution_status": "ok" if score >= THRESHOLD else "quality_failure",
        "scores": entries,
    }


def _best(client: TestClient, url: str, expect: str) -> float:
    client.get(url)  # warm-up
    times = []
    for _ in range(3):
        started = time.perf_counter()
        r = client.get(url)
        times.append(time.perf_counter() - started)
        if r.status_code != 200 or expect not in r.text:
            raise SystemExit(f"{url}: status {r.status_code}, {expect!r} not on the page")
    return min(times)


def run(args: argparse.Namespace, workdir: Path) -> None:
    n = args.results
    path = workdir / "results.jsonl"
    rng = random.Random(args.seed)
    print(f"writing {n} result rows", file=sys.stderr, flush=True)
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps(_row(i, rng)) + "\n")
    store = EventStore.open(f"sqlite:///{workdir / 'store.db'}")
    print("importing", file=sys.stderr, flush=True)
    run_id = import_results(store, path).run_id
    client = TestClient(create_app(store), base_url="http://127.0.0.1")

    print("floor: reading the run whole", file=sys.stderr, flush=True)
    run_results(store, run_id)
    floors = []
    for _ in range(3):
        started = time.perf_counter()
        rows = run_results(store, run_id)
        floors.append(time.perf_counter() - started)
    if len(rows) != n:
        raise SystemExit(f"expected {n} results, read {len(rows)}")
    floor = min(floors)

    pages = {
        "run page (first 100)": (f"/runs/{run_id}", f"{n} results"),
        "sorted by score, desc": (f"/runs/{run_id}?sort=score&desc=1", "test-"),
        "judge fails, page 100": (f"/runs/{run_id}?grader=judge&verdict=fail&page=100", "page 100 of"),
        "runs page": ("/runs", run_id),
    }
    print(f"1 imported run x {n} results x {len(GRADERS)} graders (SQLite)")
    print(f"floor: read the run whole (views.run_results): {floor:6.3f} s")
    worst_s, worst_ratio = 0.0, 0.0
    for label, (url, expect) in pages.items():
        print(f"timing {label}", file=sys.stderr, flush=True)
        t = _best(client, url, expect)
        worst_s, worst_ratio = max(worst_s, t), max(worst_ratio, t / floor)
        print(f"{label:24} {t:6.3f} s  ({t / floor:.3f} x floor)")
    print(f"slowest page: {worst_s:.3f} s (target < 1 s): {'met' if worst_s < 1 else 'MISSED'}")
    print(f"slowest page / floor: {worst_ratio:.3f} (target <= 0.5): {'met' if worst_ratio <= 0.5 else 'MISSED'}")
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, help="work directory (default: a fresh temp dir, removed after)")
    args = parser.parse_args()
    if args.dir:
        args.dir.mkdir(parents=True, exist_ok=False)
        run(args, args.dir)
    else:
        with tempfile.TemporaryDirectory(prefix="evalstore-bench-view-") as tmp:
            run(args, Path(tmp))


if __name__ == "__main__":
    main()
