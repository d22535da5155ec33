"""Custom assertions (``.agentv/assertions/NAME.ts``) run as AgentV 4.42 runs them: ``bun run FILE``
(``registry/assertion-discovery.ts``), with the code grader's stdin and no ``config``. Where ``bun`` is not
installed, the tests they grade are ``not_regradable``, said before the run or replay starts; a replay where
it is installed grades them. The ``bun`` here is a stand-in on PATH that records how it was called and
scores the answer's words, so the tests need no JavaScript runtime.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from e2e_helpers import evalstore, ok_json

STAND_IN_BUN = f"""#!{sys.executable}
import json, os, sys
payload = json.load(sys.stdin)
with open(os.environ["BUN_LOG"], "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "config": payload.get("config"),
                          "output": payload.get("output")}}) + "\\n")
words = len((payload.get("output") or "").split())
print(json.dumps({{"score": 1.0 if words >= 3 else words / 3,
                  "assertions": [{{"text": f"{{words}} words", "passed": words >= 3}}]}}))
"""


def bin_dir(path: Path, with_bun: bool) -> str:
    """A PATH of exactly python3 and sh (and the stand-in bun)."""
    path.mkdir(parents=True)
    (path / "python3").symlink_to(sys.executable)
    (path / "sh").symlink_to("/bin/sh")
    if with_bun:
        bun = path / "bun"
        bun.write_text(STAND_IN_BUN)
        bun.chmod(0o755)
    return str(path)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".agentv" / "assertions").mkdir(parents=True)
    (root / ".agentv" / "assertions" / "word-count.ts").write_text("export default () => ({ score: 1 });\n")
    (root / "evals").mkdir()
    (root / ".agentv" / "targets.yaml").write_text(
        textwrap.dedent(
            """\
            targets:
              - name: echo
                provider: cli
                command: python3 -c "print('three words here')"
            """
        )
    )
    (root / "evals" / "suite.eval.yaml").write_text(
        textwrap.dedent(
            """\
            name: custom
            execution:
              target: echo
            tests:
              - id: counted
                input: say three words
                criteria: three words
                assertions:
                  - {type: contains, value: words}
                  - {type: word-count, min: 3}
              - id: plain
                input: say three words
                criteria: three words
                assertions:
                  - {type: contains, value: words}
            """
        )
    )
    return root


def test_without_bun_the_tests_are_not_regradable_and_said_so_before_starting(project: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    env = {"PATH": bin_dir(tmp_path / "bin", with_bun=False), "BUN_LOG": str(tmp_path / "bun.log")}
    done = evalstore(db, "run", "evals/suite.eval.yaml", "--json", cwd=project, env=env)
    out = ok_json(done)
    why = "custom assertion `word-count`"
    first_line = next(line for line in done.stderr.splitlines() if why in line)
    assert "`bun` is not installed" in first_line and first_line.endswith(": counted")
    rows = {r["test_id"]: r for r in out["results"]}
    assert rows["counted"]["status"] == "not_regradable" and rows["plain"]["status"] == "ok"
    assert not (tmp_path / "bun.log").exists()

    # a replay without bun says so too; one with it grades the test, running `bun run FILE` with no config
    replay = evalstore(db, "replay", out["run_id"], "--json", cwd=project, env=env)
    assert ok_json(replay)["not_regradable"][0]["test_id"] == "counted"
    assert why in replay.stderr
    env["PATH"] = bin_dir(tmp_path / "bin-with-bun", with_bun=True)
    graded = ok_json(evalstore(db, "replay", out["run_id"], "--json", cwd=project, env=env))
    assert graded["not_regradable"] == []
    shown = ok_json(evalstore(db, "show", graded["run_id"], "--json", cwd=project, env=env))
    counted = next(r for r in shown["results"] if r["test_id"] == "counted")
    assert counted["graders"] == {"contains-words": 1.0, "word-count": 1.0} and counted["status"] == "ok"
    (call,) = [json.loads(line) for line in (tmp_path / "bun.log").read_text().splitlines()]
    assert call["argv"] == ["run", str(project / ".agentv" / "assertions" / "word-count.ts")]
    assert call["config"] is None and call["output"] == "three words here"
    assert os.path.samefile(call["cwd"], project)
