"""Regrade throughput: ``replay_run`` with a changed code grader against a plain loop of the same processes.

Run: ``.venv/bin/python bench/replay.py [--tests 1000] [--concurrency 4] [--dir DIR]``.

Setup (not timed): a suite of N tests whose graders are a Python code grader (a small script reading
the stdin JSON and printing ``{score, assertions}``) and two deterministic assertions (``contains``
and ``regex``). The stored run is made by importing N synthetic AgentV 4.x result rows with that eval
file (``import_results(..., eval_path=...)``): each row's ``output`` is a message list, so each test
gets a transcript blob the replay must read back, as a recorded run would. Importing rather than
recording with a ``cli`` target skips N agent processes that a replay never runs anyway; what a replay
reads per test (case, transcript event, messages blob, parent verdicts) is the same.

Timed, in this order, on the same store:

1. a replay with ``--eval v2`` (the code grader's script changed) at ``--concurrency 1``;
2. the floor: the same N code-grader processes (same interpreter, script, cwd, and the very stdin
   payloads replay 1 sent, read back from its ``grader_called`` events) run one after another by a
   plain ``subprocess.run`` loop, once after replay 1 and once after replay 3 (the mean is used);
3. the same replay at the default concurrency (4);
4. a replay that regrades only one deterministic grader (``--graders contains-total``; the code
   grader's and the regex's verdicts are carried over) against replay 3.

Targets: replay 1 runs at >= 0.8x the loop's tests/s; replay 3 beats the loop.
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

# ``python bench/replay.py`` puts bench/ first on sys.path, where this very file would shadow the package.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from evalstore.replay.agentv.importing import import_results  # noqa: E402
from evalstore.replay.regrade import ReplayOptions, replay_run  # noqa: E402
from evalstore.store import EventStore  # noqa: E402

RATIO_TARGET = 0.8
CHILD_TIMEOUT_S = 60
ONE_GRADER = "contains-total"

GRADER_V1 = '''\
"""Bench code grader v1: the answer states a total and shows its working."""
import json, sys
payload = json.load(sys.stdin)
output = payload.get("output") or ""
checks = [("states a total", "Total" in output), ("shows the sum", "+" in output)]
print(json.dumps({"score": sum(ok for _, ok in checks) / len(checks),
                  "assertions": [{"text": t, "passed": ok} for t, ok in checks]}))
'''
GRADER_V2 = '''\
"""Bench code grader v2: as v1, and the stated total must equal the sum of the terms."""
import json, re, sys
payload = json.load(sys.stdin)
output = payload.get("output") or ""
m = re.search(r"(\\d+(?: \\+ \\d+)+) = (\\d+)", output)
correct = bool(m) and sum(int(x) for x in m.group(1).split(" + ")) == int(m.group(2))
checks = [("states a total", "Total" in output), ("shows the sum", "+" in output), ("sum is right", correct)]
print(json.dumps({"score": sum(ok for _, ok in checks) / len(checks),
                  "assertions": [{"text": t, "passed": ok} for t, ok in checks]}))
'''
EVAL = """\
name: bench-replay
execution:
  threshold: 0.8
tests: ./cases.yaml
assertions:
  - name: {one}
    type: contains
    value: Total
  - name: has-number
    type: regex
    value: "= [0-9]+"
  - name: sum-check
    type: code-grader
    command: [{python}, ../graders/{script}]
"""
WORDS = [
    "region",
    "quarter",
    "revenue",
    "north",
    "south",
    "west",
    "east",
    "sales",
    "units",
    "growth",
    "margin",
    "report",
    "table",
    "the",
    "of",
    "and",
]


def _answer(i: int, rng: random.Random) -> tuple[str, bool]:
    terms = [rng.randint(10, 999) for _ in range(rng.randint(2, 5))]
    total = sum(terms) + (0 if rng.random() < 0.8 else rng.randint(1, 9))
    prose = " ".join(
        " ".join(rng.choices(WORDS, k=rng.randint(8, 16))).capitalize() + "." for _ in range(rng.randint(6, 14))
    )
    text = f"Report {i}. {prose}\n\nTotal: {' + '.join(map(str, terms))} = {total}"
    return text, total == sum(terms)


def build(workdir: Path, n: int, python: str) -> tuple[Path, Path, Path]:
    """The v1 and v2 eval files (sharing cases.yaml) and an AgentV results JSONL graded with v1."""
    (workdir / "graders").mkdir()
    (workdir / "evals").mkdir()
    (workdir / "graders" / "grade_v1.py").write_text(GRADER_V1)
    (workdir / "graders" / "grade_v2.py").write_text(GRADER_V2)
    v1 = workdir / "evals" / "bench.eval.yaml"
    v2 = workdir / "evals" / "bench.v2.eval.yaml"
    v1.write_text(EVAL.format(one=ONE_GRADER, python=json.dumps(python), script="grade_v1.py"))
    v2.write_text(EVAL.format(one=ONE_GRADER, python=json.dumps(python), script="grade_v2.py"))
    rng = random.Random(0)
    cases = []
    results = workdir / "results.jsonl"
    with results.open("w", encoding="utf-8") as fh:
        for i in range(n):
            test_id = f"report-{i:05d}"
            question = f"Write revenue report {i} and state the total with its working."
            cases.append({"id": test_id, "input": question, "criteria": "States a correct total."})
            answer, _ = _answer(i, rng)
            scores = [
                {
                    "name": ONE_GRADER,
                    "type": "contains",
                    "score": 1,
                    "weight": 1,
                    "verdict": "pass",
                    "assertions": [{"text": 'Output contains "Total"', "passed": True}],
                },
                {
                    "name": "has-number",
                    "type": "regex",
                    "score": 1,
                    "weight": 1,
                    "verdict": "pass",
                    "assertions": [{"text": 'Output matches pattern "= [0-9]+"', "passed": True}],
                },
                {
                    "name": "sum-check",
                    "type": "code-grader",
                    "score": 1,
                    "weight": 1,
                    "verdict": "pass",
                    "assertions": [
                        {"text": "states a total", "passed": True},
                        {"text": "shows the sum", "passed": True},
                    ],
                },
            ]
            row = {
                "timestamp": f"2026-03-01T10:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
                "test_id": test_id,
                "suite": "bench-replay",
                "score": 1,
                "target": "default",
                "input": [{"role": "user", "content": question}],
                "output": [{"role": "assistant", "content": answer}],
                "execution_status": "ok",
                "scores": scores,
            }
            fh.write(json.dumps(row) + "\n")
    (workdir / "evals" / "cases.yaml").write_text(json.dumps(cases, indent=0))  # JSON is YAML
    return v1, v2, results


def stdin_payloads(store: EventStore, run_id: str, grader: str) -> list[bytes]:
    """The stdin each code-grader process of a run received, in test order."""
    calls = [
        s.event
        for s in store.read_stream(run_id, types=["grader_called"])
        if s.event.grader == grader  # type: ignore[attr-defined]
    ]
    calls.sort(key=lambda c: c.test_id)  # type: ignore[attr-defined]
    return [store.get_blob(c.request_sha256) for c in calls]  # type: ignore[attr-defined]


def plain_loop(argv: list[str], cwd: Path, payloads: list[bytes]) -> float:
    started = time.perf_counter()
    for payload in payloads:
        done = subprocess.run(argv, input=payload, capture_output=True, cwd=cwd, timeout=CHILD_TIMEOUT_S)
        if done.returncode != 0:
            raise SystemExit(f"grader failed in the plain loop: {done.stderr.decode()[-500:]}")
    return time.perf_counter() - started


def timed_replay(store: EventStore, parent: str, options: ReplayOptions, concurrency: int, label: str, n: int):  # type: ignore[no-untyped-def]
    step = max(1, n // 5)
    done = [0]

    def progress(_scored) -> None:  # type: ignore[no-untyped-def]
        done[0] += 1
        if done[0] % step == 0:
            print(f"  {label}: {done[0]}/{n}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    outcome = replay_run(store, parent, options, concurrency=concurrency, progress=progress)
    elapsed = time.perf_counter() - started
    if not outcome.complete or len(outcome.results) != n:
        raise SystemExit(f"{label}: replay incomplete ({len(outcome.results)} of {n} results)")
    errors = [r for r in outcome.results if r.status == "execution_error"]
    if errors:
        raise SystemExit(f"{label}: {len(errors)} execution errors, first: {errors[0].error}")
    return outcome, elapsed


def run(workdir: Path, n: int, concurrency: int, python: str) -> None:
    print(f"building a suite of {n} tests and importing its results", file=sys.stderr, flush=True)
    v1, v2, results = build(workdir, n, python)
    store = EventStore.open(f"sqlite:///{workdir / 'store.db'}")
    started = time.perf_counter()
    parent = import_results(store, results, eval_path=v1).run_id
    print(f"imported {n} tests in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    argv = [python, str(workdir / "graders" / "grade_v2.py")]
    cwd = workdir / "graders"
    # Warm the interpreter's files into the page cache so neither side pays the first start.
    plain_loop(argv, cwd, [b'{"output": "Total: 1 + 1 = 2"}'] * 10)

    load_before = os.getloadavg()[0]
    # --no-cache: these replays measure running the grader processes, not reusing their recorded output.
    v2_options = ReplayOptions(eval_path=str(v2), no_cache=True)
    first, serial = timed_replay(store, parent, v2_options, 1, "replay --concurrency 1", n)
    payloads = stdin_payloads(store, first.run_id, "sum-check")
    if len(payloads) != n:
        raise SystemExit(f"expected {n} code-grader calls in the replay, found {len(payloads)}")
    print("  plain loop of the same processes (twice)", file=sys.stderr, flush=True)
    loops = [plain_loop(argv, cwd, payloads)]
    # Once right after replay 1 and once after replay 3, so a change in machine load between the
    # phases weighs on both sides of the ratio alike.
    _, parallel = timed_replay(store, parent, v2_options, concurrency, f"replay --concurrency {concurrency}", n)
    loops.append(plain_loop(argv, cwd, payloads))
    loop = sum(loops) / len(loops)
    one_options = ReplayOptions(eval_path=str(v2), graders=[ONE_GRADER], no_cache=True)
    _, only_one = timed_replay(store, parent, one_options, concurrency, f"replay --graders {ONE_GRADER}", n)
    # Nothing changed since the first replay: every code-grader execution is reused.
    _, unchanged = timed_replay(store, parent, ReplayOptions(eval_path=str(v2)), concurrency, "unchanged replay", n)
    flips = sum(1 for r in first.results if r.score < 1)
    store.close()

    mean_payload = sum(map(len, payloads)) / len(payloads)
    print(f"replay of {n} tests (code grader + contains + regex), code grader script changed (--eval v2)")
    print(f"  code-grader stdin payload: {mean_payload:.0f} bytes on average; {flips} tests scored below 1 under v2")
    print(
        f"  grader command: {' '.join(argv)}; load average {load_before:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end ({os.cpu_count()} CPUs)"
    )
    print(
        f"  plain loop, {n} grader processes:   {loop:7.2f} s  {n / loop:7.1f} tests/s  "
        f"(mean of {loops[0]:.2f} s and {loops[1]:.2f} s)"
    )
    print(
        f"  replay --concurrency 1:             {serial:7.2f} s  {n / serial:7.1f} tests/s  "
        f"ratio {loop / serial:.3f} (target >= {RATIO_TARGET}): {'met' if loop / serial >= RATIO_TARGET else 'MISSED'}"
    )
    print(
        f"  replay --concurrency {concurrency}:             {parallel:7.2f} s  {n / parallel:7.1f} tests/s  "
        f"ratio {loop / parallel:.3f} (target > 1): {'met' if loop / parallel > 1 else 'MISSED'}"
    )
    print(
        f"  replay --graders {ONE_GRADER} (c={concurrency}): {only_one:7.2f} s  {n / only_one:7.1f} tests/s  "
        f"speed-up over the full replay: {parallel / only_one:.1f}x"
    )
    print(
        f"  unchanged replay, executions reused (c={concurrency}): {unchanged:7.2f} s  {n / unchanged:7.1f} tests/s  "
        f"speed-up over the full replay: {parallel / unchanged:.1f}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4, help="the parallel replay's concurrency (default 4)")
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter the code grader runs with (default: this one)"
    )
    parser.add_argument("--dir", type=Path, help="work directory (default: a fresh temp dir, removed after)")
    args = parser.parse_args()
    if args.dir:
        args.dir.mkdir(parents=True, exist_ok=False)
        run(args.dir, args.tests, args.concurrency, args.python)
    else:
        with tempfile.TemporaryDirectory(prefix="evalstore-bench-replay-") as tmp:
            run(Path(tmp), args.tests, args.concurrency, args.python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
