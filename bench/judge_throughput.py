"""Judge throughput: full LLM-grader grades against the scripted judge server, then from the cache.

    python bench/judge_throughput.py [--calls 1000] [--latency 0.2] [--concurrency 32]

Pass 1 grades N distinct tests (N judge calls) through one JudgePool with the given concurrency
against a server that takes ``latency`` seconds per request, and compares the achieved calls/s with
the ideal ``concurrency / latency`` (target ratio >= 0.9). Pass 2 grades the same N tests with the
same recorder: every verdict must come from the judge cache, with no request reaching the server.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the product, and the test judge server

from judge_server import JudgeServer, freeform, make_recorder  # noqa: E402

from evalstore.replay.content import Message  # noqa: E402
from evalstore.replay.evalfile.specs import EvalSuite, EvalTest, LlmGraderSpec  # noqa: E402
from evalstore.replay.grading.graders.base import GraderResult, GradingContext, TranscriptInfo  # noqa: E402
from evalstore.replay.grading.graders.llm import LlmGrader  # noqa: E402
from evalstore.replay.grading.judge import JudgePool, JudgeTarget, RetryPolicy  # noqa: E402


def contexts(count: int, pool: JudgePool, recorder: object) -> list[GradingContext]:
    spec = LlmGraderSpec(name="llm-grader")
    tests = [
        EvalTest(
            id=f"sum-{i}",
            input=[Message(role="user", content=f"What is {i} + 27?")],
            expected_output=str(i + 27),
            criteria="Adds the two numbers correctly",
            graders=[spec],
        )
        for i in range(count)
    ]
    suite = EvalSuite(path=str(ROOT / "bench" / "bench.eval.yaml"), name="bench", tests=tests)
    return [
        GradingContext(
            suite=suite,
            test=test,
            transcript=TranscriptInfo(messages=[Message(role="assistant", content=f"It is {i + 27}.")]),
            recorder=recorder,  # type: ignore[arg-type]
            target="agent",
            judges=pool,
        )
        for i, test in enumerate(tests)
    ]


def grade_all(ctxs: list[GradingContext], workers: int) -> tuple[float, list[GraderResult]]:
    def one(ctx: GradingContext) -> GraderResult:
        spec = ctx.test.graders[0]
        assert isinstance(spec, LlmGraderSpec)
        return LlmGrader(spec).grade(ctx)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as executor:
        results = list(executor.map(one, ctxs))
    return time.perf_counter() - start, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the judge takes per request")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()

    with JudgeServer([freeform(0.9, [("adds correctly", True)])], latency=args.latency) as server:
        target = JudgeTarget(
            name="bench-judge", provider="openai-compatible", base_url=server.base_url, model="bench-model", timeout=30
        )
        recorder = make_recorder()
        with JudgePool({target.name: target}, concurrency=args.concurrency, retry=RetryPolicy(max_retries=0)) as pool:
            ctxs = contexts(args.calls, pool, recorder)
            fresh_time, fresh = grade_all(ctxs, args.concurrency)
            fresh_requests = len(server.requests)
            cached_time, cached = grade_all(ctxs, args.concurrency)
            cached_requests = len(server.requests) - fresh_requests

    failures = [r for r in fresh + cached if r.status != "ok"]
    if failures or fresh_requests != args.calls or cached_requests or not all(r.cache_hit for r in cached):
        print(
            f"FAILED: {len(failures)} failed grades, {fresh_requests} requests in pass 1 (want {args.calls}), "
            f"{cached_requests} in pass 2 (want 0)",
            file=sys.stderr,
        )
        return 1

    rate = args.calls / fresh_time
    ideal = args.concurrency / args.latency
    cached_rate = args.calls / cached_time
    print(
        f"judge calls:        {args.calls} at concurrency {args.concurrency}, {args.latency * 1000:.0f} ms judge latency"
    )
    print(f"max in flight:      {server.max_in_flight}")
    print(f"fresh:              {fresh_time:.2f} s, {rate:.1f} calls/s")
    print(f"ideal:              {ideal:.1f} calls/s (concurrency / latency)")
    print(f"ratio:              {rate / ideal:.3f} (target >= 0.9)")
    print(f"cached:             {cached_time:.3f} s, {cached_rate:.0f} grades/s, 0 requests")
    print(f"cache speed-up:     {fresh_time / cached_time:.1f}x")
    return 0 if rate / ideal >= 0.9 else 2


if __name__ == "__main__":
    raise SystemExit(main())
