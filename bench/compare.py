"""Compare two stored runs of 100,000 results each, against the time to read their verdicts.

Run: ``.venv/bin/python bench/compare.py [--results N] [--seed S] [--resamples R] [--dir DIR]``
(``--in-memory`` times ``compare()`` alone on runs built in memory, without a store).

Setup (not timed): two AgentV results JSONL files of N rows, graded by three graders with real
score shapes (a deterministic 0/1 code grader, a rubric grader scoring in quarters, an LLM judge
scoring in hundredths); run B is run A regraded: most verdicts carry over, some move. Both are
imported into a fresh SQLite store (``import_results``: two imported runs).

Timed, each twice, alternating, after one untimed read that warms the page cache:

* read: ``evalstore.replay.material.load_results`` for both runs (every verdict and score event of both);
* compare: the whole of ``evalstore compare A B`` short of printing: both ``load_results`` and
  ``evalstore.replay.analysis.compare.compare`` (pairing, per-test rows, per-grader tallies, bootstrap CIs, McNemar,
  kappa).

Target: compare costs at most 2x the read. Then, on the runs as loaded, ``compare()`` alone,
``to_dict()`` + ``json.dumps`` and ``render_html()``.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import tempfile
import time
from pathlib import Path

# ``python bench/X.py`` puts bench/ first on sys.path, where bench/replay.py would shadow the package.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from evalstore.replay.agentv.importing import import_results  # noqa: E402
from evalstore.replay.analysis.compare import Comparison, Key, RunResults, TestResult, compare  # noqa: E402
from evalstore.replay.analysis.report_html import render_html  # noqa: E402
from evalstore.replay.material import load_results  # noqa: E402
from evalstore.store import EventStore  # noqa: E402
from evalstore.store.events import Assertion, TestScored, VerdictRecorded  # noqa: E402

GRADERS = (("exact", "code-grader", 1), ("rubric", "rubrics", 4), ("judge", "llm-grader", 100))
"""(name, type, levels): scores are multiples of 1/levels."""

THRESHOLD = 0.8


def _verdict(key: Key, name: str, kind: str, score: float) -> VerdictRecorded:
    test_id, target, attempt = key
    passed = score >= THRESHOLD
    return VerdictRecorded(
        test_id=test_id,
        target=target,
        attempt=attempt,
        grader=name,
        grader_type=kind,
        score=score,
        verdict="pass" if passed else "fail",
        assertions=[Assertion(text=f"{name} check", passed=passed, evidence=None)],
    )


def _result(key: Key, scores: dict[str, float]) -> TestResult:
    test_id, target, attempt = key
    verdicts = {name: _verdict(key, name, kind, scores[name]) for name, kind, _ in GRADERS}
    score = sum(scores.values()) / len(scores)
    scored = TestScored(
        test_id=test_id,
        target=target,
        attempt=attempt,
        score=score,
        passed=score >= THRESHOLD,
        status="ok" if score >= THRESHOLD else "quality_failure",
        threshold=THRESHOLD,
    )
    return TestResult(scored, verdicts)


def _scores(rng: random.Random) -> tuple[dict[str, float], dict[str, float]]:
    """One test's per-grader scores in run A and in run B (10% of B's verdicts moved)."""
    scores_a = {name: rng.randint(0, levels) / levels for name, _, levels in GRADERS}
    scores_b = {
        name: (rng.randint(0, levels) / levels if rng.random() < 0.1 else s)
        for (name, _, levels), s in zip(GRADERS, scores_a.values())
    }
    return scores_a, scores_b


def synthetic_runs(n: int, seed: int = 0) -> tuple[RunResults, RunResults]:
    rng = random.Random(seed)
    a: dict[Key, TestResult] = {}
    b: dict[Key, TestResult] = {}
    for i in range(n):
        key: Key = (f"test-{i:06d}", "default", 1)
        scores_a, scores_b = _scores(rng)
        a[key] = _result(key, scores_a)
        b[key] = _result(key, scores_b)
    return RunResults("run-a", a), RunResults("run-b", b)


def verdicts_row(i: int, scores: dict[str, float]) -> dict:
    """An AgentV 4.x result row with these per-grader scores (also ``bench/import.py --shape verdicts``)."""
    entries = []
    for name, kind, _ in GRADERS:
        passed = scores[name] >= THRESHOLD
        entries.append(
            {
                "name": name,
                "type": kind,
                "score": scores[name],
                "weight": 1,
                "verdict": "pass" if passed else "fail",
                "assertions": [{"text": f"{name} check", "passed": passed}],
            }
        )
    score = round(sum(scores.values()) / len(scores), 6)
    return {
        "timestamp": f"2026-03-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
        "test_id": f"test-{i:06d}",
        "suite": "bench-compare",
        "score": score,
        "target": "default",
        "execution_status": "ok" if score >= THRESHOLD else "quality_failure",
        "scores": entries,
    }


def write_results(workdir: Path, n: int, seed: int) -> tuple[Path, Path]:
    rng = random.Random(seed)
    path_a, path_b = workdir / "run-a.jsonl", workdir / "run-b.jsonl"
    with path_a.open("w") as fa, path_b.open("w") as fb:
        for i in range(n):
            scores_a, scores_b = _scores(rng)
            fa.write(json.dumps(verdicts_row(i, scores_a)) + "\n")
            fb.write(json.dumps(verdicts_row(i, scores_b)) + "\n")
    return path_a, path_b


def _print_stats(comparison: Comparison) -> None:
    for row in comparison.graders:
        s = row.stats.score
        print(f"  {row.grader:8} n={s.n} diff={s.mean_diff:+.4f} CI=[{s.ci_low:+.4f}, {s.ci_high:+.4f}] {s.method}")
    s = comparison.overall.score
    print(f"  {'overall':8} n={s.n} diff={s.mean_diff:+.4f} CI=[{s.ci_low:+.4f}, {s.ci_high:+.4f}] {s.method}")


def _outputs(comparison: Comparison, a: RunResults, b: RunResults) -> None:
    started = time.perf_counter()
    payload = json.dumps(comparison.to_dict())
    print(f"to_dict() + json.dumps: {time.perf_counter() - started:.2f} s ({len(payload) / 1e6:.1f} MB)")
    started = time.perf_counter()
    page = render_html(comparison, a, b, title="bench")
    print(f"render_html(): {time.perf_counter() - started:.2f} s ({len(page) / 1e6:.1f} MB)")


def in_memory(args: argparse.Namespace) -> None:
    """compare() alone on runs built in memory (no store): the GC is paused while building them, as
    millions of small objects otherwise trigger repeated full collections; one full collection then
    leaves the heap as a store read would."""
    started = time.perf_counter()
    gc.disable()
    try:
        run_a, run_b = synthetic_runs(args.results, args.seed)
    finally:
        gc.enable()
    gc.collect()
    built = time.perf_counter() - started
    started = time.perf_counter()
    comparison = compare(run_a, run_b, seed=args.seed, resamples=args.resamples)
    elapsed = time.perf_counter() - started
    print(f"built 2 runs x {args.results} results x {len(GRADERS)} graders in {built:.2f} s")
    print(f"compare(): {elapsed:.2f} s")
    _outputs(comparison, run_a, run_b)
    _print_stats(comparison)


def from_store(args: argparse.Namespace, workdir: Path) -> None:
    n = args.results
    print(f"writing 2 x {n} result rows", file=sys.stderr, flush=True)
    path_a, path_b = write_results(workdir, n, args.seed)
    store = EventStore.open(f"sqlite:///{workdir / 'store.db'}")
    started = time.perf_counter()
    run_ids = []
    for path in (path_a, path_b):
        print(f"importing {path.name}", file=sys.stderr, flush=True)
        run_ids.append(import_results(store, path).run_id)
    imported = time.perf_counter() - started
    run_a, run_b = run_ids

    def read() -> tuple[RunResults, RunResults]:
        return load_results(store, run_a), load_results(store, run_b)

    def whole() -> Comparison:
        a, b = read()
        return compare(a, b, seed=args.seed, resamples=args.resamples)

    print("warm-up read", file=sys.stderr, flush=True)
    loaded = read()
    if any(len(r.results) != n for r in loaded):
        raise SystemExit(f"expected {n} results per run, read {[len(r.results) for r in loaded]}")
    del loaded
    reads: list[float] = []
    compares: list[float] = []
    comparison = None
    for round_ in (1, 2):
        print(f"round {round_}: read, then compare", file=sys.stderr, flush=True)
        started = time.perf_counter()
        loaded = read()
        reads.append(time.perf_counter() - started)
        del loaded
        comparison = None  # the previous round's result must not sit in memory during this one
        started = time.perf_counter()
        comparison = whole()
        compares.append(time.perf_counter() - started)
    assert comparison is not None
    read_s, compare_s = sum(reads) / len(reads), sum(compares) / len(compares)
    ratio = compare_s / read_s
    print(f"2 imported runs x {n} results x {len(GRADERS)} graders (SQLite; imported in {imported:.1f} s)")
    print(f"read both runs (load_results x 2):   {read_s:6.2f} s  (rounds: {', '.join(f'{t:.2f}' for t in reads)})")
    print(
        f"compare (read both + compare()):     {compare_s:6.2f} s  (rounds: {', '.join(f'{t:.2f}' for t in compares)})"
    )
    print(f"compare / read: {ratio:.2f} (target <= 2): {'met' if ratio <= 2 else 'MISSED'}")
    a, b = read()
    started = time.perf_counter()
    comparison = compare(a, b, seed=args.seed, resamples=args.resamples)
    print(f"compare() alone on the loaded runs: {time.perf_counter() - started:.2f} s")
    _outputs(comparison, a, b)
    _print_stats(comparison)
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--in-memory", action="store_true", help="time compare() on runs built in memory, no store")
    parser.add_argument("--dir", type=Path, help="work directory (default: a fresh temp dir, removed after)")
    args = parser.parse_args()
    if args.in_memory:
        in_memory(args)
    elif args.dir:
        args.dir.mkdir(parents=True, exist_ok=False)
        from_store(args, args.dir)
    else:
        with tempfile.TemporaryDirectory(prefix="evalstore-bench-compare-") as tmp:
            from_store(args, Path(tmp))


if __name__ == "__main__":
    main()
