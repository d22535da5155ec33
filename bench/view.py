"""Open the viewer's pages of runs of 100,000 results, against the time to read one such run whole.

Run: ``.venv/bin/python bench/view.py [--results N] [--dir DIR]``

Setup (not timed): two AgentV results JSONL files of N rows, three graders each (the rows of
``bench/compare.py``: run B is run A regraded, 10% of the verdicts moved), imported into a fresh SQLite
store (``import_results``).

Timed through the viewer's web application (Starlette's test client: routing, the read model, Jinja2
rendering, the response), best of three after one untimed warm-up that fills the page cache; each
timed request goes to a new application, so nothing a previous request computed is kept:

* the run page as opened from the runs list (first 100 results, grader means, histogram, snapshot);
* the run page sorted by score, descending, across all results;
* the run page filtered to one grader's failures, and its 100th page;
* the runs page;
* a test page, for the first test and for the last (input, transcript, artifacts, every verdict's audit);
* the compare page of A and B (``evalstore compare``'s statistics, the first 50 changed tests side by side);
* the compare page's 100th page of changed tests, as paging there goes: from the application that
  opened the comparison (its statistics are kept between pages).

Then, with 1,000 human labels on run A (``record_labels``, not timed), the labelling pages of
``evalstore view --label-as NAME``: a test page (blind, with the label form), "next unlabelled test" (a
redirect: reads the run's transcripts and labels), and the run page (with its graders' agreement up to
10,000 results, cold: every verdict of the run read once, then kept while neither changes).

The floor, measured in the same run: reading run A's results whole (``views.run_results``, what
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

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


def _client(store: EventStore, label_as: str | None = None) -> TestClient:
    return TestClient(create_app(store, label_as=label_as), base_url="http://127.0.0.1")


def _get(client: TestClient, url: str, expect: str) -> float:
    started = time.perf_counter()
    r = client.get(url, follow_redirects=False)
    if r.status_code == 303:  # "next unlabelled test": time the redirect, check where it goes
        elapsed = time.perf_counter() - started
        if expect not in r.headers["location"]:
            raise SystemExit(f"{url}: redirected to {r.headers['location']}, not {expect!r}")
        return elapsed
    elapsed = time.perf_counter() - started
    if r.status_code != 200 or expect not in r.text:
        raise SystemExit(f"{url}: status {r.status_code}, {expect!r} not on the page")
    return elapsed


def _best(
    store: EventStore, url: str, expect: str, *, opened_from: str | None = None, label_as: str | None = None
) -> float:
    """Best of three, each on a new application (``opened_from``: which first opened that page)."""
    times = []
    for _ in range(4):  # the first is the warm-up
        client = _client(store, label_as)
        if opened_from:
            client.get(opened_from)
        times.append(_get(client, url, expect))
    return min(times[1:])


def run(args: argparse.Namespace, workdir: Path) -> None:
    n = args.results
    rng = random.Random(args.seed)
    print(f"writing 2 x {n} result rows", file=sys.stderr, flush=True)
    path_a, path_b = workdir / "run-a.jsonl", workdir / "run-b.jsonl"
    with path_a.open("w") as fa, path_b.open("w") as fb:
        for i in range(n):
            row = _row(i, rng)
            fa.write(json.dumps(row) + "\n")
            fb.write(json.dumps(_regraded(row, rng)) + "\n")
    store = EventStore.open(f"sqlite:///{workdir / 'store.db'}")
    print("importing", file=sys.stderr, flush=True)
    run_id = import_results(store, path_a).run_id
    run_b = import_results(store, path_b).run_id

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

    last = f"test-{n - 1:06d}"
    compare = f"/compare/{run_id}/{run_b}"
    pages = {
        "run page (first 100)": (f"/runs/{run_id}", f"{n} results", None),
        "sorted by score, desc": (f"/runs/{run_id}?sort=score&desc=1", "test-", None),
        "judge fails, page 100": (f"/runs/{run_id}?grader=judge&verdict=fail&page=100", "page 100 of", None),
        "runs page": ("/runs", run_id, None),
        "test page (first test)": (f"/runs/{run_id}/tests/test-000000", "judge check", None),
        "test page (last test)": (f"/runs/{run_id}/tests/{last}", "judge check", None),
        "compare A B": (compare, "paired tests changed", None),
        "compare A B, page 100": (f"{compare}?page=100", "page 100 of", compare),
    }
    print(f"2 imported runs x {n} results x {len(GRADERS)} graders (SQLite)")
    print(f"floor: read run A whole (views.run_results): {floor:6.3f} s")
    worst_s, worst_ratio = 0.0, 0.0
    for label, (url, expect, opened_from) in pages.items():
        print(f"timing {label}", file=sys.stderr, flush=True)
        t = _best(store, url, expect, opened_from=opened_from)
        worst_s, worst_ratio = max(worst_s, t), max(worst_ratio, t / floor)
        print(f"{label:24} {t:6.3f} s  ({t / floor:.3f} x floor)  target < 1 s: {'met' if t < 1 else 'MISSED'}")
    print(f"slowest page: {worst_s:.3f} s (target < 1 s): {'met' if worst_s < 1 else 'MISSED'}")
    print(f"slowest page / floor: {worst_ratio:.3f} (target <= 0.5): {'met' if worst_ratio <= 0.5 else 'MISSED'}")
    _labelling(store, run_id, n, floor)
    store.close()


def _labelling(store: EventStore, run_id: str, n: int, floor: float) -> None:
    from evalstore.replay.labels import LabelInput, record_labels

    labelled = min(1000, n - 1)
    print(f"labelling {labelled} tests", file=sys.stderr, flush=True)
    record_labels(
        store, [LabelInput(test=f"test-{i:06d}", verdict="pass", by="alice") for i in range(labelled)], run=run_id
    )
    pages = {
        "labelling: test page": (f"/runs/{run_id}/tests/test-000500", "label-form"),
        "labelling: next test": (f"/runs/{run_id}/label", f"test-{labelled:06d}"),
        # Above RUN_PAGE_AGREEMENT_MAX results the run page names `evalstore agreement` instead of reading
        # every verdict (17.5 s cold at 100,000 results, measured when it did).
        "run page, labelled": (f"/runs/{run_id}", "agreement-table" if n <= 10_000 else "agreement-skipped"),
    }
    print(f"with {labelled} labels on run A, through evalstore view --label-as alice")
    for label, (url, expect) in pages.items():
        print(f"timing {label}", file=sys.stderr, flush=True)
        t = _best(store, url, expect, label_as="alice")
        print(f"{label:24} {t:6.3f} s  ({t / floor:.3f} x floor)  (one page: < 1 s {'met' if t < 1 else 'MISSED'})")


def _regraded(row: dict, rng: random.Random) -> dict:
    """Run B's row: run A's, with 10% of the verdicts moved (as ``bench/compare.py`` makes them)."""
    entries = []
    for entry, (_name, _kind, levels) in zip(row["scores"], GRADERS):
        score = rng.randint(0, levels) / levels if rng.random() < 0.1 else entry["score"]
        passed = score >= THRESHOLD
        verdict = "pass" if passed else "fail"
        entries.append(
            {**entry, "score": score, "verdict": verdict, "assertions": [{**entry["assertions"][0], "passed": passed}]}
        )
    score = round(sum(e["score"] for e in entries) / len(entries), 6)
    status = "ok" if score >= THRESHOLD else "quality_failure"
    return {**row, "score": score, "execution_status": status, "scores": entries}


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
