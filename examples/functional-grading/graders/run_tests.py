"""A functional grader: run the project's tests in the agent's workspace.

`config.test_file` (relative to this grader's folder) names a test to copy into the workspace first;
without it, the project's own test_calc.py runs. During a replay the workspace is a private copy of
the snapshot evalstore stored when the agent finished, so this runs without the agent.
"""

import shutil
import subprocess
import sys
from pathlib import Path

from evalstore.grader import CodeGraderInput, Result, code_grader


@code_grader
def grade(p: CodeGraderInput) -> Result:
    if not p.workspace_path:
        raise RuntimeError("no workspace: configure workspace.template in the eval")
    workspace = Path(p.workspace_path)
    test_file = "test_calc.py"
    if p.config and p.config.get("test_file"):
        source = Path(__file__).parent / p.config["test_file"]
        shutil.copy(source, workspace / source.name)
        test_file = source.name
    done = subprocess.run(
        [sys.executable, test_file], cwd=workspace, capture_output=True, text=True, timeout=60, check=False
    )
    r = Result()
    output = (done.stdout + done.stderr).strip().splitlines()
    r.check(f"{test_file} passes in the workspace", done.returncode == 0, evidence=output[-1] if output else None)
    r.check("the agent left notes", (workspace / "NOTES.md").is_file())
    return r
