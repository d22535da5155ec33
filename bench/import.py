"""Import throughput, peak memory and store size for AgentV 4.x results JSONL.

Run: ``.venv/bin/python bench/import.py [--rows 20000 --rows 100000] [--shape rubric|verdicts] [--seed S] [--dir DIR]``.

For each ``--rows`` count (default: 20,000, then 100,000 to show memory does not grow with the file)
it writes that many AgentV 4.x result rows to a JSONL file, then imports it with
``evalstore.replay.agentv.importing.import_results`` into a fresh SQLite store in a child process, so the peak RSS
(the child's ``VmHWM``) is the import's alone: the parent's generated data is not counted. It prints
rows per second, the child's RSS before the import (interpreter + libraries) and its peak, and the
store size (``.db`` + ``-wal``) against the source JSONL.

The rows have the shape of ``tests/fixtures/agentv/v4/rubric/dataset.eval.baseline.jsonl`` (a
rubric ``llm-grader`` and a ``code-grader`` per row, per-grader assertions and the flattened
``assertions``), plus what v4 final rows also carry: the rendered grader prompt in ``scores[].input``
(``{userPrompt, systemPrompt}`` for the LLM grader, ``{command, cwd}`` for the script), the grader
target and usage, the row's token usage, cost, duration and execution status. Content varies per row
(ids, scores, rubric texts, evidence, questions and answers inside the prompts), drawn from a seeded
generator, so the file does not compress to nothing.

``--shape verdicts``: the rows of ``bench/compare.py`` instead, many small verdicts (three graders a row, a
score, a verdict and one assertion each, nothing else): the shape where the store's fixed cost per event
(ids, hashes, indexes, projection rows) outweighs what the source says.

Targets: peak RSS under 200 MB whatever the file size; store no larger than the source JSONL; at least
4,000 rows/s. That last one is a figure of the machine it was set on, where ``json.loads`` of 20,000
such rows took 0.40 s, so 4,000 rows/s there is 12.5x that floor. The floor is measured here too (best
of three, on the same file) and the import's time against it is printed: a figure that holds across
machines of different speeds. The 12.5x line is judged for the rubric shape only: the verdicts' floor on
that machine was not measured.
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
from pathlib import Path

# ``python bench/X.py`` puts bench/ first on sys.path, where bench/replay.py would shadow the package.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from bench.store_size import store_bytes, table_pages  # noqa: E402

RSS_TARGET_MB = 200.0
RATE_TARGET = 4000
FLOOR_TARGET = 12.5  # 4,000 rows/s where json.loads of 20,000 rows took 0.40 s
PROJECTIONS = ("runs", "streams", "event_ids", "results", "verdicts", "judge_cache", "conversions")
CHILD_TIMEOUT_S = 3600

SYSTEM_PROMPT = (
    "You are an expert evaluator. Evaluate the candidate answer against each rubric item.\n"
    "You must return a valid JSON object matching this schema:\n"
    '{\n  "checks": [\n    {\n      "id": "string (rubric id)",\n      "satisfied": boolean,\n'
    '      "reasoning": "string (brief explanation)"\n    }\n  ],\n  "overall_reasoning": "string (summary)"\n}'
)
USER_TEMPLATE = (
    "You are an expert evaluator. Your goal is to grade the candidate answer based on how well it achieves "
    "the expected outcome for the original task.\n\nUse the reference answer as a gold standard for a "
    "high-quality response (if provided). The reference answer may be a simple text response, or it might "
    "contain a sequence of expected agent messages, including tool calls. The candidate answer does not "
    "need to match it verbatim, but should capture the key points and follow the same spirit.\n\n"
    "Be concise and focused in your evaluation. Provide succinct, specific feedback rather than verbose "
    "explanations.\n\n[[ ## criteria ## ]]\n{criteria}\n\n[[ ## question ## ]]\n{question}\n\n"
    "[[ ## reference_answer ## ]]\n{reference}\n\n[[ ## answer ## ]]\n{answer}\n\n"
    "[[ ## rubrics ## ]]\n{rubrics}\n\nFor each rubric, determine whether the candidate answer satisfies it."
)

TOPICS = [
    ("code-quality", "Write a Python function that validates {thing} and returns a boolean."),
    ("code-explanation", "Explain how {thing} works, step by step, for a junior developer."),
    ("refactor", "Refactor this module so that {thing} is handled in one place."),
    ("debugging", "Find the bug that makes {thing} fail on empty input and fix it."),
    ("sql", "Write a SQL query that reports {thing} per region for the last quarter."),
    ("docs", "Write the README section that documents {thing} for new contributors."),
]
THINGS = [
    "an email address",
    "quicksort",
    "a JWT token",
    "an ISO 8601 date",
    "a credit card number",
    "retry with backoff",
    "the revenue total",
    "a binary search tree",
    "the LRU cache",
    "a CSV export",
    "pagination",
    "rate limiting",
    "an IPv6 address",
    "the merge step",
    "a semantic version string",
    "the user session",
    "a webhook signature",
]
RUBRICS = [
    "Uses regular expressions for validation",
    "Has docstring documentation",
    "Includes type hints",
    "Handles edge cases (None, empty string)",
    "Mentions the time complexity",
    "Gives a runnable example",
    "Explains the divide-and-conquer approach",
    "Names the failing input",
    "Adds a regression test",
    "Keeps the public interface unchanged",
    "Quotes the relevant standard",
    "Uses parameterised queries",
    "Groups by region",
    "Filters to the last quarter",
    "Lists prerequisites",
    "Shows the install command",
]
WORDS = [
    "the",
    "function",
    "returns",
    "value",
    "input",
    "string",
    "list",
    "error",
    "case",
    "test",
    "module",
    "call",
    "result",
    "check",
    "pattern",
    "handle",
    "empty",
    "none",
    "raise",
    "exception",
    "loop",
    "index",
    "boundary",
    "regex",
    "match",
    "compile",
    "return",
    "type",
    "hint",
    "docstring",
    "example",
    "runs",
    "passes",
    "fails",
    "because",
    "when",
    "while",
    "should",
    "would",
    "could",
    "explicitly",
    "validates",
    "parses",
    "rejects",
    "accepts",
    "region",
    "quarter",
    "revenue",
    "total",
    "query",
    "group",
    "filter",
    "order",
    "join",
    "column",
    "table",
    "row",
    "cache",
    "entry",
    "evict",
    "key",
]
VERDICT_THRESHOLD = 0.8


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    words = rng.choices(WORDS, k=rng.randint(lo, hi))
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng, 6, 18) for _ in range(sentences))


def make_row(i: int, rng: random.Random) -> dict:
    """One AgentV 4.x result row (final index-row shape) with content varied by ``rng``."""
    category, template = TOPICS[i % len(TOPICS)]
    thing = rng.choice(THINGS)
    question = template.format(thing=thing) + " " + _paragraph(rng, rng.randint(1, 3))
    answer = _paragraph(rng, rng.randint(3, 10))
    if category.startswith("code") or category in ("refactor", "debugging"):
        answer += f"\n\n```python\ndef check_{i}(value):\n    return bool(value)  # {_sentence(rng, 3, 8)}\n```"
    reference = _paragraph(rng, rng.randint(1, 3))
    criteria = f"The answer addresses {thing} correctly and meets every rubric."
    rubric_items = rng.sample(RUBRICS, rng.randint(3, 5))
    checks = []
    for n, item in enumerate(rubric_items, start=1):
        passed = rng.random() < 0.7
        text = f"[rubric-{n}] {item}: {_sentence(rng, 8, 20)}"
        checks.append({"text": text, "passed": passed, **({"evidence": _paragraph(rng, 2)} if n == 1 else {})})
    rubric_score = round(sum(c["passed"] for c in checks) / len(checks), 4)
    syntax_ok = rng.random() < 0.9
    code_score = 1 if syntax_ok else 0
    rendered = USER_TEMPLATE.format(
        criteria=criteria,
        question=question,
        reference=reference,
        answer=answer,
        rubrics="\n".join(f"- [rubric-{n}] (REQUIRED) (weight: 1): {item}" for n, item in enumerate(rubric_items, 1)),
    )
    prompt_tokens = len(rendered) // 4
    code_assertion = {
        "text": "Python syntax is valid" if syntax_ok else f"SyntaxError: invalid syntax (line {rng.randint(1, 40)})",
        "passed": syntax_ok,
        "evidence": "Code compiled successfully" if syntax_ok else _sentence(rng, 5, 12),
    }
    scores = [
        {
            "name": "rubrics",
            "type": "llm-grader",
            "score": rubric_score,
            "weight": 1,
            "verdict": "pass" if rubric_score >= VERDICT_THRESHOLD else "fail",
            "assertions": checks,
            "input": {"userPrompt": rendered, "systemPrompt": SYSTEM_PROMPT},
            "target": "azure-gpt-4o",
            "token_usage": {"input": prompt_tokens, "output": rng.randint(80, 400)},
        },
        {
            "name": "python_syntax",
            "type": "code-grader",
            "score": code_score,
            "weight": 1,
            "verdict": "pass" if syntax_ok else "fail",
            "assertions": [code_assertion],
            "input": {"command": ["uv", "run", "check_syntax.py"], "cwd": "/home/dev/evals/dataset/graders"},
        },
    ]
    score = round((rubric_score + code_score) / 2, 4)
    flattened = [dict(c) for c in checks] + [{"text": code_assertion["text"], "passed": syntax_ok}]
    if flattened[0].get("evidence"):
        flattened[0]["evidence"] = f"rubric: {flattened[0]['evidence']} | python_syntax: {code_assertion['evidence']}"
    seconds = 1_771_623_612 + i * 2
    return {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{i % 1000:03d}Z",
        "test_id": f"{category}-{thing.replace(' ', '-')}-{i:06d}",
        "suite": "dataset",
        "score": score,
        "target": "default",
        "token_usage": {"input": rng.randint(200, 3000), "output": rng.randint(100, 1500)},
        "cost_usd": round(rng.uniform(0.001, 0.05), 6),
        "duration_ms": rng.randint(800, 60_000),
        "execution_status": "ok" if score >= VERDICT_THRESHOLD else "quality_failure",
        "scores": scores,
        "assertions": flattened,
    }


def make_verdicts_row(i: int, rng: random.Random) -> dict:
    """A row shaped as ``bench/compare.py``'s: three graders (0/1, quarters, hundredths), one assertion each."""
    # Imported here: the child that imports the file measures its RSS before the import, without compare's modules.
    from bench.compare import GRADERS, verdicts_row

    return verdicts_row(i, {name: rng.randint(0, levels) / levels for name, _, levels in GRADERS})


SHAPES = {"rubric": make_row, "verdicts": make_verdicts_row}


def write_rows(path: Path, rows: int, seed: int, shape: str = "rubric") -> None:
    rng = random.Random(seed)
    make = SHAPES[shape]
    with path.open("w", encoding="utf-8") as fh:
        for i in range(rows):
            fh.write(json.dumps(make(i, rng), ensure_ascii=False) + "\n")


# --- the child: the import alone ------------------------------------------------------------------


def _vm(field: str) -> float:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in MB."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(db_url: str, source: str, total: int) -> None:
    from evalstore.replay.agentv.importing import import_results
    from evalstore.store import EventStore

    store = EventStore.open(db_url)
    baseline = _vm("VmRSS")
    step = max(1, total // 10)
    shown = [0]

    def progress(phase: str, done: int, _total: int | None) -> None:
        if phase != "importing":
            return
        if done - shown[0] >= step or (done == total and shown[0] != total):
            shown[0] = done
            print(f"  imported {done}/{total}", file=sys.stderr, flush=True)

    started, times = time.perf_counter(), os.times()
    outcome = import_results(store, source, progress=progress)
    elapsed, after = time.perf_counter() - started, os.times()
    store.close()
    print(
        json.dumps(
            {
                "tests": outcome.tests,
                "seconds": elapsed,
                # user + system of the import and the processes it forked (each counted once it ended):
                # the work done, which the machine's load changes less than the time it takes
                "cpu_s": sum(after[:4]) - sum(times[:4]),
                "baseline_mb": baseline,
                "peak_mb": _vm("VmHWM"),
                "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                # The processes that built parts of the source (replay/agentv/import_check.py), each forked
                # from this one (their RSS counts the pages they still share with it).
                "workers_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            }
        )
    )


# --- the parent -----------------------------------------------------------------------------------


def _breakdown(db: Path) -> dict[str, int]:
    """Bytes of pages per part of the store (a table with its indexes), where SQLite has ``dbstat``."""
    import sqlite3

    con = sqlite3.connect(db)
    try:
        parts: dict[str, int] = {}
        for table, size in table_pages(con).items():
            part = (
                "log"
                if table in ("records", "dictionaries")
                else "blobs"
                if table == "blobs"
                else "projections"
                if table in PROJECTIONS
                else "other"
            )
            parts[part] = parts.get(part, 0) + size
        parts["record bodies"] = con.execute("SELECT SUM(LENGTH(body)) FROM records").fetchone()[0]
        return parts
    except sqlite3.OperationalError:
        return {}
    finally:
        con.close()


def json_floor(source: Path) -> float:
    """Seconds to ``json.loads`` every line of the file, best of three."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        with source.open("rb") as fh:
            for line in fh:
                json.loads(line)
        best = min(best, time.perf_counter() - started)
    return best


def measure(rows: int, seed: int, workdir: Path, shape: str = "rubric") -> dict:
    source = workdir / f"results-{rows}.jsonl"
    db = workdir / f"store-{rows}.db"
    print(f"[{rows} rows] generating {source.name}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    write_rows(source, rows, seed, shape)
    floor = json_floor(source)
    print(f"[{rows} rows] generated in {time.perf_counter() - started:.1f} s; importing", file=sys.stderr, flush=True)
    proc = subprocess.run(
        [sys.executable, __file__, "--child", f"sqlite:///{db}", str(source), str(rows)],
        stdout=subprocess.PIPE,
        timeout=CHILD_TIMEOUT_S,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    stats = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    if stats["tests"] != rows:
        raise SystemExit(f"imported {stats['tests']} tests, expected {rows}")
    stats.update(
        rows=rows, floor=floor, source_bytes=source.stat().st_size, store_bytes=store_bytes(db), parts=_breakdown(db)
    )
    source.unlink()
    for p in workdir.glob(f"store-{rows}.db*"):
        p.unlink()
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, action="append", help="rows to generate and import (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="rubric", help="the rows' shape (see above)")
    parser.add_argument("--dir", type=Path, help="work directory (default: a fresh temp dir, removed after)")
    parser.add_argument("--child", nargs=3, metavar=("DB_URL", "SOURCE", "ROWS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return 0
    counts = args.rows or [20_000, 100_000]
    if args.dir:
        args.dir.mkdir(parents=True, exist_ok=True)
        results = [measure(n, args.seed, args.dir, args.shape) for n in counts]
    else:
        with tempfile.TemporaryDirectory(prefix="evalstore-bench-import-") as tmp:
            results = [measure(n, args.seed, Path(tmp), args.shape) for n in counts]

    mb = 1024 * 1024
    print(f"import of AgentV 4.x results JSONL, {args.shape} rows (SQLite store, one child process per file)")
    print(
        f"{'rows':>8} {'rows/s':>8} {'seconds':>8} {'CPU s':>6} {'x floor':>8} {'RSS before':>11} {'peak RSS':>9} "
        f"{'workers':>9} {'source MB':>10} {'store MB':>9} {'store/source':>13}"
    )
    for r in results:
        print(
            f"{r['rows']:>8} {r['rows'] / r['seconds']:>8.0f} {r['seconds']:>8.1f} {r['cpu_s']:>6.1f} "
            f"{r['seconds'] / r['floor']:>7.1f}x "
            f"{r['baseline_mb']:>8.1f} MB "
            f"{r['peak_mb']:>6.1f} MB {r['workers_mb']:>6.1f} MB {r['source_bytes'] / mb:>10.1f} {r['store_bytes'] / mb:>9.1f} "
            f"{r['store_bytes'] / r['source_bytes']:>13.3f}"
        )
    for r in results:
        if r["parts"]:
            parts = ", ".join(
                f"{k} {r['parts'][k] / mb:.1f}" for k in ("log", "projections", "blobs", "other") if k in r["parts"]
            )
            print(
                f"{r['rows']:>8} rows, store MB by table (with its indexes): {parts}; of the log, record bodies "
                f"{r['parts']['record bodies'] / mb:.1f} (compressed)"
            )
    peak = max(max(r["peak_mb"], r["workers_mb"]) for r in results)
    worst_size = max(r["store_bytes"] / r["source_bytes"] for r in results)
    print(
        f"peak RSS (max over files, the import or one of its workers): {peak:.1f} MB (target < {RSS_TARGET_MB:.0f} MB): "
        f"{'met' if peak < RSS_TARGET_MB else 'MISSED'}"
    )
    if len(results) > 1:
        small, large = results[0], results[-1]
        print(
            f"peak RSS growth {small['rows']} -> {large['rows']} rows: {large['peak_mb'] - small['peak_mb']:+.1f} MB "
            f"for {large['source_bytes'] / small['source_bytes']:.1f}x the source"
        )
    print(f"store/source size (worst): {worst_size:.3f} (target <= 1.0): {'met' if worst_size <= 1.0 else 'MISSED'}")
    first = results[0]
    rate, over = first["rows"] / first["seconds"], first["seconds"] / first["floor"]
    against_floor = f"{over:.1f}x the json.loads floor of {first['floor']:.2f} s"
    if args.shape == "rubric":
        # FLOOR_TARGET was read off this shape's floor on the target's machine; the verdicts' floor there
        # was not measured, so their multiple is printed without a verdict.
        against_floor += f" (the target's machine: <= {FLOOR_TARGET}x): {'met' if over <= FLOOR_TARGET else 'MISSED'}"
    print(
        f"{first['rows']} rows: {rate:.0f} rows/s (target >= {RATE_TARGET}: {'met' if rate >= RATE_TARGET else 'MISSED'}), "
        + against_floor
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
