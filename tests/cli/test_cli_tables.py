"""Tables on stdout (cli/output.py): ids never cut, optional columns left out on a narrow terminal, and a
title that is never folded to the width of a narrow table."""

from __future__ import annotations

import pytest

from evalstore.cli.output import print_table


def test_a_long_title_stays_on_its_own_line_over_a_narrow_table(capsys, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "100")
    title = "replay rpl-20261125T004416-167708 (parent imp-2af0428ab149a83b)"
    print_table(title, ["test", "score"], [("t1", "0.5"), ("t2", "1.0")], ids=["test", "score"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == title  # whole, though the table is a third as wide
    assert lines[1].split() == ["test", "score"] and len(lines[2].strip()) < len(title)


def test_optional_columns_are_left_out_and_named_when_the_ids_do_not_fit(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "40")
    print_table(
        None, ["test", "score", "notes"], [("x" * 30, "0.5", "y" * 30)], ids=["test", "score"], optional=["notes"]
    )
    captured = capsys.readouterr()
    assert "x" * 30 in captured.out and "notes" not in captured.out
    assert "left out notes" in captured.err


def test_cells_are_text_not_markup(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "100")
    print_table("[bold]title[/bold]", ["grader"], [("regex-caf[eé]",), ("[red]x[/red]",)], ids=["grader"])
    out = capsys.readouterr().out
    assert "regex-caf[eé]" in out and "[red]x[/red]" in out and "[bold]title[/bold]" in out


def test_results_are_named_with_their_target_only_when_targets_differ() -> None:
    from evalstore.cli.results import result_labels

    assert result_labels([("t1", "default", 1), ("t2", "default", 2)]) == ["t1", "t2#2"]
    assert result_labels([("t1", "alpha", 1), ("t1", "beta", 1)]) == ["t1@alpha", "t1@beta"]


def test_a_folding_column_wraps_between_words_never_inside_one(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "34")
    print_table(None, ["grader", "TP/FN/FP/TN", "note"], [("states-total", "2/2/0/0", "too few")])
    words = capsys.readouterr().out.split()
    assert "TP/FN/FP/TN" in words and "states-total" in words and "few" in words, words
