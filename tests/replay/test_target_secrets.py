"""Secrets in target configs: what is stored (redacted), what the agent gets (everything), and what
error messages show (the configured ``${{ NAME }}`` form, never a resolved value).

Real agent scripts run as subprocesses; the openai target talks to the scripted server on 127.0.0.1.
"""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
from pathlib import Path

import pytest
from judge_server import JudgeServer, Reply

from evalstore.replay.content import Message
from evalstore.replay.errors import TargetConfigError
from evalstore.replay.evalfile.specs import EvalTest
from evalstore.replay.targets import REDACTED, check_target, redact, run_target, stored_config

PY = shlex.quote(sys.executable)
LITERAL_KEY = "sk-live-LITERALINCMD0123456789abcdef"
TOKEN_ENV, TOKEN = "EVALSTORE_TEST_SECRET_TOKEN", "tok-SUPERSECRET-777"


def a_test(text: str = "What is 6 x 7?") -> EvalTest:
    return EvalTest(id="t-1", input=[Message(role="user", content=text)])


# -- what is stored ------------------------------------------------------------------------------


def test_secret_tokens_inside_strings_and_argv_items_are_redacted_and_references_kept() -> None:
    config = {
        "name": "agent",
        "provider": "cli",
        "command": f"my-agent --api-key {LITERAL_KEY} {{PROMPT}}",
        "command_template": "agent --token hunter2 --model gpt-4o --verbose --api-key ${{ KEY }} {PROMPT}",
        "wrapped": "sh -c 'agent --token abc123' && OPENAI_API_KEY=xyz123 run --password=\"a b\" --secret {EVAL_ID}",
        "argv": [
            "agent",
            "--api-key",
            "plainsecret",
            "--model",
            "m",
            "--token",
            "${{ T }}",
            "--client-secret={PROMPT}",
            "ghp_abcdefghijklmnopqrstuvwxyz1234",
        ],
        "healthcheck": {"type": "http", "url": "http://127.0.0.1:9/health?token=tok-LITERAL-1&x=1"},
        "base_url": "https://bob:hunter2@proxy.example/v1",
        "args": ["-H", "Authorization: Bearer abc.def", "-H", "Authorization: Bearer ${{ BEARER }}"],
        "note": "aws AKIAABCDEFGHIJKLMNOP and eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    }
    out = redact(config)
    assert out["command"] == f"my-agent --api-key {REDACTED} {{PROMPT}}"
    assert out["command_template"] == (
        f"agent --token {REDACTED} --model gpt-4o --verbose --api-key ${{{{ KEY }}}} {{PROMPT}}"
    )
    assert out["wrapped"] == (
        f"sh -c 'agent --token {REDACTED}' && OPENAI_API_KEY={REDACTED} run --password={REDACTED} --secret {{EVAL_ID}}"
    )
    assert out["argv"] == [
        "agent",
        "--api-key",
        REDACTED,
        "--model",
        "m",
        "--token",
        "${{ T }}",
        "--client-secret={PROMPT}",
        REDACTED,
    ]
    assert out["healthcheck"] == {"type": "http", "url": f"http://127.0.0.1:9/health?token={REDACTED}&x=1"}
    assert out["base_url"] == f"https://bob:{REDACTED}@proxy.example/v1"
    assert out["args"] == ["-H", f"Authorization: Bearer {REDACTED}", "-H", "Authorization: Bearer ${{ BEARER }}"]
    assert out["note"] == f"aws {REDACTED} and {REDACTED}"
    dumped = json.dumps(out)
    for literal in (
        LITERAL_KEY,
        "hunter2",
        "abc123",
        "xyz123",
        "a b",
        "plainsecret",
        "ghp_",
        "tok-LITERAL-1",
        "abc.def",
        "AKIA",
        "eyJ",
    ):
        assert literal not in dumped, literal
    assert config["command"] == f"my-agent --api-key {LITERAL_KEY} {{PROMPT}}"  # the input is not modified


@pytest.mark.parametrize(
    "name", ["JUDGE_CRED", "AWS_CREDS", "SSH_PASSPHRASE", "GITHUB_PAT", "client_secret", "X-Api-Key"]
)
def test_a_value_under_a_secret_looking_name_is_redacted(name: str) -> None:
    assert redact({name: "plain-value-0987654321"}) == {name: REDACTED}


@pytest.mark.parametrize("name", ["max_tokens", "token_usage", "PATH", "PATTERN", "CREDIT_LIMIT", "pass_rate"])
def test_an_ordinary_name_is_not_taken_for_a_secret(name: str) -> None:
    assert redact({name: "plain-value"}) == {name: "plain-value"}


def test_ordinary_values_inside_strings_are_not_redacted() -> None:
    config = {
        "command": "/home/user/projects/my-agent-2024/run.py --out {OUTPUT_FILE} --max-tokens 512 --key-file k.pem",
        "digest": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "models": "claude-3-5-sonnet-20241022 gpt-4o-mini-2024-07-18 550e8400-e29b-41d4-a716-446655440000",
        "base_url": "http://localhost:8080/v1?api-version=2024-06-01",
        "env": {"HOME_DIR": "/home/x", "MODE": "task=summarise"},
    }
    assert redact(config) == config


def test_the_agent_gets_the_literal_command_and_only_the_stored_config_is_redacted(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    seen = tmp_path / "argv.json"  # where the agent says what it got, outside anything recorded
    agent.write_text(
        f"import json, sys\nopen({str(seen)!r}, 'w').write(json.dumps(sys.argv[1:]))\nprint(json.dumps(sys.argv[1:]))\n"
    )
    target = {
        "name": "agent",
        "provider": "cli",
        "command": f"{PY} {shlex.quote(str(agent))} --api-key {LITERAL_KEY} {{PROMPT}}",
        "env": {"MY_TOKEN": "tok-LITERALENVSECRET"},
    }

    outcome = run_target(target, a_test("hello"), workspace=tmp_path / "ws", eval_dir=tmp_path)

    assert outcome.status == "ok", outcome.error
    assert json.loads(seen.read_text()) == ["--api-key", LITERAL_KEY, "hello"]
    # What the agent echoes of a literal secret of its config is stored as the stored config shows it.
    assert json.loads(outcome.output_text) == ["--api-key", REDACTED, "hello"]
    stored = stored_config(target)
    assert LITERAL_KEY not in json.dumps(stored)
    assert stored["command"].endswith(f"--api-key {REDACTED} {{PROMPT}}")
    assert target["command"].endswith(f"--api-key {LITERAL_KEY} {{PROMPT}}")


# -- what errors show ------------------------------------------------------------------------------


def test_a_failed_http_healthcheck_shows_the_configured_url(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    url = f"http://127.0.0.1:9/health?token=${{{{ {TOKEN_ENV} }}}}"
    target = {"name": "agent", "provider": "cli", "command": "echo hi", "healthcheck": {"type": "http", "url": url}}
    with pytest.raises(TargetConfigError) as caught:
        check_target(target, eval_dir=tmp_path)
    message = str(caught.value)
    assert f"healthcheck failed: GET {url}: " in message
    assert TOKEN not in message


def test_a_failed_command_healthcheck_does_not_echo_the_resolved_secret(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    check = {"type": "command", "command_template": f"echo 'bad token ${{{{ {TOKEN_ENV} }}}}' >&2; exit 1"}
    target = {"name": "agent", "provider": "cli", "command": "echo hi", "healthcheck": check}
    with pytest.raises(TargetConfigError) as caught:
        check_target(target, eval_dir=tmp_path)
    message = str(caught.value)
    assert f"bad token ${{{{ {TOKEN_ENV} }}}}" in message and TOKEN not in message


@pytest.mark.parametrize("shape", ["argv", "shell"])
def test_a_command_that_cannot_start_is_named_as_configured(tmp_path: Path, monkeypatch, shape: str) -> None:
    missing = str(tmp_path / f"no-such-agent-{TOKEN}")
    monkeypatch.setenv(TOKEN_ENV, missing)
    reference = f"${{{{ {TOKEN_ENV} }}}}"
    command = [reference, "{PROMPT}"] if shape == "argv" else f"{reference} {{PROMPT}}"
    target = {"name": "agent", "provider": "cli", "command": command}

    outcome = run_target(target, a_test(), workspace=tmp_path / "ws", eval_dir=tmp_path)

    assert outcome.status == "error"
    assert reference in outcome.error, outcome.error  # the reference, where the resolved path stood
    assert TOKEN not in outcome.error and TOKEN not in outcome.stderr


def test_an_agent_that_prints_its_secret_on_failure_is_recorded_without_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    agent = tmp_path / "agent.py"
    agent.write_text(
        textwrap.dedent("""\
        import os, sys
        sys.stderr.write("auth failed for key " + os.environ["AGENT_KEY"] + "\\n")
        sys.exit(2)
    """)
    )
    target = {
        "name": "agent",
        "provider": "cli",
        "command": [sys.executable, str(agent)],
        "env": {"AGENT_KEY": f"${{{{ {TOKEN_ENV} }}}}"},
    }

    outcome = run_target(target, a_test(), workspace=tmp_path / "ws", eval_dir=tmp_path)

    assert outcome.status == "error"
    assert outcome.error.endswith(f"auth failed for key ${{{{ {TOKEN_ENV} }}}}"), outcome.error
    assert TOKEN not in outcome.error and TOKEN not in outcome.stderr


def test_an_openai_endpoint_that_echoes_the_key_is_reported_without_it(
    judge_server: JudgeServer, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    judge_server.script(Reply(status=401, body=json.dumps({"error": f"invalid api key {TOKEN}"}).encode()))
    target = {
        "name": "gpt",
        "provider": "openai",
        "base_url": judge_server.base_url,
        "model": "m",
        "api_key": f"${{{{ {TOKEN_ENV} }}}}",
        "max_retries": 0,
    }

    outcome = run_target(target, a_test(), workspace=tmp_path / "ws", eval_dir=tmp_path)

    assert judge_server.requests[0].headers["authorization"] == f"Bearer {TOKEN}"  # the key was sent
    assert outcome.status == "error" and "HTTP 401" in outcome.error
    assert f"invalid api key ${{{{ {TOKEN_ENV} }}}}" in outcome.error and TOKEN not in outcome.error


def test_an_openai_endpoint_echoing_basic_credentials_from_its_url_is_kept_without_them(
    judge_server: JudgeServer, tmp_path: Path, monkeypatch
) -> None:
    import base64

    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    basic = base64.b64encode(f"bot:{TOKEN}".encode()).decode()
    judge_server.respond_with(lambda request: Reply(content=f"you sent {request.headers.get('authorization')}"))
    target = {
        "name": "gpt",
        "provider": "openai-compatible",
        "base_url": judge_server.base_url.replace("://", f"://bot:${{{{ {TOKEN_ENV} }}}}@"),
        "model": "m",
        "max_retries": 0,
    }

    outcome = run_target(target, a_test(), workspace=tmp_path / "ws", eval_dir=tmp_path)

    assert judge_server.requests[0].headers["authorization"] == f"Basic {basic}"  # sent as HTTP Basic
    assert outcome.status == "ok" and outcome.output_text == f"you sent Basic {REDACTED}"
    assert basic not in json.dumps([m.model_dump() for m in outcome.messages])


def test_a_mask_replaces_a_secrets_utf8_bytes_in_any_bytes_and_leaves_every_other_byte() -> None:
    """Files the agent writes are masked as bytes (``SecretMask.data``): text or not, a secret's UTF-8 bytes
    become its reference's, and bytes that are not UTF-8 around it stay as they were (not U+FFFD)."""
    from evalstore.replay.targetsfile.redaction import SecretMask

    mask = SecretMask.of(references={TOKEN_ENV: TOKEN, "WIKI_SECRET": "ünïcødé-secret"})
    shown, wiki = f"${{{{ {TOKEN_ENV} }}}}".encode(), b"${{ WIKI_SECRET }}"
    binary = b"\x89PNG\r\n\x1a\n\xff" + TOKEN.encode() + b"\x00\xc3" + "ünïcødé-secret".encode() + b"\x80"
    assert mask.data(binary) == b"\x89PNG\r\n\x1a\n\xff" + shown + b"\x00\xc3" + wiki + b"\x80"
    text = f"key={TOKEN} and ünïcødé-secret\n"
    assert mask.data(text.encode()) == mask.text(text).encode()
    untouched = b"\xff\xfe no secret here"
    assert mask.data(untouched) is untouched


def test_a_literal_secret_of_the_targets_env_that_the_agent_prints_is_not_kept(tmp_path: Path) -> None:
    """``env: {MY_TOKEN: tok-...}`` is stored as REDACTED; the agent printing it must not undo that."""
    agent = tmp_path / "agent.py"
    # Into the output file: stdout passes the mask of the process's environment already.
    agent.write_text("import os, sys\nopen(sys.argv[1], 'w').write('The answer is 42. ' + os.environ['MY_TOKEN'])\n")
    target = {
        "name": "agent",
        "provider": "cli",
        "command": [sys.executable, str(agent), "{OUTPUT_FILE}"],
        "env": {"MY_TOKEN": "tok-LITERALENVSECRET", "GREETING": "hello-plain-value"},
    }
    outcome = run_target(target, a_test(), workspace=tmp_path / "ws", eval_dir=tmp_path)
    assert outcome.status == "ok", outcome.error
    assert outcome.output_text.strip() == f"The answer is 42. {REDACTED}"
    assert stored_config(target)["env"] == {"MY_TOKEN": REDACTED, "GREETING": "hello-plain-value"}


def test_a_secret_hidden_in_json_escapes_is_masked_where_it_decodes() -> None:
    """A judge or grader may escape every character of a key: ``"\\u0073\\u006b..."``. Read as JSON
    (the verdict's text), it is the key; a reply body holding that reply as a string escapes it twice."""
    from evalstore.replay.targetsfile.redaction import SecretMask

    mask = SecretMask.of(references={"MY_KEY": "sk-judgesecretABCDEF123456"})
    escaped = "".join(f"\\u{ord(c):04x}" for c in "sk-judgesecretABCDEF123456")
    half = "sk-judge" + escaped[8 * 6 :]
    content = json.dumps({"score": 1, "reasoning": f"k={escaped}"}).replace("\\\\", "\\")
    assert json.loads(content)["reasoning"] == "k=sk-judgesecretABCDEF123456"  # the reply as the grader reads it
    masked = mask.text(content)
    assert json.loads(masked)["reasoning"] == "k=${{ MY_KEY }}"
    body = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
    inner = json.loads(json.loads(mask.data(body))["choices"][0]["message"]["content"])
    assert inner["reasoning"] == "k=${{ MY_KEY }}"
    assert json.loads(mask.text('{"a": "' + half + '"}'))["a"] == "${{ MY_KEY }}"
    # Text that is not JSON, or escapes hiding nothing, is left byte for byte; an unclosed quote ends the pass.
    for text in ('C:\\path "\\u0041" and "\\/" ok', 'left "open \\u0073k-judgesecret'):
        assert mask.text(text) == text
    assert mask.data(b'\xff"\\u0073k-judgesecretABCDEF123456"\x00') == b'\xff"${{ MY_KEY }}"\x00'
