"""A synthetic run of N tests for the executor tests: imported AgentV 4.x rows (bench/replay.py's shape),
graded by two deterministic assertions and a code grader that is a small ``sh`` script (a process per test,
but one that starts in a millisecond or two, so a 400-test regrade stays quick on a loaded machine).

The v2 eval changes the code grader's script, so a replay with it runs every code grader again. The script
kills its parent process (the worker grading it) once when a file ``armed`` lies beside it: the test that
needs a worker to die mid-regrade arms it (``mv`` is atomic, so only one grader fires). With a file ``hang``
there, a grader writes its PID to ``hung`` and sleeps two minutes: what a stopped driver must not leave behind.

``bench/scale.py`` builds its runs here too (``write``, then its own timed import), at 10^5 results."""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass
from pathlib import Path

from evalstore.replay.agentv.importing import import_results
from evalstore.store import EventStore

GRADER = """\
#!/bin/sh
here=$(dirname "$0")
payload=$(cat)
if [ -e "$here/armed" ] && mv "$here/armed" "$here/fired" 2>/dev/null; then
  kill -9 "$PPID"
  sleep 30
fi
if [ -e "$here/slow" ]; then sleep 0.5; fi
if [ -e "$here/hang" ]; then echo $$ >> "$here/hung"; sleep 120; fi
case "$payload" in
  *"= 1"*) echo '{"score": 1, "assertions": [{"text": "VERSION total starts with 1", "passed": true}]}' ;;
  *) echo '{"score": 0.5, "assertions": [{"text": "VERSION total starts with 1", "passed": false}]}' ;;
esac
"""

EVAL = """\
name: executor-scale
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

CODE = """  - name: total-check
    type: code-grader
    command: [sh, ../graders/{script}]
"""

JUDGED = """  - name: quality
    type: llm-grader
    prompt: file://../prompts/quality.md
"""

PROMPT = """Grade this revenue report.
Task: {{input}}
Answer:
{{output}}
"""

TARGETS = {
    "openai": "provider: openai\n    base_url: {url}\n    model: judge-model-1",
    "azure": "provider: azure\n    endpoint: {root}\n    deployment: judge-deployment\n    api_version: 2024-10-21",
    # AgentV reads an Anthropic model only as a reference (its variable is set by the caller).
    "anthropic": "provider: anthropic\n    base_url: {root}\n    model: ${{{{ SCALE_ANTHROPIC_MODEL }}}}",
}
JUDGE_KEY_ENV = "SCALE_JUDGE_KEY"


@dataclass(frozen=True)
class ScaleRun:
    root: Path
    v1: Path
    v2: Path
    graders: Path
    run_id: str


def write(root: Path, n: int, *, judge_url: str | None = None, provider: str = "openai", code: bool = True) -> ScaleRun:
    """The suite (v1 and v2 evals) and ``results.jsonl``, N result rows graded with v1, written under
    ``root``; ``run_id`` is empty (nothing imported). Without ``code`` the evals have no code grader and v2
    differs by its threshold. With ``judge_url`` the evals also have an LLM grader (``quality``), and
    ``targets.yaml`` beside the suite names a judge target ``judge`` of ``provider`` there (key in
    ``$SCALE_JUDGE_KEY``)."""
    graders, evals = root / "graders", root / "evals"
    graders.mkdir(parents=True)
    evals.mkdir()
    (root / "prompts").mkdir()
    (root / "prompts" / "quality.md").write_text(PROMPT)
    for version in ("v1", "v2"):
        (graders / f"grade_{version}.sh").write_text(GRADER.replace("VERSION", version))
        text = EVAL + (CODE.format(script=f"grade_{version}.sh") if code else "") + (JUDGED if judge_url else "")
        if version == "v2" and not code:
            text = text.replace("threshold: 0.8", "threshold: 0.75")
        (evals / f"scale.{version}.eval.yaml").write_text(text)
    if judge_url:
        target = TARGETS[provider].format(url=judge_url, root=judge_url.removesuffix("/v1"))
        (root / "targets.yaml").write_text(
            f"targets:\n  - name: judge\n    {target}\n    api_key: ${{{{ {JUDGE_KEY_ENV} }}}}\n"
        )
    rng = random.Random(7)
    cases = []
    graded = [
        {"name": "contains-total", "type": "contains", "score": 1, "weight": 1, "verdict": "pass"},
        {"name": "has-number", "type": "regex", "score": 1, "weight": 1, "verdict": "pass"},
    ]
    if code:
        graded.append({"name": "total-check", "type": "code-grader", "score": 1, "weight": 1, "verdict": "pass"})
    with (root / "results.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(n):
            test_id = f"report-{i:05d}"
            question = f"Write revenue report {i} and state the total."
            cases.append({"id": test_id, "input": question, "criteria": "States a total."})
            terms = [rng.randint(10, 999) for _ in range(rng.randint(2, 4))]
            answer = f"Report {i}.\n\nTotal: {' + '.join(map(str, terms))} = {sum(terms)}"
            if i % 7 == 0:
                answer = f"Report {i}: no figures."
            row = {
                "timestamp": f"2026-03-01T10:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
                "test_id": test_id,
                "suite": "executor-scale",
                "score": 1,
                "target": "default",
                "input": [{"role": "user", "content": question}],
                "output": [{"role": "assistant", "content": answer}],
                "execution_status": "ok",
                "scores": graded,
            }
            fh.write(json.dumps(row) + "\n")
    (evals / "cases.yaml").write_text(json.dumps(cases, indent=0))  # JSON is YAML
    return ScaleRun(root, evals / "scale.v1.eval.yaml", evals / "scale.v2.eval.yaml", graders, "")


def build(root: Path, store: EventStore, n: int, *, judge_url: str | None = None, provider: str = "openai") -> ScaleRun:
    """:func:`write`, then the results imported into ``store`` with v1."""
    run = write(root, n, judge_url=judge_url, provider=provider)
    run_id = import_results(store, root / "results.jsonl", eval_path=run.v1).run_id
    return dataclasses.replace(run, run_id=run_id)


def verdicts(store: EventStore, run_id: str) -> dict[tuple[str, str], tuple]:
    """Every verdict of a run by (test, grader): what a regrade must reproduce (not ids, times or cache)."""
    return {
        (v.event.test_id, v.event.grader): (  # type: ignore[attr-defined]
            v.event.score,  # type: ignore[attr-defined]
            v.event.verdict,  # type: ignore[attr-defined]
            v.event.status,  # type: ignore[attr-defined]
            tuple((a.text, a.passed) for a in v.event.assertions),  # type: ignore[attr-defined]
        )
        for v in store.read_stream(run_id, types=["verdict_recorded"])
    }


def scored_keys(store: EventStore, run_id: str) -> list[tuple]:
    """Every test_scored of a run's stream, as (test, target, attempt): one each, or something doubled."""
    return sorted(
        (s.event.test_id, s.event.target or "", s.event.attempt)  # type: ignore[attr-defined]
        for s in store.read_stream(run_id, types=["test_scored"])
    )
