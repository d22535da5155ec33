"""``- include:`` assertion templates, expanded as AgentV 4.42.4 expands them (grader-parser.ts)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from evalstore.replay.errors import EvalFileError
from evalstore.replay.evalfile.parser import load_eval


def write(base: Path, rel: str, text: str) -> Path:
    path = base / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path


SUITE = """\
    tests:
      - id: t
        input: hi
        criteria: c
        assertions:
          - type: contains
            value: first
          - include: {ref}
          - type: equals
            value: last
"""


def test_a_named_template_comes_from_agentv_templates_and_expands_in_place(project: Path) -> None:
    write(
        project,
        ".agentv/templates/safety.yaml",
        """\
        assertions:
          - type: regex
            value: "^[A-Z]"
          - type: icontains
            value: ${{ WORD }}
        """,
    )
    inline = write(
        project,
        "evals/inline.eval.yaml",
        SUITE.format(ref="x").replace(
            "- include: x\n",
            '- type: regex\n            value: "^[A-Z]"\n          - type: icontains\n            value: please\n',
        ),
    )
    included = write(project, "evals/inc.eval.yaml", SUITE.format(ref="safety"))
    env = {"WORD": "please"}
    a = load_eval(included, env=env)
    b = load_eval(inline, env=env)
    assert [g.model_dump() for g in a.tests[0].graders] == [g.model_dump() for g in b.tests[0].graders]
    assert len(a.tests[0].graders) == 4
    # The template is part of what the suite depends on, so a run's snapshot keeps its bytes.
    assert ("assertion_template", str(project / ".agentv/templates/safety.yaml"), "safety") in a.referenced_files


def test_a_path_template_resolves_through_the_search_roots_and_nests_from_its_own_folder(project: Path) -> None:
    write(project, "shared/outer.yaml", "assertions:\n  - include: ./inner.yaml\n  - type: contains\n    value: mid\n")
    write(project, "shared/inner.yaml", "assertions:\n  - type: contains\n    value: deep\n")
    suite = load_eval(write(project, "evals/s.eval.yaml", SUITE.format(ref="shared/outer.yaml")))
    values = [getattr(g, "value", None) for g in suite.tests[0].graders]
    assert values == ["first", "deep", "mid", "last"]


@pytest.mark.parametrize(
    ("files", "ref", "message"),
    [
        ({}, "nope", "assertion template `nope` not found"),
        ({"a.yaml": "assertions:\n  - include: ./a.yaml\n"}, "./a.yaml", "assertion template cycle"),
        (
            {
                "a.yaml": "assertions:\n  - include: ./b.yaml\n",
                "b.yaml": "assertions:\n  - include: ./c.yaml\n",
                "c.yaml": "assertions:\n  - include: ./d.yaml\n",
                "d.yaml": "assertions: []\n",
            },
            "./a.yaml",
            "include depth exceeded 3",
        ),
        ({"a.yaml": "- type: contains\n  value: x\n"}, "./a.yaml", "YAML object with an `assertions` list"),
        ({"a.yaml": "graders: []\n"}, "./a.yaml", "top-level `assertions` list"),
    ],
)
def test_what_agentv_refuses_is_refused_with_file_and_field(
    project: Path, files: dict[str, str], ref: str, message: str
) -> None:
    for rel, text in files.items():
        write(project, f"evals/{rel}", text)
    with pytest.raises(EvalFileError) as caught:
        load_eval(write(project, "evals/s.eval.yaml", SUITE.format(ref=ref)))
    assert message in str(caught.value)
    assert ".yaml" in str(caught.value)


def test_composite_members_may_come_from_a_template(project: Path) -> None:
    write(project, "evals/members.yaml", "assertions:\n  - name: m1\n    type: contains\n    value: a\n")
    suite = load_eval(
        write(
            project,
            "evals/s.eval.yaml",
            """\
            tests:
              - id: t
                input: hi
                criteria: c
                assertions:
                  - name: both
                    type: composite
                    assertions:
                      - include: ./members.yaml
                      - name: m2
                        type: contains
                        value: b
                    aggregator:
                      type: weighted_average
            """,
        )
    )
    (composite,) = suite.tests[0].graders
    assert [m.name for m in composite.assertions] == ["m1", "m2"]
