"""Regrading an imported Inspect AI log without the model: `evalstore replay RUN --eval FILE`, FILE holding
suite-level assertions and no tests (the tests are the run's own), graders given each sample's input,
output and target; compare pairs the regrade with Inspect's scores by grader name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixture_paths import FIXTURES_DIR
from judge_server import JudgeServer

from evalstore import cli as cli_package
from evalstore.replay.errors import ReplayError
from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.material import load_run
from evalstore.store import EventStore, make_engine

inspect_log = pytest.importorskip("inspect_ai.log")

LOGS = FIXTURES_DIR / "inspect" / "logs"
MODEL = "openai-api/local/agent"

# A code grader that keeps what it was given (one file per test and attempt) and scores an exact match.
GRADER = """
import json, sys, uuid
from pathlib import Path
p = json.load(sys.stdin)
out = Path(sys.argv[1])
out.mkdir(exist_ok=True)
# A name of its own: graders of several tests run at once (numbering by the files already there raced).
(out / f"{uuid.uuid4().hex}.json").write_text(json.dumps(p))
expected = p["expected_output"][0]["content"] if p["expected_output"] else ""
ok = p["output"].strip() == expected
print(json.dumps({"score": 1.0 if ok else 0.0, "assertions": [{"text": "exact", "passed": ok}]}))
"""


def _cli(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args])


def _ok(result) -> dict:  # type: ignore[no-untyped-def]
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _suite(tmp_path: Path, assertions: str) -> Path:
    (tmp_path / "grader.py").write_text(GRADER, encoding="utf-8")
    eval_file = tmp_path / "regrade.eval.yaml"
    eval_file.write_text(f"name: inspect-regrade\nassertions:\n{assertions}", encoding="utf-8")
    return eval_file


CODE = """  - name: exact
    type: code-grader
    command: [python3, grader.py, {seen}]
"""


def _samples(log: Path) -> dict[tuple[str, int], object]:
    return {(str(s.id), s.epoch): s for s in inspect_log.read_eval_log_samples(log, all_samples_required=False)}


def test_a_suite_level_code_grader_regrades_every_sample_with_its_input_output_and_target(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    seen = tmp_path / "seen"
    eval_file = _suite(tmp_path, CODE.format(seen=seen))
    run_id = _ok(_cli(db, "import", str(LOGS / "arithmetic.eval"), "--json"))["run_id"]
    replay = _cli(db, "replay", run_id, "--eval", str(eval_file), "--json")
    assert replay.exit_code in (0, 1), replay.output  # 1: some tests are below the threshold
    replay_id = json.loads(replay.stdout)["run_id"]
    results = _ok(_cli(db, "show", replay_id, "--json"))["results"]
    samples = _samples(LOGS / "arithmetic.eval")
    assert {(r["test_id"], r["attempt"]) for r in results} == set(samples)
    for r in results:
        sample = samples[(r["test_id"], r["attempt"])]
        # Every sample is graded, an errored one from what it kept (its output empty), as `inspect score` does;
        # that one stays the agent's execution error, which cannot pass (a regrade passed it).
        assert (r["status"], r["passed"]) == (("execution_error", False) if sample.error else ("ok", True)) or (
            not sample.error and r["status"] == "quality_failure"
        ), r
        assert r["graders"] == {"exact": 1.0 if sample.output.completion.strip() == sample.target else 0.0}, r
        if sample.error:
            assert r["error"] == sample.error.message, r
    assert any(s.error for s in samples.values())
    # What the grader was given: each sample's input, output and target; an errored sample's error too.
    payloads = [json.loads(p.read_text()) for p in seen.iterdir()]
    assert len(payloads) == len(samples)
    given = sorted((p["input"][-1]["content"], p["output"], p["expected_output"][0]["content"]) for p in payloads)
    assert given == sorted((s.input, s.output.completion, s.target) for s in samples.values())
    errors = sorted(p.get("error", "") for p in payloads)
    assert errors == sorted(s.error.message if s.error else "" for s in samples.values())
    # and its messages up to the error: the system prompt and the question, no answer
    failed = [p for p in payloads if p.get("error")]
    assert failed and all([m["role"] for m in p["messages"]] == ["system", "user"] for p in failed)


def test_an_errored_sample_its_graders_pass_is_the_agents_execution_error_and_fails(tmp_path: Path) -> None:
    """A negated `contains` passes an errored sample's empty output: the regrade passed the sample, and
    `compare` counted it fail->pass, where a run's agent failure cannot pass whatever its score."""
    db = str(tmp_path / "s.db")
    eval_file = _suite(tmp_path, "  - {name: no-swearing, type: contains, value: damn, negate: true}\n")
    run_id = _ok(_cli(db, "import", str(LOGS / "arithmetic.eval"), "--json"))["run_id"]
    replay = _cli(db, "replay", run_id, "--eval", str(eval_file), "--json")
    assert replay.exit_code == 1, replay.output  # the errored sample fails the replay
    outcome = json.loads(replay.stdout)
    results = {(r["test_id"], r["attempt"]): r for r in _ok(_cli(db, "show", outcome["run_id"], "--json"))["results"]}
    errored = {key for key, sample in _samples(LOGS / "arithmetic.eval").items() if sample.error}
    assert errored
    for key, r in results.items():
        assert r["graders"] == {"no-swearing": 1.0}, r
        assert (r["score"], r["passed"], r["status"]) == (
            (1.0, False, "execution_error") if key in errored else (1.0, True, "ok")
        )
    flipped = {(f["test_id"], f["attempt"]) for f in outcome["comparison"]["flipped"] if f["flip"] == "fail->pass"}
    assert flipped and not flipped & errored  # the others' grader changed; the errored ones still fail


def test_tests_selects_samples_and_compare_pairs_a_grader_named_as_inspects(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    eval_file = _suite(tmp_path, CODE.format(seen=tmp_path / "seen").replace("name: exact", "name: match"))
    run_id = _ok(_cli(db, "import", str(LOGS / "arithmetic.eval"), "--json"))["run_id"]
    replay = _cli(db, "replay", run_id, "--eval", str(eval_file), "--tests", "div", "--json")
    assert replay.exit_code in (0, 1), replay.output
    replay_id = json.loads(replay.stdout)["run_id"]
    store = EventStore(make_engine(f"sqlite:///{db}"))
    tests = load_run(store, replay_id).tests
    store.close()
    origins = {(k[0], k[2]): {g: v.origin for g, (_, v) in m.verdicts.items()} for k, m in tests.items()}
    assert origins[("div", 1)] == origins[("div", 2)] == {"match": "graded"}
    assert set(origins[("add", 1)].values()) == {"carried"}  # Inspect's own scores, as imported
    compared = _ok(_cli(db, "compare", run_id, replay_id, "--json"))
    match = next(g for g in compared["graders"] if g["grader"] == "match")
    # Inspect's match said C for "3.0" against 3 (numeric); the exact regrade says no: paired, and a flip.
    # Paired by test, each test's two epochs averaged: every test but the one whose epochs both errored, and
    # div's flip counted once.
    assert match["n"] == len({k[0] for k in tests}) - 1
    assert (match["regressions"], match["stats"]["counts"]["a_only_pass"]) == (1, 1)


def test_an_llm_grader_sees_each_samples_question_answer_and_target(
    tmp_path: Path, judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALSTORE_JUDGE_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("EVALSTORE_JUDGE_MODEL", "stand-in")
    db = str(tmp_path / "s.db")
    eval_file = _suite(tmp_path, "  - name: judged\n    type: llm-grader\n")
    run_id = _ok(_cli(db, "import", str(LOGS / "capitals.eval"), "--json"))["run_id"]
    replay = _cli(db, "replay", run_id, "--eval", str(eval_file), "--json")
    assert replay.exit_code in (0, 1), replay.output
    prompts = ["\n".join(str(m.get("content")) for m in r.messages) for r in judge_server.requests]
    samples = _samples(LOGS / "capitals.eval")
    assert len(prompts) == len(samples)
    for sample in samples.values():
        assert any(sample.input in p and sample.output.completion in p and sample.target in p for p in prompts), (
            sample.id
        )


def test_an_llm_grader_is_given_an_errored_samples_error(
    tmp_path: Path, judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An errored sample is regraded (as `inspect score` does); its empty answer alone would leave the judge
    guessing why, so the built-in prompt carries the error in a section of its own, and a template reads it
    as {{error}}. A sample that did not error is asked exactly as before: no error section."""
    monkeypatch.setenv("EVALSTORE_JUDGE_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("EVALSTORE_JUDGE_MODEL", "stand-in")
    db = str(tmp_path / "s.db")
    template = "  - name: templated\n    type: llm-grader\n    prompt: 'Answer: [{{output}}] Error: [{{error}}]'\n"
    # A prompt script is given the error in its payload, as a code grader is.
    (tmp_path / "prompt.py").write_text(
        "import json, sys\np = json.load(sys.stdin)\nprint('Script saw: [' + p.get('error', '') + '] {{output}}')\n",
        encoding="utf-8",
    )
    script = (
        f"  - name: scripted\n    type: llm-grader\n    prompt:\n      command: [python3, {tmp_path / 'prompt.py'}]\n"
    )
    eval_file = _suite(tmp_path, "  - name: judged\n    type: llm-grader\n" + template + script)
    run_id = _ok(_cli(db, "import", str(LOGS / "arithmetic.eval"), "--json"))["run_id"]
    # --no-cache: a sample's two epochs ask the same prompt; with the cache, the second is asked or not
    # depending on whether the first's reply was stored by then (the prompt script's process makes that vary).
    replay = _cli(db, "replay", run_id, "--eval", str(eval_file), "--no-cache", "--json")
    assert replay.exit_code in (0, 1), replay.output
    samples = _samples(LOGS / "arithmetic.eval")
    errors = [s.error.message for s in samples.values() if s.error]
    assert errors, "the fixture has errored samples"
    built_in = [r.user for r in judge_server.requests if r.user.startswith("You are an expert grader")]
    templated = [r.user for r in judge_server.requests if r.user.startswith("Answer:")]
    assert len(built_in) == len(templated) == len(samples)
    with_error = [u for u in built_in if "[[ ## error ## ]]" in u]
    # Each errored sample's prompt ends with its error, after the (empty) answer.
    assert sorted(u.rsplit("[[ ## error ## ]]\n", 1)[1] for u in with_error) == sorted(e.strip() for e in errors)
    assert all("[[ ## answer ## ]]" in u.split("[[ ## error ## ]]")[0] for u in with_error)
    scripted = [r.user for r in judge_server.requests if r.user.startswith("Script saw:")]
    assert sorted(u.split("[", 1)[1].split("]", 1)[0] for u in scripted) == sorted(
        list(errors) + [""] * (len(samples) - len(errors))
    )
    assert sorted(u.split("] Error: [", 1)[1][:-1] for u in templated) == sorted(
        list(errors) + [""] * (len(samples) - len(errors))
    )


def test_an_eval_without_tests_is_refused_where_no_run_gives_them(tmp_path: Path) -> None:
    eval_file = _suite(tmp_path, CODE.format(seen=tmp_path / "seen"))
    with pytest.raises(ReplayError, match="evalstore replay RUN --eval FILE"):
        load_eval(eval_file)
    suite = load_eval(eval_file, run_tests=lambda: [{"id": "a", "input": "hi", "expected_output": "yo"}])
    assert suite.tests_from_run and [t.id for t in suite.tests] == ["a"]
    assert [g.name for g in suite.tests[0].graders] == ["exact"]


def test_a_replay_of_the_regrade_grades_the_same_tests_again(tmp_path: Path) -> None:
    """The eval snapshot has no tests either: a replay of the replay takes them from the run again."""
    db = str(tmp_path / "s.db")
    eval_file = _suite(tmp_path, CODE.format(seen=tmp_path / "seen"))
    run_id = _ok(_cli(db, "import", str(LOGS / "choice.eval"), "--json"))["run_id"]
    first = json.loads(_cli(db, "replay", run_id, "--eval", str(eval_file), "--json").stdout)["run_id"]
    second = _cli(db, "replay", first, "--json")
    assert second.exit_code in (0, 1), second.output
    results = _ok(_cli(db, "show", json.loads(second.stdout)["run_id"], "--json"))["results"]
    assert len(results) == 9 and all(set(r["graders"]) == {"exact"} for r in results)
