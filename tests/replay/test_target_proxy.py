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
    assert "HTTP 429" in result.details["refused"] and "may make 3 call(s)" in result.details["refused"]
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
        assert post(b"not json", proxy.token) == 400
        assert post(b'{"neither": 1}', proxy.token) == 400
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
