"""The openai target against a real HTTP server on 127.0.0.1, and secret redaction."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from evalstore.replay.content import Message
from evalstore.replay.errors import TargetConfigError
from evalstore.replay.evalfile.specs import EvalTest
from evalstore.replay.targets import REDACTED, redact, run_target, stored_config
from evalstore.replay.targets.openai import refusal
from evalstore.replay.targetsfile.loader import load_targets_file

SECRET = "sk-test-do-not-leak-1234567890"


@dataclass
class Reply:
    status: int = 200
    body: dict | str = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class ChatServer:
    url: str
    requests: list[dict] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)


def completion(text: str, usage: dict | None = None) -> dict:
    body = {
        "id": "c1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    """A scripted Chat Completions endpoint: each request pops the next reply (default: a fixed answer)."""
    state = ChatServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            reply = state.replies.pop(0) if state.replies else Reply(body=completion("default answer"))
            if reply.delay:
                time.sleep(reply.delay)
            payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
            data = payload.encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def openai_target(url: str, **extra) -> dict:
    return {
        "name": "gpt",
        "provider": "openai",
        "base_url": url,
        "model": "gpt-test",
        "api_key": "${{ EVALSTORE_TEST_TARGET_KEY }}",
        **extra,
    }


def a_test() -> EvalTest:
    return EvalTest(
        id="t-1",
        input=[Message(role="system", content="Answer briefly."), Message(role="user", content="What is 6 x 7?")],
    )


def run(target: dict, tmp_path: Path, **kwargs):
    return run_target(target, a_test(), workspace=tmp_path / "ws", eval_dir=tmp_path, **kwargs)


def test_answer_key_header_and_usage(chat_server: ChatServer, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EVALSTORE_TEST_TARGET_KEY", SECRET)
    chat_server.replies.append(
        Reply(body=completion("42", {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}))
    )

    outcome = run(openai_target(chat_server.url, temperature=0), tmp_path)

    assert outcome.status == "ok", outcome.error
    assert [m.model_dump(exclude_none=True) for m in outcome.messages] == [{"role": "assistant", "content": "42"}]
    assert outcome.output_text == "42"
    assert outcome.token_usage == {"input": 11, "output": 2}
    assert outcome.exit_code is None and outcome.duration_ms > 0
    [request] = chat_server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert request["body"] == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is 6 x 7?"},
        ],
        "temperature": 0.0,
    }


def test_the_key_never_appears_in_the_stored_config(chat_server: ChatServer, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EVALSTORE_TEST_TARGET_KEY", SECRET)
    targets = tmp_path / "targets.yaml"
    targets.write_text(
        "targets:\n"
        "  - name: gpt\n"
        "    provider: openai\n"
        f"    base_url: {chat_server.url}\n"
        "    model: gpt-test\n"
        "    api_key: ${{ EVALSTORE_TEST_TARGET_KEY }}\n"
        "    headers:\n"
        f"      Authorization: Bearer {SECRET}\n"
    )
    entry = load_targets_file(targets).get("gpt")

    assert run_target(entry, a_test(), workspace=tmp_path / "ws", eval_dir=tmp_path).status == "ok"
    stored = stored_config(entry)
    assert SECRET not in json.dumps(stored)
    assert stored["api_key"] == "${{ EVALSTORE_TEST_TARGET_KEY }}"
    assert stored["headers"]["Authorization"] == REDACTED
    assert stored["model"] == "gpt-test" and stored["base_url"] == chat_server.url


def test_http_error_is_an_error_outcome_with_the_status(chat_server: ChatServer, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EVALSTORE_TEST_TARGET_KEY", SECRET)
    chat_server.replies.append(Reply(status=400, body={"error": {"message": "model gpt-test does not exist"}}))
    outcome = run(openai_target(chat_server.url), tmp_path)
    assert outcome.status == "error"
    assert outcome.messages == []
    # AgentV's words: the body's error.message (once the JSON body, `HTTP 400 {"error": ...}`).
    assert outcome.error == "target 'gpt': pi-ai call failed: HTTP 400 model gpt-test does not exist"
    assert len(chat_server.requests) == 1  # a 4xx is not retried
    assert SECRET not in outcome.error


def test_server_error_is_retried(chat_server: ChatServer, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EVALSTORE_TEST_TARGET_KEY", SECRET)
    chat_server.replies += [Reply(status=503, body="busy"), Reply(body=completion("second time lucky"))]
    outcome = run(openai_target(chat_server.url, max_retries=1), tmp_path)
    assert outcome.status == "ok" and outcome.output_text == "second time lucky"
    assert len(chat_server.requests) == 2


def test_slow_endpoint_times_out_under_the_command_lines_timeout_three_times(
    chat_server: ChatServer, tmp_path: Path, monkeypatch, caplog
) -> None:
    """``--timeout`` bounds each request; a request that timed out is sent again by the OpenAI SDK AgentV calls
    through (twice), not by AgentV's own retry (``max_retries``), which does not know the SDK's timeout error."""
    monkeypatch.setenv("EVALSTORE_TEST_TARGET_KEY", SECRET)
    chat_server.replies += [Reply(body=completion("too late"), delay=2.0)] * 4
    outcome = run(openai_target(chat_server.url, max_retries=3), tmp_path, timeout=0.3)
    assert outcome.status == "timeout"
    assert outcome.error is not None and outcome.error.startswith("target 'gpt' after 3 requests: timed out after 0.3s")
    assert len(chat_server.requests) == 3
    # Said as the target's, each request numbered within the call (the third is the call's error).
    assert [r.getMessage() for r in caplog.records] == [
        f"target 'gpt' (call 1): request {n} timed out after 0.3s (ReadTimeout); trying again" for n in (1, 2)
    ]


def test_timeout_seconds_is_not_read_as_agentv_does_not_read_it(
    chat_server: ChatServer, tmp_path: Path, monkeypatch
) -> None:
    """AgentV 4.42.4's ``resolveOpenAIConfig`` has no timeout: an answer slower than ``timeout_seconds`` is an answer."""
    monkeypatch.setenv("EVALSTORE_TEST_TARGET_KEY", SECRET)
    chat_server.replies.append(Reply(body=completion("slow but sure"), delay=1.0))
    outcome = run(openai_target(chat_server.url, timeout_seconds=0.3), tmp_path)
    assert (outcome.status, outcome.output_text) == ("ok", "slow but sure")
    assert len(chat_server.requests) == 1


def test_missing_key_variable_names_variable_and_target(chat_server: ChatServer, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("EVALSTORE_TEST_TARGET_KEY", raising=False)
    with pytest.raises(
        TargetConfigError, match=r"target 'gpt': environment variable EVALSTORE_TEST_TARGET_KEY is not set"
    ):
        run(openai_target(chat_server.url), tmp_path)
    assert chat_server.requests == []


def test_literal_key_is_refused_before_any_request(chat_server: ChatServer, tmp_path: Path) -> None:
    with pytest.raises(TargetConfigError, match="literal key"):
        run(openai_target(chat_server.url, api_key=SECRET), tmp_path)
    assert chat_server.requests == []


# -- redaction ----------------------------------------------------------------------------------


def test_redact_keeps_references_and_replaces_literal_secrets() -> None:
    config = {
        "name": "agent",
        "provider": "cli",
        "command": "agent --model {PROMPT}",
        "api_key": "sk-literal",
        "token": "${{ GH_TOKEN }}",
        "max_tokens": 512,
        "max_output_tokens": "1024",
        "token_usage": "on",
        "password": 123456,
        "env": {"OPENAI_API_KEY": "sk-nested", "HOME_DIR": "/home/x", "X_TOKEN": "${{ X }}"},
        "headers": {
            "Authorization": "Bearer ${{ BEARER }}",
            "X-Api-Key": "literal-header-key",
            "Cookie": "session=abc",
        },
        "auth": {"user": "bob", "pass": "hunter2"},
        "client_secret": "${{ A }}-and-literal",
        "args": [{"secret": "in-a-list"}],
        "empty_api_key": "",
    }
    out = redact(config)
    assert out["command"] == config["command"]
    assert out["api_key"] == REDACTED
    assert out["token"] == "${{ GH_TOKEN }}"
    assert (out["max_tokens"], out["max_output_tokens"], out["token_usage"]) == (512, "1024", "on")
    assert out["password"] == REDACTED
    assert out["env"] == {"OPENAI_API_KEY": REDACTED, "HOME_DIR": "/home/x", "X_TOKEN": "${{ X }}"}
    assert out["headers"] == {"Authorization": "Bearer ${{ BEARER }}", "X-Api-Key": REDACTED, "Cookie": REDACTED}
    assert out["auth"] == {"user": REDACTED, "pass": REDACTED}
    assert out["client_secret"] == REDACTED
    assert out["args"] == [{"secret": REDACTED}]
    assert out["empty_api_key"] == ""
    dumped = json.dumps(out)
    for literal in ("sk-literal", "sk-nested", "literal-header-key", "abc", "hunter2", "in-a-list", "-and-literal"):
        assert literal not in dumped
    assert config["api_key"] == "sk-literal"  # the input is not modified


def _sent(tmp_path: Path, *messages: Message) -> list[dict]:
    from evalstore.replay.targets.base import RunRequest, as_target_spec
    from evalstore.replay.targets.openai import chat_messages

    spec = as_target_spec(openai_target("http://127.0.0.1:9"))
    request = RunRequest(spec, {}, EvalTest(id="t", input=list(messages)), tmp_path, tmp_path, None)
    return chat_messages(request)


def test_the_input_is_sent_as_agentv_sends_it(tmp_path: Path) -> None:
    """AgentV 4.42.4's model providers (``buildChatPromptFromSegments``, ``buildChatPrompt``, pi-ai's one
    system prompt): the default system prompt when the test has none; a ``|`` system message's trailing
    newline kept; leading system messages joined; a later system or tool message an ``@[Role]:`` assistant
    turn; a file named as the eval wrote it."""
    from evalstore.replay.content import FileBlock, TextBlock
    from evalstore.replay.targets.openai import DEFAULT_SYSTEM_PROMPT

    assert _sent(tmp_path, Message(role="user", content="  Hi  ")) == [
        {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": "Hi"},
    ]
    (tmp_path / "notes.md").write_text("  the notes \n", encoding="utf-8")
    note = FileBlock(path=str(tmp_path / "notes.md"), display_path="notes.md")
    assert _sent(
        tmp_path,
        Message(role="system", content="Be brief.\n"),
        Message(role="system", content="Be kind."),
        Message(role="user", content=[TextBlock(text="Read:"), note]),
        Message(role="assistant", content="Done."),
        Message(role="tool", content="ok"),
        Message(role="system", content="Late rule."),
    ) == [
        {"role": "system", "content": "Be brief.\n\n\nBe kind."},
        {"role": "user", "content": 'Read:\n<file path="notes.md">\nthe notes\n</file>'},
        {"role": "assistant", "content": "Done."},
        {"role": "assistant", "content": "@[Tool]:\nok"},
        {"role": "assistant", "content": "@[System]:\nLate rule."},
    ]
    # One system message and one user message: role markers, so the system message is sent as written.
    assert _sent(tmp_path, Message(role="system", content="Rules.\n"), Message(role="user", content="Q")) == [
        {"role": "system", "content": "Rules.\n"},
        {"role": "user", "content": "Q"},
    ]


@pytest.mark.parametrize(
    ("body", "error"),
    [  # what AgentV 4.42.4 says: node, the OpenAI SDK 6.26's APIError.generate and pi-ai's piErrorFromResult
        (b'{"error":{"message":"gone"}}', "pi-ai call failed: HTTP 400 gone"),
        (b"", "pi-ai call failed: HTTP 400 status code (no body)"),
        (b"{}", "pi-ai call failed: HTTP 400 status code (no body)"),
        (b"oops", "pi-ai call failed: HTTP 400 oops"),
        (b"oops\n", "pi-ai call failed: 400 oops\n"),
        (b'{"error":"x"}', 'pi-ai call failed: HTTP 400 "x"'),
        (b"null", "pi-ai call failed: HTTP 400 null"),
        (b'{"error":{"code":1}}', 'pi-ai call failed: HTTP 400 {"code":1}'),
        (b'{"error":{"message":{"a":1}}}', 'pi-ai call failed: HTTP 400 {"a":1}'),
    ],
)
def test_an_error_reply_is_worded_as_agentv_words_it(body: bytes, error: str) -> None:
    assert refusal(400, body) == error
