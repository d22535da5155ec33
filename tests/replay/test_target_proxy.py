"""The target proxy of a code grader: a real grader process calls the scripted judge through it."""

from __future__ import annotations

import json
import sys
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from judge_server import JudgeServer

from evalstore.replay.content import Message
from evalstore.replay.evalfile.specs import CodeGraderSpec, EvalSuite, EvalTest
from evalstore.replay.grading.graders.base import GradeOptions, GradingContext, TranscriptInfo
from evalstore.replay.grading.graders.code import CodeGrader
from evalstore.replay.grading.graders.proxy import TargetProxy
from evalstore.replay.grading.judge import JudgePool, JudgeTarget, RetryPolicy
from evalstore.replay.recording import MemoryRecorder
from evalstore.store.events import GraderCalled

KEY_ENV = "PROXY_TEST_JUDGE_KEY"

GRADER = """\
import json
from evalstore.grader import TargetError, code_grader, target_client

@code_grader
def grade(p):
    client = target_client()
    if client is None:
        return {"score": 0, "assertions": [{"text": "no target", "passed": False}]}
    replies = [client.invoke(f"Is this relevant? {p.output}", system_prompt="Answer yes or no").raw_text]
    replies += [r.raw_text for r in client.invoke_batch([{"question": "one"}, {"question": "two"}])]
    refused = ""
    try:
        client.invoke("four")
    except TargetError as exc:
        refused = str(exc)
    return {"score": 1.0 if replies[0] == "yes" else 0.0, "details": {"replies": replies, "refused": refused}}
"""


@pytest.fixture
def pool(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgePool]:
    monkeypatch.setenv(KEY_ENV, "sk-proxy-test-key")
    target = JudgeTarget(
        name="judge", provider="openai-compatible", base_url=judge_server.base_url, model="m", api_key_env=KEY_ENV
    )
    with JudgePool({"judge": target}, default="judge", retry=RetryPolicy(max_retries=0)) as p:
        yield p


def _ctx(
    tmp_path: Path, recorder: MemoryRecorder, pool: JudgePool, max_calls: int = 3
) -> tuple[CodeGrader, GradingContext]:
    script = tmp_path / "grade.py"
    script.write_text(GRADER)
    spec = CodeGraderSpec(
        name="relevance", command=[sys.executable, str(script)], script=str(script), cwd=str(tmp_path),
        target_max_calls=max_calls,
    )  # fmt: skip
    test = EvalTest(id="t", input=[Message(role="user", content="q")], graders=[spec])
    suite = EvalSuite(path=str(tmp_path / "e.yaml"), name="s", tests=[test])
    info = TranscriptInfo(messages=[Message(role="assistant", content="an answer")], output_text="an answer")
    return CodeGrader(spec), GradingContext(suite, test, info, recorder, options=GradeOptions(), judges=pool)


def test_a_grader_calls_its_target_through_the_proxy_and_call_n_plus_1_is_refused(
    tmp_path: Path, judge_server: JudgeServer, pool: JudgePool
) -> None:
    judge_server.script("yes")
    recorder = MemoryRecorder()
    grader, ctx = _ctx(tmp_path, recorder, pool)
    result = grader.grade(ctx)
    assert result.status == "ok", result.assertions
    assert result.score == 1.0 and result.details is not None
    assert result.details["replies"] == ["yes", "yes", "yes"]
    assert "HTTP 429" in result.details["refused"] and "Max calls exceeded (limit: 3)" in result.details["refused"]
    assert len(judge_server.requests) == 3
    first = judge_server.requests[0]
    assert first.messages == [
        {"role": "system", "content": "Answer yes or no"},
        {"role": "user", "content": "Is this relevant? an answer"},
    ]
    calls = [e for _, e in recorder.of_type(GraderCalled)]
    judge_calls = [c for c in calls if c.call == "judge"]
    assert len(judge_calls) == 3 and {c.grader_type for c in judge_calls} == {"code-grader"}
    assert all(c.model == "m" and c.request_sha256 and c.reply_sha256 and c.cache_key for c in judge_calls)
    assert len(result.grader_call_event_ids) == 4, "the process and its three target calls"
    assert any("refused 1 call(s) over max_calls 3" in e for e in result.evidence)
    assert "sk-proxy-test-key" not in json.dumps([c.model_dump() for c in calls])

    # A second grading with the same requests reuses the recorded replies: nothing is sent.
    again = grader.grade(_ctx(tmp_path, recorder, pool)[1])
    assert again.score == 1.0 and again.cache_hit
    assert len(judge_server.requests) == 3


def test_the_proxy_checks_the_bearer_token_and_the_request(tmp_path: Path, pool: JudgePool) -> None:
    _, ctx = _ctx(tmp_path, MemoryRecorder(), pool)
    with TargetProxy(ctx, ctx.test.graders[0]) as proxy:  # type: ignore[arg-type]
        url = proxy.env["AGENTV_TARGET_PROXY_URL"]
        assert url.startswith("http://127.0.0.1:")

        def post(body: bytes, token: str) -> int:
            request = urllib.request.Request(
                f"{url}/invoke", data=body, method="POST", headers={"Authorization": f"Bearer {token}"}
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    return int(response.status)
            except urllib.error.HTTPError as exc:
                return exc.code

        assert post(b'{"question": "x"}', "wrong") == 401
        assert post(b"not json", proxy.token) == 500  # AgentV's JSON.parse throws inside its try: 500
        assert post(b'{"neither": 1}', proxy.token) == 400
        assert post(b'{"question": ""}', proxy.token) == 400
        assert proxy.calls == 0


def test_without_target_access_the_grader_gets_no_proxy(
    tmp_path: Path, pool: JudgePool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTV_TARGET_PROXY_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AGENTV_TARGET_PROXY_TOKEN", "leaked")
    grader, ctx = _ctx(tmp_path, MemoryRecorder(), pool)
    plain = CodeGrader(grader.spec.model_copy(update={"target_max_calls": None}))
    result = plain.grade(ctx)
    assert result.score == 0.0 and result.assertions[0].text == "no target"


def test_target_in_the_eval_file(tmp_path: Path) -> None:
    from evalstore.replay.evalfile.parser import load_eval

    (tmp_path / "g.py").write_text("print(1)\n")
    (tmp_path / "e.eval.yaml").write_text(
        textwrap.dedent("""\
        tests:
          - id: t
            input: q
            assertions:
              - {name: a, type: code-grader, command: [python3, g.py], target: {max_calls: 10}}
              - {name: b, type: code-grader, command: [python3, g.py], target: {}}
              - {name: c, type: code-grader, command: [python3, g.py]}
        """)
    )
    graders = {g.name: g for g in load_eval(tmp_path / "e.eval.yaml").tests[0].graders}
    assert [graders[n].target_max_calls for n in "abc"] == [10, 50, None]  # type: ignore[union-attr]


def _call(
    proxy: TargetProxy, method: str, path: str, body: object = None, *, token: str | None = None
) -> tuple[int, object, dict[str, str]]:
    """One request to the proxy over HTTP: status, JSON answer (None without a body), headers."""
    url = proxy.env["AGENTV_TARGET_PROXY_URL"]
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {proxy.token if token is None else token}"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(f"{url}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, raw, got = int(response.status), response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        status, raw, got = exc.code, exc.read(), dict(exc.headers)
    return status, json.loads(raw) if raw else None, got


def test_the_proxy_speaks_agentvs_protocol(tmp_path: Path, judge_server: JudgeServer, pool: JudgePool) -> None:
    """AgentV 4.42.4's createTargetProxy, answer for answer: /info, /invoke, /invokeBatch, the limit, the errors."""
    judge_server.script("yes")
    recorder = MemoryRecorder()
    _, ctx = _ctx(tmp_path, recorder, pool, max_calls=4)
    with TargetProxy(ctx, ctx.test.graders[0]) as proxy:  # type: ignore[arg-type]
        assert len(proxy.token) == 64  # AgentV: randomBytes(32).toString("hex")
        status, body, headers = _call(proxy, "OPTIONS", "/invoke", token="")
        assert (status, body, headers["Access-Control-Allow-Origin"]) == (204, None, "*")
        assert _call(proxy, "GET", "/info", token="wrong")[:2] == (401, {"error": "Unauthorized"})
        info = {"targetName": "judge", "maxCalls": 4, "callCount": 0, "availableTargets": ["judge"]}
        status, body, headers = _call(proxy, "GET", "/info")
        assert (status, body, headers["Content-Type"]) == (200, info, "application/json")
        for method, path in (("GET", "/nope"), ("GET", "/invoke"), ("POST", "/info"), ("POST", "/invoke/")):
            assert _call(proxy, method, path, {} if method == "POST" else None)[:2] == (404, {"error": "Not found"})

        status, body, _ = _call(
            proxy,
            "POST",
            "/invoke",
            {"question": "Is it relevant?", "systemPrompt": "Answer yes or no", "evalCaseId": "t", "attempt": 1},
        )
        assert status == 200
        assert body == {
            "output": [{"role": "assistant", "content": "yes"}],
            "rawText": "yes",
            "tokenUsage": {"input": 100, "output": 20},
            "raw_text": "yes",  # evalstore's earlier answer, kept
            "model": "m",
            "cache_hit": False,
        }
        assert judge_server.requests[-1].messages == [
            {"role": "system", "content": "Answer yes or no"},
            {"role": "user", "content": "Is it relevant?"},
        ]
        # AgentV's Python client sends its unset fields as null: they are absent.
        assert _call(proxy, "POST", "/invoke", {"question": "x", "systemPrompt": None, "target": None})[0] == 200
        assert judge_server.requests[-1].messages == [{"role": "user", "content": "x"}]
        assert _call(proxy, "POST", "/invoke", {"question": "x", "target": "nope"})[:2] == (
            400,
            {"error": "Unknown target 'nope'. Available: judge"},
        )
        assert _call(proxy, "POST", "/invoke", {"systemPrompt": "s"})[:2] == (
            400,
            {"error": "Missing required field: question"},
        )
        assert _call(proxy, "POST", "/invokeBatch", {"requests": "x"})[:2] == (
            400,
            {"error": "Missing required field: requests (array)"},
        )
        # The whole batch is counted, its requests that cannot be made too (AgentV's rule), and none is made.
        batch = {"requests": [{"question": "a"}, {"question": "b"}, {}]}
        assert _call(proxy, "POST", "/invokeBatch", batch)[:2] == (
            429,
            {"error": "Batch would exceed max calls (current: 2, batch: 3, limit: 4)"},
        )
        assert _call(proxy, "GET", "/info")[1] == {**info, "callCount": 2}

        status, body, _ = _call(proxy, "POST", "/invokeBatch", {"requests": [{"question": "one"}, {}]})
        assert status == 200
        assert body == {
            "responses": [
                {"output": [{"role": "assistant", "content": "yes"}], "rawText": "yes", "tokenUsage": {"input": 100, "output": 20}},
                {"output": [], "rawText": "Error: Missing required field: question"},
            ]
        }  # fmt: skip
        assert _call(proxy, "POST", "/invoke", {"question": "four"})[0] == 200
        assert _call(proxy, "POST", "/invoke", {"question": "five"})[:2] == (
            429,
            {"error": "Max calls exceeded (limit: 4)"},
        )
        assert _call(proxy, "GET", "/info")[1] == {**info, "callCount": 4}
        assert (proxy.calls, proxy.refused) == (4, 4)
    judge_calls = [e for _, e in recorder.of_type(GraderCalled) if e.call == "judge"]  # type: ignore[attr-defined]
    assert len(judge_calls) == 4 and len(judge_server.requests) == 4
    assert [c.grader for c in judge_calls] == ["relevance"] * 4


def test_a_request_names_another_judge_target(
    tmp_path: Path, judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-proxy-test-key")
    targets = {
        name: JudgeTarget(
            name=name, provider="openai-compatible", base_url=judge_server.base_url, model=model, api_key_env=KEY_ENV
        )
        for name, model in (("judge", "m"), ("other", "m2"))
    }
    judge_server.script("ok")
    recorder = MemoryRecorder()
    with JudgePool(targets, default="judge", retry=RetryPolicy(max_retries=0)) as two:
        _, ctx = _ctx(tmp_path, recorder, two)
        with TargetProxy(ctx, ctx.test.graders[0]) as proxy:  # type: ignore[arg-type]
            assert _call(proxy, "GET", "/info")[1]["availableTargets"] == ["judge", "other"]  # type: ignore[index]
            status, body, _ = _call(proxy, "POST", "/invoke", {"question": "q", "target": "other"})
            assert (status, body["model"]) == (200, "m2")  # type: ignore[index]
            status, body, _ = _call(proxy, "POST", "/invokeBatch", {"requests": [{"question": "q", "target": "judge"}]})
            assert status == 200 and body["responses"][0]["rawText"] == "ok"  # type: ignore[index]
    assert [b.body["model"] for b in judge_server.requests] == ["m2", "m"]
    judge_calls = [e for _, e in recorder.of_type(GraderCalled) if e.call == "judge"]  # type: ignore[attr-defined]
    assert [c.model for c in judge_calls] == ["m2", "m"]


def test_a_failed_target_call_is_a_500_and_a_batch_item_error(
    tmp_path: Path, judge_server: JudgeServer, pool: JudgePool
) -> None:
    from judge_server import Reply

    judge_server.script(Reply(status=400, body=b'{"error": {"message": "bad model"}}'))
    _, ctx = _ctx(tmp_path, MemoryRecorder(), pool)
    with TargetProxy(ctx, ctx.test.graders[0]) as proxy:  # type: ignore[arg-type]
        status, body, _ = _call(proxy, "POST", "/invoke", {"question": "q"})
        assert status == 500 and body["error"].startswith("target judge failed: HTTP 400")  # type: ignore[index]
        status, body, _ = _call(proxy, "POST", "/invokeBatch", {"requests": [{"question": "q2"}]})
        (item,) = body["responses"]  # type: ignore[index]
        assert status == 200 and item["output"] == [] and item["rawText"].startswith("Error: target judge failed")
        assert proxy.calls == 2  # counted, as AgentV counts a call its provider failed
