"""A replay reuses recorded code-grader executions whose inputs are byte-identical, and runs only what changed.

Every grader process appends its name to a log file (named in its argv, so the log is no input that
changes), which counts the processes that really ran.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalstore import cli as cli_package

GRADER = """\
import json, sys
name, log = sys.argv[1], sys.argv[2]
with open(log, "a") as fh:
    fh.write(name + "\\n")
payload = json.load(sys.stdin)
ok = "Total" in (payload.get("output") or "")
print(json.dumps({"score": 1 if ok else 0, "assertions": [{"text": name + " VERSION", "passed": ok}]}))
"""
EVAL = """\
name: reuse
tests: ./cases.yaml
assertions:
{graders}
"""
GRADERS = ("alpha", "beta", "gamma")
TESTS = 4
ALL_REUSED = {"code_ran": 0, "code_reused": 3 * TESTS, "code_not_run": 0, "code_carried": 0, "judge_reused": 0}
"""The reuse counts of a replay that ran no grader process: every execution of the three graders reused."""


def _cli(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args], catch_exceptions=False)


def _suite(root: Path, *, uncached: str | None = None) -> tuple[Path, Path, Path]:
    log = root / "processes.log"
    graders = []
    for name in GRADERS:
        (root / f"{name}.py").write_text(GRADER.replace("VERSION", "v1"))
        entry = f"  - name: {name}\n    type: code-grader\n    command: [{json.dumps(sys.executable)}, {name}.py, {name}, {json.dumps(str(log))}]"
        if name == uncached:
            entry += "\n    cache: false"
        graders.append(entry)
    eval_file = root / "reuse.eval.yaml"
    eval_file.write_text(EVAL.format(graders="\n".join(graders)))
    cases = [{"id": f"t{i}", "input": f"question {i}", "criteria": "states a total"} for i in range(TESTS)]
    (root / "cases.yaml").write_text(json.dumps(cases))
    results = root / "results.jsonl"
    rows = [
        {
            "test_id": f"t{i}",
            "suite": "reuse",
            "score": 1,
            "target": "default",
            "output": [{"role": "assistant", "content": f"Total: {i}"}],
            "execution_status": "ok",
            "scores": [],
        }
        for i in range(TESTS)
    ]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return eval_file, results, log


def _ran(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return sorted(lines)


def _imported(db: str, root: Path, *, uncached: str | None = None) -> tuple[Path, Path, Path, str]:
    """The suite written under ``root`` and its results imported: (eval file, results, process log, run id)."""
    eval_file, results, log = _suite(root, uncached=uncached)
    printed = _cli(db, "import", str(results), "--eval", str(eval_file), "--json").stdout
    return eval_file, results, log, json.loads(printed)["run_id"]


def _replay(db: str, run: str, *extra: str) -> dict:
    result = _cli(db, "replay", run, "--json", *extra)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _verdicts(db: str, run: str) -> dict[tuple[str, str], dict]:
    from evalstore.store import EventStore, make_engine

    store = EventStore(make_engine(db))
    try:
        return {(v["test_id"], v["grader"]): v for v in store.query("verdicts", run_id=run)}
    finally:
        store.close()


def test_an_unchanged_replay_runs_no_process_and_a_changed_grader_reruns_only_its_own(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    eval_file, _results, log, imported = _imported(sqlite_url, tmp_path)

    first = _replay(sqlite_url, imported)
    assert _ran(log) == sorted(GRADERS * TESTS)  # nothing recorded yet: every process runs
    assert first["reuse"] == {
        "code_ran": 3 * TESTS,
        "code_reused": 0,
        "code_not_run": 0,
        "code_carried": 0,
        "judge_reused": 0,
    }

    again = _replay(sqlite_url, imported)
    assert _ran(log) == []  # byte-identical inputs: every execution reused
    assert again["reuse"] == ALL_REUSED
    verdicts = _verdicts(sqlite_url, again["run_id"])
    assert all(v["cache_hit"] for v in verdicts.values())
    assert {k: v["score"] for k, v in verdicts.items()} == {
        k: v["score"] for k, v in _verdicts(sqlite_url, first["run_id"]).items()
    }

    # The reuse names the execution it reused, which ran in the first replay.
    from evalstore.store import EventStore, make_engine

    store = EventStore(make_engine(sqlite_url))
    try:
        calls = [s.event for s in store.read_stream(again["run_id"], types=["grader_called"])]
        originals = {s.event_id for s in store.read_stream(first["run_id"], types=["grader_called"])}
    finally:
        store.close()
    assert len(calls) == 3 * TESTS
    assert all(c.cache_hit and c.reused_from in originals for c in calls)  # type: ignore[attr-defined]

    # One of three graders changes (its script's bytes): only its processes run.
    (tmp_path / "beta.py").write_text(GRADER.replace("VERSION", "v2"))
    changed = _replay(sqlite_url, imported, "--eval", str(eval_file))
    assert _ran(log) == ["beta"] * TESTS
    assert changed["reuse"] == {
        "code_ran": TESTS,
        "code_reused": 2 * TESTS,
        "code_not_run": 0,
        "code_carried": 0,
        "judge_reused": 0,
    }
    assert {v["cache_hit"] for k, v in _verdicts(sqlite_url, changed["run_id"]).items() if k[1] == "beta"} == {False}

    # --no-cache runs everything.
    fresh = _replay(sqlite_url, imported, "--eval", str(eval_file), "--no-cache")
    assert _ran(log) == sorted(GRADERS * TESTS)
    assert fresh["reuse"]["code_reused"] == 0


def test_a_grader_with_cache_false_always_runs(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _eval_file, _results, log, imported = _imported(sqlite_url, tmp_path, uncached="gamma")
    _replay(sqlite_url, imported)
    assert len(_ran(log)) == 3 * TESTS
    again = _replay(sqlite_url, imported)
    assert _ran(log) == ["gamma"] * TESTS
    assert again["reuse"] == {
        "code_ran": TESTS,
        "code_reused": 2 * TESTS,
        "code_not_run": 0,
        "code_carried": 0,
        "judge_reused": 0,
    }


def test_the_environment_is_part_of_the_key_but_secrets_are_not(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _eval_file, _results, log, imported = _imported(sqlite_url, tmp_path)
    monkeypatch.setenv("GRADER_MODE", "strict")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-one")
    _replay(sqlite_url, imported)
    assert len(_ran(log)) == 3 * TESTS
    monkeypatch.setenv("OPENAI_API_KEY", "sk-two")  # a secret: not in the key
    _replay(sqlite_url, imported)
    assert _ran(log) == []
    monkeypatch.setenv("GRADER_MODE", "lenient")  # a setting the grader may read: in the key
    _replay(sqlite_url, imported)
    assert len(_ran(log)) == 3 * TESTS
    # evalstore's own settings are not the grader's: not passed to it, so not in the key. (Naming the
    # store by EVALSTORE_DB instead of --db made every execution run again.)
    monkeypatch.setenv("EVALSTORE_DB", sqlite_url)
    monkeypatch.setenv("EVALSTORE_JUDGE_MODEL", "some-model")
    _replay(sqlite_url, imported)
    assert _ran(log) == []


def test_a_replay_started_from_another_folder_reuses_and_graders_see_their_own_folder_as_pwd(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grader runs in its own folder (the eval file's) wherever the user starts the replay, and its
    ``PWD`` names that folder, as a shell's ``cd`` leaves it: where the user happened to be is in neither
    what the grader sees nor its reuse key, so a replay from another folder reuses every execution."""
    monkeypatch.chdir(tmp_path)
    eval_file, _results, log, imported = _imported(sqlite_url, tmp_path)
    (tmp_path / "alpha.py").write_text(
        "import json, os, sys\n"
        "open(sys.argv[2], 'a').write('alpha\\n')\n"
        "print(json.dumps({'score': 1, 'assertions': [{'text': os.environ['PWD'], 'passed': True}]}))\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("PWD", str(elsewhere))
    first = _replay(sqlite_url, imported, "--eval", str(eval_file))
    assert len(_ran(log)) == 3 * TESTS
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", str(tmp_path))
    again = _replay(sqlite_url, imported, "--eval", str(eval_file))
    assert _ran(log) == []
    assert again["reuse"]["code_reused"] == 3 * TESTS
    from evalstore.store import EventStore, make_engine

    store = EventStore(make_engine(sqlite_url))
    try:
        seen = {
            s.event.assertions[0].text  # type: ignore[attr-defined]
            for s in store.read_stream(first["run_id"], types=["verdict_recorded"])
            if s.event.grader == "alpha"  # type: ignore[attr-defined]
        }
    finally:
        store.close()
    assert seen == {str(eval_file.parent)}


def test_graders_do_not_see_evalstores_own_settings(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's URL may carry a password: no process evalstore starts gets it."""
    monkeypatch.chdir(tmp_path)
    eval_file, _results, _log, imported = _imported(sqlite_url, tmp_path)
    (tmp_path / "alpha.py").write_text(
        "import json, os, sys\n"
        "seen = sorted(k for k in os.environ if k.startswith(('EVALSTORE_', 'GRADER_')))\n"
        "print(json.dumps({'score': 1, 'assertions': [{'text': ' '.join(seen), 'passed': True}]}))\n"
    )
    monkeypatch.setenv("EVALSTORE_DB", "postgresql://team:hunter2@db/evals")
    monkeypatch.setenv("GRADER_MODE", "strict")
    replay = _replay(sqlite_url, imported, "--eval", str(eval_file))["run_id"]
    from evalstore.store import EventStore, make_engine

    store = EventStore(make_engine(sqlite_url))
    try:
        verdicts = [s.event for s in store.read_stream(replay, types=["verdict_recorded"])]
    finally:
        store.close()
    texts = {v.assertions[0].text for v in verdicts if v.grader == "alpha"}  # type: ignore[attr-defined]
    assert texts == {"GRADER_MODE"}


def test_executions_of_runs_sharing_the_transcripts_are_read_ahead_and_others_still_found(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A replay reads the executions its transcript run's family recorded in a few queries instead of one
    # lookup per grader; an execution recorded elsewhere (another import of the same results) is still
    # found by its key, one lookup at a time.
    from evalstore.store import EventStore

    monkeypatch.chdir(tmp_path)
    eval_file, results, log, imported = _imported(sqlite_url, tmp_path)
    _replay(sqlite_url, imported)
    assert len(_ran(log)) == 3 * TESTS

    lookups: list[str] = []
    real_lookup = EventStore.lookup

    def counting(self: EventStore, index: str, key: str):  # type: ignore[no-untyped-def]
        lookups.append(index)
        return real_lookup(self, index, key)

    monkeypatch.setattr(EventStore, "lookup", counting)
    again = _replay(sqlite_url, imported)
    assert again["reuse"] == ALL_REUSED
    assert _ran(log) == [] and lookups == []

    # The same answers in another import (scored otherwise, so another run): the graders get the same input.
    copy = tmp_path / "results-rescored.jsonl"
    copy.write_text(results.read_text().replace('"score": 1', '"score": 0.5'))
    other = json.loads(_cli(sqlite_url, "import", str(copy), "--eval", str(eval_file), "--json").stdout)["run_id"]
    assert other != imported
    elsewhere = _replay(sqlite_url, other)
    assert elsewhere["reuse"] == ALL_REUSED
    assert _ran(log) == [] and lookups.count("judge_cache") == 3 * TESTS
