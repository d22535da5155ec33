"""A replay's summary says what failed in a test with an execution error: the agent (its failure in the run,
reproduced, not graded), a test the run never ran, or a grader. Once every execution error was "a grader
failed to run", which sends a user looking at graders when the agent had crashed.

Both kinds of run, each through the installed console script in a real subprocess: an import of the real
AgentV 4.42.4's run whose agent exited 1 (tests/fixtures/agentv-grader-error's `agent-error`: the agent's row
`failure_stage: agent`, the two after it not run), and a run `evalstore run` recorded of a cli agent that
exits 3.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from e2e_helpers import evalstore
from fixture_paths import FIXTURES_DIR

AGENT_ERROR = FIXTURES_DIR / "agentv-grader-error" / "project"
ENV = {"OPENAI_ENDPOINT": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-local", "JUDGE_MODEL": "judge-model"}
AGENT_FAILED = "with an execution error (the agent failed in the run: reproduced, not graded; such a test cannot pass)"


def test_a_replay_of_agentvs_agent_failure_says_the_agent_failed(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    run = AGENT_ERROR / "runs" / "agent-error"
    imported = evalstore(
        db, "import", str(run), "--eval", str(AGENT_ERROR / "evals" / "agent-error.eval.yaml"), cwd=tmp_path, env=ENV
    )
    assert imported.returncode == 0, imported.stderr
    replayed = evalstore(db, "replay", "last", cwd=tmp_path, env=ENV)
    assert replayed.returncode == 1, replayed.stderr
    lines = replayed.stderr.splitlines()
    assert f"1 regraded test {AGENT_FAILED}: agent-fails" in lines, replayed.stderr
    assert (
        "2 regraded tests with an execution error (the run did not run it, for a failed dependency, the budget "
        "or fail_on_error: reproduced; such a test cannot pass): after-agent, later"
    ) in lines, replayed.stderr
    assert "a grader failed to run" not in replayed.stderr


def test_a_replay_of_a_recorded_agent_crash_says_the_agent_failed(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text('import sys\nprint("boom: agent crashed", file=sys.stderr)\nsys.exit(3)\n')
    (tmp_path / "targets.yaml").write_text(
        textwrap.dedent(f"""\
            targets:
              - name: agent
                provider: cli
                command: [{sys.executable!r}, {str(tmp_path / "agent.py")!r}, "{{OUTPUT_FILE}}"]
            """)
    )
    (tmp_path / "crash.eval.yaml").write_text(
        "name: crash\nexecution: {target: agent}\n"
        "tests:\n  - {id: crash-1, input: hi, assertions: [{type: contains, value: hi}]}\n"
    )
    db = f"sqlite:///{tmp_path / 'store.db'}"
    ran = evalstore(db, "run", "crash.eval.yaml", "--max-retries", "0", cwd=tmp_path)
    assert ran.returncode == 1, ran.stderr
    replayed = evalstore(db, "replay", "last", cwd=tmp_path)
    assert replayed.returncode == 1, replayed.stderr
    assert f"1 regraded test {AGENT_FAILED}: crash-1" in replayed.stderr.splitlines(), replayed.stderr
    assert "a grader failed to run" not in replayed.stderr
