"""Real AgentV 4.42.4 runs (tests/fixtures/agentv-real): imported as AgentV wrote them.

The run directories, judge logs and the files the agent wrote were produced by the real AgentV CLI
(regenerate.py there). Each test copies the fixture into tmp_path, so absolute paths recorded in the
rows (a ``file://`` URL into the checkout that wrote them) lie outside every folder the import may read.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import audit, cli, ok_json, one_line_error, results_by_test, verdict_signature
from judge_server import JudgeServer

from evalstore.store import EventStore

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "agentv-real"
SUITES = {"text-and-files": "text-and-files", "workspace": "workspace", "judge-fails": "judge-fails"}


def rows(suite: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (REAL / "runs" / suite / "index.jsonl").read_text("utf-8").splitlines()]


@pytest.fixture
def real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fixture copied; the import runs from an unrelated folder (not the target's cwd)."""
    copy = tmp_path / "agentv-real"
    shutil.copytree(REAL, copy)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return copy


def imported(db: str, real: Path, suite: str, *extra: str) -> str:
    eval_file = real / "project" / "evals" / f"{suite}.eval.yaml"
    out = ok_json(cli(db, "import", str(real / "runs" / suite), "--eval", str(eval_file), "--json", *extra))
    assert out["tests"] == len(rows(suite))
    return str(out["run_id"])


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_per_test_and_per_grader_scores_equal_agentvs(sqlite_url: str, real: Path, suite: str) -> None:
    run = imported(sqlite_url, real, suite)
    shown = results_by_test(sqlite_url, run)
    assert set(shown) == {r["test_id"] for r in rows(suite)}
    for row in rows(suite):
        got = shown[row["test_id"]]
        assert got["score"] == pytest.approx(row["score"]), row["test_id"]
        # AgentV's own names (contains-Paris, regex-<30 chars>, …); a repeated name is made unique.
        (test,) = audit(sqlite_url, run, row["test_id"])["tests"]
        verdicts = [(v["grader"], v["score"], v["verdict"]) for v in test["verdicts"]]
        expected = [(s["name"], s["score"], s["verdict"]) for s in row.get("scores", [])]
        assert [(v[1], v[2]) for v in verdicts] == [(e[1], e[2]) for e in expected], row["test_id"]
        seen: set[str] = set()
        for (name, _, _), (want, _, _) in zip(verdicts, expected, strict=True):
            assert name == want if want not in seen else name.startswith(want)
            seen.add(want)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_bytes_of_every_file_the_agent_wrote_are_stored(sqlite_url: str, real: Path) -> None:
    # The agent wrote under its target's `cwd: ..` (project/); the import finds that folder through the
    # targets file above the eval file, though it runs from elsewhere.
    run = imported(sqlite_url, real, "text-and-files")
    out = real / "project" / "out"
    for test_id in ("revenue-files", "odd-files"):
        (test,) = audit(sqlite_url, run, test_id)["tests"]
        artifacts = {a["path"]: a for a in test["artifacts"]}
        for path in sorted((out / test_id).iterdir()):
            if path.name == "notes.txt":
                continue  # named by a file:// URL into the checkout that wrote the fixture (below)
            a = artifacts[f"out/{test_id}/{path.name}"]
            assert (a["status"], a["sha256"], a["blob"]) == ("stored", _sha(path.read_bytes()), "ok"), a
    (test,) = audit(sqlite_url, run, "odd-files")["tests"]
    by_name = {Path(a["path"]).name: a for a in test["artifacts"]}
    assert by_name["never-written.txt"]["status"] == "missing"
    # The URL points outside every folder this import may read: not read, whether or not it exists.
    assert by_name["notes.txt"]["status"] in {"refused", "missing"} and by_name["notes.txt"]["sha256"] is None


def test_the_agents_files_are_not_read_without_the_users_targets_file(sqlite_url: str, real: Path) -> None:
    # Without the user's targets file, the target's `cwd: ..` is known from AgentV's copy in the run only:
    # data, so where to look (the files are found there), not permission to read them.
    (real / "project" / ".agentv" / "targets.yaml").unlink()
    run = imported(sqlite_url, real, "text-and-files")
    (test,) = audit(sqlite_url, run, "revenue-files")["tests"]
    out = [a for a in test["artifacts"] if a["path"].startswith("out/")]
    assert {a["status"] for a in out} == {"refused"}, out
    project = (real / "project").resolve()
    assert all(a["reason"].startswith(f"{project}/out/") and "--files-root" in a["reason"] for a in out), out

    other = f"sqlite:///{real / 'other.db'}"
    run = imported(other, real, "text-and-files", "--files-root", str(real / "project"))
    (test,) = audit(other, run, "revenue-files")["tests"]
    assert {a["status"] for a in test["artifacts"] if a["path"].startswith("out/")} == {"stored"}


def test_paths_named_inside_the_results_are_data_not_permission(sqlite_url: str, real: Path, tmp_path: Path) -> None:
    secret_dir = tmp_path / "private"
    secret_dir.mkdir()
    (secret_dir / "secret.txt").write_text("do not import me\n", encoding="utf-8")
    row = rows("judge-fails")[0]
    row.update(
        workspace_path="/",
        output=[
            {
                "role": "assistant",
                "content": [
                    {"type": "file", "media_type": "text/plain", "path": "etc/passwd"},
                    {"type": "file", "media_type": "text/plain", "path": str(secret_dir / "secret.txt")},
                ],
            }
        ],
    )
    for key in [k for k in row if k.endswith("_path") and k != "workspace_path"]:
        del row[key]
    results = tmp_path / "crafted" / "results.jsonl"
    results.parent.mkdir()
    results.write_text(json.dumps(row) + "\n", encoding="utf-8")

    run = ok_json(cli(sqlite_url, "import", str(results), "--json"))["run_id"]
    (test,) = audit(sqlite_url, run, row["test_id"])["tests"]
    by_name = {Path(a["path"]).name: a for a in test["artifacts"]}
    for name in ("passwd", "secret.txt"):
        assert by_name[name]["status"] == "refused" and by_name[name]["sha256"] is None, by_name[name]
        assert "--files-root" in by_name[name]["reason"]

    # The user's own flag is permission: the same results, another store, the secret folder allowed.
    other = f"sqlite:///{tmp_path / 'other.db'}"
    run = ok_json(cli(other, "import", str(results), "--files-root", str(secret_dir), "--json"))["run_id"]
    (test,) = audit(other, run, row["test_id"])["tests"]
    by_name = {Path(a["path"]).name: a for a in test["artifacts"]}
    assert by_name["secret.txt"]["status"] == "stored"
    assert by_name["secret.txt"]["sha256"] == _sha(b"do not import me\n")
    assert by_name["passwd"]["status"] == "refused"


def test_files_root_must_be_a_folder(sqlite_url: str, real: Path) -> None:
    result = cli(sqlite_url, "import", str(real / "runs" / "workspace"), "--files-root", str(real / "nope"))
    assert "not a directory (--files-root)" in one_line_error(result)


def _judge_module() -> Any:
    spec = importlib.util.spec_from_file_location("agentv_real_judge", REAL / "judge.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def real_judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgeServer]:
    """The judge AgentV graded with (judge.py), where the fixture's targets file points."""
    judge = _judge_module()
    server = JudgeServer().start()
    server.respond_with(lambda request: judge.answer(request.body))
    monkeypatch.setenv("JUDGE_BASE_URL", server.base_url)
    monkeypatch.setenv("JUDGE_API_KEY", "sk-fixture-not-a-secret")
    monkeypatch.setenv("JUDGE_MODEL", "judge-model")
    try:
        yield server
    finally:
        server.stop()


CUSTOM = "Every variable AgentV 4.42 knows"
# Documented in docs/usage.md ("Where evalstore differs from AgentV"): a rubric string beside objects under
# an llm-grader's `rubrics:` is dropped by AgentV 4.42 and kept by evalstore (capital); AgentV deletes its
# workspace after the run and its index rows carry no file_changes, so the regrade of ws-report sees the
# file as missing and no diff.
KNOWN_PROMPT_DEVIATIONS = {"capital", "ws-report"}


@pytest.mark.parametrize("suite", ["text-and-files", "workspace"])
def test_custom_prompts_reach_the_judge_byte_identical_to_agentvs(
    sqlite_url: str, real: Path, real_judge: JudgeServer, suite: str
) -> None:
    run = imported(sqlite_url, real, suite)
    ok_json(cli(sqlite_url, "replay", run, "--json"), 0, 1)  # 1: a regraded test below the threshold
    logged = [json.loads(line) for line in (REAL / "judge-logs" / f"{suite}.jsonl").read_text("utf-8").splitlines()]
    agentv = {m["content"] for entry in logged for m in entry["body"]["messages"] if m["role"] == "user"}
    ours = [r.user for r in real_judge.requests if CUSTOM in r.user]
    custom_tests = {r["test_id"] for r in rows(suite) for s in r["scores"] if CUSTOM in str(s.get("input"))}
    assert len(ours) == len(custom_tests) > 0
    identical = [u for u in ours if u in agentv]
    assert len(identical) == len(custom_tests - KNOWN_PROMPT_DEVIATIONS), [u for u in ours if u not in agentv]


# Besides KNOWN_PROMPT_DEVIATIONS: odd-files's answer names files AgentV read from the folder it ran in
# (absolute paths of the machine that made the fixture); an import has no such files to show.
FILES_NOT_AT_HAND = {"odd-files"}


@pytest.mark.parametrize("suite", ["text-and-files", "workspace", "judge-fails"])
def test_every_judge_request_is_the_one_agentv_sent(
    sqlite_url: str, real: Path, real_judge: JudgeServer, suite: str
) -> None:
    """Built-in prompts included (freeform, rubric checklist; system and user messages): per test and
    grader, a replay of the imported run asks the judge exactly what AgentV 4.42.4 asked (its
    ``scores[].input``, the rendered request it recorded)."""
    run = imported(sqlite_url, real, suite)
    replay = ok_json(cli(sqlite_url, "replay", run, "--no-cache", "--json"), 0, 1)["run_id"]
    agentv = {
        # The request as AgentV sent it: its record keeps a custom prompt's final newline, its judge log does not.
        (row["test_id"], score["name"]): (score["input"].get("systemPrompt"), score["input"]["userPrompt"].rstrip())
        for row in rows(suite)
        for score in row.get("scores", [])
        if isinstance(score.get("input"), dict) and "userPrompt" in score["input"]
    }
    store = EventStore.open(sqlite_url)
    try:
        ours: dict[tuple[str, str], tuple[str | None, str]] = {}
        for stored in store.read_stream(replay, types=["grader_called"]):
            call = stored.payload
            if call["call"] != "judge" or call.get("parse_attempt", 1) != 1:  # the first request of each grader
                continue
            messages = json.loads(store.get_blob(call["request_sha256"]))
            by_role = {m["role"]: m["content"] for m in messages}
            ours.setdefault((call["test_id"], call["grader"]), (by_role.get("system"), by_role["user"]))
    finally:
        store.close()
    assert set(ours) == set(agentv)
    expected_to_differ = KNOWN_PROMPT_DEVIATIONS | FILES_NOT_AT_HAND
    same = {key for key in agentv if ours[key] == agentv[key]}
    assert same == {key for key in agentv if key[0] not in expected_to_differ}, sorted(set(agentv) - same)


def _replay(db: str, run: str, *extra: str) -> str:
    return str(ok_json(cli(db, "replay", run, "--json", *extra), 0, 1)["run_id"])


@pytest.mark.parametrize("suite", ["judge-fails", "text-and-files"])
def test_an_unchanged_replay_reproduces_every_verdict_without_asking_the_judge(
    sqlite_url: str, real: Path, real_judge: JudgeServer, suite: str
) -> None:
    # judge-fails: valid JSON only from the repair request (no-json), and never (never-json).
    run = imported(sqlite_url, real, suite)
    first = _replay(sqlite_url, run)
    asked = len(real_judge.requests)
    assert asked > 0
    if suite == "judge-fails":
        repairs = [r for r in real_judge.requests if r.user.startswith("The following evaluation response")]
        assert len(repairs) == 2  # one for no-json, one for never-json
    signature = verdict_signature(sqlite_url, first)

    again = _replay(sqlite_url, first)
    assert len(real_judge.requests) == asked  # not one request
    assert verdict_signature(sqlite_url, again) == signature
    llm = [
        v
        for test_id in results_by_test(sqlite_url, again)
        for t in audit(sqlite_url, again, test_id)["tests"]
        for v in t["verdicts"]
        if v["grader_type"] == "llm-grader"
    ]
    assert llm and all(v["cache_hit"] for v in llm), [(v["grader"], v["cache_hit"]) for v in llm]

    fresh = _replay(sqlite_url, first, "--no-cache")
    assert len(real_judge.requests) == 2 * asked
    assert verdict_signature(sqlite_url, fresh) == signature


def test_a_recorded_run_replays_without_asking_the_judge(sqlite_url: str, real: Path, real_judge: JudgeServer) -> None:
    eval_file = real / "project" / "evals" / "judge-fails.eval.yaml"
    run = str(ok_json(cli(sqlite_url, "run", str(eval_file), "--json"), 0, 1)["run_id"])
    asked = len(real_judge.requests)
    assert asked == 1 + 4 + 4  # judged; no-json: 3 attempts + repair; never-json: 3 attempts + repair
    replay = _replay(sqlite_url, run)
    assert len(real_judge.requests) == asked
    assert verdict_signature(sqlite_url, replay) == verdict_signature(sqlite_url, run)
