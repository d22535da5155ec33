"""Test selection as AgentV selects: ``--test-id`` globs (micromatch's answers) and ``--tag``/``--exclude-tag``."""

from __future__ import annotations

import json

import pytest
from fixture_paths import FIXTURES_DIR

from evalstore.replay.evalfile.selection import id_matcher, matches_any, tags_selected

TABLE = json.loads((FIXTURES_DIR / "micromatch" / "test-id-globs.json").read_text("utf-8"))


@pytest.mark.parametrize("pattern", sorted(TABLE["patterns"]))
def test_a_glob_selects_the_ids_micromatch_selects(pattern: str) -> None:
    assert [i for i in TABLE["ids"] if id_matcher(pattern)(i)] == TABLE["patterns"][pattern]


def test_repeated_globs_select_any_match() -> None:
    assert [i for i in ("paris-1", "lyon-1", "nice-2") if matches_any(i, ["paris-*", "*-2"])] == ["paris-1", "nice-2"]


@pytest.mark.parametrize(
    "tags,include,exclude,selected",
    [
        (["smoke", "fast"], ["smoke"], [], True),
        (["smoke"], ["smoke", "fast"], [], False),  # every --tag must be there
        ([], ["smoke"], [], False),  # a file without tags is skipped by any --tag
        ([], [], ["slow"], True),
        (["smoke", "slow"], ["smoke"], ["slow"], False),
    ],
)
def test_tags_select_as_agentv_matches_tag_filters(
    tags: list[str], include: list[str], exclude: list[str], selected: bool
) -> None:
    assert tags_selected(tags, include, exclude) is selected
