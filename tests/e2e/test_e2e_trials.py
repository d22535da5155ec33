"""``evalstore run`` with ``execution.trials``: each test run as AgentV runs it, trial by trial (pass@k stops
at the first passing trial), each trial a result of its own, the test passing when any of its trials passed
(AgentV's ``hasOk``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from e2e_helpers import evalstore, ok_json, write_cli_agent

# Answers wrong, then right: a counter per test in the agent's home.
AGENT = """\
import pathlib, sys
prompt = pathlib.Path(sys.argv[1]).read_text()
counter = pathlib.Path(sys.argv[3]) / (prompt.strip().replace(" ", "_") + ".n")
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
pathlib.Path(sys.argv[2]).write_text("42" if n >= 2 else "I do not know")
"""


def _project(root: Path, strategy: str) -> Path:
    write_cli_agent(root, AGENT)
    eval_file = root / "trials.eval.yaml"
    eval_file.write_text(
        textwrap.dedent(f"""\
            execution:
              target: agent
              trials: {{count: 3, strategy: {strategy}}}
            tests:
              - id: answer
                input: What is 6 x 7
                assertions: [{{type: contains, value: "42"}}]
            """)
    )
    return eval_file


def test_pass_at_k_stops_at_the_first_passing_trial(tmp_path: Path) -> None:
    eval_file = _project(tmp_path / "p", "pass_at_k")
    out = ok_json(evalstore(f"sqlite:///{tmp_path / 's.db'}", "run", str(eval_file), "--json", cwd=tmp_path))
    assert [(r["attempt"], r["score"]) for r in out["results"]] == [(1, 0.0), (2, 1.0)]
    trials = out["trials"]["answer"]
    assert (trials["score"], trials["passed"], trials["trials"]) == (1.0, True, 2)
    assert trials["aggregation"] == {"strategy": "pass_at_k", "passed_attempts": 1, "total_attempts": 2}


def test_mean_runs_every_trial_and_passes_the_test_when_a_trial_passed(tmp_path: Path) -> None:
    """The one score is the mean (0.67, below 0.8), yet the test passes and the run exits 0: AgentV 4.42.4's
    status is ok when any trial's is (tests/fixtures/agentv-newuser2/trials-mean is its run showing it)."""
    eval_file = _project(tmp_path / "m", "mean")
    out = ok_json(evalstore(f"sqlite:///{tmp_path / 's.db'}", "run", str(eval_file), "--json", cwd=tmp_path), 0)
    assert [(r["attempt"], r["score"]) for r in out["results"]] == [(1, 0.0), (2, 1.0), (3, 1.0)]
    trials = out["trials"]["answer"]
    assert (round(trials["score"], 4), trials["passed"]) == (0.6667, True)
