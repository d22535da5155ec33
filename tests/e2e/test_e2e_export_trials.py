"""``export --format agentv-jsonl`` of a run with trials writes AgentV's rows: one per test and target, its
score the trials' aggregate, the trials in AgentV's ``trials[]`` and ``aggregation``.

tests/fixtures/agentv-trials-row (its README says how it was made) is a suite with ``execution.trials``
(``mean`` over two trials of a ``cli`` agent that answers well, then badly) and the real AgentV 4.42.4's run of
it: ``run/index.jsonl`` (the rows as the run ended) and ``streamed.jsonl`` (``t1``'s row as AgentV streams it,
with ``trials`` and ``aggregation``). The export of evalstore's run once wrote a row per trial, with the same
test id and target and no aggregate: ``agentv compare`` keeps the last row of a test (here the bad trial's 0.5)
and reported a loss against AgentV's own 0.75. An import of a row with ``trials`` once dropped them (and its
``aggregation``): the round trip AgentV -> evalstore -> AgentV lost them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import cli, ok_json, one_line_error
from fixture_paths import FIXTURES_DIR

TRIALS_ROW = FIXTURES_DIR / "agentv-trials-row"
STREAMED = TRIALS_ROW / "streamed.jsonl"
AGENTV_TRIALS_EXAMPLE = (
    FIXTURES_DIR / "agentv-examples-4.42.4/examples/features/trials/evals/dataset.eval.baseline.jsonl"
)
"""AgentV's own example's baseline rows of a suite with trials (``pass_at_k``), written by an AgentV of
before 4.42.4: ``trials`` and ``aggregation`` right after ``target``, its trials only attempt, score, verdict."""


def _rows(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def agentv_rows() -> list[dict[str, Any]]:
    return _rows((TRIALS_ROW / "run" / "index.jsonl").read_text("utf-8"))


def compare_reads(rows: list[dict[str, Any]]) -> dict[str, float]:
    """What ``agentv compare`` reads of a results file (``loadCompareResults`` in AgentV 4.42.4's
    ``dist/chunk-ISPJY2AX.js``): each row's test id and score, a later row of a test id replacing one before."""
    return {r["test_id"]: r["score"] for r in rows}


def _graders(scores: list[dict[str, Any]]) -> list[tuple[str, float, str]]:
    return [(s["name"], s["score"], s["verdict"]) for s in scores]


def members(line: str) -> dict[str, str]:
    """A JSON object line's top-level members as written: each key's value, its exact text, in the line's order."""
    decoder, out, at = json.JSONDecoder(), {}, 1
    while line[at] != "}":
        key, at = decoder.raw_decode(line, at)
        start = at + 1  # past the ':' (AgentV's lines are compact)
        _, at = decoder.raw_decode(line, start)
        out[key] = line[start:at]
        at += line[at] == ","
    return out


def _trials(row: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (t["attempt"], t["score"], t["verdict"], t["execution_status"], _graders(t["scores"])) for t in row["trials"]
    ]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The suite copied out of the checkout (its agent counts its answers in a file beside it), run from there."""
    copy = tmp_path / "trials-row"
    shutil.copytree(TRIALS_ROW, copy, ignore=shutil.ignore_patterns("run", "streamed.jsonl", "agentv.out"))
    (copy / ".git").mkdir()  # the repository root AgentV found the targets file under
    monkeypatch.chdir(copy)
    return copy


def test_an_export_of_a_run_with_trials_is_agentvs_one_row_per_test(sqlite_url: str, project: Path) -> None:
    done = ok_json(cli(sqlite_url, "run", "evals/trials.eval.yaml", "--json"))  # exit 0, as AgentV's
    assert [(r["test_id"], r["attempt"], r["score"]) for r in done["results"]] == [
        ("t1", 1, 1.0),
        ("t1", 2, 0.5),
        ("slow", 1, 1.0),
        ("slow", 2, 1.0),
    ]
    rows = _rows(cli(sqlite_url, "export", done["run_id"]).stdout)
    agentv = agentv_rows()
    # One row per test and target, as AgentV's; what `agentv compare` reads of it is AgentV's own.
    # (In the order the tests finished, which two tests run at once may change.)
    assert sorted((r["test_id"], r["target"]) for r in rows) == sorted((r["test_id"], r["target"]) for r in agentv)
    assert compare_reads(rows) == compare_reads(agentv) == {"t1": 0.75, "slow": 1}
    by_test = {r["test_id"]: r for r in rows}
    for want in agentv:
        row = by_test[want["test_id"]]
        # The best trial's row (its scores[]), the trials' score and status, no sample index.
        assert (row["score"], row["execution_status"]) == (want["score"], want["execution_status"])
        assert _graders(row["scores"]) == _graders(want["scores"])
        assert "sample_index" not in row
    # The trials as AgentV writes them (its streamed row: the rows it rewrites at the end keep none).
    (streamed,) = _rows((TRIALS_ROW / "streamed.jsonl").read_text("utf-8"))
    t1 = by_test["t1"]
    assert (
        _trials(t1)
        == _trials(streamed)
        == [
            (0, 1, "pass", "ok", [("contains-alpha", 1, "pass"), ("contains-beta", 1, "pass")]),
            (1, 0.5, "fail", "quality_failure", [("contains-alpha", 1, "pass"), ("contains-beta", 0, "fail")]),
        ]
    )
    assert t1["aggregation"] == streamed["aggregation"] == {"strategy": "mean", "mean": 0.75, "min": 0.5, "max": 1}
    assert (t1["output"], t1["assertions"]) == (streamed["output"], streamed["assertions"])
    assert {k for t in t1["trials"] for k in t} <= {k for t in streamed["trials"] for k in t} | {
        "error",
        "cost_usd",
        "failure_stage",
        "failure_reason_code",
    }
    assert list(t1)[-2:] == list(streamed)[-2:] == ["trials", "aggregation"]
    # An unchanged replay regrades each trial: its export is the run's, row for row, and it exits 0 as the
    # run did (t1's bad trial is no failure: a test with trials passes when one of them did).
    replay = ok_json(cli(sqlite_url, "replay", done["run_id"], "--json"))
    replayed = _rows(cli(sqlite_url, "export", replay["run_id"]).stdout)
    assert sorted((r["test_id"], r["score"], _trials(r), r["aggregation"]) for r in replayed) == sorted(
        (r["test_id"], r["score"], _trials(r), r["aggregation"]) for r in rows
    )


def test_an_imported_row_with_trials_exports_its_trials_as_agentv_wrote_them(sqlite_url: str, project: Path) -> None:
    """AgentV's row of a test with trials (as it streams it) comes back out of an import with its ``trials[]``
    and ``aggregation`` byte for byte: the same keys, in the same order, the same numbers, last on the row, as
    AgentV writes them; the rest of the row as any imported row's. A replay regrades the one answer the row
    kept: its row is that answer's, without AgentV's trials (they are not its results)."""
    (line,) = STREAMED.read_text("utf-8").splitlines()
    imported = ok_json(cli(sqlite_url, "import", str(STREAMED), "--json"))["run_id"]
    (exported,) = cli(sqlite_url, "export", imported, "--format", "agentv-jsonl").stdout.splitlines()
    assert exported.endswith(line[line.index(',"trials":') :])  # the bytes of both keys and their values
    assert list(members(exported))[-2:] == list(members(line))[-2:] == ["trials", "aggregation"]
    row, original = json.loads(exported), json.loads(line)
    assert (row["score"], row["execution_status"], _graders(row["scores"])) == (
        original["score"],
        original["execution_status"],
        _graders(original["scores"]),
    )
    # The trials are AgentV's: the run holds its one result, as show and the JSON export say.
    (shown,) = ok_json(cli(sqlite_url, "show", imported, "--json"))["results"]
    assert (shown["attempt"], shown["score"], shown["passed"]) == (1, 0.75, True)
    (result,) = ok_json(cli(sqlite_url, "export", imported, "--format", "json"))["results"]
    assert result["row_fields"] == {"category": "Uncategorized"}

    replay = ok_json(cli(sqlite_url, "replay", imported, "--eval", "evals/trials.eval.yaml", "--json"))
    (again,) = _rows(cli(sqlite_url, "export", replay["run_id"]).stdout)
    assert (again["test_id"], again["score"], _graders(again["scores"])) == (
        "t1",
        1,
        [("contains-alpha", 1, "pass"), ("contains-beta", 1, "pass")],
    )
    assert not {"trials", "aggregation", "cost_limited"} & set(again)
    # Nor are they labels a comparison clusters tests by.
    refused = one_line_error(cli(sqlite_url, "compare", imported, replay["run_id"], "--cluster-by", "no_such_key"))
    assert "their tests have: category (see " in refused, refused


def test_rows_of_an_earlier_agentv_keep_their_trials_too(sqlite_url: str) -> None:
    """Rows whose ``trials`` stand elsewhere on the row (an AgentV before 4.42.4 wrote them after ``target``)
    come back with the same text of each, where AgentV 4.42.4 writes them: last."""
    lines = AGENTV_TRIALS_EXAMPLE.read_text("utf-8").splitlines()
    imported = ok_json(cli(sqlite_url, "import", str(AGENTV_TRIALS_EXAMPLE), "--json"))["run_id"]
    exported = cli(sqlite_url, "export", imported, "--format", "agentv-jsonl").stdout.splitlines()
    assert len(exported) == len(lines) == 2
    for line, out in zip(lines, exported):
        theirs, ours = members(line), members(out)
        assert (ours["trials"], ours["aggregation"]) == (theirs["trials"], theirs["aggregation"])
        assert list(ours)[-2:] == ["trials", "aggregation"]


def test_an_import_of_a_run_with_trials_keeps_its_rows_whichever_wrote_them(
    sqlite_url: str, project: Path, tmp_path: Path
) -> None:
    """AgentV's rows of a test with trials are its one result already: an import of AgentV's run exports them
    as they came (the eval it kept has trials, yet nothing is aggregated again), and an import of evalstore's
    export of its own run is the same result per test as an import of AgentV's run."""
    imported = ok_json(cli(sqlite_url, "import", str(TRIALS_ROW / "run"), "--json"))["run_id"]
    again = _rows(cli(sqlite_url, "export", imported).stdout)
    agentv = agentv_rows()
    assert [(r["test_id"], r["score"], r["execution_status"], _graders(r["scores"])) for r in again] == [
        (r["test_id"], r["score"], r["execution_status"], _graders(r["scores"])) for r in agentv
    ]
    assert not any("trials" in r or "aggregation" in r for r in again)

    done = ok_json(cli(sqlite_url, "run", "evals/trials.eval.yaml", "--json"))
    exported = tmp_path / "exported" / "index.jsonl"
    exported.parent.mkdir()
    exported.write_text(cli(sqlite_url, "export", done["run_id"]).stdout, encoding="utf-8")
    ours = ok_json(cli(sqlite_url, "import", str(exported), "--eval", "evals/trials.eval.yaml", "--json"))["run_id"]
    # ... whose export is the file it came from, trials and aggregation byte for byte (evalstore's are AgentV's).
    written = exported.read_text("utf-8").splitlines()
    back = cli(sqlite_url, "export", ours).stdout.splitlines()
    assert [members(b)["trials"] for b in back] == [members(w)["trials"] for w in written]
    assert [members(b)["aggregation"] for b in back] == [members(w)["aggregation"] for w in written]

    def shown(run: str) -> list[tuple[Any, ...]]:
        results = ok_json(cli(sqlite_url, "show", run, "--json"))["results"]
        return sorted((r["test_id"], r["attempt"], r["score"], r["passed"], r["graders"]) for r in results)

    assert (
        shown(ours)
        == shown(imported)
        == [
            ("slow", 1, 1, True, {"contains-alpha": 1}),
            ("t1", 1, 0.75, True, {"contains-alpha": 1, "contains-beta": 1}),
        ]
    )
