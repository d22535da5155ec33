"""``evalstore replay``: regrade a recorded run without the agent; each swap; drift; --no-cache."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from e2e_helpers import (
    EVALSTORE,
    JUDGE_KEY_ENV,
    MODEL2_SCORE,
    PY,
    STRICT_SCORE,
    TESTS,
    Recorded,
    audit,
    cli,
    judge_script,
    make_suite,
    ok_json,
    one_line_error,
    record,
    results_by_test,
    runs,
    sha256,
    verdict_signature,
)
from judge_server import JudgeServer


def replay(db: str, run: str, *args: str) -> dict:
    """``evalstore replay RUN ARGS --json`` in process; returns its JSON (the comparison included)."""
    out = ok_json(cli(db, "replay", run, "--json", *args), 0, 1)  # 1: a regraded test below the threshold
    assert out["parent_run_id"] == run and out["complete"] is True
    return out


def origins(db: str, run: str) -> dict[tuple[str, str], str]:
    return {
        (t["test_id"], v["grader"]): v["origin"]
        for test_id in TESTS
        for t in audit(db, run, test_id)["tests"]
        for v in t["verdicts"]
    }


def graders(db: str, run: str, name: str) -> dict[str, float]:
    return {t: r["graders"][name] for t, r in results_by_test(db, run).items()}


def _can_unshare_network() -> bool:
    try:
        return subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# -- the unchanged replay -----------------------------------------------------------------------


def test_an_unchanged_replay_reproduces_every_verdict_from_the_cache(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    before = len(judge.requests)
    out = replay(recorded_db, recorded.run_id)
    assert len(judge.requests) == before, "an unchanged replay must not call the judge"
    assert out["drift"] == []
    new = out["run_id"]
    assert verdict_signature(recorded_db, new) == verdict_signature(recorded_db, recorded.run_id)
    assert results_by_test(recorded_db, new).keys() == set(TESTS)
    for test_id, row in results_by_test(recorded_db, recorded.run_id).items():
        assert results_by_test(recorded_db, new)[test_id]["score"] == row["score"]
    (test,) = audit(recorded_db, new, "q1-report")["tests"]
    quality = next(v for v in test["verdicts"] if v["grader"] == "quality")
    assert quality["cache_hit"] is True and quality["origin"] == "graded"
    # Conversions came from the recorded ones (same fingerprint), not from running the converters again.
    assert all(p["reused_from"] for v in test["verdicts"] for p in v["preprocessing"])
    (rpl,) = [r for r in runs(recorded_db) if r["run_id"] == new]
    assert rpl["kind"] == "replay" and rpl["parent_run_id"] == recorded.run_id and rpl["status"] == "completed"


def test_a_replay_needs_neither_the_target_nor_the_network(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    if not _can_unshare_network():
        pytest.skip("`unshare -rn` (a network namespace with no interfaces up) is not available here")
    agent = recorded.suite.agent
    kept = agent.read_bytes()
    agent.unlink()  # the target command is gone
    try:
        before = len(judge.requests)
        result = subprocess.run(
            ["unshare", "-rn", str(EVALSTORE), "--db", recorded_db, "replay", recorded.run_id, "--json"],
            cwd=recorded.suite.root,
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        agent.write_bytes(kept)
    out = ok_json(result, 0, 1)  # 1: a regraded test below the threshold
    assert len(judge.requests) == before
    assert verdict_signature(recorded_db, out["run_id"]) == verdict_signature(recorded_db, recorded.run_id)


def test_a_cached_replay_does_not_need_the_judge_key(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(JUDGE_KEY_ENV, raising=False)
    before = len(judge.requests)
    out = replay(recorded_db, recorded.run_id)
    assert verdict_signature(recorded_db, out["run_id"]) == verdict_signature(recorded_db, recorded.run_id)
    assert len(judge.requests) == before
    # A changed prompt misses the cache: without the key that is an execution error naming the variable.
    prompt = recorded.suite.root / "prompts" / "quality.v2.md"
    new = replay(recorded_db, recorded.run_id, "--prompt", f"quality=file://{prompt}")["run_id"]
    assert len(judge.requests) == before
    for row in results_by_test(recorded_db, new).values():
        assert row["verdicts"]["quality"] == "skip" and JUDGE_KEY_ENV in row["error"]


# -- swaps ---------------------------------------------------------------------------------------


def test_swap_eval_regrades_with_the_new_version(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    before = len(judge.requests)
    out = replay(recorded_db, recorded.run_id, "--eval", str(recorded.suite.eval_v2))
    assert len(judge.requests) == before  # the LLM grader did not change: its verdicts come from the cache
    new = out["run_id"]
    assert graders(recorded_db, new, "workbook") == dict.fromkeys(TESTS, 1.0)  # v2 only checks the Total row
    old_sig, new_sig = verdict_signature(recorded_db, recorded.run_id), verdict_signature(recorded_db, new)
    for key, value in old_sig.items():
        if key[1] != "workbook":
            assert new_sig[key] == value, key
    assert new_sig[("q1-report", "workbook")][3] == (("has a Total row", True),)
    snapshot = audit(recorded_db, new, "q1-report")["run"]["eval_snapshot"]
    assert {Path(s["path"]).name for s in snapshot if s["role"] == "grader_script"} == {"check_v2.py"}


def test_swap_preprocessor_json_argv_and_plain_command_line(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    root = recorded.suite.root
    before = len(judge.requests)
    json_form = json.dumps([PY, str(root / "scripts" / "xlsx_summary.py")])
    first = replay(recorded_db, recorded.run_id, "--preprocessor", f"xlsx={json_form}")["run_id"]
    # The workbook is now seen as a sheet count, not CSV: the code grader and the judge both see that.
    assert graders(recorded_db, first, "workbook") == pytest.approx(dict.fromkeys(TESTS, 2 / 3))
    assert len(judge.requests) == before + 3
    assert all("workbook with 1 sheet(s)" in r.user and "Region,Revenue" not in r.user for r in judge.requests[before:])
    (test,) = audit(recorded_db, first, "q1-report")["tests"]
    xlsx = next(p for v in test["verdicts"] for p in v["preprocessing"] if p["path"] == "revenue.xlsx")
    assert xlsx["argv"] == [PY, str(root / "scripts" / "xlsx_summary.py")] and xlsx["status"] == "converted"

    # The same converter as a plain command line, its script found through the eval's search roots.
    second = replay(
        recorded_db, recorded.run_id, "--preprocessor", f"xlsx={PY} scripts/xlsx_summary.py", "--graders", "workbook"
    )["run_id"]
    first_sig, second_sig = verdict_signature(recorded_db, first), verdict_signature(recorded_db, second)
    for test_id in TESTS:
        assert second_sig[(test_id, "workbook")] == first_sig[(test_id, "workbook")]


def test_one_media_type_swapped_twice_is_refused(recorded: Recorded, recorded_db: str) -> None:
    """The last would win and the first be recorded as given: one line, nothing run."""
    before = len(runs(recorded_db))
    result = cli(
        recorded_db,
        "replay",
        recorded.run_id,
        "--preprocessor",
        f"xlsx={PY} scripts/xlsx_summary.py",
        "--preprocessor",
        f"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet={PY} scripts/xlsx_summary.py",
    )
    line = one_line_error(result)
    assert line.startswith("Error: --preprocessor application/vnd.openxmlformats-officedocument.spreadsheetml.sheet: ")
    assert "is swapped twice (also as xlsx)" in line and len(runs(recorded_db)) == before


def test_a_replay_of_a_replay_replaces_a_converter_whose_file_is_gone(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    """A teammate's checkout elsewhere: the inherited converter's script is not there. Without a swap of the
    same type the replay runs the converter from the bytes the replay recorded (and says so: issue 30);
    giving the same type again replaces it (it is not read at all)."""
    root = recorded.suite.root
    private = root / "mine" / "summary.py"
    private.parent.mkdir()
    private.write_bytes((root / "scripts" / "xlsx_summary.py").read_bytes())
    first = replay(recorded_db, recorded.run_id, "--preprocessor", f"xlsx={json.dumps([PY, str(private)])}")["run_id"]
    private.unlink()
    restored = cli(recorded_db, "replay", first, "--json", "--graders", "workbook")
    assert restored.exit_code in (0, 1), restored.stderr  # 1: a test below the threshold
    assert "summary.py is gone: run from the bytes recorded with the run" in restored.stderr
    assert (
        verdict_signature(recorded_db, json.loads(restored.stdout)["run_id"])[("q1-report", "workbook")]
        == verdict_signature(recorded_db, first)[("q1-report", "workbook")]
    )
    theirs = json.dumps([PY, str(root / "scripts" / "xlsx_summary.py")])
    again = replay(recorded_db, first, "--preprocessor", f"xlsx={theirs}", "--graders", "workbook")["run_id"]
    assert (
        verdict_signature(recorded_db, again)[("q1-report", "workbook")]
        == verdict_signature(recorded_db, first)[("q1-report", "workbook")]
    )


def test_a_replay_of_a_replay_reads_a_prompt_whose_file_is_gone_from_the_recorded_bytes(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    """A teammate's checkout, or a bundle imported elsewhere: the inherited --prompt file is not there. The
    replay grades with the prompt's bytes the replay recorded (and says so), as for a gone converter."""
    root = recorded.suite.root
    private = root / "mine" / "prompts" / "quality.v2.md"
    private.parent.mkdir(parents=True)
    private.write_bytes((root / "prompts" / "quality.v2.md").read_bytes())
    first = replay(recorded_db, recorded.run_id, "--prompt", f"quality=file://{private}")["run_id"]
    private.unlink()
    before = len(judge.requests)
    again = cli(recorded_db, "replay", first, "--json")
    assert again.exit_code in (0, 1), again.stderr  # 1: a test below the threshold
    assert f"prompt {private} is gone: run from the bytes recorded with the run" in again.stderr
    assert len(judge.requests) == before  # the same prompt, rendered the same: every reply reused
    assert graders(recorded_db, json.loads(again.stdout)["run_id"], "quality") == dict.fromkeys(TESTS, STRICT_SCORE)


def test_swap_prompt_sends_the_new_prompt_to_the_judge(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    before = len(judge.requests)
    prompt = recorded.suite.root / "prompts" / "quality.v2.md"
    new = replay(recorded_db, recorded.run_id, "--prompt", f"quality=file://{prompt}")["run_id"]
    sent = judge.requests[before:]
    assert len(sent) == 3 and all(r.user.startswith("STRICT AUDITOR") for r in sent)
    assert graders(recorded_db, new, "quality") == dict.fromkeys(TESTS, STRICT_SCORE)
    old_sig, new_sig = verdict_signature(recorded_db, recorded.run_id), verdict_signature(recorded_db, new)
    assert {k: v for k, v in new_sig.items() if k[1] != "quality"} == {
        k: v for k, v in old_sig.items() if k[1] != "quality"
    }
    (test,) = audit(recorded_db, new, "q1-report", "--grader", "quality", "--show-prompt")["tests"]
    (verdict,) = test["verdicts"]
    assert "STRICT AUDITOR" in json.dumps(verdict)


def test_swap_judge_model(recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict) -> None:
    before = len(judge.requests)
    new = replay(recorded_db, recorded.run_id, "--judge-model", "judge-model-2")["run_id"]
    sent = judge.requests[before:]
    assert len(sent) == 3 and {r.body["model"] for r in sent} == {"judge-model-2"}
    assert graders(recorded_db, new, "quality") == dict.fromkeys(TESTS, MODEL2_SCORE)
    (test,) = audit(recorded_db, new, "q2-report", "--grader", "quality")["tests"]
    (call,) = test["verdicts"][0]["grader_calls"]
    assert call["model"] == "judge-model-2" and call["cache_hit"] is False


def test_the_same_model_at_another_endpoint_is_another_judge(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict, tmp_path: Path
) -> None:
    """Two servers of one model name (Ollama and vLLM, two deployments) answer differently: a judge target at
    another endpoint is asked, not answered from the replies of the one recorded; asked again, it is reused."""
    other = JudgeServer(judge_script).start()
    try:
        targets = tmp_path / "targets.yaml"
        targets.write_text(
            "targets:\n  - name: judge\n    provider: openai-compatible\n"
            f"    base_url: {other.base_url}\n    model: judge-model-1\n"
            f"    api_key: ${{{{ {JUDGE_KEY_ENV} }}}}\n    temperature: 0\n"
        )
        before = len(judge.requests)
        new = replay(recorded_db, recorded.run_id, "--targets", str(targets), "--judge-target", "judge")["run_id"]
        assert len(judge.requests) == before and len(other.requests) == 3
        replay(recorded_db, new)
        assert len(judge.requests) == before and len(other.requests) == 3
    finally:
        other.stop()


def test_a_chain_of_swaps_keeps_each_and_an_unchanged_replay_of_it_reproduces_it(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    prompt = recorded.suite.root / "prompts" / "quality.v2.md"
    first = replay(recorded_db, recorded.run_id, "--prompt", f"quality=file://{prompt}")["run_id"]
    before = len(judge.requests)
    # The second swap applies on top of the first: the v2 prompt, now sent to the second model.
    second = replay(recorded_db, first, "--judge-model", "judge-model-2")["run_id"]
    sent = judge.requests[before:]
    assert len(sent) == 3 and all(r.user.startswith("STRICT AUDITOR") for r in sent)
    assert {r.body["model"] for r in sent} == {"judge-model-2"}
    assert graders(recorded_db, second, "quality") == dict.fromkeys(TESTS, STRICT_SCORE)
    # Each replay records the options it was given; the chain records the rest.
    started = {r["run_id"]: r for r in runs(recorded_db)}
    assert started[second]["parent_run_id"] == first

    # Replayed again with no options: the same verdicts, from the cache, no request, no flip.
    third = replay(recorded_db, second)
    assert len(judge.requests) == before + 3
    assert verdict_signature(recorded_db, third["run_id"]) == verdict_signature(recorded_db, second)
    counts = third["comparison"]["overall"]["counts"]
    assert counts["a_only_pass"] == counts["b_only_pass"] == 0, counts
    (test,) = audit(recorded_db, third["run_id"], "q1-report", "--grader", "quality")["tests"]
    (call,) = test["verdicts"][0]["grader_calls"]
    assert call["model"] == "judge-model-2" and call["cache_hit"] is True

    # A resumed or sharded replay of the chain grades with the same configuration.
    sharded = [replay_shard(recorded_db, second, k) for k in (1, 2)]
    assert sharded[0] == sharded[1]
    assert verdict_signature(recorded_db, sharded[0]) == verdict_signature(recorded_db, second)


def replay_shard(db: str, run: str, k: int) -> str:
    out = ok_json(cli(db, "replay", run, "--shard", f"{k}/2", "--json"), 0, 1)  # 1: a test below the threshold
    return str(out["run_id"])


def test_graders_subset_carries_the_others(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    new = replay(recorded_db, recorded.run_id, "--eval", str(recorded.suite.eval_v2), "--graders", "workbook")["run_id"]
    assert graders(recorded_db, new, "workbook") == dict.fromkeys(TESTS, 1.0)
    by = origins(recorded_db, new)
    assert {k: v for k, v in by.items() if k[1] == "workbook"} == {(t, "workbook"): "graded" for t in TESTS}
    assert {v for k, v in by.items() if k[1] != "workbook"} == {"carried"}
    old_sig, new_sig = verdict_signature(recorded_db, recorded.run_id), verdict_signature(recorded_db, new)
    for key, value in old_sig.items():
        if key[1] != "workbook":
            assert new_sig[key] == value


def test_tests_glob_regrades_a_subset_and_carries_the_rest(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    new = replay(recorded_db, recorded.run_id, "--eval", str(recorded.suite.eval_v2), "--tests", "q1-*")["run_id"]
    workbook = graders(recorded_db, new, "workbook")
    assert workbook["q1-report"] == 1.0
    assert workbook["q3-report"] == pytest.approx(2 / 3)  # carried from the parent, graded by v1
    by = origins(recorded_db, new)
    assert {v for k, v in by.items() if k[0] == "q1-report"} == {"graded"}
    assert {v for k, v in by.items() if k[0] != "q1-report"} == {"carried"}
    shown = results_by_test(recorded_db, new)
    parent = results_by_test(recorded_db, recorded.run_id)
    assert shown["q3-report"]["origin"] == "carried" and shown["q3-report"]["score"] == parent["q3-report"]["score"]


def test_no_cache_calls_the_judge_and_the_converters_again(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    before = len(judge.requests)
    new = replay(recorded_db, recorded.run_id, "--no-cache")["run_id"]
    assert len(judge.requests) == before + 3
    assert verdict_signature(recorded_db, new) == verdict_signature(recorded_db, recorded.run_id)
    (test,) = audit(recorded_db, new, "q1-report")["tests"]
    quality = next(v for v in test["verdicts"] if v["grader"] == "quality")
    assert quality["cache_hit"] is False
    conversions = [p for v in test["verdicts"] for p in v["preprocessing"]]
    # Each converter ran once in this replay (later graders of the test reuse that fresh conversion).
    fresh = [p for p in conversions if not p["reused_from"]]
    assert {p["path"] for p in fresh} == {"revenue.xlsx", "summary.html"}
    assert all(p["status"] == "converted" for p in fresh)


# -- drift ---------------------------------------------------------------------------------------


def test_drift_is_named_and_strict_refuses(tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "suite", cases=[("q1-report", "Write the Q1 revenue report.")])
    db = f"sqlite:///{tmp_path / 'store.db'}"
    run_id = record(db, suite)["run_id"]
    suite.grader.write_text("print('{\"score\": 0.25}')\n", encoding="utf-8")  # edited after the run

    before_runs, before_events = runs(db), ok_json(cli(db, "verify", "--json"))["events"]
    line = one_line_error(cli(db, "replay", run_id, "--strict"))
    assert "--strict" in line and str(suite.grader) in line and "changed" in line
    assert runs(db) == before_runs and ok_json(cli(db, "verify", "--json"))["events"] == before_events

    result = cli(db, "replay", run_id)
    assert result.exit_code in (0, 1), result.stderr
    assert "drift" in result.stderr and str(suite.grader) in result.stderr.replace("\n", "")
    out = ok_json(cli(db, "replay", run_id, "--json"), 0, 1)
    assert any(str(suite.grader) in d for d in out["drift"])
    # The replay ran the script as it is now, and its own snapshot says so.
    assert graders(db, out["run_id"], "workbook") == {"q1-report": 0.25}
    snap = audit(db, out["run_id"], "q1-report")["run"]["eval_snapshot"]
    (grader,) = [s for s in snap if s["role"] == "grader_script"]
    assert grader["sha256"] == sha256(suite.grader.read_bytes())


def test_drift_of_a_script_only_graders_left_out_run_is_not_told(tmp_path: Path) -> None:
    """``--graders states-total`` carries ``workbook``'s verdicts over: its script's edit changes nothing
    the replay grades, so it neither warns nor makes ``--strict`` refuse; regrading ``workbook`` still does."""
    suite = make_suite(tmp_path / "suite", cases=[("q1-report", "Write the Q1 revenue report.")])
    db = f"sqlite:///{tmp_path / 'store.db'}"
    run_id = record(db, suite)["run_id"]
    suite.grader.write_text("print('{\"score\": 0.25}')\n", encoding="utf-8")

    out = ok_json(cli(db, "replay", run_id, "--graders", "states-total", "--strict", "--json"), 0, 1)
    assert out["drift"] == []
    result = cli(db, "replay", run_id, "--graders", "states-total")
    assert result.exit_code in (0, 1), result.stderr
    assert "drift" not in result.stderr and str(suite.grader) not in result.stderr.replace("\n", "")

    line = one_line_error(cli(db, "replay", run_id, "--graders", "workbook", "--strict"))
    assert "--strict" in line and str(suite.grader) in line


def test_a_grader_script_gone_from_disk_runs_from_the_recorded_bytes(tmp_path: Path) -> None:
    """Another user's checkout, a deleted folder: `evalstore replay RUN` still reproduces RUN."""
    suite = make_suite(tmp_path / "suite", cases=[("q1-report", "Write the Q1 revenue report.")])
    db = f"sqlite:///{tmp_path / 'store.db'}"
    run_id = record(db, suite)["run_id"]
    recorded_bytes = suite.grader.read_bytes()
    suite.grader.unlink()

    one_line_error(cli(db, "replay", run_id, "--strict"))  # --strict still refuses any drift
    result = cli(db, "replay", run_id, "--json")
    out = ok_json(result, 0, 1)
    assert any(str(suite.grader) in d and "run from the bytes recorded" in d for d in out["drift"]), out["drift"]
    assert (
        verdict_signature(db, out["run_id"])[("q1-report", "workbook")]
        == verdict_signature(db, run_id)[("q1-report", "workbook")]
    )
    # The replay recorded the bytes it ran under the path the eval names, so a replay of it restores them too.
    snap = audit(db, out["run_id"], "q1-report")["run"]["eval_snapshot"]
    (grader,) = [s for s in snap if s["role"] == "grader_script"]
    assert (grader["path"], grader["sha256"]) == (str(suite.grader), sha256(recorded_bytes))
    again = ok_json(cli(db, "replay", out["run_id"], "--json"), 0, 1)
    assert (
        verdict_signature(db, again["run_id"])[("q1-report", "workbook")]
        == verdict_signature(db, run_id)[("q1-report", "workbook")]
    )


CRASH_SUITE = """\
name: crash-suite
execution:
  target: flaky
tests:
  - id: crashes
    criteria: Never apologises.
    input: crash
    assertions:
      - type: contains
        value: sorry
        negate: true
  - id: answers
    criteria: Never apologises.
    input: answer
    assertions:
      - type: contains
        value: sorry
        negate: true
"""

FLAKY_AGENT = """\
import sys
prompt = open(sys.argv[1], encoding="utf-8").read()
if "crash" in prompt:
    sys.stderr.write("tool unreachable")
    sys.exit(3)
open(sys.argv[2], "w", encoding="utf-8").write("Here you are.")
"""


def test_a_test_whose_agent_failed_is_not_graded_by_a_replay(tmp_path: Path) -> None:
    """The run recorded an execution error for a test whose target crashed and graded nothing; a replay
    reproduces the error instead of grading the missing answer (where a negated assertion would pass it)."""
    (tmp_path / ".agentv").mkdir()
    (tmp_path / ".agentv" / "targets.yaml").write_text(
        "targets:\n  - name: flaky\n    provider: cli\n"
        f"    command: {PY} {tmp_path / 'agent.py'} {{PROMPT_FILE}} {{OUTPUT_FILE}}\n",
        encoding="utf-8",
    )
    (tmp_path / "agent.py").write_text(FLAKY_AGENT, encoding="utf-8")
    eval_file = tmp_path / "crash.eval.yaml"
    eval_file.write_text(CRASH_SUITE, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'store.db'}"
    run = ok_json(cli(db, "run", str(eval_file), "--json", "--workdir", str(tmp_path / "work")), 1)
    assert {r["test_id"]: r["status"] for r in run["results"]} == {"crashes": "execution_error", "answers": "ok"}

    out = replay(db, run["run_id"])
    by_test = results_by_test(db, out["run_id"])
    assert (by_test["crashes"]["status"], by_test["crashes"]["score"], by_test["crashes"]["graders"]) == (
        "execution_error",
        0.0,
        {},
    )
    assert "exited with code 3: tool unreachable" in by_test["crashes"]["error"]
    assert (by_test["answers"]["status"], by_test["answers"]["score"]) == ("ok", 1.0)
    # The mean counts the error as 0; AgentV's summary leaves it out, and show gives that figure beside it.
    summary = ok_json(cli(db, "show", out["run_id"], "--json"))["run"]
    assert (summary["errors"], summary["mean_score"], summary["mean_score_without_errors"]) == (1, 0.5, 1.0)
    shown = cli(db, "show", out["run_id"])
    assert "mean=0.500 (1.000 without the execution errors, as AgentV reports it)" in shown.stdout
    paired = {t["test_id"]: (t["status_a"], t["status_b"], t["flip"]) for t in out["comparison"]["tests"]}
    assert paired["crashes"] == ("execution_error", "execution_error", None)
    assert out["comparison"]["flipped"] == []


def test_replay_of_an_unknown_run_is_one_line(sqlite_url: str) -> None:
    line = one_line_error(cli(sqlite_url, "replay", "rec-nope"))
    assert "rec-nope" in line or "no runs" in line or "no store at" in line  # a replay never creates a store


def test_bad_swaps_are_one_line(recorded: Recorded, recorded_db: str) -> None:
    assert "--preprocessor" in one_line_error(cli(recorded_db, "replay", recorded.run_id, "--preprocessor", "xlsx"))
    assert "nosuch" in one_line_error(cli(recorded_db, "replay", recorded.run_id, "--graders", "nosuch"))
    # workbook is a code grader: the line names the LLM graders a prompt can be swapped for.
    assert "(its LLM graders: quality)" in one_line_error(
        cli(recorded_db, "replay", recorded.run_id, "--prompt", "workbook=file://prompts/quality.v2.md")
    )
    assert len(runs(recorded_db)) == 1


def test_a_preprocessor_for_a_type_no_file_has_and_tests_matching_nothing_are_refused_with_what_exists(
    recorded: Recorded, recorded_db: str
) -> None:
    before = ok_json(cli(recorded_db, "verify", "--json"))["events"]
    line = one_line_error(
        cli(recorded_db, "replay", recorded.run_id, "--preprocessor", f'xslx=["{PY}","scripts/xlsx_summary.py"]')
    )
    assert line.startswith(f"Error: --preprocessor xslx: no file of that type in run {recorded.run_id}"), line
    assert "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet (xlsx)" in line
    assert "text/html (html)" in line

    line = one_line_error(cli(recorded_db, "replay", recorded.run_id, "--tests", "nomatch*"))
    assert line == (
        f"Error: --tests 'nomatch*' matches no test of run {recorded.run_id} (its tests: {', '.join(TESTS)})"
    )
    assert len(runs(recorded_db)) == 1  # nothing written
    assert ok_json(cli(recorded_db, "verify", "--json"))["events"] == before


def test_an_eval_that_has_none_of_the_runs_tests_is_refused(recorded: Recorded, recorded_db: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    other = tmp_path / "other.eval.yaml"
    other.write_text(
        "name: other\ntests:\n  - {id: zz-1, input: hi, criteria: x}\n"
        "assertions:\n  - {name: c, type: contains, value: x}\n"
    )
    line = one_line_error(cli(recorded_db, "replay", recorded.run_id, "--eval", str(other)))
    assert line == (
        f"Error: --eval {other}: none of its tests is a test of run {recorded.run_id} "
        f"(the run's tests: {', '.join(sorted(TESTS))}; the eval's: zz-1)"
    )
    assert len(runs(recorded_db)) == 1  # nothing written


def test_the_progress_line_counts_the_tests_actually_regraded(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    result = cli(recorded_db, "replay", recorded.run_id, "--tests", "q1-*")
    assert result.exit_code == 0, result.stderr
    assert "1 test to regrade" in result.stderr, result.stderr
    result = cli(recorded_db, "replay", recorded.run_id)
    assert f"{len(TESTS)} tests to regrade" in result.stderr, result.stderr
