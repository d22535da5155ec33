"""Judges on the ``anthropic`` and ``gemini`` providers, asked what AgentV 4.42.4's llm-grader asks them.

``tests/fixtures/agentv-vendor-requests/judges.json`` holds what AgentV's own ``LlmGrader`` sent through its own
``AnthropicProvider``/``GeminiProvider`` to ``tests/vendor.py`` for each scenario (the path, the headers
AgentV sets, the body byte for byte) and the verdict it made of the scripted reply. Here evalstore's LLM grader
grades the same test with the same judge target on the same fake: the same request, the same verdict. The
judge cache keys such a request with its provider, so an OpenAI judge's reply to the same messages is not
taken for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vendor_server import VendorReply, VendorServer

from evalstore.replay.content import Message
from evalstore.replay.evalfile.specs import EvalSuite, EvalTest, LlmGraderSpec, RubricItem
from evalstore.replay.grading.graders.base import GradeOptions, GradingContext, TranscriptInfo
from evalstore.replay.grading.graders.llm import LlmGrader
from evalstore.replay.grading.judge import JudgePool
from evalstore.replay.grading.judge.calls import cache_key
from evalstore.replay.recording import MemoryRecorder
from evalstore.replay.targetsfile.loader import load_targets_file
from evalstore.store.events import GraderCalled

CAPTURED = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "agentv-vendor-requests" / "judges.json").read_text("utf-8")
)
SCENARIOS = {s["name"]: s for s in CAPTURED["judges"]}


@pytest.fixture
def vendor() -> Iterator[VendorServer]:
    with VendorServer() as server:
        yield server


def judge_pool(
    scenario: dict[str, Any], server: VendorServer, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> JudgePool:
    for name, value in scenario["env"].items():
        monkeypatch.setenv(name, value)
    base = server.url if scenario["provider"] == "anthropic" else f"{server.url}/v1beta"
    entry = {"name": "judge", "provider": scenario["provider"], **scenario["target"], "base_url": base}
    path = folder / "targets.yaml"
    path.write_text(json.dumps({"targets": [entry]}), encoding="utf-8")
    return JudgePool.from_targets_file(load_targets_file(path))


def context(scenario: dict[str, Any], pool: JudgePool, recorder: MemoryRecorder) -> GradingContext:
    t = scenario["test"]
    rubrics = [
        RubricItem(id=r["id"], outcome=r["outcome"], weight=r["weight"], required=r["required"])
        for r in t.get("rubrics", [])
    ]
    spec = LlmGraderSpec(name="quality", rubrics=rubrics)
    test = EvalTest(
        id=t["id"],
        input=[Message(role="user", content=t["question"])],
        expected_output=[{"role": "assistant", "content": t["reference_answer"]}],
        criteria=t["criteria"],
        graders=[spec],
    )
    return GradingContext(
        suite=EvalSuite(path="/evals/math.eval.yaml", name="math", tests=[test]),
        test=test,
        transcript=TranscriptInfo(messages=[Message(role="assistant", content=t["answer"])]),
        recorder=recorder,
        target="agent",
        options=GradeOptions(judge_target="judge"),
        judges=pool,
    )


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_judge_asks_what_agentv_asks_and_scores_as_agentv_scores(
    name: str, vendor: VendorServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = SCENARIOS[name]
    usage = CAPTURED["usage"]
    vendor.script(VendorReply(text=scenario["reply"], usage=usage))
    recorder = MemoryRecorder()
    with judge_pool(scenario, vendor, tmp_path, monkeypatch) as pool:
        ctx = context(scenario, pool, recorder)
        result = LlmGrader(ctx.test.graders[0]).grade(ctx)  # type: ignore[arg-type]
    (sent,) = vendor.requests
    want = scenario["request"]
    assert sent.path == want["path"]
    assert {k: sent.headers.get(k) for k in want["headers"]} == want["headers"]
    assert sent.raw.decode("utf-8") == want["body"]
    verdict = scenario["verdict"]
    assert (result.status, result.score, result.verdict) == ("ok", pytest.approx(verdict["score"]), verdict["verdict"])
    got = [
        {"text": a.text, "passed": a.passed, **({"evidence": a.evidence} if a.evidence else {})}
        for a in result.assertions
    ]
    assert got == verdict["assertions"]
    (call,) = [e for _, e in recorder.events if isinstance(e, GraderCalled)]
    assert call.usage == {"prompt_tokens": usage["input"], "completion_tokens": usage["output"], "total_tokens": 150}
    assert call.model == json.loads(want["body"]).get("model", call.model)


def test_a_reply_is_reused_only_for_the_same_provider(
    vendor: VendorServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge cache key of an Anthropic or Gemini request names its provider (and, as every judge's, its
    endpoint): a Chat Completions judge's key for the same messages, model and parameters is another, and an
    unchanged regrade reuses the reply."""
    scenario = SCENARIOS["anthropic-freeform"]
    vendor.script(VendorReply(text=scenario["reply"]))
    recorder = MemoryRecorder()
    with judge_pool(scenario, vendor, tmp_path, monkeypatch) as pool:
        ctx = context(scenario, pool, recorder)
        first = LlmGrader(ctx.test.graders[0]).grade(ctx)  # type: ignore[arg-type]
        again = LlmGrader(ctx.test.graders[0]).grade(ctx)  # type: ignore[arg-type]
    assert len(vendor.requests) == 1 and again.cache_hit and again.score == first.score
    call = next(e for _, e in recorder.events if isinstance(e, GraderCalled))
    messages = json.loads(recorder.get_blob(call.request_sha256))
    endpoint = vendor.url + vendor.requests[0].path.split("?")[0]
    assert call.cache_key == cache_key(messages, call.model, call.parameters, 1, "anthropic", endpoint)
    assert call.cache_key != cache_key(messages, call.model, call.parameters, endpoint=endpoint)


def test_a_judge_without_its_key_reuses_recorded_replies_and_sends_nothing(
    vendor: VendorServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = SCENARIOS["gemini-freeform"]
    vendor.script(VendorReply(text=scenario["reply"]))
    recorder = MemoryRecorder()
    with judge_pool(scenario, vendor, tmp_path, monkeypatch) as pool:
        ctx = context(scenario, pool, recorder)
        LlmGrader(ctx.test.graders[0]).grade(ctx)  # type: ignore[arg-type]
        monkeypatch.delenv("JUDGE_KEY")
        reused = LlmGrader(ctx.test.graders[0]).grade(ctx)  # type: ignore[arg-type]
        fresh = context({**scenario, "test": {**scenario["test"], "answer": "It is 41."}}, pool, recorder)
        unavailable = LlmGrader(fresh.test.graders[0]).grade(fresh)  # type: ignore[arg-type]
    assert len(vendor.requests) == 1
    assert reused.status == "ok" and reused.cache_hit
    assert (
        unavailable.status == "execution_error"
        and "JUDGE_KEY (the API key) is not set" in unavailable.assertions[0].text
    )
