"""Imported data is shown to people with its control characters written out (``cli.output.visible``): an
escape sequence in a test id, a suite or an assertion could clear the screen, retitle the window or
hide a link, and a carriage return in evidence could draw a failed assertion over with a passed one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalstore import cli as cli_package
from evalstore.cli.output import visible

TEST_ID = "q1\x1b]8;;http://evil.example/\x1b\\click-me\x1b]8;;\x1b\\\x1b]0;pwned\x07"
HOSTILE = ("\x1b", "\x07", "\r", "\x08", "\x9b")


def _row(test_id: str, evidence: str, score: float) -> dict:
    assertion = {"text": "total is 2,880", "passed": False, "evidence": evidence}
    grader = {"name": "g\x1b[31m", "type": "llm-grader", "score": score, "weight": 1, "verdict": "fail"}
    return {
        "test_id": test_id,
        "suite": "s\x1b[2J",
        "target": "t\x08",
        "score": score,
        "scores": [{**grader, "assertions": [assertion]}],
        "output": "wrong\x9b answer",
    }


def _cli(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args], catch_exceptions=False)


def _two_runs(tmp_path: Path, rows: tuple[dict, dict]) -> tuple[str, str, str]:
    """A store with runs a and b imported, one row each: (store URL, run a, run b)."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    ids = []
    for name, row in zip("ab", rows, strict=True):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps(row) + "\n")
        ids.append(json.loads(_cli(db, "import", str(path), "--json").output)["run_id"])
    return db, ids[0], ids[1]


@pytest.fixture
def runs(tmp_path: Path) -> tuple[str, str, str]:
    evidence = "\r    \u2713 total is 2,880 \u2014 verified"
    return _two_runs(tmp_path, (_row(TEST_ID, evidence, 0.0), _row(TEST_ID, evidence, 1.0)))


@pytest.mark.parametrize(
    "command",
    [
        ["runs"],
        ["show", "{a}"],
        ["show", "{a}", "--all"],
        ["audit", "{a}", TEST_ID],
        ["audit", "{a}", "q1"],  # an error naming what was asked for
        ["compare", "{a}", "{b}"],
        ["compare", "{a}", "{b}", "--test", TEST_ID],
        ["labels"],
    ],
)
def test_no_control_character_reaches_a_person(runs: tuple[str, str, str], command: list[str]) -> None:
    db, a, b = runs
    result = CliRunner().invoke(
        cli_package.main, ["--db", db, *(c.format(a=a, b=b) for c in command)], catch_exceptions=False
    )
    shown = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert shown.strip(), result
    assert not [c for c in HOSTILE if c in shown], repr(shown)


def test_show_writes_them_out_and_json_keeps_them() -> None:
    assert visible("a\x1b[2Jb\rc\td\ne\x9b") == "a\\x1b[2Jb\\x0dc\td\ne\\x9b"


def test_json_keeps_the_data_as_it_is(runs: tuple[str, str, str]) -> None:
    db, a, _ = runs
    (row,) = json.loads(_cli(db, "show", a, "--json").output)["results"]
    assert row["test_id"] == TEST_ID


FORGED = "real\n\u2500\u2500\u2500\nforged-test   default  1.000  yes   ok   g=1.000\u2028forged-too\tx\x85y"
"""A test id whose newlines print what looks like a passing row under the real one (the new-user pass's
``nl.jsonl``), with the other line breaks a terminal honours."""


@pytest.fixture
def forged(tmp_path: Path) -> tuple[str, str, str]:
    def row(score: float) -> dict:
        grader = {"name": "g\nforged-grader", "type": "contains", "score": score, "weight": 1, "verdict": "fail"}
        return {"test_id": FORGED, "suite": "s\nforged-suite", "score": score, "target": "default", "scores": [grader]}

    return _two_runs(tmp_path, (row(0.1), row(0.9)))


@pytest.mark.parametrize(
    "command",
    [
        ["runs"],
        ["show", "{a}"],
        ["show", "{a}", "--all"],
        ["audit", "{a}", FORGED],
        ["compare", "{a}", "{b}"],
        ["compare", "{a}", "{b}", "--test", FORGED],
    ],
)
def test_no_line_break_of_stored_text_starts_a_line(forged: tuple[str, str, str], command: list[str]) -> None:
    db, a, b = forged
    result = CliRunner().invoke(
        cli_package.main, ["--db", db, *(c.format(a=a, b=b) for c in command)], catch_exceptions=False
    )
    shown = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert result.exit_code == 0, shown
    assert not [line for line in shown.splitlines() if line.lstrip().startswith("forged")], shown
    assert "\u2028" not in shown and "\x85" not in shown, repr(shown)
    if command[0] in ("show", "audit", "compare"):
        assert "real\\x0a\u2500\u2500\u2500\\x0aforged-test" in shown, shown


def test_json_keeps_the_line_breaks(forged: tuple[str, str, str]) -> None:
    db, a, _ = forged
    (row,) = json.loads(_cli(db, "show", a, "--json").output)["results"]
    assert row["test_id"] == FORGED


def test_one_line_writes_out_every_line_break() -> None:
    assert visible("a\nb\tc\u2028d\u2029e\x85f\x1b", one_line=True) == "a\\x0ab\\x09c\\u2028d\\u2029e\\x85f\\x1b"


def test_a_left_out_lines_file_name_with_a_line_break_stays_on_its_line(tmp_path: Path) -> None:
    """``show`` lists the lines an import left out by file and line: a file name is stored text too."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    path = tmp_path / "results\nforged-line: all good.jsonl"
    path.write_text('{"test_id": "t1", "score": 1}\nnot json\n')
    run_id = json.loads(_cli(db, "import", str(path), "--skip-bad", "--json").output)["run_id"]
    shown = _cli(db, "show", run_id).output
    assert "1 source lines left out:" in shown
    assert not [line for line in shown.splitlines() if line.startswith("forged")], shown
    assert "results\\x0aforged-line: all good.jsonl:2: " in shown, shown
