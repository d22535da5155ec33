"""The file canary: an agent writes secrets into files of its workspace, names two of them in its answer
(a text file and a binary one) and leaves a third unnamed, then says them in its answer too (a test, and a
conversation's turn). Two secrets:
a variable of evalstore's environment whose name looks secret (the environment's mask), and the value
the target's ``${{ NAME }}`` reference resolved to under a secret-looking key, from a variable whose name
does not look secret (only the target's mask knows it).

What is stored of those files (the captured files, the workspace snapshot, ``file_changes``) and of what
graders were given of them (a code grader's stdin and output, the judge's prompt) holds each secret as its
``${{ NAME }}`` reference, and no byte of either, in any encoding: the SQLite file, its WAL, every decoded
blob and every event are grepped. One ``evalstore run`` and one ``evalstore replay`` are shared by the tests.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import canaries
import pytest
from canaries import judge_target, raw_store_bytes, run_suite
from e2e_helpers import evalstore, ok_json
from judge_server import JudgeServer, Reply, Request

from evalstore.store import EventStore, make_engine
from evalstore.store.codec import sha256_hex

PY = sys.executable
ENV_SECRET_NAME, ENV_SECRET = "CANARY_FILES_API_KEY", "canary-FILESENV-3b9d7a11"  # secret-looking by name
TARGET_VAR, TARGET_SECRET = "CANARY_FILES_SVC", "canary-FILESTGT-c4e82f90"  # secret by the key it stands under
JUDGE_KEY_ENV, JUDGE_KEY = "CANARY_FILES_JUDGE_KEY", "canary-FILESJUDGE-77aa01"
ENV = {ENV_SECRET_NAME: ENV_SECRET, TARGET_VAR: TARGET_SECRET, JUDGE_KEY_ENV: JUDGE_KEY}
ENV_SHOWN = f"${{{{ {ENV_SECRET_NAME} }}}}".encode()
TARGET_SHOWN = f"${{{{ {TARGET_VAR} }}}}".encode()
BINARY_AROUND = (b"\xff\xfe\x00", b"\x80\x00", b"\xc3")  # not UTF-8: kept byte for byte around the secrets

AGENT = textwrap.dedent(f"""\
    import json, os, sys
    from pathlib import Path

    ws = Path(os.environ["AGENTV_WORKSPACE_PATH"])
    env_secret, target_secret = os.environ[{ENV_SECRET_NAME!r}], os.environ["AGENT_KEY"]
    text = f"env={{env_secret}}\\ntarget={{target_secret}}\\n"
    (ws / "out").mkdir(exist_ok=True)
    (ws / "out" / "report.txt").write_text("report\\n" + text, encoding="utf-8")
    (ws / "blob.bin").write_bytes(
        {BINARY_AROUND[0]!r} + env_secret.encode() + {BINARY_AROUND[1]!r} + target_secret.encode() + {BINARY_AROUND[2]!r}
    )
    (ws / "notes.md").write_text("notes\\n" + text, encoding="utf-8")  # not named: snapshot and diff only
    blocks = [
        {{"type": "text", "text": "done: " + text}},
        {{"type": "file", "media_type": "text/plain", "path": "out/report.txt"}},
        {{"type": "file", "media_type": "application/octet-stream", "path": "blob.bin"}},
    ]
    out = Path(sys.argv[sys.argv.index("--output") + 1])
    out.write_text(json.dumps({{"output": [{{"role": "assistant", "content": blocks}}]}}), encoding="utf-8")
""")

# Says, for each file it is given and for the live workspace's report, whether it read a secret ("raw"),
# both references ("masked") or neither; and prints the workspace's report as evidence.
GRADER = textwrap.dedent(f"""\
    import json, os, sys
    from pathlib import Path

    payload = json.load(sys.stdin)
    secrets = [os.environ[{ENV_SECRET_NAME!r}].encode(), os.environ[{TARGET_VAR!r}].encode()]

    def seen(data):
        if any(s in data for s in secrets):
            return "raw"
        return "masked" if {ENV_SHOWN!r} in data and {TARGET_SHOWN!r} in data else "neither"

    given = {{Path(f["original_path"]).name: seen(Path(f["path"]).read_bytes()) for f in payload["files"]}}
    report = (Path(payload["workspace_path"]) / "out" / "report.txt").read_bytes()
    assertions = [{{"text": f"given {{name}}: {{how}}", "passed": True}} for name, how in sorted(given.items())]
    assertions.append({{"text": "workspace report: " + seen(report), "passed": True, "evidence": report.decode()}})
    print(json.dumps({{"score": 1.0, "assertions": assertions}}))
""")

# An LLM grader's prompt template script: it quotes the live workspace's report (a replay gives it none).
PROMPT = textwrap.dedent("""\
    import json, sys
    from pathlib import Path

    ws = json.load(sys.stdin).get("workspace_path")
    report = (Path(ws) / "out" / "report.txt").read_text() if ws else "(no workspace)"
    print("The workspace's report: " + report + " Does {{output}} report it?")
""")

# A workspace hook that prints both secrets (on stdout before the agent, on stderr after it): it sees the
# agent's environment, the target's variable too.
HOOK = textwrap.dedent(f"""\
    import os, sys
    stream = sys.stdout if sys.argv[1] == "stdout" else sys.stderr
    print(f"env={{os.environ[{ENV_SECRET_NAME!r}]}} target={{os.environ[{TARGET_VAR!r}]}}", file=stream)
""")


def encodings(value: str) -> set[bytes]:
    forms = {value, json.dumps(value)[1:-1], json.dumps(json.dumps(value)[1:-1])[1:-1]}
    return {f.encode("utf-8") for f in forms}


def judge(request: Request) -> Reply | str:
    return json.dumps({"score": 1.0, "assertions": [{"text": "fine", "passed": True}]})


def write_project(root: Path, server: JudgeServer) -> Path:
    root.mkdir(parents=True)
    (root / "agent.py").write_text(AGENT, encoding="utf-8")
    (root / "grader.py").write_text(GRADER, encoding="utf-8")
    (root / "prompt.py").write_text(PROMPT, encoding="utf-8")
    (root / "hook.py").write_text(HOOK, encoding="utf-8")
    (root / "template").mkdir()
    (root / "template" / "seed.txt").write_text("from the template\n", encoding="utf-8")
    agent = textwrap.dedent(f"""\
        - name: agent
          provider: cli
          command: [{json.dumps(PY)}, {json.dumps(str(root / "agent.py"))}, --output, "{{OUTPUT_FILE}}"]
          env:
            AGENT_KEY: ${{{{ {TARGET_VAR} }}}}
          grader_target: judge
        """)
    eval_yaml = textwrap.dedent(f"""\
        name: files-canary
        workspace:
          template: template
          isolation: per_test
          hooks:
            before_each: {{command: [{json.dumps(PY)}, {json.dumps(str(root / "hook.py"))}, stdout]}}
            after_each: {{command: [{json.dumps(PY)}, {json.dumps(str(root / "hook.py"))}, stderr]}}
        tests:
          - id: writes
            input: Write your report.
            criteria: writes it
          - id: converses
            mode: conversation
            input: [{{role: system, content: You write reports.}}]
            criteria: writes it
            turns:
              - input: Write your report.
        assertions:
          - {{name: reader, type: code-grader, command: [{json.dumps(PY)}, {json.dumps(str(root / "grader.py"))}]}}
          - {{name: quality, type: llm-grader}}
          - {{name: templated, type: llm-grader, prompt: {{command: [{json.dumps(PY)}, {json.dumps(str(root / "prompt.py"))}]}}}}
        """)
    return canaries.write_project(root, agent + judge_target(server, JUDGE_KEY_ENV), eval_yaml)


@dataclass
class Recorded:
    db_file: Path
    run_id: str
    replay_id: str
    judge_requests: list[Request]
    printed: str

    def events(self, stream: str) -> list[Any]:
        store = EventStore(make_engine(f"sqlite:///{self.db_file}"))
        try:
            return [e.event for e in store.read_stream(stream)]
        finally:
            store.close()

    def blob(self, digest: str) -> bytes:
        store = EventStore(make_engine(f"sqlite:///{self.db_file}"))
        try:
            return store.get_blob(digest)
        finally:
            store.close()

    def code_grader_output(self, stream: str, test_id: str = "writes") -> bytes:
        calls = [e for e in self.events(stream) if e.type == "grader_called" and e.grader == "reader"]
        (call,) = [e for e in calls if e.test_id == test_id]
        return self.blob(call.reply_sha256)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """The suite run once and replayed once (the replay's code grader works in a copy of the snapshot)."""
    root = tmp_path_factory.mktemp("files-canary")
    server = JudgeServer(judge).start()
    try:
        eval_file = write_project(root / "proj", server)
        db_file = root / "store.db"
        ran = run_suite(db_file, eval_file, "agent", root / "ws", ENV)
        run_id = ok_json(ran, 0)["run_id"]
        replayed = evalstore(f"sqlite:///{db_file}", "replay", run_id, "--json", cwd=root, env=ENV)
        replay_id = ok_json(replayed, 0)["run_id"]
        printed = ran.stdout + ran.stderr + replayed.stdout + replayed.stderr
        yield Recorded(db_file, run_id, replay_id, list(server.requests), printed)
    finally:
        server.stop()


def test_no_byte_of_a_secret_the_agent_wrote_into_a_file_is_stored(recorded: Recorded) -> None:
    stored = raw_store_bytes(recorded.db_file)
    for secret in (ENV_SECRET, TARGET_SECRET, JUDGE_KEY):
        for form in encodings(secret):
            leaks = [name for name, data in stored.items() if form in data]
            assert not leaks, f"{form!r} stored in {leaks}"
            assert form.decode() not in recorded.printed
    everything = b"\n".join(stored.values())
    assert ENV_SHOWN in everything and TARGET_SHOWN in everything


def test_a_captured_file_is_stored_masked_with_the_digest_and_size_of_the_masked_bytes(recorded: Recorded) -> None:
    artifacts = {e.path: e for e in recorded.events(recorded.run_id) if e.type == "artifact_stored"}
    assert set(artifacts) == {"out/report.txt", "blob.bin"}
    assert all(a.status == "stored" for a in artifacts.values())
    report = recorded.blob(artifacts["out/report.txt"].sha256)
    assert report == b"report\nenv=" + ENV_SHOWN + b"\ntarget=" + TARGET_SHOWN + b"\n"
    binary = recorded.blob(artifacts["blob.bin"].sha256)
    before, between, after = BINARY_AROUND
    assert binary == before + ENV_SHOWN + between + TARGET_SHOWN + after  # the other bytes as they were
    for artifact, data in ((artifacts["out/report.txt"], report), (artifacts["blob.bin"], binary)):
        assert (artifact.sha256, artifact.size) == (sha256_hex(data), len(data))


def test_the_workspace_snapshot_holds_the_agents_files_masked(recorded: Recorded) -> None:
    snapshots = {e.test_id: e for e in recorded.events(recorded.run_id) if e.type == "workspace_snapshotted"}
    assert set(snapshots) == {"writes", "converses"}  # a test and a conversation's turns
    before, between, after = BINARY_AROUND
    expected = {
        "out/report.txt": b"report\nenv=" + ENV_SHOWN + b"\ntarget=" + TARGET_SHOWN + b"\n",
        "notes.md": b"notes\nenv=" + ENV_SHOWN + b"\ntarget=" + TARGET_SHOWN + b"\n",
        "blob.bin": before + ENV_SHOWN + between + TARGET_SHOWN + after,
    }
    for test_id, snapshot in snapshots.items():
        files = {e.path: e for e in snapshot.entries if e.kind == "file"}
        assert set(files) == {"seed.txt", *expected}, test_id
        for path, data in expected.items():
            assert recorded.blob(files[path].sha256) == data, (test_id, path)
            assert files[path].size == len(data)
        assert snapshot.total_bytes == sum(e.size or 0 for e in files.values())


def test_file_changes_show_the_references_where_the_secrets_were_written(recorded: Recorded) -> None:
    transcripts = {e.test_id: e for e in recorded.events(recorded.run_id) if e.type == "transcript_recorded"}
    assert set(transcripts) == {"writes", "converses"}
    for transcript in transcripts.values():
        changes = transcript.file_changes.encode()
        assert b"+++ b/notes.md" in changes and b"+++ b/out/report.txt" in changes
        assert b"+env=" + ENV_SHOWN in changes and b"+target=" + TARGET_SHOWN in changes
        assert ENV_SECRET.encode() not in changes and TARGET_SECRET.encode() not in changes


def test_graders_are_given_the_captured_files_masked(recorded: Recorded) -> None:
    """During the run, a code grader's ``files`` are copies of the stored (masked) bytes, and the judge's
    prompt quotes the captured file as stored."""
    output = recorded.code_grader_output(recorded.run_id)
    assert b"given report.txt: masked" in output and b"given blob.bin: masked" in output
    sent = [r.raw for r in recorded.judge_requests]
    captured = json.dumps(f"report\nenv={ENV_SHOWN.decode()}\ntarget={TARGET_SHOWN.decode()}\n")[1:-1].encode()
    assert [raw for raw in sent if captured in raw and b"The workspace's report" not in raw]  # the quality grader's
    for secret in (ENV_SECRET, TARGET_SECRET):
        assert not [raw for raw in sent if secret.encode() in raw], f"{secret} sent to the judge"


def test_what_a_grader_prints_of_the_live_workspace_is_stored_masked(recorded: Recorded) -> None:
    """During the run a code grader (and a prompt template script) works in the live workspace, where the
    files hold the secrets as the agent wrote them; what it prints of them is stored with the references, the
    target's secret too (which no variable of the grader's environment names as secret)."""
    for test_id in ("writes", "converses"):
        output = recorded.code_grader_output(recorded.run_id, test_id)
        assert b"workspace report: raw" in output
        assert b"env=" + ENV_SHOWN in output and b"target=" + TARGET_SHOWN in output
    # A prompt template script quoting the live workspace: the judge is sent (and the store keeps) its masked text.
    report = f"The workspace's report: report\nenv={ENV_SHOWN.decode()}\ntarget={TARGET_SHOWN.decode()}\n"
    quoted = [r for r in recorded.judge_requests if json.dumps(report)[1:-1].encode() in r.raw]
    assert len(quoted) == 2  # the test's and the conversation's


def test_a_replay_grades_the_masked_snapshot(recorded: Recorded) -> None:
    output = recorded.code_grader_output(recorded.replay_id)
    assert b"workspace report: masked" in output
    assert b"given report.txt: masked" in output and b"given blob.bin: masked" in output
    assert b"workspace report: masked" in recorded.code_grader_output(recorded.replay_id, "converses")


def test_what_a_workspace_hook_prints_is_stored_masked(recorded: Recorded) -> None:
    """A hook's output passed only the environment's mask: the target's secret, under a variable whose name
    does not look secret, was stored in its ``workspace_hook_ran`` event as printed."""
    ran = [e for e in recorded.events(recorded.run_id) if e.type == "workspace_hook_ran"]
    tails = {(e.hook, e.test_id): (e.stdout_tail or "") + (e.stderr_tail or "") for e in ran}
    assert set(tails) == {(h, t) for h in ("before_each", "after_each") for t in ("writes", "converses")}
    shown = f"env={ENV_SHOWN.decode()} target={TARGET_SHOWN.decode()}"
    assert all(shown in tail for tail in tails.values()), tails
