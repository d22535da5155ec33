"""`evalstore label`, `labels`, `agreement` and the label-aware `compare`, through the CLI."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from labelled_runs import add_run, add_transcripts

from evalstore import cli as cli_package
from evalstore.store import EventStore

TESTS = {f"t{i:02d}": i % 3 != 0 for i in range(12)}
HUMANS = {t: i % 2 == 0 for i, t in enumerate(TESTS)}


def _cli(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args])


def _setup(tmp_path: Path) -> str:
    db = f"sqlite:///{tmp_path / 's.db'}"
    store = EventStore.open(db)
    add_run(store, "rec-1", TESTS, metadata={t: {"category": f"c{i % 5}"} for i, t in enumerate(TESTS)})
    add_run(store, "rpl-good", HUMANS, parent="rec-1")
    add_run(store, "rpl-same", TESTS, parent="rec-1")
    store.close()
    return db


def test_label_import_list_agreement_and_compare(tmp_path: Path) -> None:
    db = _setup(tmp_path)
    f = tmp_path / "labels.csv"
    f.write_text("test_id,verdict,by\n" + "".join(f"{t},{'pass' if p else 'fail'},ann\n" for t, p in HUMANS.items()))
    first = _cli(db, "labels", "import", str(f), "--run", "rpl-good")
    assert first.exit_code == 0 and f"imported {len(HUMANS)} label(s) for rec-1" in first.stderr
    again = _cli(db, "labels", "import", str(f), "--run", "rpl-good")  # nothing new: it says so
    assert f"imported 0 new label(s); {len(HUMANS)} already in the store" in again.stderr
    exported = tmp_path / "exported.jsonl"
    assert _cli(db, "labels", "export", "-o", str(exported)).exit_code == 0
    back = _cli(db, "labels", "import", str(exported))  # an export of this store: the same labels (it doubled them)
    assert f"imported 0 new label(s); {len(HUMANS)} already in the store" in back.stderr
    assert len(json.loads(_cli(db, "labels", "rec-1", "--json", "--all").stdout)) == len(HUMANS)
    r = _cli(db, "label", "rec-1", "t00", "--fail", "--by", "bob", "--note", "wrong total")
    assert r.exit_code == 0 and "labelled t00 fail by bob" in r.stdout
    listed = json.loads(_cli(db, "labels", "rpl-same", "--json").stdout)
    assert len(listed) == 13 and {x["run"] for x in listed} == {"rec-1"}

    report = json.loads(_cli(db, "agreement", "rec-1", "rpl-good", "--json").stdout)
    rows = {(r["run_id"], r["grader"]): r for r in report["rows"]}
    assert rows[("rpl-good", "quality")]["accuracy"]["value"] == 1.0
    # ann and bob split on t00: an even split leaves it out
    assert rows[("rec-1", "quality")]["confusion"]["n"] == 11 and rows[("rec-1", "quality")]["ties"] == 1
    assert report["people"] == ["ann", "bob"]
    assert "labeller_alpha" in report

    cmp = json.loads(_cli(db, "compare", "rec-1", "rpl-good", "--json").stdout)
    [quality] = [a for a in cmp["agreement"] if a["grader"] == "quality"]
    assert quality["accuracy_b"] == 1.0 and quality["accuracy_a"] < 1.0

    many = json.loads(_cli(db, "compare", "rec-1", "rpl-good", "rpl-same", "--cluster-by", "category", "--json").stdout)
    assert many["correction"] == "holm" and [r["run_id"] for r in many["rows"]] == ["rpl-good", "rpl-same"]
    good, same = many["rows"]
    assert same["mean_diff"] == 0 and good["clusters"] == 5
    assert good["p_holm"] >= good["p_value"]

    exported = _cli(db, "labels", "export", "--format", "csv").stdout.splitlines()
    assert exported[0].startswith("run,test_id,") and len(exported) == 14


def test_bad_input_is_one_error_line_and_nothing_written(tmp_path: Path) -> None:
    db = _setup(tmp_path)
    r = _cli(db, "label", "rec-1", "missing", "--pass")
    assert r.exit_code == 2 and r.stderr.strip().startswith("Error: run rec-1 has no test 'missing'")
    f = tmp_path / "bad.jsonl"
    f.write_text(
        '{"run": "rec-1", "test_id": "t01", "verdict": "pass"}\n{"run": "rec-1", "test_id": "t02", "score": "x"}\n'
    )
    r = _cli(db, "labels", "import", str(f))
    assert r.exit_code == 2 and f"{f}:2: score: expected a number" in r.stderr
    assert json.loads(_cli(db, "labels", "rec-1", "--json").stdout) == []
    dated = tmp_path / "dated.csv"
    dated.write_text("test_id,verdict,labelled_at\nt01,pass,2026-11-25T10:00:00Z\nt02,fail,yesterday\n")
    r = _cli(db, "labels", "import", str(dated), "--run", "rec-1")
    assert r.exit_code == 2 and f"{dated}:3: labelled_at: expected an ISO 8601 date or time" in r.stderr
    assert "'yesterday'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert json.loads(_cli(db, "labels", "rec-1", "--json").stdout) == []
    # A grader no run has is named, with the ones there are.
    r = _cli(db, "agreement", "rec-1", "rpl-good", "--grader", "qualty")
    assert r.exit_code == 2 and "--grader 'qualty': no grader of that name" in r.stderr and "quality" in r.stderr


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "{f}: empty; a labels CSV begins with a header"),
        ("test_id,test_id,verdict\nt01,t02,fail\n", "{f}:1: the header names test_id twice; name each column once"),
        ("test_id,verdict\n", "{f}: no labels in it"),
    ],
)
def test_a_labels_csv_without_labels_or_with_a_column_twice_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    """A column named twice kept its last cell and an empty file said it had no test_id column; a file of a
    header only said it imported 0 labels for no run."""
    db = _setup(tmp_path)
    f = tmp_path / "labels.csv"
    f.write_text(text)
    r = _cli(db, "labels", "import", str(f), "--run", "rec-1")
    assert r.exit_code == 2 and r.stderr.strip().startswith("Error: " + problem.format(f=f)), r.output
    assert len(r.stderr.strip().splitlines()) == 1
    assert json.loads(_cli(db, "labels", "rec-1", "--json").stdout) == []


def test_pass_and_fail_together_are_refused(tmp_path: Path) -> None:
    db = _setup(tmp_path)
    both = _cli(db, "label", "rec-1", "t00", "--pass", "--fail", "--by", "bob")
    assert both.exit_code == 2 and "--pass and --fail contradict each other" in both.stderr
    store = EventStore.open(db)
    assert store.stream_version("lbl-rec-1") == 0  # nothing written
    store.close()


def test_a_label_is_named_with_its_target_and_attempt_when_it_has_them(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 't.db'}"
    store = EventStore.open(db)
    add_transcripts(store, "rec-t", [("multi", t, a) for t in ("alpha", "beta") for a in (1, 3)])
    store.close()
    done = _cli(db, "label", "rec-t", "multi@alpha#3", "--pass", "--by", "ann")
    assert done.exit_code == 0 and "labelled multi@alpha#3 pass by ann" in done.stdout
    assert _cli(db, "label", "rec-t", "multi@beta#1", "--fail", "--by", "ann").exit_code == 0
    listed = _cli(db, "labels", "list", "rec-t").stdout
    assert "multi@alpha#3" in listed and "multi@beta " in listed  # attempt 1 is not spelled out


LONG_RUN = "rec-20261128T094609-b51e95"
LONG_REPLAY = "rpl-20261128T094610-b959e3"
OTHER_REPLAY = "rpl-20261128T094611-aaaaaa"


def _few_labels(tmp_path: Path) -> str:
    """Runs with real-length ids and a long grader name, and four labels: fewer than --min-labels."""
    db = f"sqlite:///{tmp_path / 'few.db'}"
    store = EventStore.open(db)
    add_run(store, LONG_RUN, TESTS)
    add_run(store, LONG_REPLAY, HUMANS, parent=LONG_RUN, grader="states-total")
    add_run(store, OTHER_REPLAY, {t: i % 4 == 0 for i, t in enumerate(TESTS)}, parent=LONG_RUN, grader="states-total")
    store.close()
    for test in ("t00", "t01", "t02", "t03"):
        assert _cli(db, "label", LONG_RUN, test, "--pass", "--by", "ann").exit_code == 0
    return db


def test_too_few_labels_say_so_once_per_row_and_show_no_agreement_figures(tmp_path: Path) -> None:
    db = _few_labels(tmp_path)
    r = CliRunner(env={"COLUMNS": "200"}).invoke(cli_package.main, ["--db", db, "agreement", LONG_RUN, LONG_REPLAY])
    assert r.exit_code == 0, r.output
    rows = [line for line in r.stdout.splitlines() if line.startswith(("rec-", "rpl-"))]
    assert len(rows) == 4
    for row in rows:
        # The confusion matrix holds (it is the count); accuracy, TPR, TNR, precision and kappa do not.
        cells = row.split()
        assert "2/2/0/0" in cells and row.count("too few labels") == 1
        after = row.split("too few labels")[1].split()
        assert len(after) == 2 and after[1].startswith("["), row  # only the raw pass rate and its interval
    assert "agreement needs at least 10 labelled tests" in r.stdout
    report = json.loads(_cli(db, "agreement", LONG_RUN, LONG_REPLAY, "--json").stdout)
    for row in report["rows"]:
        assert row["enough"] is False and row["note"] == "not enough labels (n=4; need at least 10)"
        assert {row[k]["value"] for k in ("accuracy", "tpr", "tnr", "precision", "kappa")} == {None}
    # Enough by a lower bar: a kappa of zero (observed agreement equal to chance) is 0, not -3.3e-16.
    enough = json.loads(_cli(db, "agreement", LONG_RUN, LONG_REPLAY, "--json", "--min-labels", "2").stdout)
    assert {row["kappa"]["value"] for row in enough["rows"]} == {0.0}


@pytest.mark.parametrize(
    "args",
    [
        ["agreement", LONG_RUN, LONG_REPLAY],
        ["agreement", LONG_RUN, LONG_REPLAY, "--min-labels", "2"],
        ["compare", LONG_RUN, LONG_REPLAY],
        ["compare", LONG_RUN, LONG_REPLAY, OTHER_REPLAY],
    ],
)
def test_at_80_columns_no_id_name_or_header_is_cut_and_left_out_columns_are_named(
    tmp_path: Path, args: list[str]
) -> None:
    db = _few_labels(tmp_path)
    r = CliRunner(env={"COLUMNS": "80"}).invoke(cli_package.main, ["--db", db, *args])
    assert r.exit_code == 0, r.output
    table_lines = [line for line in r.stdout.splitlines() if "  " in line or line.startswith("─")]  # not titles
    assert table_lines and all(len(line) <= 80 for line in table_lines), r.stdout
    words = r.stdout.split()
    for whole in (LONG_RUN, LONG_REPLAY, "states-total", "TP/FN/FP/TN", "pass->fail", "fail->pass"):
        # A cut token leaves a piece of it as a word of its own: "rec-202611", "states-tota", "TP/FN/FP/T".
        pieces = [w for w in words if whole.startswith(w) and w != whole and not w.isalnum()]
        assert not pieces, r.stdout
    assert LONG_RUN in r.stdout and LONG_REPLAY in words
    if "left out" in r.stderr:
        assert "a wider terminal or --json shows them" in r.stderr


def test_compare_html_has_the_agreement_section_compare_prints(tmp_path: Path) -> None:
    db = _setup(tmp_path)
    f = tmp_path / "labels.csv"
    f.write_text("test_id,verdict,by\n" + "".join(f"{t},{'pass' if p else 'fail'},ann\n" for t, p in HUMANS.items()))
    assert _cli(db, "labels", "import", str(f), "--run", "rec-1").exit_code == 0
    report = tmp_path / "report.html"
    printed = _cli(db, "compare", "rec-1", "rpl-good", "--html", str(report))
    assert printed.exit_code == 0 and "agreement with the human labels" in printed.stdout
    page = report.read_text(encoding="utf-8")
    assert '<h2 id="agreement">Agreement with the human labels</h2>' in page
    section = page.split('id="agreement"')[1].split("</table>")[0]
    [row] = [r for r in section.split("<tr>") if r.startswith("<th>quality</th>")]
    # The same figures as the table compare prints: 12 labelled, B always right.
    cmp = json.loads(_cli(db, "compare", "rec-1", "rpl-good", "--json").stdout)
    [quality] = [a for a in cmp["agreement"] if a["grader"] == "quality"]
    assert f'<td class="num">{quality["n"]}</td>' in row and f"{quality['accuracy_a']:.3f}" in row
    assert "1.000" in row and html.escape(quality["verdict"]) in row
    # No labels, no section.
    bare = tmp_path / "bare.html"
    other = f"sqlite:///{tmp_path / 'other.db'}"
    store = EventStore.open(other)
    add_run(store, "rec-2", TESTS)
    add_run(store, "rpl-2", HUMANS, parent="rec-2")
    store.close()
    assert _cli(other, "compare", "rec-2", "rpl-2", "--html", str(bare)).exit_code == 0
    assert 'id="agreement"' not in bare.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        (
            ["--pass", "--score", "0"],
            "--pass and --score 0 contradict each other: a score of 0 fails under any pass mark",
        ),
        (
            ["--fail", "--score", "1"],
            "--fail and --score 1 contradict each other: a score of 1 passes under every pass mark",
        ),
    ],
)
def test_a_verdict_no_pass_mark_gives_its_score_is_refused(tmp_path: Path, given: list[str], problem: str) -> None:
    """A pass at 0 or a fail at 1 was recorded silently; agreement would then count a verdict the person
    probably did not mean. The same from a labels file names its line."""
    db = _setup(tmp_path)
    r = _cli(db, "label", "rec-1", "t01", *given, "--by", "bob")
    assert r.exit_code == 2 and r.stderr.startswith(f"Error: {problem}") and len(r.stderr.splitlines()) == 1
    f = tmp_path / "labels.csv"
    f.write_text(f"test_id,verdict,score\nt02,pass,0.9\nt01,{given[0][2:]},{given[2]}\n")
    r = _cli(db, "labels", "import", str(f), "--run", "rec-1")
    verdict, score = given[0][2:], given[2]
    assert r.exit_code == 2 and f"Error: {f}:3: verdict {verdict} and score {score} contradict each other" in r.stderr
    assert json.loads(_cli(db, "labels", "rec-1", "--json").stdout) == []  # nothing written


def test_a_verdict_off_the_pass_mark_or_a_grader_no_run_has_is_recorded_with_a_warning(tmp_path: Path) -> None:
    """Between 0 and 1 a pass mark decides (the test's, --threshold: a regrade may change it), so the label
    stands, with a warning when its run's pass mark makes the score the other verdict. A grader no run of
    the answers has may be a criterion not written yet: kept, with the graders there are named."""
    db = _setup(tmp_path)
    r = _cli(db, "label", "rpl-good", "t01", "--pass", "--score", "0.5", "--by", "bob")
    assert r.exit_code == 0 and "labelled t01 pass score 0.5 by bob (run rec-1)" in r.stdout
    assert r.stderr == (
        "warning: 1 label gives a verdict its score does not have at its pass mark (t01#1 of run rec-1: pass with "
        "score 0.5, pass mark 0.8); recorded as given: agreement counts the verdict, not the score\n"
    )
    assert _cli(db, "label", "rec-1", "t02", "--fail", "--score", "0.5").stderr == ""  # 0.5 fails at 0.8
    r = _cli(db, "label", "rec-1", "t03", "--fail", "--grader", "qualty", "--by", "bob")
    assert r.exit_code == 0 and "labelled t03 [qualty] fail by bob" in r.stdout
    assert r.stderr == (
        "warning: grader 'qualty': neither run rec-1 nor a replay of it has a grader of that name (labelled all "
        "the same, for a grader still to be written); they have quality\n"
    )
    assert _cli(db, "label", "rec-1", "t03", "--fail", "--grader", "quality").stderr == ""
    f = tmp_path / "labels.csv"
    f.write_text("test_id,grader,verdict,score\nt04,,fail,0.9\nt05,quality,pass,0.1\nt06,later,pass,\n")
    r = _cli(db, "labels", "import", str(f), "--run", "rec-1")
    assert r.exit_code == 0 and "imported 3 label(s) for rec-1" in r.stderr
    assert "warning: grader 'later': neither run rec-1 nor a replay of it has" in r.stderr
    assert (
        f"warning: 2 labels give a verdict their score does not have at their pass mark (e.g. {f}:2: t04#1 of run "
        "rec-1: fail with score 0.9, pass mark 0.8)" in r.stderr
    )
    assert len(json.loads(_cli(db, "labels", "rec-1", "--json").stdout)) == 7


def test_stored_text_cannot_print_a_line_of_its_own(tmp_path: Path) -> None:
    """A test id, a name or a note holding a line break printed it, so imported text could forge a line of
    the output; a question or an answer, which keep their lines, are indented under their heading."""
    from evalstore.store.events import RunStarted, TestCaseRecorded, TranscriptRecorded

    db = f"sqlite:///{tmp_path / 'q.db'}"
    forged = "[2/2] other-test"
    store = EventStore.open(db)
    store.append(
        "rec-q",
        [
            RunStarted(run_id="rec-q", kind="recorded", tool_version="t"),
            TestCaseRecorded(test_id=f"sums\n{forged}", input=[{"role": "user", "content": f"Add up.\n{forged}"}]),
            TranscriptRecorded(test_id=f"sums\n{forged}", messages_sha256=None, output_text=f"5\n\n{forged}"),
        ],
    )
    store.close()
    r = _cli(db, "label", "rec-q", f"sums\n{forged}", "--pass", "--by", "ann\nlabelled x")
    assert (
        r.exit_code == 0 and r.stdout == "labelled sums\\x0a[2/2] other-test pass by ann\\x0alabelled x (run rec-q)\n"
    )
    listed = _cli(db, "labels", "rec-q").stdout
    assert "sums\\x0a[2/2] other-test" in listed and not any(line.startswith("[2/2]") for line in listed.splitlines())
    r = CliRunner().invoke(cli_package.main, ["--db", db, "label", "rec-q", "--next", "--by", "bo"], input="f\n")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert (
        "[1/1] sums\\x0a[2/2] other-test" in lines and lines.count(f"  {forged}") == 2
    )  # the question's, the answer's
    assert not any(line.startswith(forged) for line in lines)
    assert lines[lines.index("Question:") + 1] == "  Add up." and "Answer (as the graders saw it):" in lines
    # --json keeps the text as it is.
    [label] = [x for x in json.loads(_cli(db, "labels", "rec-q", "--json").stdout) if x["by"] == "ann\nlabelled x"]
    assert label["test_id"] == f"sums\n{forged}"
