"""Inspect AI logs made as a new user makes them (tests/fixtures/inspect-newuser: the Python API, mockllm, a
tool-using agent, grouped metrics and pass_at_2 reducers, dict and list values, retried errors, a `.json`
log, a folder left by `inspect eval-set`): imported with every scorer value, audited, regraded on every
sample, exported and read back by Inspect with its own metrics."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixture_paths import FIXTURES_DIR

from evalstore import cli as cli_package

inspect_log = pytest.importorskip("inspect_ai.log")
from inspect_ai.scorer import value_to_float  # noqa: E402

LOGS = FIXTURES_DIR / "inspect-newuser" / "logs"

GRADER = """
import json, sys
p = json.load(sys.stdin)
expected = p["expected_output"][0]["content"] if p["expected_output"] else ""
ok = bool(expected) and str(expected).lower() in p["output"].lower()
print(json.dumps({"score": 1.0 if ok else 0.0, "assertions": [{"text": "the target is in the answer", "passed": ok}]}))
"""


def _cli(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args])


def _json(result) -> object:  # type: ignore[no-untyped-def]
    assert result.exit_code in (0, 1), result.output  # a replay exits 1 when tests are below the threshold
    return json.loads(result.stdout)


def test_a_folder_left_by_eval_set_imports_its_log_not_its_manifests(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    shutil.copytree(LOGS / "eval-set", folder)
    assert {"logs.json", "eval-set.json"} <= {p.name for p in folder.iterdir()}
    (log,) = [p for p in folder.iterdir() if p.suffix == ".eval"]
    imported = _json(_cli(str(tmp_path / "s.db"), "import", str(folder), "--json"))
    assert isinstance(imported, list) and [(i["path"], i["tests"]) for i in imported] == [(str(log), 12)]


def test_a_folder_imports_the_eval_logs_of_its_subfolders_as_inspect_lists_them(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    shutil.copytree(LOGS / "eval-set", folder / "set")  # a subfolder: its .eval, not its manifests
    (log,) = [p for p in (folder / "set").iterdir() if p.suffix == ".eval"]
    hidden = folder / ".trash" / log.name  # a hidden folder's: not a log of this folder
    hidden.parent.mkdir()
    shutil.copy(log, hidden)
    (folder / "set" / "timing.json").write_text("{}")  # a subfolder's .json: not looked at (AgentV writes them)
    imported = _json(_cli(str(tmp_path / "s.db"), "import", str(folder), "--json"))
    assert isinstance(imported, list) and [(i["path"], i["tests"]) for i in imported] == [(str(log), 12)]


@pytest.mark.parametrize("name", ["calculator.eval", "review.json"])
def test_a_new_users_log_in_regraded_and_back_out(tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture) -> None:
    db = str(tmp_path / "s.db")
    path = LOGS / name
    run_id = _json(_cli(db, "import", str(path), "--json"))["run_id"]  # type: ignore[index]
    # Every scorer value, as Inspect's value_to_float reads it (a dict or list value: one per key or item).
    results = {(r["test_id"], r["attempt"]): r for r in _json(_cli(db, "show", run_id, "--json"))["results"]}  # type: ignore[index]
    to_float = value_to_float()
    samples = list(inspect_log.read_eval_log_samples(path, all_samples_required=False))
    checked = 0
    for sample in samples:
        graders = results[(str(sample.id), sample.epoch)]["graders"]
        for scorer, score in (sample.scores or {}).items():
            value = score.value
            parts = (
                value.items()
                if isinstance(value, dict)
                else enumerate(value)
                if isinstance(value, list)
                else [(None, value)]
            )
            for key, part in parts:
                if part is None or (isinstance(part, float) and math.isnan(part)):
                    continue  # unscored: a skipped verdict
                assert graders[scorer if key is None else f"{scorer}/{key}"] == pytest.approx(to_float(part))
                checked += 1
    assert checked
    if name == "calculator.eval":  # dave's edit, in audit
        audit = _cli(db, "audit", run_id, "3")
        assert audit.exit_code == 0 and "by dave" in audit.output and "tool bug" in audit.output
    # A suite-level code grader scores every sample, the errored ones too.
    (tmp_path / "grader.py").write_text(GRADER, encoding="utf-8")
    suite = tmp_path / "regrade.eval.yaml"
    suite.write_text(
        "name: regrade\nassertions:\n  - name: has_target\n    type: code-grader\n    command: [python3, grader.py]\n"
    )
    replay_id = _json(_cli(db, "replay", run_id, "--eval", str(suite), "--json"))["run_id"]  # type: ignore[index]
    regraded = _json(_cli(db, "show", replay_id, "--json"))["results"]  # type: ignore[index]
    assert len(regraded) == len(samples) and all("has_target" in r["graders"] for r in regraded)
    # Back out as .eval and .json: read by Inspect, every sample with both scores, Inspect's metrics.
    for suffix in (".eval", ".json"):
        out = tmp_path / f"out{suffix}"
        caplog.clear()
        exported = _cli(db, "export", replay_id, "--format", "inspect", "-o", str(out))
        assert exported.exit_code == 0, exported.output
        # Inspect's warning for each value its metrics cannot read (a list, an unscored key), once per
        # sample: not a user's concern when the export computes the metrics again.
        assert not [r for r in caplog.records if "Unable to convert" in r.getMessage()]
        log = inspect_log.read_eval_log(out)
        assert len(log.samples) == len(samples)
        for sample in log.samples:
            assert "has_target" in sample.scores
            assert set(sample.scores) - {"has_target"} == set(
                next(s for s in samples if (s.id, s.epoch) == (sample.id, sample.epoch)).scores or {}
            )
        again = log.model_copy(deep=True)
        inspect_log.recompute_metrics(again)
        assert log.results == again.results and log.reductions == again.reductions
        assert "has_target" in {s.name for s in log.results.scores}


def test_an_epoch_is_named_alike_by_show_and_by_a_replay(tmp_path: Path) -> None:
    """calculator.eval ran each sample in 3 epochs: sample 3's second epoch is `3#2` in `show`'s table as in
    the replay's (`key_label`); `show` wrote `3 #2`."""
    db = str(tmp_path / "s.db")
    run_id = _json(_cli(db, "import", str(LOGS / "calculator.eval"), "--json"))["run_id"]  # type: ignore[index]
    (tmp_path / "grader.py").write_text(GRADER, encoding="utf-8")
    suite = tmp_path / "regrade.eval.yaml"
    suite.write_text(
        "name: regrade\nassertions:\n  - name: has_target\n    type: code-grader\n    command: [python3, grader.py]\n"
    )
    replayed = _cli(db, "replay", run_id, "--eval", str(suite))
    assert replayed.exit_code in (0, 1), replayed.output
    for table in (_cli(db, "show", run_id).stdout, replayed.stdout):
        names = {line.split()[0] for line in table.splitlines() if line[:1].isdigit()}
        assert {"3", "3#2", "3#3"} <= names, table
        assert " #2" not in table
