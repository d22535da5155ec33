"""Inspect AI logs with what a real user's logs hold and the other fixtures lack (tests/fixtures/inspect-newuser3:
images in the input, sample files and setup in a local sandbox, int and str ids mixed, an id with a slash
and a space, scorers of str/bool/out-of-range values and None answers, a second model's usage, store,
subtask, info, sandbox and tool events, a 300-message transcript cut by the message limit, epochs reduced
by the median, logs left "error", "cancelled" and "started" with fewer samples than planned, a log
rescored by ``inspect score --action append``, one converted by ``inspect log convert --to json``):
imported with every scorer value as Inspect's value_to_float reads it, regraded by suite-level code and
deterministic assertions with no warning about fields the user never wrote, exported and read back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixture_paths import FIXTURES_DIR
from inspect_values import expected_verdicts

from evalstore import cli as cli_package
from evalstore.replay.inspect.importing import import_log
from evalstore.replay.material import load_run
from evalstore.store import EventStore, make_engine

inspect_log = pytest.importorskip("inspect_ai.log")

LOGS = FIXTURES_DIR / "inspect-newuser3" / "logs"
ALL_LOGS = sorted(LOGS.iterdir())

GRADER = """
import json, sys
p = json.load(sys.stdin)
expected = json.dumps(p["expected_output"], ensure_ascii=False).lower()
words = [w for w in p["output"].lower().replace(".", " ").split() if len(w) > 1 or w.isdigit()]
ok = any(w in expected for w in words)
print(json.dumps({"score": 1.0 if ok else 0.0, "assertions": [{"text": "a word of the answer is in the target", "passed": ok}]}))
"""

SUITE = """name: regrade
assertions:
  - name: target_word
    type: code-grader
    command: [python3, grader.py]
  - name: includes
    type: contains
    value: "5"
"""


def _cli(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args])


def _json(result) -> dict:  # type: ignore[no-untyped-def]
    assert result.exit_code in (0, 1), result.output  # a replay exits 1 when tests are below the threshold
    return json.loads(result.stdout)


def test_the_fixtures_hold_what_they_are_kept_for() -> None:
    """What each log was made to hold (make_logs.py), so a remade log that lost it fails here."""
    media = inspect_log.read_eval_log(LOGS / "media.eval")
    assert [s.id for s in media.samples] == [1, 3, "geo/fr 4", "zwei"]  # read_eval_log's order
    values = {(s.id, n): sc.value for s in media.samples for n, sc in s.scores.items()}
    assert {values[(1, "verdict_word")], values[(1, "out_of_ten")], values[(3, "out_of_ten")]} == {"maybe", "7.5", -1.5}
    assert isinstance(values[(1, "is_short")], bool) and values[("zwei", "out_of_ten")] == 8
    first = media.samples[0]
    assert any(getattr(c, "type", None) == "image" for c in first.input[0].content)
    assert set(first.model_usage) == {"mockllm/model", "mockllm/helper"} and first.store
    assert {"sandbox", "tool", "info", "score", "subtask"} <= {
        e.event if e.event != "span_begin" else getattr(e, "type", None) for e in media.samples[1].events
    }
    assert media.samples[1].files == ["notes.txt"] and media.samples[1].setup
    agent = inspect_log.read_eval_log(LOGS / "agent.eval")
    assert {(s.output.completion, s.output.message.text) for s in agent.samples} == {
        ("Paris", "I will submit my answer."),
        ("Barcelona", "I will submit my answer."),
    }
    loop = inspect_log.read_eval_log(LOGS / "loop.eval")
    long = next(s for s in loop.samples if s.id == "long")
    assert long.limit is not None and long.limit.type == "message" and len(long.messages) == 300
    assert (loop.eval.config.epochs, loop.eval.config.epochs_reducer) == (3, ["median"])
    status = {p.name: inspect_log.read_eval_log(p, header_only=True).status for p in ALL_LOGS}
    assert (status["sums-error.eval"], status["sums-cancelled.eval"], status["sums-interrupted.eval"]) == (
        "error",
        "cancelled",
        "started",
    )
    rescored = inspect_log.read_eval_log(LOGS / "sums-rescored.eval")
    assert [s.name for s in rescored.results.scores] == ["includes", "second_opinion"]


@pytest.mark.parametrize("log", ALL_LOGS, ids=[p.name for p in ALL_LOGS])
def test_imported_regraded_and_exported(log: Path, store_url: str, tmp_path: Path) -> None:
    db = store_url
    imported = _json(_cli(db, "import", str(log), "--json"))
    run_id = imported["run_id"]
    expected = expected_verdicts(log)
    planned = inspect_log.read_eval_log(log, header_only=True)
    if len(planned.eval.dataset.sample_ids or []) * (planned.eval.config.epochs or 1) > len(expected):
        assert any("not in it" in w for w in imported["warnings"])  # a cancelled eval's missing samples, said
    if planned.status != "success":  # an eval that was cancelled, interrupted or ended in an error: said
        assert any(f"(the eval's status: {planned.status}" in w for w in imported["warnings"]), imported["warnings"]
    # ... and kept: the run is a complete import of what the log holds, of an eval that ended otherwise.
    (listed,) = [r for r in _json(_cli(db, "runs", "--json")) if r["run_id"] == run_id]
    ended = None if planned.status == "success" else planned.status
    assert listed["status"] == "completed" and listed["source_status"] == ended
    said = {"started": "unfinished"}.get(ended, ended)  # a log whose process died is still "started"
    shown_status = f"status=completed ({said} at source)" if ended else "status=completed "
    assert shown_status in _cli(db, "show", run_id).stdout
    # Every scorer value, as Inspect's value_to_float reads it ("maybe" 0, True 1, "7.5" 7.5, -1.5, 8).
    shown = _json(_cli(db, "show", run_id, "--json"))["results"]
    got = {(r["test_id"], r["attempt"]): r["graders"] for r in shown}
    assert set(got) == set(expected)
    for key, verdicts in expected.items():
        for name, value in verdicts.items():
            if value is not None:
                assert got[key][name] == pytest.approx(value), (key, name)
    # A tests-less suite of a code and a deterministic grader scores every sample, and says nothing about
    # fields of the run's own tests (an Inspect message's id and source were "unknown keys" of the
    # user's file: a warning a message of every sample).
    (tmp_path / "grader.py").write_text(GRADER, encoding="utf-8")
    suite = tmp_path / "regrade.eval.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    replayed = _cli(db, "replay", run_id, "--eval", str(suite), "--json")
    # Only the log's scorers the suite does not grade again are said, once: their scores are not regraded.
    left = sorted({name for verdicts in expected.values() for name in verdicts} - {"target_word", "includes"})
    warnings = [line for line in replayed.stderr.splitlines() if "warning" in line]
    said = f"Inspect scorer{'s' if len(left) > 1 else ''} {', '.join(left)} {'are' if len(left) > 1 else 'is'} not in"
    assert (len(warnings), said in replayed.stderr) == ((1, True) if left else (0, False)), replayed.stderr
    replay_id = _json(replayed)["run_id"]
    regraded = _json(_cli(db, "show", replay_id, "--json"))["results"]
    assert len(regraded) == len(expected)
    assert all({"target_word", "includes"} <= set(r["graders"]) for r in regraded)
    compared = _cli(db, "compare", run_id, replay_id, "--json")
    assert compared.exit_code in (0, 1), compared.output
    assert "includes" in {g["grader"] for g in json.loads(compared.stdout)["graders"]}
    # Back out: read by Inspect with the log's status, every sample with both scores, the original values
    # of the scorers the regrade did not touch as they were, Inspect's own metrics.
    out = tmp_path / "out.eval"
    exported = _cli(db, "export", replay_id, "--format", "inspect", "-o", str(out))
    assert exported.exit_code == 0, exported.output
    back = inspect_log.read_eval_log(out)
    assert back.status == planned.status and len(back.samples) == len(expected)
    originals = {(s.id, s.epoch): s for s in inspect_log.read_eval_log_samples(log, all_samples_required=False)}
    for sample in back.samples:
        original = originals[(sample.id, sample.epoch)]
        assert type(sample.id) is type(original.id)  # an int id stays an int
        assert {"target_word", "includes"} <= set(sample.scores)
        for name, score in (original.scores or {}).items():
            if name != "includes":
                assert sample.scores[name].value == score.value and sample.scores[name].answer == score.answer
        assert sample.input == original.input and sample.store == original.store
    again = back.model_copy(deep=True)
    with pytest.MonkeyPatch.context() as mp:  # where `inspect eval` ran: Inspect loads tasks.py for `top`
        mp.chdir(LOGS.parent)
        inspect_log.recompute_metrics(again)
    assert back.results == again.results and back.reductions == again.reductions
    if log.name == "agent.eval":  # graded on the submitted answer, as Inspect's includes was: the same verdicts
        regrade = {r["test_id"]: r["graders"]["target_word"] for r in regraded}
        assert regrade == {"fr": 1.0, "es": 0.0}


@pytest.mark.parametrize("log", ALL_LOGS, ids=[p.name for p in ALL_LOGS])
def test_a_results_output_is_the_completion_inspect_scored(store: EventStore, log: Path) -> None:
    """``output.completion``, which ``basic_agent`` sets to the submitted answer (its message keeping
    "I will submit my answer."), not the message's text."""
    run = load_run(store, import_log(store, log).run_id)
    model = inspect_log.read_eval_log(log, header_only=True).eval.model
    for sample in inspect_log.read_eval_log_samples(log, all_samples_required=False):
        transcript = run.tests[(str(sample.id), model, sample.epoch)].transcript
        assert transcript is not None
        assert (transcript[1].output_text or "") == sample.output.completion, (sample.id, sample.epoch)


def test_an_import_exported_untouched_is_the_log_it_was(sqlite_url: str, tmp_path: Path) -> None:
    """Images, files, setup, store, events and both models' usage come back as Inspect wrote them."""
    log = LOGS / "media.eval"
    run_id = _json(_cli(sqlite_url, "import", str(log), "--json"))["run_id"]
    out = tmp_path / "out.json"
    assert _cli(sqlite_url, "export", run_id, "--format", "inspect", "-o", str(out)).exit_code == 0
    original, back = inspect_log.read_eval_log(log), inspect_log.read_eval_log(out)
    assert [s.model_dump() for s in back.samples] == [s.model_dump() for s in original.samples]
    assert back.results == original.results


def test_a_cases_input_keeps_the_image_and_leaves_the_message_ids_to_the_sample(sqlite_url: str) -> None:
    run_id = _json(_cli(sqlite_url, "import", str(LOGS / "media.eval"), "--json"))["run_id"]
    shown = _json(_cli(sqlite_url, "show", run_id, "--json"))
    assert shown["results"]
    store = EventStore(make_engine(sqlite_url))
    try:
        run = load_run(store, run_id)
        cases = {key[0]: m.case[1] for key, m in run.tests.items() if m.case}
    finally:
        store.close()
    (picture,) = cases["1"].input
    assert picture["content"][1]["type"] == "image" and picture["content"][1]["source"].startswith("data:image/png")
    assert all("metadata" not in m for case in cases.values() for m in case.input)
    assert [m["role"] for m in cases["zwei"].input] == ["system", "user"]


def _export_elsewhere(db: str, run_id: str, out: Path) -> subprocess.CompletedProcess[str]:
    """``evalstore export`` in a process of its own (Inspect's metric registry as a user's new process has
    it), from a folder without the task's file."""
    argv = [sys.executable, "-m", "evalstore.cli", "--db", db, "export", run_id, "--format", "inspect", "-o", str(out)]
    return subprocess.run(argv, cwd=out.parent, capture_output=True, text=True, timeout=300)


def test_a_metric_of_the_tasks_own_file_is_kept_where_inspect_cannot_make_it(tmp_path: Path) -> None:
    """media.eval's verdict_word has a metric of tasks.py's own (`top`), which Inspect's recompute_metrics
    makes by loading the log's task_file relative to where it runs: from anywhere else every export of the
    log failed ("tasks.py: No such file or directory"). Its value is kept as the log has it where the
    scores did not change, and left out (said in the results' metadata) where a regrade changed them."""
    db = f"sqlite:///{tmp_path / 's.db'}"
    log = LOGS / "media.eval"
    original = inspect_log.read_eval_log(log, header_only=True).results
    run_id = _json(_cli(db, "import", str(log), "--json"))["run_id"]
    (tmp_path / "grader.py").write_text(GRADER, encoding="utf-8")
    suite = tmp_path / "regrade.eval.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    replay_id = _json(_cli(db, "replay", run_id, "--eval", str(suite), "--json"))["run_id"]
    suite.write_text(SUITE.replace("name: includes", "name: verdict_word"), encoding="utf-8")
    rescored_id = _json(_cli(db, "replay", run_id, "--eval", str(suite), "--json"))["run_id"]
    assert not (tmp_path / "tasks.py").exists()

    plain = _export_elsewhere(db, run_id, tmp_path / "plain.eval")
    assert plain.returncode == 0, plain.stderr
    assert inspect_log.read_eval_log(tmp_path / "plain.eval", header_only=True).results == original

    regraded = _export_elsewhere(db, replay_id, tmp_path / "regraded.eval")
    assert regraded.returncode == 0, regraded.stderr
    results = {
        s.name: s for s in inspect_log.read_eval_log(tmp_path / "regraded.eval", header_only=True).results.scores
    }
    before = {s.name: s for s in original.scores}
    assert list(results["verdict_word"].metrics) == ["mean", "top"]
    assert results["verdict_word"].metrics == before["verdict_word"].metrics
    assert results["includes"].metrics["accuracy"].value == 0.0  # recomputed: the regrade's contains "5"

    rescored = _export_elsewhere(db, rescored_id, tmp_path / "rescored.eval")
    assert rescored.returncode == 0, rescored.stderr
    back = inspect_log.read_eval_log(tmp_path / "rescored.eval", header_only=True)
    word = next(s for s in back.results.scores if s.name == "verdict_word")
    assert list(word.metrics) == ["mean"]
    assert back.results.metadata["evalstore"]["metrics_not_recomputed"] == {"verdict_word": ["top"]}
    assert [m.name for m in next(s for s in back.eval.scorers if s.name == "verdict_word").metrics] == [
        "inspect_ai/mean",
        "top",
    ]  # the header still says what the task declared


def test_the_task_file_a_log_names_is_never_run_by_an_export(tmp_path: Path) -> None:
    """Inspect's recompute_metrics loads the log's task_file (a path the log names) to make a metric it does
    not know: a log imported from anyone would run a file of that name where the export runs. The export
    never lets it: the task's own metric is kept as the log has it, and the file is not run."""
    db = f"sqlite:///{tmp_path / 's.db'}"
    log = LOGS / "media.eval"
    header = inspect_log.read_eval_log(log, header_only=True)
    task_file = header.eval.task_file
    assert task_file and not Path(task_file).is_absolute()
    run_id = _json(_cli(db, "import", str(log), "--json"))["run_id"]
    planted = tmp_path / task_file
    planted.parent.mkdir(parents=True, exist_ok=True)
    marker = tmp_path / "ran"
    planted.write_text(f"open({str(marker)!r}, 'w').write('ran')\n", encoding="utf-8")
    exported = _export_elsewhere(db, run_id, tmp_path / "out.eval")
    assert exported.returncode == 0, exported.stderr
    assert not marker.exists()
    assert inspect_log.read_eval_log(tmp_path / "out.eval", header_only=True).results == header.results


def test_a_grader_named_as_a_scorer_of_per_key_metrics_is_refused_in_one_line(tmp_path: Path) -> None:
    """review.json's `style` scorer has metrics per key of its dict value; a regrade grader of that name
    made Inspect's metrics raise a TypeError: exit 3."""
    db = str(tmp_path / "s.db")
    run_id = _json(_cli(db, "import", str(FIXTURES_DIR / "inspect-newuser" / "logs" / "review.json"), "--json"))[
        "run_id"
    ]
    suite = tmp_path / "clash.eval.yaml"
    suite.write_text("name: clash\nassertions:\n  - name: style\n    type: contains\n    value: Paris\n")
    replay_id = _json(_cli(db, "replay", run_id, "--eval", str(suite), "--json"))["run_id"]
    out = tmp_path / "out.eval"
    exported = _cli(db, "export", replay_id, "--format", "inspect", "-o", str(out))
    assert exported.exit_code == 2, exported.output
    (line,) = exported.output.strip().splitlines()
    assert "grader style is named as the log's scorer style" in line and not out.exists()
    assert not list(tmp_path.glob(".out.*"))  # no half-written log left behind


def test_values_inspect_reads_as_zero_are_said_once_per_log_not_once_per_value(tmp_path: Path) -> None:
    """Inspect's value_to_float logs a line per value it cannot read (a word: it counts 0), from the import's
    workers, naming no log; the import says it once, with the log and the values, and keeps them."""
    for name in ("media.eval", "media-converted.json"):  # built by forked workers, and in the process
        db = tmp_path / f"{name}.db"
        done = subprocess.run(
            [sys.executable, "-m", "evalstore", "--db", str(db), "import", str(LOGS / name)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert "Unable to convert" not in done.stderr, done.stderr
        said = [line for line in done.stderr.splitlines() if "cannot read as a number" in line]
        assert said == [
            f"warning: {LOGS / name}: 1 score value Inspect cannot read as a number, counted 0 as in Inspect's "
            "metrics (kept as written in the verdicts' details): 'maybe' (1)"
        ], done.stderr


def test_the_viewer_says_an_eval_was_cancelled_beside_its_import(sqlite_url: str) -> None:
    from starlette.testclient import TestClient

    from evalstore.viewer import create_app

    run_id = _json(_cli(sqlite_url, "import", str(LOGS / "sums-cancelled.eval"), "--json"))["run_id"]
    store = EventStore(make_engine(sqlite_url))
    try:
        with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
            listed = client.get("/runs").text.split(f'data-run="{run_id}"')[1].split("</tr>")[0]
            assert "<td>completed (cancelled at source)</td>" in listed
            assert "<dd>completed (cancelled at source)</dd>" in client.get(f"/runs/{run_id}").text
    finally:
        store.close()


def test_show_says_why_a_sample_is_an_execution_error(sqlite_url: str) -> None:
    """The sample's own error, where its graders have nothing to say: not an empty "why"."""
    run_id = _json(_cli(sqlite_url, "import", str(LOGS / "sums-error.eval"), "--json"))["run_id"]
    shown = _json(_cli(sqlite_url, "show", run_id, "--json"))["results"]
    errors = [r for r in shown if r["status"] == "execution_error"]
    assert errors and all(r["error"] and r["note"] == r["error"] for r in errors), errors
    assert all(r["note"] == "" for r in shown if r["status"] != "execution_error")
    text = _cli(sqlite_url, "show", run_id).stdout
    assert all(r["error"][:12] in text for r in errors), text


def test_a_list_target_is_one_expected_message_per_target(sqlite_url: str, tmp_path: Path) -> None:
    # Sample `zwei`'s target is ["Schweiz", "Switzerland"]: a code grader is given one assistant message per
    # target, which the SDK reads as two texts, and an LLM grader's reference answer is the last one's (as
    # AgentV renders several expected messages), not the JSON of one message of text segments.
    from evalstore.replay.grading.judge.templates import render_expected

    run_id = _json(_cli(sqlite_url, "import", str(LOGS / "media.eval"), "--json"))["run_id"]
    store = EventStore(make_engine(sqlite_url))
    try:
        cases = {key[0]: m.case[1] for key, m in load_run(store, run_id).tests.items() if m.case}
    finally:
        store.close()
    assert cases["zwei"].expected_output == [
        {"role": "assistant", "content": "Schweiz"},
        {"role": "assistant", "content": "Switzerland"},
    ]
    assert cases["3"].expected_output == "hello"  # a string target as it was
    assert render_expected(cases["zwei"].expected_output) == "Switzerland"
    (tmp_path / "sdk.py").write_text(
        "from evalstore.grader import CodeGraderInput, Result, code_grader\n"
        "@code_grader\n"
        "def grade(p: CodeGraderInput) -> Result:\n"
        "    r = Result()\n"
        "    texts = [m.text for m in p.expected_output]\n"
        "    r.check(repr(texts), texts == ['Schweiz', 'Switzerland'])\n"
        "    return r\n",
        encoding="utf-8",
    )
    suite = tmp_path / "sdk.eval.yaml"
    suite.write_text(
        f"name: sdk\nassertions:\n  - name: targets\n    type: code-grader\n"
        f"    command: [{sys.executable}, {tmp_path / 'sdk.py'}]\n",
        encoding="utf-8",
    )
    replay_id = _json(_cli(sqlite_url, "replay", run_id, "--eval", str(suite), "--tests", "zwei", "--json"))["run_id"]
    (result,) = [r for r in _json(_cli(sqlite_url, "show", replay_id, "--json"))["results"] if r["test_id"] == "zwei"]
    assert result["graders"]["targets"] == 1.0, result
