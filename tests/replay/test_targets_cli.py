"""The cli target: real agent scripts run as subprocesses in a real workspace."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

import pytest

from evalstore.replay.content import FileBlock, Message, question_text
from evalstore.replay.errors import TargetConfigError
from evalstore.replay.evalfile.specs import EvalTest
from evalstore.replay.targets import capture_files, run_target
from evalstore.replay.targetsfile.loader import load_targets_file

PY = shlex.quote(sys.executable)


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def a_test(text: str = "What is 6 x 7?", test_id: str = "t-1") -> EvalTest:
    return EvalTest(id=test_id, input=[Message(role="user", content=text)])


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    eval_dir = tmp_path / "suite"
    eval_dir.mkdir()
    return tmp_path / "ws", eval_dir


def cli_target(command, **extra) -> dict:
    return {"name": "agent", "provider": "cli", "command": command, **extra}


def test_plain_text_stdout_is_one_assistant_message_and_prompt_is_shell_quoted(tmp_path, dirs) -> None:
    workspace, eval_dir = dirs
    agent = script(
        tmp_path,
        "agent.py",
        """
        import sys
        print("answer to: " + sys.argv[1])
    """,
    )
    prompt = 'it\'s $(touch pwned) `touch pwned2` "quoted"; rm -rf nothing'

    outcome = run_target(
        cli_target(f"{PY} {shlex.quote(str(agent))} {{PROMPT}}"), a_test(prompt), workspace=workspace, eval_dir=eval_dir
    )

    assert outcome.status == "ok", outcome.error
    assert outcome.exit_code == 0
    assert outcome.output_text == f"answer to: {prompt}"
    assert [m.model_dump(exclude_none=True) for m in outcome.messages] == [
        {"role": "assistant", "content": f"answer to: {prompt}"}
    ]
    assert not list(workspace.glob("pwned*")), "the prompt reached the shell unquoted"
    # Measured as AgentV measures it (Date.now() - startTime): whole milliseconds, so a latency grader says
    # "Duration 34ms", not "Duration 34.378ms".
    assert isinstance(outcome.duration_ms, int) and outcome.duration_ms > 0
    assert datetime.fromisoformat(outcome.start_time) <= datetime.fromisoformat(outcome.end_time)


def test_runs_in_the_workspace_by_default(tmp_path, dirs) -> None:
    workspace, eval_dir = dirs
    outcome = run_target(
        cli_target([sys.executable, "-c", "import os; print(os.getcwd())"]),
        a_test(),
        workspace=workspace,
        eval_dir=eval_dir,
    )
    assert Path(outcome.output_text).resolve() == workspace.resolve()


def test_output_file_json_with_xlsx_and_html_file_blocks_is_captured(tmp_path, dirs) -> None:
    openpyxl = pytest.importorskip("openpyxl")
    workspace, eval_dir = dirs
    agent = script(
        tmp_path,
        "agent.py",
        """
        import json, os, sys
        import openpyxl
        out_file = sys.argv[1]
        os.makedirs("generated", exist_ok=True)
        book = openpyxl.Workbook()
        book.active["A1"] = "revenue"
        book.active["B1"] = 42
        book.save("generated/report.xlsx")
        with open("generated/page.html", "w") as f:
            f.write("<html><body><h1>Q1</h1></body></html>")
        answer = {
            "output": [{"role": "assistant", "content": [
                {"type": "text", "text": "Report attached."},
                {"type": "file", "media_type": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                 "path": "generated/report.xlsx"},
                {"type": "file", "media_type": "text/html", "path": "generated/page.html"},
            ]}],
            "token_usage": {"input": 120, "output": 30},
            "cost_usd": 0.0042,
        }
        with open(out_file, "w") as f:
            json.dump(answer, f)
        print("progress noise on stdout that is not the answer")
    """,
    )

    outcome = run_target(
        cli_target(f"{PY} {shlex.quote(str(agent))} {{OUTPUT_FILE}}"), a_test(), workspace=workspace, eval_dir=eval_dir
    )

    assert outcome.status == "ok", outcome.error
    assert outcome.output_text == "Report attached."
    assert outcome.token_usage == {"input": 120, "output": 30}
    assert outcome.cost_usd == pytest.approx(0.0042)
    [message] = outcome.messages
    assert [b.type for b in message.content] == ["text", "file", "file"]

    captured = capture_files(outcome.messages, workspace)
    xlsx, html = captured.files
    assert (xlsx.status, html.status) == ("stored", "stored")
    assert xlsx.sha256 == hashlib.sha256((workspace / "generated/report.xlsx").read_bytes()).hexdigest()
    sheet = openpyxl.load_workbook(io.BytesIO(xlsx.data)).active
    assert (sheet["A1"].value, sheet["B1"].value) == ("revenue", 42)
    assert b"<h1>Q1</h1>" in html.data
    blocks = [b for b in captured.messages[0].content if isinstance(b, FileBlock)]
    assert [b.sha256 for b in blocks] == [xlsx.sha256, html.sha256]


def test_prompt_file_and_eval_id_substitution_in_an_argv_command(tmp_path, dirs) -> None:
    workspace, eval_dir = dirs
    agent = script(
        tmp_path,
        "agent.py",
        """
        import json, sys
        prompt_file, eval_id = sys.argv[1], sys.argv[2]
        print(json.dumps({"text": json.dumps({"prompt": open(prompt_file).read(), "id": eval_id})}))
    """,
    )
    test = EvalTest(
        id="case 7's id",
        input=[
            Message(role="system", content="Be terse."),
            Message(role="user", content="Add 2 and 3."),
        ],
    )

    outcome = run_target(
        cli_target([sys.executable, str(agent), "{PROMPT_FILE}", "--id={EVAL_ID}"]),
        test,
        workspace=workspace,
        eval_dir=eval_dir,
    )

    assert outcome.status == "ok", outcome.error
    seen = json.loads(outcome.output_text)
    assert seen["id"] == "--id=case 7's id"
    assert seen["prompt"] == "@[System]:\nBe terse.\n\n@[User]:\nAdd 2 and 3."


def test_prompt_text_single_turn_embeds_input_files(tmp_path) -> None:
    (tmp_path / "notes.md").write_text("line one\r\nline two\n")
    messages = [
        Message(role="user", content=[{"type": "text", "text": "Summarise:"}, {"type": "file", "path": "notes.md"}])
    ]
    assert question_text(messages, base_dir=str(tmp_path)) == (
        'Summarise:\n\n<file path="notes.md">\nline one\nline two\n</file>'
    )


def test_output_file_config_and_env_reference_are_used(tmp_path, dirs, monkeypatch) -> None:
    workspace, eval_dir = dirs
    monkeypatch.setenv("AGENT_GREETING", "hello from env")
    (workspace / "answers").mkdir(parents=True)
    (workspace / "answers" / "final.txt").write_text("stale answer from the template")
    target = cli_target(
        "printf '%s' \"$GREETING\" > {OUTPUT_FILE}",
        output_file="answers/final.txt",
        env={"GREETING": "${{ AGENT_GREETING }}"},
    )
    outcome = run_target(target, a_test(), workspace=workspace, eval_dir=eval_dir)
    assert outcome.status == "ok", outcome.error
    assert outcome.output_text == "hello from env"
    assert (workspace / "answers" / "final.txt").read_text() == "hello from env"


def test_cwd_is_resolved_against_the_eval_dir(tmp_path, dirs) -> None:
    workspace, eval_dir = dirs
    (eval_dir / "tools").mkdir()
    outcome = run_target(cli_target("pwd", cwd="tools"), a_test(), workspace=workspace, eval_dir=eval_dir)
    assert Path(outcome.output_text).resolve() == (eval_dir / "tools").resolve()


def test_a_command_that_does_not_exist_is_an_error_outcome(dirs) -> None:
    workspace, eval_dir = dirs
    shell = run_target(cli_target("no-such-agent-xyz {PROMPT}"), a_test(), workspace=workspace, eval_dir=eval_dir)
    assert shell.status == "error"
    assert shell.exit_code == 127
    assert "exited with code 127" in shell.error and "not found" in shell.error
    assert shell.messages == []

    argv = run_target(cli_target(["no-such-agent-xyz", "{PROMPT}"]), a_test(), workspace=workspace, eval_dir=eval_dir)
    assert argv.status == "error"
    assert argv.exit_code is None
    assert "cannot start 'no-such-agent-xyz'" in argv.error and "target 'agent'" in argv.error


def test_nonzero_exit_reports_code_and_stderr_tail(tmp_path, dirs) -> None:
    workspace, eval_dir = dirs
    agent = script(
        tmp_path,
        "agent.py",
        """
        import sys
        print("partial answer")
        sys.stderr.write("x" * 5000 + "\\nTraceback: model quota exhausted\\n")
        sys.exit(3)
    """,
    )
    outcome = run_target(cli_target([sys.executable, str(agent)]), a_test(), workspace=workspace, eval_dir=eval_dir)
    assert outcome.status == "error"
    assert outcome.exit_code == 3
    assert outcome.error.startswith("target 'agent': exited with code 3: ")
    assert outcome.error.endswith("Traceback: model quota exhausted")
    assert len(outcome.error) < 2200  # only the tail of stderr
    assert "quota exhausted" in outcome.stderr


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")  # a zombie waiting for a reaper is dead


def test_hang_times_out_and_the_process_group_is_killed(tmp_path, dirs) -> None:
    workspace, eval_dir = dirs
    pid_file = tmp_path / "grandchild.pid"
    agent = script(
        tmp_path,
        "agent.py",
        f"""
        import subprocess, time
        child = subprocess.Popen(["sleep", "60"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(60)
    """,
    )

    started = time.monotonic()
    outcome = run_target(
        cli_target([sys.executable, str(agent)], timeout_seconds=60),
        a_test(),
        workspace=workspace,
        eval_dir=eval_dir,
        timeout=1.5,
    )

    assert time.monotonic() - started < 15
    assert outcome.status == "timeout"
    assert outcome.exit_code is None
    assert "timed out after 1.5s" in outcome.error
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(grandchild), "the grandchild sleep outlived the timeout"


def test_timeout_seconds_from_config_applies(tmp_path, dirs) -> None:
    workspace, eval_dir = dirs
    outcome = run_target(cli_target("sleep 30", timeout_seconds=0.5), a_test(), workspace=workspace, eval_dir=eval_dir)
    assert outcome.status == "timeout"
    assert outcome.duration_ms < 10_000


def test_malformed_json_output_is_an_error_outcome(tmp_path, dirs) -> None:
    workspace, eval_dir = dirs
    bad = json.dumps({"output": [{"role": "assistant", "content": [{"type": "file", "media_type": "text/html"}]}]})
    outcome = run_target(
        cli_target(f"printf '%s' {shlex.quote(bad)}"), a_test(), workspace=workspace, eval_dir=eval_dir
    )
    assert outcome.status == "error"
    assert "malformed output" in outcome.error and "path" in outcome.error


def test_json_without_output_or_text_is_plain_text(dirs) -> None:
    workspace, eval_dir = dirs
    outcome = run_target(cli_target("""echo '{"answer": 42}'"""), a_test(), workspace=workspace, eval_dir=eval_dir)
    assert outcome.status == "ok"
    assert outcome.output_text == '{"answer": 42}'


def test_configuration_errors_raise_naming_file_and_target(tmp_path, dirs, monkeypatch) -> None:
    workspace, eval_dir = dirs
    monkeypatch.delenv("EVALSTORE_TEST_MISSING_VAR", raising=False)
    targets = tmp_path / ".agentv" / "targets.yaml"
    targets.parent.mkdir()
    targets.write_text(
        textwrap.dedent("""
        targets:
          - name: nocmd
            provider: cli
          - name: weird
            provider: telepathy
          - name: needs-env
            provider: cli
            command: agent --key ${{ EVALSTORE_TEST_MISSING_VAR }} {PROMPT}
          - name: badcwd
            provider: cli
            command: echo hi
            cwd: does/not/exist
    """)
    )
    loaded = load_targets_file(targets)
    cases = {
        "nocmd": "needs `command:`",
        "weird": "provider 'telepathy' is not built in",
        "needs-env": "environment variable EVALSTORE_TEST_MISSING_VAR is not set",
        "badcwd": "`cwd` 'does/not/exist' is not a directory",
    }
    for name, reason in cases.items():
        with pytest.raises(TargetConfigError) as info:
            run_target(loaded.get(name), a_test(), workspace=workspace, eval_dir=eval_dir)
        message = str(info.value)
        assert "\n" not in message
        assert str(targets) in message, message
        assert f"target '{name}'" in message, message
        assert reason in message, message


def test_a_target_from_a_targets_file_runs(tmp_path, dirs) -> None:
    workspace, eval_dir = dirs
    targets = tmp_path / "targets.yaml"
    targets.write_text("targets:\n  - name: echo\n    provider: cli\n    command: echo got {EVAL_ID}\n")
    outcome = run_target(
        load_targets_file(targets).get("echo"), a_test(test_id="abc"), workspace=workspace, eval_dir=eval_dir
    )
    assert outcome.status == "ok" and outcome.output_text == "got abc"


def test_the_agent_sees_its_workspace_in_the_environment(dirs) -> None:
    workspace, eval_dir = dirs
    outcome = run_target(
        cli_target('printf "%s" "$AGENTV_WORKSPACE_PATH"', cwd=str(eval_dir)),
        a_test(),
        workspace=workspace,
        eval_dir=eval_dir,
    )
    assert outcome.output_text == str(workspace)
    assert os.path.isdir(outcome.output_text)


def test_agentv_head_shape_with_id_and_nested_config_runs(dirs) -> None:
    workspace, eval_dir = dirs
    target = {"id": "nested", "provider": "cli", "config": {"command": "echo nested {EVAL_ID}"}}
    outcome = run_target(target, a_test(test_id="n1"), workspace=workspace, eval_dir=eval_dir)
    assert outcome.status == "ok" and outcome.output_text == "nested n1"


def _imports_of(path: Path, package: list[str]) -> list[str]:
    import ast

    imported: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            imported += [module] + [f"{module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            imported += [a.name for a in node.names]
    return imported


def test_only_the_recording_runner_imports_target_code() -> None:
    """Replay of stored runs must never be able to call a target: nothing in evalstore.replay but
    record.py (``evalstore run``) imports evalstore.replay.targets."""
    from evalstore import replay

    root = Path(replay.__file__).parent
    importers = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] == "targets":
            continue
        package = ["evalstore", "replay", *rel.parts[:-1]]
        if any(
            m == "evalstore.replay.targets" or m.startswith("evalstore.replay.targets.")
            for m in _imports_of(path, package)
        ):
            importers.append(rel.as_posix())
    assert importers == ["record.py"]  # the check sees the one module that must import targets


def test_regrading_loads_no_target_code() -> None:
    """The same rule at run time: importing the replay path (and the CLI's replay command) loads no target module."""
    code = (
        "import sys, evalstore.replay.regrade, evalstore.replay.api, evalstore.replay.analysis.audit; "
        "print(sorted(m for m in sys.modules if m.split('.')[:3] == ['evalstore', 'replay', 'targets']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_keep_temp_files_leaves_the_prompt_file(dirs) -> None:
    workspace, eval_dir = dirs
    kept = run_target(
        cli_target("echo {PROMPT_FILE}", keep_temp_files=True), a_test("kept?"), workspace=workspace, eval_dir=eval_dir
    )
    assert Path(kept.output_text).read_text() == "kept?"
    gone = run_target(cli_target("echo {PROMPT_FILE}"), a_test(), workspace=workspace, eval_dir=eval_dir)
    assert not Path(gone.output_text).exists()


def test_the_trace_an_agent_reports_is_kept_whole(dirs) -> None:
    """AgentV's cli output: tool calls with arguments, results, status and timings, per-message timings, the
    target's usage, cost and duration. All of it is what the trace graders read; the agent's own
    duration stands over the measured one (``parsed.durationMs ?? measuredDurationMs``)."""
    workspace, eval_dir = dirs
    call = {
        "tool": "Read",
        "input": {"file_path": "src/a.py"},
        "output": "print(1)",
        "id": "c1",
        "status": "ok",
        "start_time": "2026-01-01T00:00:00.000Z",
        "end_time": "2026-01-01T00:00:00.250Z",
        "duration_ms": 250,
    }
    answer = {
        "output": [
            {"role": "assistant", "content": "", "tool_calls": [call], "start_time": "2026-01-01T00:00:00Z"},
            {"role": "assistant", "content": "done", "duration_ms": 12, "metadata": {"model": "m"}},
        ],
        "token_usage": {"input": 100, "output": 20, "cached": 5},
        "cost_usd": 0.0042,
        "duration_ms": 4321,
    }
    command = f"printf '%s' {shlex.quote(json.dumps(answer))}"
    outcome = run_target(cli_target(command), a_test(), workspace=workspace, eval_dir=eval_dir)
    assert outcome.status == "ok", outcome.error
    first, last = (m.model_dump(mode="json", exclude_none=True) for m in outcome.messages)
    assert first["tool_calls"] == [call]
    assert first["start_time"] == "2026-01-01T00:00:00Z"
    assert (last["duration_ms"], last["metadata"]) == (12, {"model": "m"})
    assert (outcome.token_usage, outcome.cost_usd, outcome.duration_ms) == (answer["token_usage"], 0.0042, 4321)


def test_a_negative_reported_duration_is_dropped_for_the_measured_one(dirs) -> None:
    workspace, eval_dir = dirs
    answer = json.dumps({"text": "hi", "duration_ms": -5, "cost_usd": -1})
    outcome = run_target(
        cli_target(f"printf '%s' {shlex.quote(answer)}"), a_test(), workspace=workspace, eval_dir=eval_dir
    )
    assert outcome.cost_usd is None and outcome.duration_ms is not None and outcome.duration_ms >= 0


def test_a_healthcheck_is_told_by_its_fields_as_in_agentv(tmp_path: Path) -> None:
    """AgentV's ``normalizeCliHealthcheck``: a ``url`` is an HTTP check, otherwise a ``command`` (run in its
    ``cwd``, relative to the eval file's folder); ``type:`` is not needed (features/local-cli writes none)."""
    from evalstore.replay.targets import check_target

    (tmp_path / "agent").mkdir()
    check = {"command": f"{PY} -c \"open('ran', 'w').write('yes')\"", "cwd": "agent"}
    check_target({"name": "a", "provider": "cli", "command": "echo hi", "healthcheck": check}, eval_dir=tmp_path)
    assert (tmp_path / "agent" / "ran").read_text() == "yes"
    failing = {"command": f"{PY} -c \"raise SystemExit('agent down')\""}
    with pytest.raises(TargetConfigError, match="healthcheck failed"):
        check_target({"name": "a", "provider": "cli", "command": "echo hi", "healthcheck": failing}, eval_dir=tmp_path)
    with pytest.raises(TargetConfigError, match=r"healthcheck failed: GET http://127\.0\.0\.1:9/health"):
        check = {"url": "http://127.0.0.1:9/health", "timeout_seconds": 5}
        check_target({"name": "a", "provider": "cli", "command": "echo hi", "healthcheck": check}, eval_dir=tmp_path)
    with pytest.raises(TargetConfigError, match="healthcheck: either `command` or `url` is required"):
        check_target(
            {"name": "a", "provider": "cli", "command": "echo hi", "healthcheck": {"type": "http"}}, eval_dir=tmp_path
        )


def test_attempt_is_agentvs_provider_attempt(dirs, tmp_path: Path) -> None:
    """``{ATTEMPT}`` is AgentV's provider attempt (cli.ts ``request.attempt ?? 0``): 0, the number of the call
    when a failed one is tried again (``--max-retries``); the healthcheck's is 0."""
    from evalstore.replay.targets import check_target

    workspace, eval_dir = dirs
    argv = run_target(
        cli_target([sys.executable, "-c", "import sys; print('attempt=' + sys.argv[1])", "{ATTEMPT}"]),
        a_test(),
        workspace=workspace,
        eval_dir=eval_dir,
    )
    shell = run_target(cli_target("echo attempt={ATTEMPT}"), a_test(), workspace=workspace, eval_dir=eval_dir)
    assert (argv.output_text, shell.output_text) == ("attempt=0", "attempt=0")
    again = run_target(
        cli_target("echo attempt={ATTEMPT}"), a_test(), workspace=workspace, eval_dir=eval_dir, attempt=2
    )
    assert again.output_text == "attempt=2"
    zero = [sys.executable, "-c", "import sys; sys.exit(0 if sys.argv[1] == '0' else 3)", "{ATTEMPT}"]
    check_target(cli_target("echo hi", healthcheck={"command": zero}), eval_dir=tmp_path)


def test_a_url_healthcheck_is_bounded_whole_and_follows_redirects(tmp_path: Path) -> None:
    """The URL healthcheck used ``urlopen``, whose timeout bounds each read: a server sending its status line
    a byte a second held the run before its first test for ever. Now the check's timeout bounds the
    exchange, connect to headers (AgentV's ``fetch`` with an abort signal), and a redirect is followed."""
    import socket
    import threading

    from evalstore.replay.targets import check_target

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                path = conn.recv(4096).split(b" ")[1]
                if path == b"/drip":
                    for byte in b"HTTP/1.1 200 OK\r\n":
                        if stop.wait(1):
                            break
                        conn.sendall(bytes([byte]))
                elif path == b"/moved":
                    conn.sendall(
                        b"HTTP/1.1 302 Found\r\nLocation: /ok\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                else:
                    status = b"200 OK" if path == b"/ok" else b"503 Service Unavailable"
                    conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")

    server = threading.Thread(target=serve, daemon=True)
    server.start()

    def check(path: str) -> None:
        url = f"http://127.0.0.1:{port}{path}"
        target = {
            "name": "a",
            "provider": "cli",
            "command": "echo hi",
            "healthcheck": {"url": url, "timeout_seconds": 2},
        }
        check_target(target, eval_dir=tmp_path)

    try:
        check("/ok")
        check("/moved")
        with pytest.raises(TargetConfigError, match=r"GET http://127\.0\.0\.1:\d+/down answered HTTP 503"):
            check("/down")
        started = time.monotonic()
        with pytest.raises(TargetConfigError, match=r"healthcheck failed: GET .*/drip: no answer within 2s"):
            check("/drip")
        assert time.monotonic() - started < 5
    finally:
        stop.set()
        listener.close()
