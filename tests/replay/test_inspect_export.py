"""Inspect AI logs back out: `evalstore export RUN --format inspect -o OUT.eval` is read by
inspect_ai's read_eval_log; an import comes back as it was, a regrade's verdicts are scores with
evalstore's provenance in Inspect's own history, and the samples it did not regrade are marked."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixture_paths import FIXTURES_DIR

from evalstore import cli as cli_package

inspect_log = pytest.importorskip("inspect_ai.log")

LOGS = FIXTURES_DIR / "inspect" / "logs"

GRADER = """
import json, sys
p = json.load(sys.stdin)
expected = p["expected_output"][0]["content"] if p["expected_output"] else ""
ok = p["output"].strip() == expected
print(json.dumps({"score": 1.0 if ok else 0.0, "assertions": [{"text": "the answer is the target", "passed": ok}]}))
"""


def _cli(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args])


def _run_id(result) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code in (0, 1), result.output  # a replay exits 1 when tests are below the threshold
    return json.loads(result.stdout)["run_id"]


def _eval(tmp_path: Path, *names: str) -> Path:
    (tmp_path / "grader.py").write_text(GRADER, encoding="utf-8")
    graders = "".join(f"  - name: {n}\n    type: code-grader\n    command: [python3, grader.py]\n" for n in names)
    path = tmp_path / "regrade.eval.yaml"
    path.write_text(f"name: regrade\nassertions:\n{graders}", encoding="utf-8")
    return path


def _by_key(log) -> dict:  # type: ignore[no-untyped-def]
    return {(str(s.id), s.epoch): s for s in log.samples}


@pytest.mark.parametrize("name", ["arithmetic.eval", "capitals.json"])
def test_an_imported_log_exports_as_it_was(tmp_path: Path, name: str) -> None:
    db = str(tmp_path / "s.db")
    run_id = _run_id(_cli(db, "import", str(LOGS / name), "--json"))
    out = tmp_path / f"out{Path(name).suffix}"
    result = _cli(db, "export", run_id, "--format", "inspect", "-o", str(out))
    assert result.exit_code == 0, result.output
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask  # as Inspect's own logs: others can read it
    original, exported = inspect_log.read_eval_log(LOGS / name), inspect_log.read_eval_log(out)
    assert exported.eval == original.eval and exported.results == original.results
    assert _by_key(exported).keys() == _by_key(original).keys()
    for key, sample in _by_key(original).items():
        again = _by_key(exported)[key]
        assert again.model_dump(exclude={"events"}) == sample.model_dump(exclude={"events"}), key
        assert len(again.events) == len(sample.events)
    # What `inspect view` lists: one summary a sample, in the order written.
    summaries = [(str(s.id), s.epoch) for s in inspect_log.read_eval_log_sample_summaries(out)]
    assert sorted(summaries) == sorted(_by_key(original)) and len(summaries) == len(set(summaries))


def test_a_regrade_exports_both_scores_on_every_sample_with_its_provenance(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    run_id = _run_id(_cli(db, "import", str(LOGS / "arithmetic.eval"), "--json"))
    replay_id = _run_id(_cli(db, "replay", run_id, "--eval", str(_eval(tmp_path, "exact", "match")), "--json"))
    out = tmp_path / "regraded.eval"
    result = _cli(db, "export", replay_id, "--format", "inspect", "-o", str(out))
    assert result.exit_code == 0, result.output
    original = _by_key(inspect_log.read_eval_log(LOGS / "arithmetic.eval"))
    log = inspect_log.read_eval_log(out)
    exported = _by_key(log)
    assert exported.keys() == original.keys()
    for key, sample in original.items():
        scores = exported[key].scores or {}
        if sample.error:  # the model failed, Inspect scored nothing: the regrade's scores, added
            assert set(scores) == {"exact", "match"} and scores["exact"].value == scores["match"].value == 0.0
            assert [h.provenance.author for h in scores["match"].history] == ["evalstore"]
            continue
        right = sample.output.completion.strip() == sample.target
        # Inspect's own scores, untouched but for the regrade's edit of `match`.
        for name, score in (sample.scores or {}).items():
            if name != "match":
                assert scores[name] == score
        # The regrade's new score, named after its grader, added with evalstore's provenance.
        exact = scores["exact"]
        assert exact.value == (1.0 if right else 0.0)
        (added,) = exact.history
        assert added.provenance.author == "evalstore"
        assert f"evalstore replay {replay_id} of {run_id}" in added.provenance.reason
        assert "grader exact (code-grader)" in added.provenance.reason
        assert exact.metadata["evalstore"]["run_id"] == replay_id
        # A score of the same name: an edit; Inspect's history keeps the original first. `match` scored C or
        # I: the regrade's passed or failed verdict is written C or I too, the scorer's form, which Inspect's
        # viewer shows (the score itself is in the reason).
        match = scores["match"]
        assert sample.scores["match"].value in ("C", "I")
        assert match.value == ("C" if right else "I")
        assert match.history[0].provenance is None and match.history[0].value == sample.scores["match"].value
        assert match.history[-1].provenance.author == "evalstore"
        assert f"regraded score match: {sample.scores['match'].value!r} -> {1.0 if right else 0.0!r}" in (
            match.history[-1].provenance.reason
        )
    # What `inspect view` lists a log by: its sample summaries, with the regrade's scores.
    summaries = inspect_log.read_eval_log_sample_summaries(out)
    assert len(summaries) == len(original)
    assert all("exact" in (s.scores or {}) for s in summaries)
    marking = log.metadata["evalstore"]
    assert marking["run_id"] == replay_id and marking["imported_run_id"] == run_id
    assert marking["unregraded_samples"] == [] and marking["regraded_samples"] == len(original)


def _metric(log, scorer: str, metric: str) -> float:  # type: ignore[no-untyped-def]
    return next(s for s in log.results.scores if s.name == scorer).metrics[metric].value


def test_the_exported_results_are_inspects_metrics_over_the_scores_as_they_stand(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    run_id = _run_id(_cli(db, "import", str(LOGS / "arithmetic.eval"), "--json"))
    replay_id = _run_id(_cli(db, "replay", run_id, "--eval", str(_eval(tmp_path, "exact", "match")), "--json"))
    out = tmp_path / "regraded.eval"
    assert _cli(db, "export", replay_id, "--format", "inspect", "-o", str(out)).exit_code == 0
    log = inspect_log.read_eval_log(out)
    # What Inspect itself computes from the exported samples' scores (every sample read whole).
    again = log.model_copy(deep=True)
    inspect_log.recompute_metrics(again)
    assert log.results == again.results and log.reductions == again.reductions
    # Every original scorer, as edited by the regrade or not, and every regrade scorer.
    original = inspect_log.read_eval_log(LOGS / "arithmetic.eval")
    names = [s.name for s in log.results.scores]
    assert set(names) == {s.name for s in original.results.scores} | {"exact"}
    assert next(s for s in log.results.scores if s.name == "includes") == next(
        s for s in original.results.scores if s.name == "includes"
    )
    # exact: Inspect's metrics for a score no scorer declares (mean, stderr), each sample's epochs reduced
    # by their mean, over every sample id (the errored one too: the regrade scored it).
    per_id: dict[str, list[float]] = {}
    for sample in log.samples:
        per_id.setdefault(str(sample.id), []).append(float(sample.scores["exact"].value))
    means = [sum(v) / len(v) for v in per_id.values()]
    assert _metric(log, "exact", "mean") == pytest.approx(sum(means) / len(means))
    assert "stderr" in next(s for s in log.results.scores if s.name == "exact").metrics
    assert _metric(log, "match", "accuracy") == pytest.approx(_metric(log, "exact", "mean"))
    assert _metric(log, "match", "accuracy") != pytest.approx(_metric(original, "match", "accuracy"))
    assert log.results.completed_samples == original.results.completed_samples


def test_samples_outside_tests_keep_their_scores_and_are_marked(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    run_id = _run_id(_cli(db, "import", str(LOGS / "choice.eval"), "--json"))
    first = _run_id(_cli(db, "replay", run_id, "--eval", str(_eval(tmp_path, "answer")), "--tests", "q1", "--json"))
    # A replay of the replay grading q2: q1's verdicts carried from the first replay, q3 still Inspect's own.
    second = _run_id(_cli(db, "replay", first, "--tests", "q2", "--json"))
    original = _by_key(inspect_log.read_eval_log(LOGS / "choice.eval"))
    graded_by = {first: {"q1": first}, second: {"q1": first, "q2": second}}
    for exported_run, graders in graded_by.items():
        out = tmp_path / f"{exported_run}.eval"
        assert _cli(db, "export", exported_run, "--format", "inspect", "-o", str(out)).exit_code == 0
        log = inspect_log.read_eval_log(out)
        for key, sample in _by_key(log).items():
            if key[0] in graders:
                last = sample.scores["answer"].history[-1].provenance
                assert last.author == "evalstore"
                assert f"evalstore replay {graders[key[0]]} of {run_id}" in last.reason  # the replay that graded it
            else:
                assert sample.scores == original[key].scores
        marked = {(s["id"], s["epoch"]) for s in log.metadata["evalstore"]["unregraded_samples"]}
        assert marked == {k for k in original if k[0] not in graders}


def test_what_cannot_be_exported_as_an_inspect_log_is_one_line(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    run_id = _run_id(_cli(db, "import", str(LOGS / "choice.eval"), "--json"))
    usage = _cli(db, "export", run_id, "--format", "inspect")
    assert usage.exit_code == 2 and "give it with -o LOG.eval" in usage.output
    # A replay needs the graders to regrade with: an Inspect log holds none, and the refusal says what to give.
    bare = _cli(db, "replay", run_id)
    assert bare.exit_code == 2 and bare.stderr.strip().endswith(
        "pass --eval EVAL.yaml: for an Inspect log, a file of suite-level `assertions:` (no `tests:`) grades its samples"
    )
    missing = tmp_path / "no-such-folder" / "out.eval"
    nowhere = _cli(db, "export", run_id, "--format", "inspect", "-o", str(missing))
    assert nowhere.exit_code == 2 and f"{missing}: the folder {missing.parent} does not exist" in nowhere.stderr
    wrong = _cli(db, "export", run_id, "--format", "inspect", "-o", str(tmp_path / "out.txt"))
    assert wrong.exit_code == 2 and "a .eval or .json file" in wrong.output
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"test_id": "t", "score": 1.0, "target": "x"}) + "\n", encoding="utf-8")
    other = _run_id(_cli(db, "import", str(rows), "--json"))
    refused = _cli(db, "export", other, "--format", "inspect", "-o", str(tmp_path / "out.eval"))
    assert refused.exit_code == 2 and "was not imported from an Inspect AI log" in refused.output
    assert not (tmp_path / "out.eval").exists() and not list(tmp_path.glob(".out*"))


def test_the_recorder_keeps_its_summaries_where_the_export_collects_them(tmp_path: Path) -> None:
    """The export keeps the summaries of the samples it logs itself (the recorder's own list is copied whole per
    sample: quadratic). It finds that list on the installed inspect_ai; were it gone, the export would still be
    right but quadratic again, so this says so."""
    import asyncio

    from inspect_ai.log._recorders.eval import EvalRecorder

    from evalstore.replay.inspect.export import _zip_log

    log = inspect_log.read_eval_log(LOGS / "arithmetic.eval", header_only=True)

    async def opened() -> object:
        recorder = EvalRecorder(str(tmp_path))
        await recorder.log_init(log.eval, str(tmp_path / "x.eval"), clean=True)
        return _zip_log(recorder, log.eval)

    assert asyncio.run(opened()) is not None
