"""Helpers for the end-to-end tests: an example suite written into tmp_path, and two ways to run the CLI.

The suite is a small AgentV-style project: a ``cli`` target whose Python agent answers in text and
writes ``revenue.xlsx`` (openpyxl) and ``summary.html`` into its per-test workspace, graded by
deterministic assertions, a code grader that reads the converted files (both asking for them with
``preprocessors:`` of their own, evalstore's extension), the example converters
(xlsx -> CSV, html -> Markdown) and, when a judge URL is given, an LLM grader on the scripted judge
server. The agent keeps a copy of every file it wrote under ``saved/`` (so tests can hash exactly what
it produced after the workspace is gone) and appends one line per invocation to ``calls.log``.

``cli()`` runs the command in process (click's CliRunner: fast); ``evalstore()`` runs the installed
console script in a real subprocess (what a user runs; needed for kill/resume and concurrency).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from click.testing import CliRunner, Result
from fixture_paths import AGENTV_FIXTURES as FIXTURES
from judge_server import JudgeServer, Reply, Request, freeform

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

BASELINE = FIXTURES / "v4" / "rubric" / "dataset.eval.baseline.jsonl"
V5_BUNDLE = FIXTURES / "v5-next" / "runs" / "2026-07-06T01-06-18-244Z"
PY = sys.executable
EVALSTORE = Path(sys.executable).parent / "evalstore"
JUDGE_KEY_ENV = "E2E_JUDGE_KEY"
JUDGE_KEY_VALUE = "sk-e2e-SECRET-9f1c7d2b44a0"
SUBPROCESS_TIMEOUT = 90

TESTS = ("q1-report", "q2-report", "q3-report")

WITHOUT_PYTEST_PHASE: dict[str, str | None] = {"PYTEST_CURRENT_TEST": None}
"""pytest names the running test and phase in ``PYTEST_CURRENT_TEST``: converters and code graders see the
environment and their reuse keys hold it, so a fixture's run and a test's replay would differ by it alone."""


def fixture_module(name: str, path: Path) -> ModuleType:
    """A fixture folder's script (how its runs were made, the answers its server gave) imported as ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def agentv_project(
    source: Path, copy: Path, answers: ModuleType, environment: dict[str, str], monkeypatch: Any
) -> Iterator[tuple[Path, JudgeServer]]:
    """A new user's AgentV project copied out of the checkout as a repository root (as AgentV's was: it, and
    evalstore, look for the targets file from an eval's folder up to there), and the server AgentV ran
    against, answering as ``answers.answer`` did, in AgentV's environment (``{url}`` in a value: the server's)."""
    shutil.copytree(source, copy)
    (copy / ".git").mkdir()
    server = JudgeServer().start()
    server.respond_with(lambda request: answers.answer(request.body))
    for name, value in environment.items():
        monkeypatch.setenv(name, value.format(url=server.base_url))
    try:
        yield copy, server
    finally:
        server.stop()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- running the CLI ------------------------------------------------------------------------------


def cli(db: str, *args: str, env: dict[str, str] | None = None) -> Result:
    """``evalstore --db DB ARGS`` in process; the caller chdirs where the command should run."""
    from evalstore import cli as cli_package

    env = {**WITHOUT_PYTEST_PHASE, **(env or {})}
    return CliRunner().invoke(cli_package.main, ["--db", db, *args], env=env, catch_exceptions=False)


def evalstore(
    db: str, *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = SUBPROCESS_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """The installed console script in a subprocess, with ``--db DB`` and ``cwd``."""
    return subprocess.run(
        [str(EVALSTORE), "--db", db, *args],
        cwd=cwd,
        env={k: v for k, v in {**os.environ, **(env or {})}.items() if k not in WITHOUT_PYTEST_PHASE},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok_json(result: Result | subprocess.CompletedProcess[str], *codes: int) -> Any:
    """The JSON a command printed, after checking its exit code (0 unless ``codes``)."""
    code = result.exit_code if isinstance(result, Result) else result.returncode
    assert code in (codes or (0,)), f"exit {code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return json.loads(result.stdout)


def one_line_error(result: Result | subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The single ``Error: ...`` line a failed command printed on stderr (checked: no traceback)."""
    got = result.exit_code if isinstance(result, Result) else result.returncode
    assert got == code, f"exit {got}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


# -- reading a run back ---------------------------------------------------------------------------


def show(db: str, run: str) -> dict[str, Any]:
    return ok_json(cli(db, "show", run, "--json"))


def results_by_test(db: str, run: str) -> dict[str, dict[str, Any]]:
    return {r["test_id"]: r for r in show(db, run)["results"]}


def audit(db: str, run: str, test: str, *extra: str) -> dict[str, Any]:
    return ok_json(cli(db, "audit", run, test, "--json", *extra))


def verdict_signature(db: str, run: str) -> dict[tuple[str, str], tuple[Any, ...]]:
    """Every verdict of a run, by (test, grader): score, verdict, status and assertions."""
    out: dict[tuple[str, str], tuple[Any, ...]] = {}
    for test_id in results_by_test(db, run):
        for test in audit(db, run, test_id)["tests"]:
            for v in test["verdicts"]:
                assertions = tuple((a["text"], a["passed"]) for a in v["assertions"])
                out[(test["test_id"], v["grader"])] = (v["score"], v["verdict"], v["status"], assertions)
    return out


def runs(db: str) -> list[dict[str, Any]]:
    return ok_json(cli(db, "runs", "--json"))


def no_store(db: str) -> bool:
    """Whether the SQLite store at ``db`` was never made (a run refused before it began leaves none)."""
    return not Path(db.removeprefix("sqlite:///")).exists()


def event_count(db: str) -> int:
    return ok_json(cli(db, "verify", "--json"))["events"]


# -- small projects -------------------------------------------------------------------------------


def write_chat_targets(root: Path, base_url: str, key_env: str) -> None:
    """``ROOT/.agentv/targets.yaml``: an OpenAI-compatible ``agent`` at BASE_URL whose judge is ``judge``, the
    same server, both keyed by the variable KEY_ENV (named, never written)."""
    (root / ".agentv").mkdir(parents=True)
    (root / ".agentv" / "targets.yaml").write_text(
        textwrap.dedent(f"""\
            targets:
              - name: agent
                provider: openai
                base_url: {base_url}
                model: agent-model
                api_key: ${{{{ {key_env} }}}}
                grader_target: judge
              - name: judge
                provider: openai
                base_url: {base_url}
                model: judge-model
                api_key: ${{{{ {key_env} }}}}
            """),
        encoding="utf-8",
    )


def write_cli_agent(root: Path, agent_source: str) -> None:
    """``ROOT/agent.py`` (AGENT_SOURCE, run as ``agent.py PROMPT_FILE OUTPUT_FILE ROOT``) and the ``cli`` target
    ``agent`` that runs it, in ``ROOT/.agentv/targets.yaml``."""
    (root / ".agentv").mkdir(parents=True)
    (root / "agent.py").write_text(agent_source)
    (root / ".agentv" / "targets.yaml").write_text(
        textwrap.dedent(f"""\
            targets:
              - name: agent
                provider: cli
                command: ["{PY}", "{root / "agent.py"}", "{{PROMPT_FILE}}", "{{OUTPUT_FILE}}", "{root}"]
            """)
    )


# -- the example suite ----------------------------------------------------------------------------

AGENT = '''
"""The e2e agent: a text answer, revenue.xlsx (openpyxl) and summary.html, as AgentV cli JSON."""
import argparse, json, os, shutil, sys, time
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--prompt-file", required=True)
p.add_argument("--output", required=True)
p.add_argument("--eval-id", required=True)
p.add_argument("--home", required=True)
args = p.parse_args()
home = Path(args.home)
prompt = Path(args.prompt_file).read_text(encoding="utf-8")
with open(home / "calls.log", "a", encoding="utf-8") as log:
    log.write(args.eval_id + "\\n")
if "SLEEP" in prompt and float(os.environ.get("E2E_AGENT_SLEEP", "0")):
    (home / "sleeping.pid").write_text(str(os.getpid()))
    time.sleep(float(os.environ["E2E_AGENT_SLEEP"]))
if "CRASH" in prompt:
    print("agent: the model quota is exhausted", file=sys.stderr)
    sys.exit(3)

import openpyxl

quarter = next(q for q in ("Q1", "Q2", "Q3") if q in prompt)
regions = {"Q1": [("North", 1200), ("South", 950), ("West", 730)],
           "Q2": [("North", 1310), ("South", 990), ("West", 805)],
           "Q3": [("North", 1275), ("South", 1010), ("West", 0)]}[quarter]
total = sum(v for _, v in regions)
os.chdir(os.environ["AGENTV_WORKSPACE_PATH"])
wb = openpyxl.Workbook()
ws = wb.active
ws.title = "Revenue"
ws.append(["Region", "Revenue"])
for row in regions:
    ws.append(list(row))
ws.append(["Total", total])
wb.save("revenue.xlsx")
stated = "" if quarter == "Q3" else f"<p>Total revenue: <b>{total}</b></p>"
Path("summary.html").write_text(
    f"<html><body><h1>{quarter} revenue summary</h1><ul>"
    + "".join(f"<li>{r}: {v}</li>" for r, v in regions) + f"</ul>{stated}</body></html>", encoding="utf-8")
saved = home / "saved" / args.eval_id
saved.mkdir(parents=True, exist_ok=True)
for name in ("revenue.xlsx", "summary.html"):
    shutil.copy(name, saved / name)
text = f"The {quarter} report is in revenue.xlsx and summary.html."
Path(args.output).write_text(json.dumps({"output": [{"role": "assistant", "content": [
    {"type": "text", "text": text},
    {"type": "file", "media_type": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
     "path": "revenue.xlsx"},
    {"type": "file", "media_type": "text/html", "path": "summary.html"},
]}]}), encoding="utf-8")
'''

GRADER = '''
"""Code grader: the converted workbook has every region, none is zero, and the summary was converted."""
import json, sys
payload = json.load(sys.stdin)
out = payload.get("output") or ""
checks = [
    ("workbook converted to CSV", "Region,Revenue" in out),
    ("no region reports zero revenue", ",0\\n" not in out + "\\n"),
    ("summary converted to Markdown", "revenue summary" in out and "# " in out),
]
print(json.dumps({"score": sum(ok for _, ok in checks) / len(checks),
                  "assertions": [{"text": t, "passed": ok} for t, ok in checks]}))
'''

GRADER_V2 = '''
"""Code grader v2: only checks that the workbook has a Total row."""
import json, sys
out = json.load(sys.stdin).get("output") or ""
ok = "Total," in out
print(json.dumps({"score": 1.0 if ok else 0.0, "assertions": [{"text": "has a Total row", "passed": ok}]}))
'''

# An xlsx converter that only reports the sheet size: a swap whose effect the graders can see.
XLSX_SUMMARY = """
import json, sys, zipfile
path = json.load(sys.stdin)["path"]
with zipfile.ZipFile(path) as z:
    print("workbook with", len([n for n in z.namelist() if n.startswith("xl/worksheets/")]), "sheet(s)")
"""

PROMPT = """Grade this revenue report.
Task: {{input}}
Answer with files as text:
{{output}}
"""

PROMPT_V2 = """STRICT AUDITOR. Grade this revenue report; any zero figure scores 0.
Task: {{input}}
Answer with files as text:
{{output}}
"""

CASES = [
    ("q1-report", "Write the Q1 revenue report as revenue.xlsx and summary.html."),
    ("q2-report", "Write the Q2 revenue report as revenue.xlsx and summary.html."),
    ("q3-report", "Write the Q3 revenue report as revenue.xlsx and summary.html."),
]


@dataclass
class Suite:
    """A suite written into a directory; ``eval`` is the v1 eval file, ``eval_v2`` its next version."""

    root: Path
    eval: Path
    eval_v2: Path
    targets: Path
    agent: Path
    grader: Path
    judged: bool
    cases: list[tuple[str, str]] = field(default_factory=list)

    @property
    def calls_log(self) -> Path:
        return self.root / "calls.log"

    def calls(self) -> list[str]:
        return self.calls_log.read_text(encoding="utf-8").split() if self.calls_log.exists() else []

    def saved(self, test_id: str, name: str) -> bytes:
        return (self.root / "saved" / test_id / name).read_bytes()


def _eval_yaml(name: str, cases_file: str, grader_script: str, judged: bool, extra: str = "") -> str:
    llm = "  - name: quality\n    type: llm-grader\n    prompt: file://../prompts/quality.md\n" if judged else ""
    return (
        textwrap.dedent(
            f"""\
        name: {name}
        description: e2e revenue reports
        execution:
          target: agent
          threshold: 0.8
        preprocessors: &converters
          - type: xlsx
            command: ["{PY}", "../scripts/xlsx_to_csv.py"]
          - type: html
            command: ["{PY}", "../scripts/html_to_md.py"]
        tests: ./{cases_file}
        assertions:
          - name: names-files
            type: contains-all
            value: [revenue.xlsx, summary.html]
          - name: states-total
            type: regex
            value: "Total revenue: \\\\*\\\\*[0-9]+\\\\*\\\\*"
            preprocessors: *converters
          - name: workbook
            type: code-grader
            command: ["{PY}", "../graders/{grader_script}"]
            preprocessors: *converters
        """
        )
        + llm
        + extra
    )


def make_suite(root: Path, *, judge_url: str | None = None, cases: list[tuple[str, str]] | None = None) -> Suite:
    """Write the example suite under ``root`` (v1 and v2 eval files, targets, agent, graders, converters)."""
    cases = list(cases or CASES)
    for sub in ("agent", "evals", "graders", "scripts", "prompts", ".agentv"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "agent" / "agent.py").write_text(AGENT, encoding="utf-8")
    (root / "graders" / "check.py").write_text(GRADER, encoding="utf-8")
    (root / "graders" / "check_v2.py").write_text(GRADER_V2, encoding="utf-8")
    for script in ("xlsx_to_csv.py", "html_to_md.py"):
        shutil.copy(EXAMPLES / "preprocessors" / "scripts" / script, root / "scripts" / script)
    (root / "scripts" / "xlsx_summary.py").write_text(XLSX_SUMMARY, encoding="utf-8")
    (root / "prompts" / "quality.md").write_text(PROMPT, encoding="utf-8")
    (root / "prompts" / "quality.v2.md").write_text(PROMPT_V2, encoding="utf-8")
    (root / "evals" / "cases.yaml").write_text(
        "".join(
            f"- id: {tid}\n  input: {text}\n  criteria: every region with its revenue and a total\n"
            for tid, text in cases
        ),
        encoding="utf-8",
    )
    judged = judge_url is not None
    targets = textwrap.dedent(
        f"""\
        targets:
          - name: agent
            provider: cli
            command: {PY} agent/agent.py --prompt-file {{PROMPT_FILE}} --output {{OUTPUT_FILE}} --eval-id {{EVAL_ID}} --home {root}
            cwd: ..
            timeout_seconds: 60
        """
    )
    if judged:
        targets += "    grader_target: judge\n"
        targets += textwrap.indent(
            textwrap.dedent(
                f"""\
                - name: judge
                  provider: openai-compatible
                  base_url: {judge_url}
                  model: judge-model-1
                  api_key: ${{{{ {JUDGE_KEY_ENV} }}}}
                  temperature: 0
                """
            ),
            "  ",
        )
    (root / ".agentv" / "targets.yaml").write_text(targets, encoding="utf-8")
    eval_v1 = root / "evals" / "report.eval.yaml"
    eval_v1.write_text(_eval_yaml("revenue-report", "cases.yaml", "check.py", judged), encoding="utf-8")
    eval_v2 = root / "evals" / "report.v2.eval.yaml"
    eval_v2.write_text(_eval_yaml("revenue-report", "cases.yaml", "check_v2.py", judged), encoding="utf-8")
    return Suite(
        root,
        eval_v1,
        eval_v2,
        root / ".agentv" / "targets.yaml",
        root / "agent" / "agent.py",
        root / "graders" / "check.py",
        judged,
        cases,
    )


def record(
    db: str, suite: Suite, *extra: str, codes: tuple[int, ...] = (0, 1), env: dict[str, str] | None = None
) -> dict[str, Any]:
    """``evalstore run`` of the suite in process; returns its ``--json`` output."""
    workdir = suite.root / "workspaces"
    result = cli(db, "run", str(suite.eval), "--json", "--workdir", str(workdir), *extra, env=env)
    return ok_json(result, *codes)


def result_rows(db_file: Path, prefix: str) -> int:
    """Results recorded so far for runs whose id starts with ``prefix``, read straight from the projection
    (while another process writes)."""
    import sqlite3

    if not db_file.exists():
        return 0
    conn = sqlite3.connect(db_file, timeout=5)
    try:
        runs = "SELECT count(*) FROM results r JOIN streams s ON s.stream = r.run WHERE s.stream_id LIKE ?"
        return conn.execute(runs, (prefix + "%",)).fetchone()[0]
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0
    finally:
        conn.close()


def kill_pid_file(path: Path) -> None:
    """Kill the child a test made sleep (it runs in a session of its own, out of reach of killpg)."""
    import signal

    if path.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(path.read_text()), signal.SIGKILL)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


# -- the judge and the shared recording ------------------------------------------------------

LENIENT, Q3_SCORE, STRICT_SCORE, MODEL2_SCORE = 0.9, 0.2, 0.1, 0.5


def judge_script(request: Request) -> Reply:
    """The judge's answers: the strict v2 prompt scores 0.1, the second model 0.5, the Q3 report (a zero
    region) 0.2, anything else 0.9."""
    model = request.body.get("model") if isinstance(request.body, dict) else None
    if "STRICT AUDITOR" in request.user:
        return freeform(STRICT_SCORE, [("strict: every figure checked", False)])
    if model == "judge-model-2":
        return freeform(MODEL2_SCORE, [("second opinion", True)])
    if "West,0" in request.user:
        return freeform(Q3_SCORE, [("no region reports zero revenue", False)])
    return freeform(LENIENT, [("workbook and summary agree", True)])


@dataclass
class Recorded:
    suite: Suite
    db_file: Path
    run_id: str
    output: dict
    """What ``evalstore run --json`` printed."""
    judge_sent: list[Request]
    """The requests the judge received during the recording."""
