"""Time ``replay.compare.compare`` on two synthetic runs of 100,000 results with 3 graders each.

Run: ``.venv/bin/python bench/compare.py [--results N] [--seed S]``.

The graders mimic real score shapes: a deterministic 0/1 code grader, a rubric grader scoring in
quarters, and an LLM judge scoring in hundredths. Run B is run A regraded: most verdicts carry over,
some move. Building the runs is setup: it runs with the garbage collector paused (millions of
small objects otherwise trigger repeated full collections), then one full collection leaves the heap
in the steady state a store read would leave it in, and only ``compare()`` is timed.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import time

from store.events import Assertion, TestScored, VerdictRecorded

from replay.compare import Key, RunResults, TestResult, compare
from replay.report_html import render_html

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


def synthetic_runs(n: int, seed: int = 0) -> tuple[RunResults, RunResults]:
    rng = random.Random(seed)
    a: dict[Key, TestResult] = {}
    b: dict[Key, TestResult] = {}
    for i in range(n):
        key: Key = (f"test-{i:06d}", "default", 1)
        scores_a = {name: rng.randint(0, levels) / levels for name, _, levels in GRADERS}
        scores_b = {
            name: (rng.randint(0, levels) / levels if rng.random() < 0.1 else s)
            for (name, _, levels), s in zip(GRADERS, scores_a.values())
        }
        a[key] = _result(key, scores_a)
        b[key] = _result(key, scores_b)
    return RunResults("run-a", a), RunResults("run-b", b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resamples", type=int, default=10_000)
    args = parser.parse_args()
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
    started = time.perf_counter()
    payload = json.dumps(comparison.to_dict())
    print(f"to_dict() + json.dumps: {time.perf_counter() - started:.2f} s ({len(payload) / 1e6:.1f} MB)")
    started = time.perf_counter()
    page = render_html(comparison, title="bench")
    print(f"render_html(): {time.perf_counter() - started:.2f} s ({len(page) / 1e6:.1f} MB)")
    for row in comparison.graders:
        s = row.stats.score
        print(f"  {row.grader:8} n={s.n} diff={s.mean_diff:+.4f} CI=[{s.ci_low:+.4f}, {s.ci_high:+.4f}] {s.method}")
    s = comparison.overall.score
    print(f"  {'overall':8} n={s.n} diff={s.mean_diff:+.4f} CI=[{s.ci_low:+.4f}, {s.ci_high:+.4f}] {s.method}")


if __name__ == "__main__":
    main()
