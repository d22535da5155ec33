"""A fourth new user's suites, run by the real AgentV 4.42.4, and by evalstore (tests/fixtures/agentv-newuser4).

Suites of AgentV features the earlier checks did not use: an image and files inside a test's input
messages (`vision`), grader prompts every way AgentV reads them (an executable prompt with `config`, an
inline prompt without template variables, deprecated `type: rubric` and test-level `rubrics`, a suite
`input` prefix and suite assertions, `skip_defaults`, a grader's own judge `target`: `templates`), a test
that continues an earlier exchange with a `conversation_id` and a custom prompt of the conversation
(`history`), an FAQ run by two agent models (`faq-a`, `faq-b`, compared by `agentv compare`) and
regraded from the first run's transcript with a stricter eval (`agentv eval --transcript`: `faq-strict`).

An import, an unchanged replay and `evalstore run` grade every test and grader as AgentV did, and `run`
sends the agent and the judge only what AgentV sent; a replay of faq-a with the stricter eval grades as
AgentV's transcript regrade; `compare` gives `agentv compare`'s deltas, wins, losses and ties; and an export of a run evalstore
made, and of its replay, writes the row labels AgentV writes (`category`, `conversation_id`, `experiment`),
which it once left out, and each grader's request and usage as AgentV's row records them. Conversations
(`chat`) whose turn failed are exported with AgentV's scores, status and labels (none), and replayed with a
judge; the tests after one, under `fail_on_error`, and those depending on it run as AgentV runs them (`chat-deps`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentv_examples import messages_sent
from e2e_helpers import agentv_project, cli, fixture_module, ok_json, one_line_error, results_by_test
from fixture_paths import FIXTURES_DIR
from judge_server import JudgeServer

NEWUSER4 = FIXTURES_DIR / "agentv-newuser4"
PROJECT = NEWUSER4 / "project"
RUNS = {  # AgentV's run → its suite's folder and eval file
    "vision": ("vision", "vision"),
    "templates": ("templates", "templates"),
    "history": ("history", "history"),
    "faq-a": ("faq", "faq"),
    "faq-b": ("faq", "faq"),
    "faq-strict": ("faq", "faq-strict"),
    "outage": ("outage", "outage"),
}
CHAT = PROJECT / "chat" / "runs" / "chat"
"""AgentV's run of `chat`: conversations (`mode: conversation`) where a turn's agent call fails (outage-chat's
status-page turn) and a turn's judge never answers JSON (apology-chat's first turn)."""
CHAT_DEPS = PROJECT / "chat" / "runs" / "chat-deps"
"""AgentV's run of `chat-deps`: outage-chat again, under `fail_on_error`, then a test after it (root-cause) and
one that depends on it (refund-window): both ran."""
REPAIR = "The following evaluation response has useful grading content but invalid JSON structure."
"""The judge's repair request names the reply's problem in evalstore's words (docs/usage.md, where evalstore
differs from AgentV): the one request of these suites that is not AgentV's byte for byte."""
answers = fixture_module("agentv_newuser4_answers", NEWUSER4 / "answers.py")


def run_dir(run: str) -> Path:
    return PROJECT / RUNS[run][0] / "runs" / run


def agentv_rows(run: str) -> dict[str, dict[str, Any]]:
    lines = (run_dir(run) / "index.jsonl").read_text("utf-8").splitlines()
    return {r["test_id"]: r for r in map(json.loads, filter(str.strip, lines))}


def agentv_requests() -> set[str]:
    """The messages of every request AgentV sent the server (agent and judge, all runs, chat's included)."""
    logs = ("agentv-requests.jsonl", "chat-requests.jsonl", "chat-deps-requests.jsonl")
    lines = [line for log in logs for line in (NEWUSER4 / "logs" / log).read_text("utf-8").splitlines()]
    return set(messages_sent([json.loads(line)["body"] for line in lines]))


def not_asked_by_agentv(server: JudgeServer) -> set[str]:
    """What evalstore sent the server that AgentV never did, the repair request left aside."""
    return {m for m in messages_sent([r.body for r in server.requests]) if REPAIR not in m} - agentv_requests()


def as_agentv(run: str, rescored: bool = True) -> dict[str, tuple[Any, ...]]:
    """Each test's score (as its row has it, or ``rescored`` by evalstore's rule: ``_score``), pass (AgentV's
    `execution_status`), and every grader's score and verdict."""
    return {
        t: (
            pytest.approx(_score(r) if rescored else r["score"]),
            r["execution_status"] == "ok",
            {s["name"]: pytest.approx(s["score"]) for s in r.get("scores", [])},
            {s["name"]: s["verdict"] for s in r.get("scores", [])},
        )
        for t, r in agentv_rows(run).items()
    }


def _score(row: dict[str, Any]) -> float:
    """AgentV's score of the row; where a grader could not grade (verdict `skip`), the other graders' mean
    (equal weights here): evalstore leaves the grader out where AgentV scores the test 0 (docs/usage.md,
    where evalstore differs from AgentV)."""
    kept = [s["score"] for s in row.get("scores", []) if s["verdict"] != "skip"]
    return sum(kept) / len(kept) if len(kept) < len(row.get("scores", [])) else row["score"]


def graded(db: str, run: str) -> dict[str, tuple[Any, ...]]:
    return {t: (r["score"], r["passed"], r["graders"], r["verdicts"]) for t, r in results_by_test(db, run).items()}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, JudgeServer]]:
    """The project copied out of the checkout (a repository root, as AgentV's was: the targets file at its
    root is found from every suite), and the server AgentV ran against, in AgentV's environment."""
    environment = {
        "OPENAI_ENDPOINT": "{url}",
        "OPENAI_API_KEY": "sk-local",
        "OPENAI_MODEL": "agent-model",
        "FAST_MODEL": "fast-model",
        "JUDGE_MODEL": "judge-model",
        "JUDGE_B_MODEL": "judge-b-model",
    }
    with agentv_project(PROJECT, tmp_path / "project", answers, environment, monkeypatch) as served:
        yield served


def exported_json(db: str, run: str) -> dict[str, dict[str, Any]]:
    """``export --format json``'s results by test id (a version 3 document: version 1 had no experiment)."""
    doc = json.loads(cli(db, "export", run, "--format", "json").stdout)
    assert (doc["format"], doc["version"]) == ("evalstore-export", 3)
    return {r["test_id"]: r for r in doc["results"]}


def imported(db: str, run: str) -> str:
    return ok_json(cli(db, "import", str(run_dir(run)), "--json"))["run_id"]


@pytest.mark.parametrize("run", list(RUNS))
def test_an_import_and_an_unchanged_replay_grade_as_agentv_did(
    store_url: str, run: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, server = project
    monkeypatch.chdir(folder / RUNS[run][0])
    run_id = imported(store_url, run)
    assert graded(store_url, run_id) == as_agentv(run, rescored=False)
    failing = any(r["execution_status"] != "ok" for r in agentv_rows(run).values())
    replayed = ok_json(cli(store_url, "replay", run_id, "--json"), 1 if failing else 0)
    assert graded(store_url, replayed["run_id"]) == as_agentv(run)
    # AgentV's rows keep no judge reply: the replay asks the judge again, what AgentV asked.
    assert not_asked_by_agentv(server) == set()


@pytest.mark.parametrize("suite", ["vision", "templates", "history", "faq", "outage"])
def test_run_asks_what_agentv_asked_and_grades_as_it_did(
    sqlite_url: str, suite: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, server = project
    monkeypatch.chdir(folder / suite)
    run = "faq-a" if suite == "faq" else suite
    failing = any(r["execution_status"] != "ok" for r in agentv_rows(run).values())
    done = ok_json(cli(sqlite_url, "run", f"evals/{suite}.eval.yaml", "--workers", "1", "--json"), int(failing))
    assert graded(sqlite_url, done["run_id"]) == as_agentv(run)
    assert server.requests and not_asked_by_agentv(server) == set()
    # The question the agent's endpoint refuses is asked as often as AgentV asked it: three times (its
    # --max-retries default of 2; evalstore once asked once).
    refused = "Where is your status page?"
    agentv_bodies = [json.loads(line)["body"] for line in (NEWUSER4 / "logs" / "agentv-requests.jsonl").open()]
    asked = [sum(refused in m for m in messages_sent(b)) for b in ([r.body for r in server.requests], agentv_bodies)]
    assert asked == ([3, 3] if suite == "outage" else [0, 3])


@pytest.mark.parametrize("where", ["history", "."])
def test_an_export_of_a_run_writes_agentv_row_labels(
    sqlite_url: str, where: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentV's row names the test's `conversation_id` and the eval's `category` (its folders relative to
    where `agentv eval` ran, `evals` left out: `Uncategorized` from the suite's folder, `history` from the
    project's); an export of evalstore's run of the same suite, and of a replay of that run, once had neither."""
    folder, _ = project
    monkeypatch.chdir(folder / where)
    eval_file = Path("history" if where == "." else ".") / "evals" / "history.eval.yaml"
    run = ok_json(cli(sqlite_url, "run", str(eval_file), "--json"))["run_id"]
    replay = ok_json(cli(sqlite_url, "replay", run, "--json"))["run_id"]
    (agentv,) = agentv_rows("history").values()
    category = "history" if where == "." else agentv["category"]
    for exported in (run, replay):
        (row,) = map(json.loads, cli(sqlite_url, "export", exported).stdout.splitlines())
        assert (row["conversation_id"], row["category"]) == (agentv["conversation_id"], category)


def test_a_replay_with_a_stricter_eval_grades_as_agentvs_transcript_regrade(
    store_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """faq-strict is AgentV grading faq-a's transcripts (`--transcript`) with a stricter eval: evalstore's
    regrade of faq-a with that eval gives the same scores (AgentV names the target `transcript`)."""
    folder, _ = project
    monkeypatch.chdir(folder / "faq")
    replay = ok_json(
        cli(store_url, "replay", imported(store_url, "faq-a"), "--eval", "evals/faq-strict.eval.yaml", "--json"), 1
    )
    assert graded(store_url, replay["run_id"]) == as_agentv("faq-strict")


def test_an_agentv_transcript_file_is_not_taken_for_results(
    sqlite_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file `agentv eval --transcript` graded (faq-a's transcripts, one entry per test) is no results file:
    `import` says what it is and how to regrade it, where it once said its first line had no score."""
    folder, _ = project
    monkeypatch.chdir(folder / "faq")
    line = one_line_error(cli(sqlite_url, "import", "runs/faq-a-transcript.jsonl"))
    assert "AgentV transcript rows (agentv.transcript.v1), not results" in line and "--eval" in line, line


def test_compare_gives_agentv_compare_deltas(
    store_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _ = project
    monkeypatch.chdir(folder / "faq")
    agentv = json.loads((NEWUSER4 / "logs" / "compare.json").read_text("utf-8"))
    report = ok_json(cli(store_url, "compare", imported(store_url, "faq-a"), imported(store_url, "faq-b"), "--json"))
    assert {t["test_id"]: t["delta"] for t in report["tests"]} == {
        m["test_id"]: pytest.approx(m["delta"]) for m in agentv["matched"]
    }
    assert report["overall"]["score"]["mean_diff"] == pytest.approx(agentv["summary"]["mean_delta"])


def test_compare_counts_wins_losses_and_ties_as_agentv_compare(
    store_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agentv compare`'s summary (its `--json` and its table's `Summary:` line): each test a win, a loss or a
    tie at its 0.1 threshold, the mean delta rounded as AgentV rounds it, the normalized gain and the status,
    in `compare --json` (`outcomes`, and each test's `outcome`) and in the table (once not given at all)."""
    folder, _ = project
    monkeypatch.chdir(folder / "faq")
    agentv = json.loads((NEWUSER4 / "logs" / "compare.json").read_text("utf-8"))
    table = (NEWUSER4 / "logs" / "compare.out").read_text("utf-8")
    counts, mean, status = re.search(r"Summary: (.*) \| Mean Δ: (\S+) \| Status: (\w+)", table).groups()  # type: ignore[union-attr]
    a, b = imported(store_url, "faq-a"), imported(store_url, "faq-b")
    report = ok_json(cli(store_url, "compare", a, b, "--json"))
    summary = {k: agentv["summary"][k] for k in ("wins", "losses", "ties", "mean_delta", "mean_normalized_gain")}
    assert {k: report["outcomes"][k] for k in summary} == summary
    assert (report["outcomes"]["threshold"], report["outcomes"]["status"]) == (0.1, status)
    assert {t["test_id"]: (t["outcome"], t["normalized_gain"]) for t in report["tests"]} == {
        m["test_id"]: (m["outcome"], m["normalized_gain"]) for m in agentv["matched"]
    }
    printed = cli(store_url, "compare", a, b).stdout
    assert f"{counts} | mean delta {float(mean):+.3f} | status: {status}" in printed, printed
    # A loss of 0.5 is a tie at a threshold above it, as `agentv compare --threshold 0.6` counts it.
    wider = ok_json(cli(store_url, "compare", a, b, "--threshold", "0.6", "--json"))["outcomes"]
    assert (wider["wins"], wider["losses"], wider["ties"]) == (0, 0, 4)


def test_an_export_of_a_run_writes_agentv_failure_labels_and_grader_requests(
    sqlite_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """outage: the agent's endpoint refuses one question (AgentV: `failure_stage: agent`,
    `failure_reason_code: provider_error`), and the judge answers the other in prose until the repair
    request. An export of evalstore's run, and of its replay, writes AgentV's labels (once left out), and
    the grader's `scores[].input` and `token_usage` as AgentV's row has them: the rendered prompt (not the
    repair request, which it once wrote) and the usage of the last prose reply and the repaired one together
    (once the repaired one's alone). The agent's refusal is worded as pi-ai's, once as a judge's."""
    folder, _ = project
    monkeypatch.chdir(folder / "outage")
    run = ok_json(cli(sqlite_url, "run", "evals/outage.eval.yaml", "--json"), 1)["run_id"]
    replay = ok_json(cli(sqlite_url, "replay", run, "--json"), 1)["run_id"]
    agentv = agentv_rows("outage")
    labels = ("execution_status", "failure_stage", "failure_reason_code")
    for exported in (run, replay):
        rows = {r["test_id"]: r for r in map(json.loads, cli(sqlite_url, "export", exported).stdout.splitlines())}
        assert {t: [r.get(k) for k in labels] for t, r in rows.items()} == {
            t: [r.get(k) for k in labels] for t, r in agentv.items()
        }
    rows = {r["test_id"]: r for r in map(json.loads, cli(sqlite_url, "export", run).stdout.splitlines())}
    # The agent's refusal in AgentV's words (pi-ai's of the body's error.message), not as a judge's ("HTTP 400
    # from judge 'default'") nor its JSON body, after the target evalstore's errors name.
    assert rows["status-page"]["error"] == f"target 'default': {agentv['status-page']['error']}"
    judged, judged_by_agentv = rows["root-cause"]["scores"][1], agentv["root-cause"]["scores"][1]
    assert (judged["input"], judged["token_usage"]) == (judged_by_agentv["input"], judged_by_agentv["token_usage"])


def _rows(db: str, run: str) -> dict[str, dict[str, Any]]:
    return {r["test_id"]: r for r in map(json.loads, cli(db, "export", run).stdout.splitlines())}


def _agentv_rows(run: Path) -> dict[str, dict[str, Any]]:
    return {r["test_id"]: r for r in map(json.loads, (run / "index.jsonl").read_text("utf-8").splitlines())}


RESULT_KEYS = ("execution_status", "error", "failure_stage", "failure_reason_code")
"""What a conversation's row says of how it ended: AgentV's status is its score's, with no error or labels."""


def test_a_conversation_whose_turn_failed_has_agentvs_status_and_labels_none(
    sqlite_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentV's conversation runner scores a turn whose agent call failed 0 (`Provider error: ...`), leaves a
    turn's grader that could not grade out of the turn's score, and sets the status from the score, with no
    error, `failure_stage` or `failure_reason_code` (orchestrator.ts `runConversationMode`,
    `classifyQualityStatus`). evalstore's run and its replay export AgentV's scores, turns, status
    (outage-chat `quality_failure`, apology-chat `ok`: both once `execution_error`, with an error naming the
    turn) and labels (none). An import keeps AgentV's rows as they are."""
    folder, server = project
    monkeypatch.chdir(folder / "chat")
    agentv = _agentv_rows(CHAT)
    run = ok_json(cli(sqlite_url, "run", "evals/chat.eval.yaml", "--workers", "1", "--json"), 1)["run_id"]
    assert server.requests and not_asked_by_agentv(server) == set()
    replay = ok_json(cli(sqlite_url, "replay", run, "--json"), 1)["run_id"]
    for exported in (run, replay):
        rows = _rows(sqlite_url, exported)
        assert {t: [r.get(k) for k in RESULT_KEYS] for t, r in rows.items()} == {
            t: [r.get(k) for k in RESULT_KEYS] for t, r in agentv.items()
        }
        assert {t: r["execution_status"] for t, r in rows.items()} == {
            "outage-chat": "quality_failure",
            "apology-chat": "ok",
        }
        assert {
            t: (r["score"], [(s["name"], s["score"], s["verdict"]) for s in r["scores"]]) for t, r in rows.items()
        } == {t: (r["score"], [(s["name"], s["score"], s["verdict"]) for s in r["scores"]]) for t, r in agentv.items()}
        assert rows["outage-chat"]["scores"][1]["assertions"] == agentv["outage-chat"]["scores"][1]["assertions"]
    imported_run = ok_json(cli(sqlite_url, "import", str(CHAT), "--json"))["run_id"]
    rows = _rows(sqlite_url, imported_run)
    keys = ("score", *RESULT_KEYS)
    assert {t: [r.get(k) for k in keys] for t, r in rows.items()} == {
        t: [r.get(k) for k in keys] for t, r in agentv.items()
    }


def test_tests_after_a_conversation_whose_turn_failed_run_as_in_agentv(
    sqlite_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentV halts the tests after an execution error under `fail_on_error`, and skips a test whose dependency
    ended in one; a conversation whose turn failed is not one (orchestrator.ts: both read `executionStatus ===
    'execution_error'`). In AgentV's run of chat-deps, root-cause (after outage-chat) and refund-window
    (`depends_on: [outage-chat]`) ran and passed; so they do in evalstore's (once both not run: `Halted: ...`
    and a failed dependency), which asks the agent what AgentV asked."""
    folder, server = project
    monkeypatch.chdir(folder / "chat")
    agentv = _agentv_rows(CHAT_DEPS)
    run = ok_json(cli(sqlite_url, "run", "evals/chat-deps.eval.yaml", "--workers", "1", "--json"), 1)["run_id"]
    rows = _rows(sqlite_url, run)
    assert {t: r["execution_status"] for t, r in rows.items()} == {
        "outage-chat": "quality_failure",
        "root-cause": "ok",
        "refund-window": "ok",
    }
    keys = ("score", *RESULT_KEYS)
    assert {t: [r.get(k) for k in keys] for t, r in rows.items()} == {
        t: [r.get(k) for k in keys] for t, r in agentv.items()
    }
    assert not_asked_by_agentv(server) == set()
    assert len(server.requests) == len((NEWUSER4 / "logs" / "chat-deps-requests.jsonl").read_text("utf-8").splitlines())


def test_compare_clusters_a_run_by_the_category_agentv_would_write(
    sqlite_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--cluster-by category` on evalstore's own run of faq and two regrades: its four tests share AgentV's
    category (`Uncategorized`, run from the suite's folder), one cluster; they were once four clusters of
    one, the label known only for imports."""
    folder, _ = project
    monkeypatch.chdir(folder / "faq")
    run = ok_json(cli(sqlite_url, "run", "evals/faq.eval.yaml", "--json"))["run_id"]
    same = ok_json(cli(sqlite_url, "replay", run, "--json"))["run_id"]
    strict = ok_json(cli(sqlite_url, "replay", run, "--eval", "evals/faq-strict.eval.yaml", "--json"), 1)["run_id"]
    report = ok_json(cli(sqlite_url, "compare", run, same, strict, "--cluster-by", "category", "--json"))
    assert [r["clusters"] for r in report["rows"]] == [1, 1]


GRADER_RECORD = ("name", "input", "target", "token_usage")
"""What AgentV's row records of a grader's call: its request (``scores[].input``), judge and usage."""


@pytest.mark.parametrize("suite", ["vision", "templates", "history", "faq", "outage"])
def test_an_export_of_a_run_and_its_replay_records_graders_and_experiment_as_agentv(
    sqlite_url: str, suite: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export of evalstore's run of each suite (faq as AgentV's faq-b: `--experiment model-b`, the second
    agent model), and of its unchanged replay, writes AgentV's `experiment` (once left out; in the JSON
    document too, whose results once had none), and of each
    grader what AgentV's row records: the prompt as rendered, a trailing newline kept though the judge is
    sent it trimmed (once the sent one), and the usage of the judge's reply the verdict came from, also where
    the replay took it from the judge cache (once none), and none where no reply parsed (outage's judge that
    never answers JSON; once the last reply's)."""
    folder, server = project
    monkeypatch.chdir(folder / suite)
    run, options = ("faq-b", ["--experiment", "model-b"]) if suite == "faq" else (suite, [])
    if suite == "faq":
        monkeypatch.setenv("OPENAI_MODEL", "agent-model-b")
    done = ok_json(cli(sqlite_url, "run", f"evals/{suite}.eval.yaml", *options, "--json"), 0, 1)["run_id"]
    asked = len(server.requests)
    replay = ok_json(cli(sqlite_url, "replay", done, "--json"), 0, 1)["run_id"]
    assert len(server.requests) == asked  # every judge reply from the cache
    agentv = agentv_rows(run)
    for exported in (done, replay):
        rows = {r["test_id"]: r for r in map(json.loads, cli(sqlite_url, "export", exported).stdout.splitlines())}
        assert {t: r["experiment"] for t, r in rows.items()} == {t: r["experiment"] for t, r in agentv.items()}
        assert {t: r["experiment"] for t, r in exported_json(sqlite_url, exported).items()} == {
            t: r["experiment"] for t, r in agentv.items()
        }
        assert {t: [[s.get(k) for k in GRADER_RECORD] for s in r.get("scores", [])] for t, r in rows.items()} == {
            t: [[s.get(k) for k in GRADER_RECORD] for s in r.get("scores", [])] for t, r in agentv.items()
        }


def test_an_export_of_an_import_and_its_replay_keeps_agentvs_experiment(
    store_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """faq-b was run with `--experiment model-b`: its import's rows, and a replay's of them, keep the label
    (not the `default` a run evalstore made without one is written), and so do the JSON document's results
    (which once had none)."""
    folder, _ = project
    monkeypatch.chdir(folder / "faq")
    run_id = imported(store_url, "faq-b")
    replay = ok_json(cli(store_url, "replay", run_id, "--json"), 0, 1)["run_id"]
    for exported in (run_id, replay):
        rows = [json.loads(line) for line in cli(store_url, "export", exported).stdout.splitlines()]
        assert [r["experiment"] for r in rows] == ["model-b"] * len(agentv_rows("faq-b"))
        assert [r["experiment"] for r in exported_json(store_url, exported).values()] == ["model-b"] * len(rows)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["evals/faq.eval.yaml", "--experiment", "model b"], 'Invalid experiment name "model b"'),
        (["--resume", "last", "--experiment", "model-b"], "--experiment names a new run"),
    ],
)
def test_run_refuses_an_experiment_agentv_refuses(
    sqlite_url: str, options: list[str], error: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name AgentV refuses is refused in its words (letters, numbers, ".", "_" and "-" only), and a resumed
    run keeps the experiment it was started with; nothing is run or recorded."""
    folder, server = project
    monkeypatch.chdir(folder / "faq")
    assert error in one_line_error(cli(sqlite_url, "run", *options))
    assert not server.requests and "no store" in one_line_error(cli(sqlite_url, "runs"))
