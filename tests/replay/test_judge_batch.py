"""``replay --batch``: the judge prompts a replay sends, through the stand-in batch APIs of tests/judge_server.py.

A batched replay sends no prompt one at a time, puts in its batches the prompts a direct replay sends
directly, and gives the same verdicts; a replay killed while its batch runs is finished by ``--resume``
from that batch; an unchanged replay submits nothing; items a batch failed are sent directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from judge_server import JudgeServer, Reply, Request, freeform
from scale_runs import JUDGE_KEY_ENV, ScaleRun, build, scored_keys, verdicts

from evalstore.replay.grading.judge.batch_apis import AnthropicBatches, BatchAPIError, OpenAIBatches
from evalstore.replay.grading.judge.targets import JudgeTarget, ResolvedJudge
from evalstore.replay.regrade import ReplayOptions, judge_requests, replay_run, resume_replay
from evalstore.store import EventStore

N = 24
EVALSTORE = Path(sys.executable).parent / "evalstore"
KEY = "sk-batch-SECRET-1b2c3d4e5f60"
TIMEOUT = 120


def judge(request: Request) -> Reply:
    """A verdict that depends on the answer: reports whose total starts with 1 score 1, the rest 0.4."""
    if "= 1" in request.user:
        return freeform(1.0, [("total starts with 1", True)])
    return freeform(0.4, [("total starts with 1", False)])


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgeServer]:
    monkeypatch.setenv(JUDGE_KEY_ENV, KEY)
    monkeypatch.setenv("SCALE_ANTHROPIC_MODEL", "claude-haiku-4-5")
    monkeypatch.setenv("EVALSTORE_JUDGE_BATCH_POLL", "0.05")
    with JudgeServer(judge) as running:
        yield running


def _options(root: Path, **kwargs: object) -> ReplayOptions:
    return ReplayOptions(
        eval_path=str(root / "evals" / "scale.v1.eval.yaml"),
        targets_path=str(root / "targets.yaml"),
        judge_target="judge",
        graders=["quality"],
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("provider", ["openai", "azure", "anthropic"])
def test_a_batched_replay_sends_in_batches_what_a_direct_one_sends_and_grades_alike(
    server: JudgeServer, tmp_path: Path, provider: str
) -> None:
    direct_store = EventStore.open(f"sqlite:///{tmp_path / 'direct.db'}")
    run = build(tmp_path / "direct", direct_store, N, judge_url=server.base_url, provider=provider)
    direct = replay_run(direct_store, run.run_id, _options(run.root))
    direct_prompts = sorted(json.dumps(r.messages) for r in server.requests)
    direct_bodies = sorted(r.raw.decode() for r in server.requests)
    assert len(direct_prompts) == N and not server.batches

    server.requests.clear()
    store = EventStore.open(f"sqlite:///{tmp_path / 'batched.db'}")
    batched_run = build(tmp_path / "batched", store, N, judge_url=server.base_url, provider=provider)
    batched = replay_run(store, batched_run.run_id, _options(batched_run.root, batch=True))

    assert server.requests == []  # not one prompt sent on its own
    assert len(server.batches) == 1
    assert sorted(json.dumps(r.messages) for r in server.batch_items()) == direct_prompts
    if provider == "azure":
        assert server.batch_items()[0].path == "/chat/completions"
        assert server.batch_items()[0].body["model"] == "judge-deployment"
    if provider == "anthropic":  # the direct requests were AgentV's, streamed
        assert all(json.loads(b)["stream"] is True for b in direct_bodies)
    assert verdicts(store, batched.run_id) == verdicts(direct_store, direct.run_id)
    assert judge_requests(store, batched.run_id) == {"by_batch": N, "direct": 0, "reused": 0}
    assert batched.batch is not None and batched.batch.answered == N and not batched.batch.unanswered
    [submitted] = list(store.read_stream(batched.run_id, types=["judge_batch_submitted"]))
    assert submitted.event.batch_id == server.batches[0].id  # type: ignore[attr-defined]
    assert submitted.event.provider == provider and submitted.event.requests == N  # type: ignore[attr-defined]
    # Replies enter the judge cache as direct calls do: the next replay reuses them, submitting nothing.
    again = replay_run(store, batched_run.run_id, _options(batched_run.root, batch=True))
    assert len(server.batches) == 1 and server.requests == []
    assert judge_requests(store, again.run_id) == {"by_batch": 0, "direct": 0, "reused": N}
    assert verdicts(store, again.run_id) == verdicts(store, batched.run_id)
    assert store.verify().ok
    # The key went in headers only: nothing stored holds it.
    assert KEY.encode() not in (tmp_path / "batched.db").read_bytes()


def test_items_a_batch_failed_or_let_expire_are_sent_directly(server: JudgeServer, tmp_path: Path) -> None:
    store = EventStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    run = build(tmp_path / "suite", store, N, judge_url=server.base_url)
    server.fail_item = lambda r: "server_error" if "Report 3." in r.user else None
    server.expire_items = lambda r: "Report 5." in r.user
    outcome = replay_run(store, run.run_id, _options(run.root, batch=True))
    assert sorted(r.user.split("Answer:")[1].split(".")[0].strip() for r in server.requests) == [
        "Report 3",
        "Report 5",
    ]
    assert outcome.batch is not None and len(outcome.batch.unanswered) == 2
    assert judge_requests(store, outcome.run_id) == {"by_batch": N - 2, "direct": 2, "reused": 0}
    assert len(verdicts(store, outcome.run_id)) == N * 4 and outcome.complete


def test_a_replay_killed_while_its_batch_runs_is_finished_by_resume_without_a_second_batch(
    server: JudgeServer, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore.open(url)
    run = build(tmp_path / "suite", store, N, judge_url=server.base_url)
    server.hold_batches.set()
    argv = [str(EVALSTORE), "--db", url, "replay", run.run_id, "--eval", str(run.v1), "--batch"]
    argv += ["--targets", str(run.root / "targets.yaml"), "--judge-target", "judge", "--graders", "quality"]
    driver = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and server.batch_polls < 2:
            time.sleep(0.05)
        assert driver.poll() is None, driver.stderr.read() if driver.stderr else ""
    finally:
        driver.kill()
        driver.wait(timeout=30)
    [replay] = [r for r in store.query("runs") if r["kind"] == "replay"]
    assert [s.type for s in store.read_stream(replay["run_id"], types=["judge_batch_submitted"])] == [
        "judge_batch_submitted"
    ]
    assert store.query("results", run_id=replay["run_id"]) == []
    server.hold_batches.clear()

    resumed = subprocess.run(
        [str(EVALSTORE), "--db", url, "replay", "--resume", replay["run_id"], "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=dict(os.environ),
    )
    assert resumed.returncode in (0, 1), resumed.stderr
    assert len(server.batches) == 1 and server.requests == []
    assert json.loads(resumed.stdout)["judge_requests"] == {"by_batch": N, "direct": 0, "reused": 0}
    assert len(set(scored_keys(store, replay["run_id"]))) == N
    scores = {k[0]: v[0] for k, v in verdicts(store, replay["run_id"]).items() if k[1] == "quality"}
    assert sorted(set(scores.values())) == [0.4, 1.0]
    assert store.verify().ok


def test_the_anthropic_message_batches_client_against_the_stand_in(server: JudgeServer, tmp_path: Path) -> None:
    """The client sends each request as the judge's direct request (AgentV's, through pi-ai) without
    ``stream``, to the judge's base URL with its key, and reads each reply's text and usage."""
    from evalstore.replay.grading.judge.client import pi_request
    from evalstore.replay.targetsfile.loader import load_targets_file

    path = tmp_path / "targets.yaml"
    root = server.base_url.removesuffix("/v1")
    path.write_text(
        "targets:\n  - name: claude\n    provider: anthropic\n    base_url: "
        + root
        + "\n    model: ${{ SCALE_ANTHROPIC_MODEL }}\n    temperature: 0\n    api_key: ${{ "
        + JUDGE_KEY_ENV
        + " }}\n",
        encoding="utf-8",
    )
    target = JudgeTarget.from_entry(load_targets_file(path).targets["claude"])
    resolved: ResolvedJudge = target.resolve({JUDGE_KEY_ENV: KEY, "SCALE_ANTHROPIC_MODEL": "claude-haiku-4-5"})
    with httpx.Client() as http:
        api = AnthropicBatches(target, resolved, {JUDGE_KEY_ENV: KEY}, http)
        system = {"role": "system", "content": "You are a grader."}
        done = api.submit(
            {
                "k1": [system, {"role": "user", "content": "Answer: Total: 10 + 5 = 15"}],
                "k2": [system, {"role": "user", "content": "Answer: Total: 20 + 2 = 22"}],
            },
            "intent-1",
        )
        assert api.status(done.batch_id).state == "completed"
        results = api.results(done.batch_id)
    [batch] = server.batches
    assert batch.api == "anthropic"
    asked = [system, {"role": "user", "content": "Answer: Total: 10 + 5 = 15"}]
    _, _, direct = pi_request(resolved, asked)
    sent = api.params(asked)
    assert sent == {k: v for k, v in direct.items() if k != "stream"}
    assert sent["max_tokens"] == 64000 // 3 and sent["model"] == "claude-haiku-4-5" and sent["temperature"] == 0
    assert batch.items[0][1].body["max_tokens"] == 64000 // 3
    assert batch.items[0][1].messages[0] == system  # the stand-in shows ``system`` as a leading message
    first, second = results["k1"], results["k2"]
    assert not isinstance(first, str) and not isinstance(second, str)
    assert json.loads(first.content or "")["score"] == 1.0 and json.loads(second.content or "")["score"] == 0.4
    assert first.usage == {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}


def _driver(url: str, run: ScaleRun, cwd: Path) -> subprocess.Popen[str]:
    argv = [str(EVALSTORE), "--db", url, "replay", run.run_id, "--eval", str(run.v1), "--batch"]
    argv += ["--targets", str(run.root / "targets.yaml"), "--judge-target", "judge", "--graders", "quality"]
    return subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _resume(url: str, run_id: str, cwd: Path) -> dict:
    resumed = subprocess.run(
        [str(EVALSTORE), "--db", url, "replay", "--resume", run_id, "--json"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert resumed.returncode in (0, 1), resumed.stderr
    return json.loads(resumed.stdout)


def test_a_replay_killed_after_submitting_a_batch_before_recording_it_finds_it_on_resume(
    server: JudgeServer, tmp_path: Path
) -> None:
    """kill -9 while the provider holds the new batch and the driver has not heard its id: the intent
    recorded before submitting finds the batch by its metadata; nothing is submitted again."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore.open(url)
    run = build(tmp_path / "suite", store, N, judge_url=server.base_url)
    server.hold_creates.set()
    driver = _driver(url, run, tmp_path)
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and not server.batches:
            time.sleep(0.02)
        assert driver.poll() is None and len(server.batches) == 1, driver.stderr.read() if driver.stderr else ""
    finally:
        driver.kill()  # SIGKILL: the answer to the batch's creation never reaches it
        driver.wait(timeout=30)
    server.hold_creates.clear()
    [replay] = [r for r in store.query("runs") if r["kind"] == "replay"]
    kinds = ["judge_batch_intended", "judge_batch_submitted"]
    [intent] = [s.event for s in store.read_stream(replay["run_id"], types=kinds)]
    assert intent.type == "judge_batch_intended" and intent.requests == N  # type: ignore[attr-defined]
    assert server.batches[0].metadata == {"evalstore_intent": intent.intent_id}  # type: ignore[attr-defined]

    summary = _resume(url, replay["run_id"], tmp_path)
    assert len(server.batches) == 1 and server.requests == []
    assert summary["judge_requests"] == {"by_batch": N, "direct": 0, "reused": 0}
    events = [s.event for s in store.read_stream(replay["run_id"], types=kinds)]
    assert [e.type for e in events] == kinds
    assert events[1].batch_id == server.batches[0].id  # type: ignore[attr-defined]
    assert events[1].intent_id == intent.intent_id  # type: ignore[attr-defined]
    assert len(set(scored_keys(store, replay["run_id"]))) == N
    assert store.verify().ok


def test_an_intent_whose_batch_was_never_created_is_submitted_on_resume(server: JudgeServer, tmp_path: Path) -> None:
    store = EventStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    run = build(tmp_path / "suite", store, N, judge_url=server.base_url)
    server.fail_creates = 1
    with pytest.raises(BatchAPIError, match="creating the batch: HTTP 500"):
        replay_run(store, run.run_id, _options(run.root, batch=True))
    [replay] = [r for r in store.query("runs") if r["kind"] == "replay"]
    outcome = resume_replay(store, replay["run_id"])
    assert len(server.batches) == 1 and server.requests == []
    kinds = ["judge_batch_intended", "judge_batch_submitted"]
    events = [s.event for s in store.read_stream(replay["run_id"], types=kinds)]
    assert [e.type for e in events] == ["judge_batch_intended", "judge_batch_intended", "judge_batch_submitted"]
    assert events[2].intent_id == events[1].intent_id != events[0].intent_id  # type: ignore[attr-defined]
    assert judge_requests(store, outcome.run_id) == {"by_batch": N, "direct": 0, "reused": 0}


@pytest.mark.parametrize("limit", ["requests", "bytes"])
def test_prompts_beyond_a_providers_maxima_go_in_several_batches_each_recorded(
    server: JudgeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    store = EventStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    run = build(tmp_path / "suite", store, N, judge_url=server.base_url)
    # The stand-in refuses a batch above its maxima, as the providers do: one batch of all N is refused.
    if limit == "requests":
        server.max_batch_requests = 10
    else:
        server.max_batch_bytes = 6_000  # each request's line is 600-700 bytes: some 9 a batch
    with pytest.raises(BatchAPIError, match="HTTP 400"):
        replay_run(store, run.run_id, _options(run.root, batch=True))
    assert server.batches == []

    monkeypatch.setattr(OpenAIBatches, "max_requests", server.max_batch_requests or OpenAIBatches.max_requests)
    monkeypatch.setattr(OpenAIBatches, "max_bytes", server.max_batch_bytes or OpenAIBatches.max_bytes)
    outcome = replay_run(store, run.run_id, _options(run.root, batch=True))
    assert server.requests == []
    if limit == "requests":
        assert [len(b.items) for b in server.batches] == [10, 10, 4]
    else:
        assert len(server.batches) > 2 and all(b.size <= 6_000 for b in server.batches)
        longest = max(len(json.dumps(r.body)) + 150 for r in server.batch_items())  # a line: body and envelope
        assert all(b.size + longest > 6_000 for b in server.batches[:-1])  # each full but for less than a request
    submitted = [s.event for s in store.read_stream(outcome.run_id, types=["judge_batch_submitted"])]
    intents = [s.event for s in store.read_stream(outcome.run_id, types=["judge_batch_intended"])]
    assert [e.batch_id for e in submitted] == [b.id for b in server.batches]  # type: ignore[attr-defined]
    assert [e.intent_id for e in submitted] == [e.intent_id for e in intents]  # type: ignore[attr-defined]
    assert [e.requests for e in submitted] == [len(b.items) for b in server.batches]  # type: ignore[attr-defined]
    assert sorted(k for b in server.batches for k, _ in b.items) == sorted(
        {k for b in server.batches for k, _ in b.items}
    )  # no prompt in two batches
    assert judge_requests(store, outcome.run_id) == {"by_batch": N, "direct": 0, "reused": 0}
    scores = {k[0]: v[0] for k, v in verdicts(store, outcome.run_id).items() if k[1] == "quality"}
    assert len(scores) == N and sorted(set(scores.values())) == [0.4, 1.0]


def test_a_prompt_larger_than_a_whole_batch_is_sent_directly(
    server: JudgeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = EventStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    run = build(tmp_path / "suite", store, N, judge_url=server.base_url)
    # Report 0 is the one answer with no figures among the first seven: the shortest request. Every other
    # is larger than this limit.
    sizes: dict[str, int] = {}
    size = OpenAIBatches.size

    def measured(self: OpenAIBatches, key: str, messages: list[dict]) -> int:
        sizes[key] = size(self, key, messages)
        return sizes[key]

    monkeypatch.setattr(OpenAIBatches, "size", measured)
    monkeypatch.setattr(OpenAIBatches, "max_bytes", 10**9)
    replay_run(store, run.run_id, _options(run.root, batch=True))
    limit = sorted(sizes.values())[N // 2]
    monkeypatch.setattr(OpenAIBatches, "max_bytes", limit)
    store = EventStore.open(f"sqlite:///{tmp_path / 'fresh.db'}")
    run = build(tmp_path / "fresh", store, N, judge_url=server.base_url)
    server.batches.clear()
    outcome = replay_run(store, run.run_id, _options(run.root, batch=True))
    larger = sum(1 for s in sizes.values() if s > limit)
    assert 0 < larger < N
    assert judge_requests(store, outcome.run_id) == {"by_batch": N - larger, "direct": larger, "reused": 0}
    assert outcome.batch is not None and len(outcome.batch.unanswered) == larger
    assert len(server.requests) == larger


def test_the_anthropic_client_finds_a_batch_by_its_size_and_time(server: JudgeServer) -> None:
    """Message batches keep no metadata: a batch of an intent is one of its size created since."""
    target = JudgeTarget("claude", "anthropic", server.base_url, "claude-judge", api_key_env=JUDGE_KEY_ENV)
    resolved = ResolvedJudge("claude", server.base_url, "claude-judge", {}, 30.0, {})
    server.hold_batches.set()
    with httpx.Client() as http:
        api = AnthropicBatches(target, resolved, {JUDGE_KEY_ENV: KEY}, http)
        since = time.time()
        ask = [{"role": "user", "content": "Answer: Total: 1 = 1"}]
        two = api.submit({"a1": ask, "a2": ask}, "i-two")
        three = api.submit({"b1": ask, "b2": ask, "b3": ask}, "i-three")
        assert api.find("i-two", 2, since) == [two.batch_id]
        assert api.find("i-three", 3, since) == [three.batch_id]
        assert api.find("i-later", 2, since + 2 * 3600) == []  # created before the intent (beyond clock skew)


def _cli(url: str, run: ScaleRun, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    argv = [str(EVALSTORE), "--db", url, "replay", run.run_id, "--eval", str(run.v1), "--batch"]
    argv += ["--targets", str(run.root / "targets.yaml"), "--judge-target", "judge", "--graders", "quality"]
    return subprocess.run([*argv, *extra], capture_output=True, text=True, timeout=TIMEOUT, env=env or dict(os.environ))


def test_a_batch_refused_when_created_says_how_to_finish_the_replay_and_exits_1(
    server: JudgeServer, tmp_path: Path
) -> None:
    """HTTP 429 on creation: the replay has begun (its intent is recorded), so the error names the resume that
    finishes it, and exits 1 (the provider failed, not the input: exit 2 would say the command was wrong)."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    run = build(tmp_path / "suite", EventStore.open(url), N, judge_url=server.base_url)
    server.fail_creates, server.create_status = 1, 429
    refused = _cli(url, run)
    store = EventStore.open(url)
    [replay] = [r for r in store.query("runs") if r["kind"] == "replay"]
    assert refused.returncode == 1, refused.stderr
    [error] = [line for line in refused.stderr.splitlines() if line.startswith("Error:")]
    assert "creating the batch: HTTP 429" in error
    assert error.endswith(f"(finish it with: evalstore replay --resume {replay['run_id']})"), error
    assert replay["status"] == "started"
    finished = subprocess.run(
        [str(EVALSTORE), "--db", url, "replay", "--resume", replay["run_id"], "--json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert finished.returncode in (0, 1), finished.stderr
    assert json.loads(finished.stdout)["judge_requests"] == {"by_batch": N, "direct": 0, "reused": 0}


def test_a_batched_replay_whose_judge_key_is_unset_is_refused_before_it_writes_anything(
    server: JudgeServer, tmp_path: Path
) -> None:
    """Prompts the cache does not hold, and no key to submit them with: refused as `run` refuses such a judge
    (exit 2, naming the variable), not graded into a replay of execution errors whose cause only audit shows."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    run = build(tmp_path / "suite", EventStore.open(url), N, judge_url=server.base_url)
    env = {k: v for k, v in os.environ.items() if k != JUDGE_KEY_ENV}
    refused = _cli(url, run, env=env)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("Error: --batch: ") and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert f"{N} judge prompts the judge cache does not hold cannot be sent" in refused.stderr
    assert f"environment variable {JUDGE_KEY_ENV} (the API key) is not set" in refused.stderr
    assert [r for r in EventStore.open(url).query("runs") if r["kind"] == "replay"] == []
    assert server.batches == [] and server.requests == []
    # Every prompt recorded: the key is not needed, and the batched replay reuses them without it.
    done = replay_run(EventStore.open(url), run.run_id, _options(run.root))
    reused = _cli(url, run, "--json", env=env)
    assert reused.returncode in (0, 1), reused.stderr
    assert json.loads(reused.stdout)["judge_requests"] == {"by_batch": 0, "direct": 0, "reused": N}
    assert done.complete


def test_a_failed_batch_says_how_many_prompts_it_held_and_they_are_sent_directly(
    server: JudgeServer, tmp_path: Path
) -> None:
    store = EventStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    run = build(tmp_path / "suite", store, N, judge_url=server.base_url)
    server.fail_batches = "Enqueued token limit reached"
    said: list[str] = []
    outcome = replay_run(store, run.run_id, _options(run.root, batch=True), note=said.append)
    [batch] = server.batches
    assert f"judge batch {batch.id} failed: 0 of {N} prompts answered (Enqueued token limit reached)" in said
    assert judge_requests(store, outcome.run_id) == {"by_batch": 0, "direct": N, "reused": 0}
