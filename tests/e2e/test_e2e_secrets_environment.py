"""The environment canary (issue 29 item 5): an agent and a code grader that print their whole environment
in several encodings (``KEY=value`` lines, JSON with and without ASCII escapes, inside a JSON reply's
strings, on stdout and stderr), run with an environment full of secrets: a judge's key only the judge's
target references, vendor keys the agent may use, a database URL with a password, a secret holding
quotes and backslashes and one holding non-ASCII. Then every stored byte (the SQLite file, its WAL, every
decoded blob, every event) and every export (agentv-jsonl, csv, json, bundle, ``show --json``) is grepped
for each secret in each encoding.

And the agent never sees the judge's key: a child process is not given the variables only a judge's
target references (``processes.children.child_environment``), unless its own target names them.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import canaries
from canaries import judge_target, raw_store_bytes, run_suite
from e2e_helpers import evalstore, ok_json
from judge_server import JudgeServer, Reply, Request

from evalstore.store import EventStore

PY = sys.executable
JUDGE_KEY_ENV, JUDGE_KEY = "CANARY_JUDGE_KEY", "canary-JUDGEKEY-5e1f0c"  # referenced by the judge's target only
SECRETS = {
    "OPENAI_API_KEY": "sk-canary-OPENAI-8c2d4e6f1a3b5c7d",
    "GITHUB_TOKEN": "ghp_canaryGITHUB0123456789abcdefXYZ",
    "DB_PASSWORD": 'canary-"quoted"\\back\\slash-2b',  # JSON escapes it differently from how it is written
    "WIKI_SECRET": "canary-ünïcødé-secret-7a",  # and \\u-escapes it with ensure_ascii
}
DB_URL_PASS = "canaryDBpw-91fe"
ENV = {
    **SECRETS,
    JUDGE_KEY_ENV: JUDGE_KEY,
    "DB_URL": f"postgresql://bob:{DB_URL_PASS}@db.example:5432/app",
    "GREETING": "hello-not-a-secret",  # not secret-looking: kept as it is
}

# Prints everything it has, in every encoding below, and says whether it got the judge's key.
DUMP = textwrap.dedent(f"""\
    import json, os, sys
    env = dict(os.environ)
    lines = "\\n".join(f"{{k}}={{v}}" for k, v in sorted(env.items()))
    seen = "judge key: " + ("SEEN" if {JUDGE_KEY_ENV!r} in env else "absent")
    sys.stderr.write(lines + "\\n" + json.dumps(env) + "\\n")
""")
AGENT = DUMP + textwrap.dedent("""\
    print(seen)
    print(lines)
    print(json.dumps(env))
    print(json.dumps(env, ensure_ascii=False))
""")
GRADER = DUMP + textwrap.dedent("""\
    sys.stdin.read()
    dumped = json.dumps(env)
    print(json.dumps({"score": 1.0, "assertions": [
        {"text": seen, "passed": True},
        {"text": lines, "passed": True, "evidence": dumped},
    ], "details": {"env": env, "nested": dumped}}))
""")


def encodings(value: str) -> set[bytes]:
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    forms.add(json.dumps(json.dumps(value)[1:-1])[1:-1])
    return {f.encode("utf-8") for f in forms}


def judge(request: Request) -> Reply | str:
    return json.dumps({"score": 1.0, "assertions": [{"text": "fine", "passed": True}]})


def write_project(root: Path, server: JudgeServer) -> Path:
    root.mkdir(parents=True)
    (root / "agent.py").write_text(AGENT, encoding="utf-8")
    (root / "grader.py").write_text(GRADER, encoding="utf-8")
    agent = textwrap.dedent(f"""\
        - name: agent
          provider: cli
          command: [{json.dumps(PY)}, {json.dumps(str(root / "agent.py"))}]
          grader_target: judge
        """)
    eval_yaml = textwrap.dedent(f"""\
        name: env-canary
        tests:
          - id: dump
            input: Print your environment.
            criteria: prints it
        assertions:
          - {{name: dumper, type: code-grader, command: [{json.dumps(PY)}, {json.dumps(str(root / "grader.py"))}]}}
          - {{name: quality, type: llm-grader}}
        """)
    return canaries.write_project(root, agent + judge_target(server, JUDGE_KEY_ENV), eval_yaml)


def test_no_secret_of_the_environment_is_stored_or_exported_in_any_encoding(
    tmp_path: Path, judge_server: JudgeServer
) -> None:
    judge_server.respond_with(judge)
    eval_file = write_project(tmp_path / "proj", judge_server)
    db_file = tmp_path / "store.db"
    db = f"sqlite:///{db_file}"
    result = run_suite(db_file, eval_file, "agent", tmp_path / "ws", ENV)
    out = ok_json(result, 0)
    run_id = out["run_id"]
    printed = result.stdout + result.stderr

    exports: dict[str, bytes] = {}
    for fmt in ("agentv-jsonl", "csv", "json"):
        target = tmp_path / f"export.{fmt}"
        done = evalstore(db, "export", run_id, "--format", fmt, "-o", str(target), cwd=tmp_path, env=ENV)
        assert done.returncode == 0, done.stderr
        exports[fmt] = target.read_bytes()
    bundle = tmp_path / "bundle"
    assert (
        evalstore(db, "export", run_id, "--format", "bundle", "-o", str(bundle), cwd=tmp_path, env=ENV).returncode == 0
    )
    exports.update({f"bundle {p}": p.read_bytes() for p in bundle.rglob("*") if p.is_file()})
    shown = evalstore(db, "show", run_id, "--json", cwd=tmp_path, env=ENV)
    assert shown.returncode == 0
    exports["show"] = shown.stdout.encode()
    audit = evalstore(db, "audit", run_id, "dump", "--json", cwd=tmp_path, env=ENV)
    exports["audit"] = audit.stdout.encode()

    stored = {**raw_store_bytes(db_file), **exports}
    everything = b"\n".join(stored.values())
    # The dumps happened and were kept, masked: the agent's and the grader's, with the harmless variable.
    assert b"judge key: absent" in everything and b"judge key: SEEN" not in everything
    assert b"GREETING=hello-not-a-secret" in everything
    assert b"${{ OPENAI_API_KEY }}" in everything and b"***redacted***" in everything
    assert everything.count(b"${{ GITHUB_TOKEN }}") >= 4  # agent stdout and stderr, grader stdout and stderr
    secrets = [*SECRETS.values(), JUDGE_KEY, DB_URL_PASS]
    for secret in secrets:
        for form in encodings(secret):
            leaks = [name for name, data in stored.items() if form in data]
            assert not leaks, f"{form!r} stored in {leaks}"
            assert form.decode() not in printed


def test_an_agent_whose_own_target_names_the_judges_variable_gets_it(tmp_path: Path, judge_server: JudgeServer) -> None:
    judge_server.respond_with(judge)
    root = tmp_path / "proj"
    eval_file = write_project(root, judge_server)
    targets = root / ".agentv" / "targets.yaml"
    targets.write_text(
        targets.read_text().replace(
            "    grader_target: judge\n",
            f"    grader_target: judge\n    env:\n      SHARED: ${{{{ {JUDGE_KEY_ENV} }}}}\n",
            1,
        )
    )
    db_file = tmp_path / "store.db"
    ok_json(run_suite(db_file, eval_file, "agent", tmp_path / "ws", ENV), 0)
    everything = b"\n".join(raw_store_bytes(db_file).values())
    assert b"judge key: SEEN" in everything  # its target names it: it is passed (and still masked)
    assert JUDGE_KEY.encode() not in everything


def test_a_replay_keeps_the_judges_variables_back_whichever_graders_it_runs(
    tmp_path: Path, judge_server: JudgeServer
) -> None:
    """A replay kept the judges' variables from its graders only when it needed a judge: ``--graders
    dumper`` (a code grader alone) gave the grader the judge's key, and an environment other than a full
    replay's, so the execution that replay recorded was not reused (the environment is part of its key)."""
    judge_server.respond_with(judge)
    eval_file = write_project(tmp_path / "proj", judge_server)
    db_file = tmp_path / "store.db"
    db = f"sqlite:///{db_file}"
    run_id = ok_json(run_suite(db_file, eval_file, "agent", tmp_path / "ws", ENV), 0)["run_id"]

    def replay(*args: str) -> dict:
        return ok_json(evalstore(db, "replay", run_id, "--json", *args, cwd=tmp_path, env=ENV), 0)

    # The run's grader worked in the live workspace (never reused); a replay's works in the snapshot.
    assert replay()["reuse"]["code_ran"] == 1
    assert replay("--graders", "dumper")["reuse"]["code_reused"] == 1
    again = replay("--graders", "dumper", "--no-cache")
    assert again["reuse"]["code_ran"] == 1
    store = EventStore.open(db)
    try:
        (call,) = [e.event for e in store.read_stream(again["run_id"]) if e.event.type == "grader_called"]
        assert b"judge key: absent" in store.get_blob(call.reply_sha256)
    finally:
        store.close()
