"""``show``, ``export`` and ``compare`` read projections and stream: large runs print the first rows with
a count (``--all`` for every row), and compare reads full verdicts only where it shows assertions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalstore import cli as cli_package
from evalstore.cli.output import TABLE_ROWS

ROWS = TABLE_ROWS + 12


def _cli(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args], catch_exceptions=False)


def _row(i: int, moved: bool) -> dict:
    """An AgentV 4.x row with two graders; ``moved`` flips the rubric grader (and the test) to fail."""
    rubric_pass = (i % 3 != 0) != moved
    rubric = {
        "name": "rubric",
        "type": "llm-grader",
        "score": 1.0 if rubric_pass else 0.25,
        "weight": 1,
        "verdict": "pass" if rubric_pass else "fail",
        "assertions": [
            {"text": f"names the cause of case {i}", "passed": rubric_pass, "evidence": f"evidence {i}"},
            {"text": "is polite", "passed": True},
        ],
        "input": {"userPrompt": f"grade answer {i}", "systemPrompt": "You grade."},
    }
    code = {
        "name": "syntax",
        "type": "code-grader",
        "score": 1,
        "weight": 1,
        "verdict": "pass",
        "assertions": [{"text": "compiles", "passed": True}],
    }
    score = (rubric["score"] + 1) / 2
    return {
        "timestamp": "2026-03-01T10:00:00.000Z",
        "test_id": f"case-{i:03d}",
        "suite": "read",
        "score": score,
        "target": "default",
        "execution_status": "ok" if score >= 0.8 else "quality_failure",
        "scores": [rubric, code],
    }


def _import(db: str, tmp_path: Path, name: str, moved: set[int]) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(_row(i, i in moved)) + "\n" for i in range(ROWS)), encoding="utf-8")
    result = _cli(db, "import", str(path), "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["run_id"]


def test_show_prints_the_first_rows_with_a_count_and_all_prints_every_row(sqlite_url: str, tmp_path: Path) -> None:
    run = _import(sqlite_url, tmp_path, "a", set())
    table = _cli(sqlite_url, "show", run)
    assert table.exit_code == 0
    shown = [i for i in range(ROWS) if f"case-{i:03d}" in table.stdout]
    assert shown == list(range(TABLE_ROWS))
    assert f"first {TABLE_ROWS} of {ROWS} results; --all prints every one" in table.stdout

    every = _cli(sqlite_url, "show", run, "--all")
    assert every.exit_code == 0
    lines = every.stdout.splitlines()
    header = lines.index("test\ttarget\tscore\tpass\tstatus\tgraders\twhy")
    rows = [line.split("\t") for line in lines[header + 1 :]]
    assert [r[0] for r in rows] == [f"case-{i:03d}" for i in range(ROWS)]
    assert rows[0][2:] == ["0.625", "no", "quality_failure", "rubric=0.250, syntax=1.000", ""]
    assert rows[1][2:] == ["1.000", "yes", "ok", "rubric=1.000, syntax=1.000", ""]
    assert "first" not in every.stdout


def test_show_json_streams_every_result_with_its_graders(sqlite_url: str, tmp_path: Path) -> None:
    run = _import(sqlite_url, tmp_path, "a", set())
    data = json.loads(_cli(sqlite_url, "show", run, "--json").stdout)
    assert data["run"]["run_id"] == run and data["run"]["tests"] == ROWS
    assert data["skipped_lines"] == []
    assert [r["test_id"] for r in data["results"]] == [f"case-{i:03d}" for i in range(ROWS)]
    first = data["results"][0]
    assert first["graders"] == {"rubric": 0.25, "syntax": 1.0}
    assert first["verdicts"] == {"rubric": "fail", "syntax": "pass"}
    assert first["passed"] is False and first["origin"] == "imported"


def test_compare_from_projections_equals_compare_of_the_full_events(store_url: str, tmp_path: Path) -> None:
    """Pairing reads projection rows; flipped results (and --test) still show every assertion."""
    from evalstore.replay.analysis.compare import VerdictScore, compare
    from evalstore.replay.material import load_results, load_scores
    from evalstore.store import EventStore, make_engine

    a = _import(store_url, tmp_path, "a", set())
    b = _import(store_url, tmp_path, "b", {1, 2, 4, 30})
    store = EventStore(make_engine(store_url))
    try:
        light_a, light_b = load_scores(store, a), load_scores(store, b)
        assert all(isinstance(v, VerdictScore) for r in light_a.results.values() for v in r.verdicts.values())
        full = compare(load_results(store, a), load_results(store, b), test_id="case-002").to_dict()
        light = compare(light_a, light_b, test_id="case-002").to_dict()
    finally:
        store.close()
    assert light == full
    assert [f["test_id"] for f in light["flipped"]] == ["case-001", "case-002", "case-004", "case-030"]
    rubric = next(g for g in light["flipped"][0]["graders"] if g["grader"] == "rubric")
    assert rubric["a"]["assertions"][0] == {
        "text": "names the cause of case 1",
        "passed": True,
        "evidence": "evidence 1",
    }
    assert light["assertion_diffs"][0]["graders"][0]["changed"][0]["text"] == "names the cause of case 2"

    printed = json.loads(_cli(store_url, "compare", a, b, "--json").stdout)
    assert printed["flipped"] == light["flipped"] and printed["overall"] == light["overall"]


def test_results_with_verdicts_and_get_blobs(store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from evalstore.replay.agentv.importing import import_results
    from evalstore.store import BlobNotFound, sha256_hex

    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(_row(i, False)) + "\n" for i in range(5)), encoding="utf-8")
    run = import_results(store, path).run_id
    got = list(store.results_with_verdicts(run))
    assert [r[0] for r, _ in got] == [f"case-{i:03d}" for i in range(5)]
    assert all([v[0] for v in verdicts] == ["rubric", "syntax"] for _, verdicts in got)
    assert got[0][1][0][1:4] == ("llm-grader", 0.25, "fail")
    assert list(store.results_with_verdicts("no-such-run")) == []

    bodies = {sha256_hex(b): b for b in (b"one", b"two" * 400)}
    store.put_blobs(bodies)
    assert store.get_blobs([*bodies, *bodies]) == bodies
    with pytest.raises(BlobNotFound):
        store.get_blobs([*bodies, "0" * 64])


def test_writing_a_run_out_pauses_cycle_collection_and_restores_it() -> None:
    import gc

    from evalstore.cli.output import no_cycle_collection

    was = gc.isenabled()
    try:
        for before in (True, False):
            gc.enable() if before else gc.disable()
            with pytest.raises(RuntimeError), no_cycle_collection():
                assert not gc.isenabled()
                raise RuntimeError("a failed export")
            assert gc.isenabled() is before
    finally:
        gc.enable() if was else gc.disable()
