"""A replay says when the parent's graders are not graded again as they were (``replay/grader_sets.py``):
a grader its eval does not have, and, with ``--graders``, an Inspect scorer carried as an eval grader."""

from __future__ import annotations

from pathlib import Path

from evalstore.replay.evalfile.parser import load_eval_text
from evalstore.replay.grader_sets import grader_warnings

EVAL = """\
name: sets
tests:
  - id: a
    input: hi
    assertions:
      - {name: says-hi, type: contains, value: hi}
      - {name: polite, type: regex, value: "please|thanks"}
  - id: b
    input: bye
    assertions:
      - {name: says-bye, type: contains, value: bye}
"""


def suite(tmp_path: Path):  # type: ignore[no-untyped-def]
    return load_eval_text(EVAL, tmp_path / "sets.eval.yaml")


PARENT = [("a", "says-hi", "contains"), ("a", "polite", "regex"), ("b", "says-bye", "contains")]


def test_the_parents_own_graders_say_nothing(tmp_path: Path) -> None:
    assert grader_warnings(PARENT, suite(tmp_path), None) == []
    assert grader_warnings(PARENT, suite(tmp_path), ["polite"]) == []
    assert grader_warnings(PARENT[2:], suite(tmp_path), None) == []  # only b regraded (--tests b)


def test_a_grader_the_eval_lost_is_named_with_what_keeps_it(tmp_path: Path) -> None:
    (warning,) = grader_warnings([*PARENT, ("b", "tone", "llm-grader")], suite(tmp_path), None)
    assert "the parent's grader tone is not in this eval" in warning and "add it to the eval" in warning
    # Held to each test's own graders: a grader of a test is not another test's.
    (warning,) = grader_warnings([("b", "says-hi", "contains"), ("b", "tone", "llm-grader")], suite(tmp_path), None)
    assert "graders says-hi, tone are not in this eval" in warning


def test_inspect_scorers_are_named_apart_and_carried_ones_said_under_graders(tmp_path: Path) -> None:
    parent = [("a", "says-hi", "inspect-scorer")]
    parent += [(t, name, "inspect-scorer") for t in ("a", "b") for name in ("match", "accuracy")]
    dropped, carried = grader_warnings(parent, suite(tmp_path), ["polite", "says-bye"])
    assert "Inspect scorers accuracy, match are not in this eval" in dropped and "--format inspect" in dropped
    assert carried.startswith("--graders leaves says-hi as the parent scored it") and "contains grader" in carried
    # Graded again as the eval says: nothing carried to say.
    assert len(grader_warnings(parent, suite(tmp_path), ["says-hi", "polite", "says-bye"])) == 1


def test_a_grader_left_out_of_graders_with_nothing_to_keep_is_said_to_be_graded(tmp_path: Path) -> None:
    parent = [("a", "says-hi", "contains"), ("b", "says-bye", "contains")]  # polite never graded a
    (warning,) = grader_warnings(parent, suite(tmp_path), ["says-hi"])
    assert warning == (
        "--graders leaves out polite, but the parent has no verdict of it to keep: it is graded as the eval says"
    )
    assert grader_warnings(PARENT, suite(tmp_path), ["says-hi"]) == []  # each has its verdict to keep
