"""``evalstore run`` as a new user meets it: their own AgentV targets file and a tiny cli agent.

Each test writes a small project into tmp_path (``.agentv/targets.yaml`` at the root, the eval file in
a subfolder, an agent script) and runs the real CLI against a real SQLite store. The agent logs every
call (argv, prompt, cwd, whether the secret reached it) to ``calls.jsonl`` beside it, so the tests can
check what the target was given, and how many times it ran.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from e2e_helpers import EVALSTORE, audit, cli, evalstore, ok_json, one_line_error, runs, wait_for

from evalstore.store import EventStore, make_engine

PY = sys.executable
SECRET_ENV = "VARIANTS_AGENT_TOKEN"
SECRET_VALUE = "tok-VARIANTS-7c0ffee-do-not-store"
TRICKY_PROMPT = 'He said "it\'s fine"; $HOME `echo pwned` $(touch pwned) naïve — 日本\nsecond line\n\tindented'

AGENT = textwrap.dedent(
    """\
    import json, os, sys, time
    from pathlib import Path

    args = sys.argv[1:]
    prompt = Path(args[args.index("--prompt-file") + 1]).read_text(encoding="utf-8") if "--prompt-file" in args else args[0]
    log = Path(__file__).with_name("calls.jsonl")
    with log.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"argv": args, "prompt": prompt, "cwd": os.getcwd(),
                                 "secret_ok": os.environ.get("AGENT_TOKEN") == os.environ.get("EXPECTED_TOKEN")}) + "\\n")
    if "STALL" in prompt and not Path(__file__).with_name("stalled").exists():
        Path(__file__).with_name("stalled").touch()  # only the first call stalls
        time.sleep(60)
    if "HANG" in prompt:
        time.sleep(60)
    if "FAIL" in prompt:
        sys.stderr.write("agent: quota exhausted\\n")
        sys.exit(3)
    if "SLOW" in prompt:
        time.sleep(1.0)
    if "--output" in args:
        ws = Path(os.environ["AGENTV_WORKSPACE_PATH"])
        (ws / "out").mkdir(exist_ok=True)
        (ws / "out" / "a.txt").write_text("relative bytes")
        (ws / "abs.txt").write_text("absolute bytes")
        Path("in-cwd.txt").write_text("written where the agent ran")
        blocks = [{"type": "text", "text": "answer: " + prompt},
                  {"type": "file", "media_type": "text/plain", "path": "out/a.txt"},
                  {"type": "file", "media_type": "text/plain", "path": str(ws / "abs.txt")},
                  {"type": "file", "media_type": "text/plain", "path": "../outside.txt"},
                  {"type": "file", "media_type": "text/plain", "path": "/etc/hostname"},
                  {"type": "file", "media_type": "text/plain", "path": "nope.txt"},
                  {"type": "file", "media_type": "text/plain", "path": "in-cwd.txt"}]
        out = Path(args[args.index("--output") + 1])
        out.write_text(json.dumps({"output": [{"role": "assistant", "content": blocks}]}), encoding="utf-8")
    else:
        print("answer: " + prompt)
    """
)

TARGETS = f"""\
$schema: agentv-targets-v2.2
targets:
  # AgentV v4 spellings: command_template, camelCase timeout, upper-case provider, ${{{{ ENV }}}} in env.
  - name: stdout-agent
    provider: CLI
    command_template: {PY} agent/agent.py {{PROMPT}}
    cwd: ../..
    timeoutSeconds: 20
    env:
      AGENT_TOKEN: ${{{{ {SECRET_ENV} }}}}
      EXPECTED_TOKEN: {SECRET_VALUE}
  - name: file-agent
    provider: cli
    command: ["{PY}", "{{AGENT}}", --prompt-file, "{{PROMPT_FILE}}", --output, "{{OUTPUT_FILE}}", "{{EVAL_ID}}"]
  - name: file-agent-in-cwd
    provider: cli
    commandTemplate: {PY} agent/agent.py --prompt-file {{PROMPT_FILE}} --output {{OUTPUT_FILE}}
    cwd: ../..
"""


def make_project(
    root: Path, tests: list[tuple[str, str]], *, target: str = "stdout-agent", extra_targets: str = ""
) -> Path:
    """A project: ``.agentv/targets.yaml`` at ``root``, the eval two folders down (found upward)."""
    (root / ".agentv").mkdir(parents=True)
    (root / "agent").mkdir()
    agent = root / "agent" / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    (root / ".agentv" / "targets.yaml").write_text(
        TARGETS.replace("{AGENT}", str(agent)) + extra_targets, encoding="utf-8"
    )
    eval_file = root / "evals" / "team" / "suite.eval.yaml"
    eval_file.parent.mkdir(parents=True)
    cases = "".join(
        f"  - id: {test_id}\n    input: {json.dumps(prompt)}\n    assertions:\n"
        f"      - {{name: answered, type: contains, value: 'answer: '}}\n"
        for test_id, prompt in tests
    )
    eval_file.write_text(f"name: variants\nexecution:\n  target: {target}\ntests:\n{cases}", encoding="utf-8")
    return eval_file


def calls(root: Path) -> list[dict]:
    log = root / "agent" / "calls.jsonl"
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


def everything_stored(db_file: Path) -> bytes:
    """Every event payload and every blob, decoded, as one byte string to search."""
    store = EventStore(make_engine(f"sqlite:///{db_file}"))
    parts = [event.payload_json.encode("utf-8") for event in store.read_all()]
    with sqlite3.connect(db_file) as conn:
        digests = [row[0] for row in conn.execute("SELECT sha256 FROM blobs")]
    parts += [store.get_blob(digest) for digest in digests]
    return b"\n".join(parts)


def test_an_agentv_targets_file_found_upward_runs_with_exact_prompts_and_no_secret_stored(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET_VALUE)
    eval_file = make_project(tmp_path / "proj", [("tricky", TRICKY_PROMPT), ("plain", "hello")])
    db_file = tmp_path / "store.db"

    result = evalstore(
        f"sqlite:///{db_file}",
        "run",
        str(eval_file),
        "--json",
        "--workdir",
        str(tmp_path / "ws"),
        cwd=tmp_path,
        env={SECRET_ENV: SECRET_VALUE},
    )
    out = ok_json(result)
    assert [(r["test_id"], r["status"], r["graders"]) for r in out["results"]] == [
        ("tricky", "ok", {"answered": 1.0}),
        ("plain", "ok", {"answered": 1.0}),
    ]
    assert f"run {out['run_id']}: 2 tests" in result.stderr  # progress goes to stderr, stdout is the JSON

    seen = {c["prompt"].split("\n")[0]: c for c in calls(tmp_path / "proj")}
    tricky = seen[TRICKY_PROMPT.split("\n")[0]]
    assert tricky["argv"] == [TRICKY_PROMPT.rstrip("\n")] and tricky["prompt"] == TRICKY_PROMPT.rstrip("\n")
    assert all(c["secret_ok"] for c in seen.values()), "the ${{ ENV }} reference did not reach the agent"
    assert Path(tricky["cwd"]) == (tmp_path / "proj").resolve()  # cwd: ../.. from the eval's folder
    assert not list((tmp_path / "proj").rglob("pwned*")), "the prompt reached the shell unquoted"

    run = audit(f"sqlite:///{db_file}", out["run_id"], "tricky")["run"]
    assert run["target"]["env"]["AGENT_TOKEN"] == f"${{{{ {SECRET_ENV} }}}}"
    # Neither the referenced value nor the literal one (under a secret-looking key) is stored.
    assert run["target"]["env"]["EXPECTED_TOKEN"] != SECRET_VALUE
    stored = everything_stored(db_file)
    assert SECRET_ENV.encode() in stored and SECRET_VALUE.encode() not in stored


def test_target_flag_overrides_execution_target_and_output_file_blocks_are_captured_or_refused(tmp_path) -> None:
    eval_file = make_project(tmp_path / "proj", [("files", "write the files")])
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "outside.txt").write_text("not the agent's to give")
    db = f"sqlite:///{tmp_path / 'store.db'}"

    out = ok_json(cli(db, "run", str(eval_file), "--target", "file-agent", "--json", "--workdir", str(tmp_path / "ws")))
    (row,) = out["results"]
    assert row["target"] == "file-agent" and row["status"] == "ok"
    (call,) = calls(tmp_path / "proj")
    assert call["argv"][-1] == "files" and call["prompt"] == "write the files"  # {EVAL_ID}, {PROMPT_FILE}

    (test,) = audit(db, out["run_id"], "files")["tests"]
    status = {a["path"]: a["status"] for a in test["artifacts"]}
    workspace = tmp_path / "ws" / "files"
    assert status == {
        "out/a.txt": "stored",
        str(workspace / "abs.txt"): "stored",
        "../outside.txt": "refused",
        "/etc/hostname": "refused",
        "nope.txt": "missing",
        "in-cwd.txt": "stored",
    }
    by_path = {a["path"]: a for a in test["artifacts"]}
    assert by_path["out/a.txt"]["size"] == len("relative bytes")
    assert "outside the test workspace" in by_path["../outside.txt"]["reason"]


def test_a_file_written_in_the_targets_cwd_is_found_there_as_agentv_finds_it(tmp_path) -> None:
    eval_file = make_project(tmp_path / "proj", [("files", "write the files")])
    db = f"sqlite:///{tmp_path / 'store.db'}"
    out = ok_json(
        cli(db, "run", str(eval_file), "--target", "file-agent-in-cwd", "--json", "--workdir", str(tmp_path / "ws"))
    )
    (test,) = audit(db, out["run_id"], "files")["tests"]
    by_path = {a["path"]: a for a in test["artifacts"]}
    assert by_path["out/a.txt"]["status"] == "stored"  # written under $AGENTV_WORKSPACE_PATH
    # AgentV resolves a relative path against the workspace, else the target's configured cwd.
    assert by_path["in-cwd.txt"]["status"] == "stored", by_path["in-cwd.txt"]
    assert by_path["nope.txt"]["status"] == "missing"
    assert by_path["/etc/hostname"]["status"] == "refused"  # neither folder lets it out
    assert "outside the test workspace and the target's cwd" in by_path["/etc/hostname"]["reason"]


BROKEN = f"""\
  - name: unset-secret
    provider: cli
    command: echo hi
    env: {{K: "${{{{ VARIANTS_NEVER_SET_VAR }}}}"}}
  - name: no-command
    provider: cli
    cwd: .
  - name: bad-cwd
    provider: cli
    command: echo hi
    cwd: ./no/such/dir
  - name: unhealthy
    provider: cli
    command: echo hi
    healthcheck: {{type: command, command_template: "{PY} -c 'import sys; sys.exit(\\"agent server down\\")'"}}
  - name: healthy
    provider: cli
    command_template: {PY} agent/agent.py {{PROMPT}}
    cwd: ../..
    healthcheck: {{type: command, command_template: "echo check >> agent/health.log", cwd: ../..}}
"""


def test_a_broken_target_config_stops_before_any_run_is_recorded(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("VARIANTS_NEVER_SET_VAR", raising=False)
    eval_file = make_project(tmp_path / "proj", [("a", "hi")], extra_targets=BROKEN)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    expected = {
        "unset-secret": "VARIANTS_NEVER_SET_VAR",
        "no-command": "command_template",
        "bad-cwd": "no/such/dir",
        "unhealthy": "agent server down",
    }
    for target, needle in expected.items():
        line = one_line_error(cli(db, "run", str(eval_file), "--target", target, "--workdir", str(tmp_path / "ws")))
        assert needle in line and target in line, line
    assert not (tmp_path / "store.db").exists() and calls(tmp_path / "proj") == []  # no store made


LITERAL_KEY = "sk-live-LITERALINCMD0123456789abcdef"
HEALTH_ENV, HEALTH_TOKEN = "VARIANTS_HEALTH_TOKEN", "tok-SUPERSECRET-777"
SECRETS_IN_CONFIG = f"""\
  - name: literal-key
    provider: cli
    command: {PY} agent/agent.py {{PROMPT}} --api-key {LITERAL_KEY}
    cwd: ../..
  - name: health-secret
    provider: cli
    command: echo hi
    healthcheck: {{type: http, url: "http://127.0.0.1:9/health?token=${{{{ {HEALTH_ENV} }}}}"}}
"""


def test_a_literal_key_in_the_command_reaches_the_agent_but_not_the_store(tmp_path) -> None:
    eval_file = make_project(tmp_path / "proj", [("a", "hello")], extra_targets=SECRETS_IN_CONFIG)
    db_file = tmp_path / "store.db"
    out = ok_json(
        cli(
            f"sqlite:///{db_file}",
            "run",
            str(eval_file),
            "--target",
            "literal-key",
            "--json",
            "--workdir",
            str(tmp_path / "ws"),
        )
    )
    assert [(r["status"], r["passed"]) for r in out["results"]] == [("ok", True)]
    (call,) = calls(tmp_path / "proj")
    assert call["argv"] == ["hello", "--api-key", LITERAL_KEY]  # the agent got the command as written

    run = audit(f"sqlite:///{db_file}", out["run_id"], "a")["run"]
    assert run["target"]["command"].endswith("--api-key ***redacted***"), run["target"]
    assert LITERAL_KEY.encode() not in everything_stored(db_file)


def test_a_failed_healthcheck_names_the_url_as_configured_not_the_resolved_secret(tmp_path) -> None:
    eval_file = make_project(tmp_path / "proj", [("a", "hello")], extra_targets=SECRETS_IN_CONFIG)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result = evalstore(
        db,
        "run",
        str(eval_file),
        "--target",
        "health-secret",
        "--workdir",
        str(tmp_path / "ws"),
        cwd=tmp_path,
        env={HEALTH_ENV: HEALTH_TOKEN},
    )
    line = one_line_error(result)
    assert f"healthcheck failed: GET http://127.0.0.1:9/health?token=${{{{ {HEALTH_ENV} }}}}: " in line, line
    assert HEALTH_TOKEN not in result.stderr + result.stdout
    assert not (tmp_path / "store.db").exists()


def test_a_healthcheck_runs_once_per_run_not_per_test(tmp_path) -> None:
    eval_file = make_project(tmp_path / "proj", [("a", "one"), ("b", "two"), ("c", "three")], extra_targets=BROKEN)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    out = ok_json(cli(db, "run", str(eval_file), "--target", "healthy", "--json", "--workdir", str(tmp_path / "ws")))
    assert [r["status"] for r in out["results"]] == ["ok", "ok", "ok"]
    assert (tmp_path / "proj" / "agent" / "health.log").read_text().splitlines() == ["check"]


def test_a_failing_and_a_hanging_test_are_execution_errors_and_the_rest_still_run(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET_VALUE)
    tests = [("fails", "please FAIL"), ("hangs", "please HANG"), ("fine", "hello")]
    eval_file = make_project(tmp_path / "proj", tests)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    started = time.monotonic()
    result = evalstore(
        db,
        "run",
        str(eval_file),
        "--json",
        "--timeout",
        "2",
        "--max-retries",  # one call each (the retries of a failed call: test_e2e_run_retries.py)
        "0",
        "--workers",
        "3",
        "--workdir",
        str(tmp_path / "ws"),
        cwd=tmp_path,
        env={SECRET_ENV: SECRET_VALUE},
    )
    rows = {r["test_id"]: r for r in ok_json(result, 1)["results"]}
    assert time.monotonic() - started < 30, "the hanging agent was not cut off"
    assert rows["fine"]["status"] == "ok" and rows["fine"]["passed"]
    assert rows["fails"]["status"] == "execution_error"
    assert rows["fails"]["error"].startswith("target 'stdout-agent': exited with code 3: agent: quota exhausted")
    assert rows["hangs"]["status"] == "execution_error" and "timed out after 2s" in rows["hangs"]["error"]
    assert "Traceback" not in result.stderr


def interrupted(
    db: str, args: list[str], cwd: Path, ready: Callable[[], bool], what: str, env: dict[str, str] | None = None
) -> tuple[int, str, float]:
    """``evalstore --db DB ARGS`` started, given Ctrl-C once ``ready()`` (waited for as ``what``): its exit
    code, what it printed on stderr, and how long it took to stop."""
    proc = subprocess.Popen(
        [str(EVALSTORE), "--db", db, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A child started from a non-interactive parent may inherit SIGINT ignored; a user's shell does not.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        wait_for(ready, 60, what)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        return proc.returncode, err, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()


class Interrupted(NamedTuple):
    eval_file: Path
    db: str
    code: int
    err: str
    stopped_after: float


def interrupted_run(
    tmp_path: Path, cases: list[tuple[str, str]], started: int, what: str, env: dict[str, str]
) -> Interrupted:
    """``evalstore run`` of a project of ``cases``, one test at a time, given Ctrl-C once the agent has been
    called ``started`` times (waited for as ``what``): :func:`interrupted`'s, with the eval file and store."""
    eval_file = make_project(tmp_path / "proj", cases)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    run_args = ["run", str(eval_file), "--workers", "1", "--workdir", str(tmp_path / "ws")]

    def ready() -> bool:
        return len(calls(tmp_path / "proj")) >= started

    return Interrupted(eval_file, db, *interrupted(db, run_args, tmp_path, ready, what, env))


def test_ctrl_c_stops_pending_tests_and_resume_runs_only_the_rest(tmp_path) -> None:
    monkey_env = {SECRET_ENV: SECRET_VALUE}
    names = [f"t{i}" for i in range(8)]
    # COLUMNS=80: what rich assumes for a stderr that is not a terminal; the hint must not wrap at it.
    _, db, code, err, _ = interrupted_run(
        tmp_path, [(n, f"SLOW {n}") for n in names], 2, "the agent's second call", {**monkey_env, "COLUMNS": "80"}
    )
    assert code == 130, err
    done_before = len(calls(tmp_path / "proj"))
    assert done_before < len(names), "Ctrl-C did not stop the tests not yet started"
    (run,) = runs(db)
    assert run["status"] != "completed"
    # One line, whole, so it can be copied and pasted.
    hint = f"run {run['run_id']} is incomplete; finish it with: evalstore run --resume {run['run_id']}"
    assert hint in err.splitlines(), err

    resumed = ok_json(evalstore(db, "run", "--resume", run["run_id"], "--json", cwd=tmp_path, env=monkey_env))
    assert sorted(r["test_id"] for r in resumed["results"]) == sorted(names)
    prompts = [c["prompt"] for c in calls(tmp_path / "proj")]
    # Tests recorded before the interrupt were not run again; at most the one in flight ran twice.
    assert len(set(prompts)) == len(names) and len(prompts) <= len(names) + 1
    assert runs(db)[0]["status"] == "completed"


def test_ctrl_c_kills_the_agent_in_flight_and_resume_runs_that_test_again(tmp_path) -> None:
    _, db, code, err, stopped_after = interrupted_run(
        tmp_path,
        [("stalls", "STALL first"), ("quick", "plain")],
        1,
        "the agent's first call",
        {SECRET_ENV: SECRET_VALUE},
    )
    # The agent sleeps 60 s in its own process group; Ctrl-C must not wait for it.
    assert code == 130, err
    # What it printed on the way out says where a slow stop waited (seen once, 21 s, under a loaded CI).
    assert stopped_after < 15, (
        f"Ctrl-C took {stopped_after:.1f} s: the running agent was not killed; it printed {err!r}"
    )
    (run,) = runs(db)
    assert run["tests"] == 0, "the killed agent's test must not be recorded as an execution error"

    resumed = ok_json(
        evalstore(db, "run", "--resume", run["run_id"], "--json", cwd=tmp_path, env={SECRET_ENV: SECRET_VALUE})
    )
    assert {r["test_id"]: r["status"] for r in resumed["results"]} == {"stalls": "ok", "quick": "ok"}
    assert [c["prompt"] for c in calls(tmp_path / "proj")].count("STALL first") == 2


def _result_row(i: int) -> dict:
    score = (i % 5) / 4
    verdict = "pass" if score >= 0.5 else "fail"
    return {
        "test_id": f"t-{i:06d}",
        "suite": "many",
        "score": score,
        "target": "default",
        "execution_status": "ok" if score >= 0.8 else "quality_failure",
        "scores": [
            {"name": "check", "type": "code-grader", "score": score, "verdict": verdict, "assertions": []},
        ],
    }


def test_an_import_stopped_while_it_writes_is_completed_by_importing_again(tmp_path) -> None:
    source = tmp_path / "results.jsonl"
    source.write_text("".join(json.dumps(_result_row(i)) + "\n" for i in range(60_000)), encoding="utf-8")
    db_file = tmp_path / "store.db"
    db = f"sqlite:///{db_file}"

    def writing() -> bool:  # the run's first event is appended once every line has been checked
        if not db_file.exists():
            return False
        with contextlib.closing(sqlite3.connect(db_file, timeout=5)) as conn:
            try:
                return bool(conn.execute("SELECT count(*) FROM results").fetchone()[0])
            except sqlite3.OperationalError:  # the schema is not there yet
                return False

    code, err, _ = interrupted(db, ["import", str(source)], tmp_path, writing, "the import's first batch")
    assert code == 130, err
    assert "the import stopped; what it wrote stays, and importing the same source again completes it" in err
    assert "Traceback" not in err
    (run,) = runs(db)
    assert run["status"] == "started" and 0 < run["tests"] < 60_000

    again = ok_json(evalstore(db, "import", str(source), "--json", cwd=tmp_path))
    assert (again["run_id"], again["tests"]) == (run["run_id"], 60_000)
    (run,) = runs(db)
    assert (run["status"], run["tests"]) == ("completed", 60_000)
    assert ok_json(evalstore(db, "verify", "--json", cwd=tmp_path))["ok"] is True


def test_a_replay_of_an_interrupted_run_says_it_regrades_only_what_the_run_recorded(tmp_path) -> None:
    eval_file, db, code, err, _ = interrupted_run(
        tmp_path,
        [("quick", "plain"), ("stalls", "STALL first"), ("later", "plain")],
        2,
        "the stalling call",
        {SECRET_ENV: SECRET_VALUE},
    )
    assert code == 130, err
    (run,) = runs(db)
    assert (run["status"], run["tests"]) == ("started", 1)

    replayed = evalstore(db, "replay", run["run_id"], "--json", cwd=tmp_path)
    assert [r["test_id"] for r in ok_json(replayed)["comparison"]["tests"]] == ["quick"]
    assert (
        f"warning: run {run['run_id']} did not finish (it was interrupted, or is still running): this replay "
        f"regrades the 1 result it recorded; `evalstore run --resume {run['run_id']}` runs the rest first"
    ) in replayed.stderr.splitlines()
    # The eval file edited meanwhile: the run goes on with the eval it began with, and says so.
    eval_file.write_text(eval_file.read_text() + "# edited\n")
    resumed = evalstore(db, "run", "--resume", run["run_id"], "--json", cwd=tmp_path, env={SECRET_ENV: SECRET_VALUE})
    assert {r["test_id"] for r in ok_json(resumed)["results"]} == {"quick", "stalls", "later"}
    assert f"{eval_file} changed since run {run['run_id']} began: the run goes on with the eval it began with" in (
        resumed.stderr
    )
    # A finished run's replay says nothing of the kind.
    assert "did not finish" not in evalstore(db, "replay", run["run_id"], "--json", cwd=tmp_path).stderr
