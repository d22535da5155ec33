"""`evalstore assert`: the grader dev loop, run as the real command in a real process."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HAS_42 = """\
from evalstore.grader import CodeGraderInput, Result, code_grader


@code_grader
def grade(p: CodeGraderInput) -> Result:
    r = Result()
    r.check("mentions 42", "42" in p.output_text)
    r.check("asked something", bool(p.input) and bool(p.input[0].text), evidence=p.criteria)
    return r
"""


def _evalstore(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EVALSTORE_DB": f"sqlite:///{cwd / 'store.db'}"}
    return subprocess.run(
        [sys.executable, "-m", "evalstore", "assert", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    graders = tmp_path / ".agentv" / "graders"
    graders.mkdir(parents=True)
    (graders / "has42.py").write_text(HAS_42, encoding="utf-8")
    shell = graders / "nonempty.sh"
    shell.write_text(
        "#!/bin/sh\npython3 -c 'import json,sys; d=json.load(sys.stdin); print(1 if d[\"output\"] else 0)'\n"
    )
    no_exec = graders / "viashebang"
    no_exec.write_text("#!/bin/sh\necho 0.25\n")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    return tmp_path


def test_a_named_grader_is_found_walking_up_and_its_score_sets_the_exit_code(project: Path) -> None:
    done = _evalstore(project / "deep" / "er", "has42", "--output", "It is 42.", "--input", "What is 6x7?")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["grader"] == "has42" and result["score"] == 1.0 and result["status"] == "ok"
    done = _evalstore(project / "deep", "has42", "--output", "It is 41.", "--criteria", "says 42")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["score"] == 0.0
    assert result["assertions"][1] == {"text": "asked something", "passed": False, "evidence": "says 42"}


def test_a_result_file_instead_of_options(project: Path) -> None:
    f = project / "result.json"
    f.write_text(json.dumps({"output": "42!", "input": [{"role": "user", "content": "q"}], "criteria": "c"}))
    done = _evalstore(project, "has42", "--file", str(f))
    assert done.returncode == 0 and json.loads(done.stdout)["score"] == 1.0


def test_non_python_graders_run_directly_or_through_their_shebang(project: Path) -> None:
    script = project / ".agentv" / "graders" / "nonempty.sh"
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    assert _evalstore(project, "nonempty", "--output", "x").returncode == 0
    assert _evalstore(project, "nonempty", "--output", "").returncode == 1
    done = _evalstore(project, "viashebang", "--output", "x")  # not executable: run through #!/bin/sh
    assert done.returncode == 1 and json.loads(done.stdout)["score"] == 0.25


def test_a_failing_grader_exits_1_and_says_why(project: Path) -> None:
    (project / ".agentv" / "graders" / "boom.py").write_text(
        "from evalstore.grader import code_grader\n@code_grader\ndef grade(p):\n    raise RuntimeError('no tests found')\n"
    )
    done = _evalstore(project, "boom", "--output", "x")
    assert done.returncode == 1
    assert json.loads(done.stdout)["status"] == "execution_error"
    assert "grader boom failed" in done.stderr


def test_against_a_test_of_an_eval_file(project: Path) -> None:
    (project / "checks").mkdir()
    (project / "checks" / "exact.py").write_text(
        textwrap.dedent("""\
        from evalstore.grader import code_grader

        @code_grader
        def grade(p):
            return p.output_text.strip() == p.expected_output[0].content and p.criteria == "exact total"
        """)
    )
    (project / "suite.eval.yaml").write_text(
        textwrap.dedent("""\
        tests:
          - id: total
            input: What is the total?
            criteria: exact total
            expected_output: "2880"
            assertions:
              - name: exact
                type: code-grader
                command: [python3, checks/exact.py]
        """)
    )
    base = ["--eval", "suite.eval.yaml", "--test", "total"]
    assert _evalstore(project, *base, "--grader", "exact", "--output", "2880").returncode == 0
    assert _evalstore(project, *base, "--grader", "exact", "--output", "2881").returncode == 1
    # A name the test does not have comes from .agentv/graders/.
    done = _evalstore(project, *base, "--grader", "has42", "--output", "42")
    assert done.returncode == 0 and json.loads(done.stdout)["assertions"][1]["evidence"] == "exact total"
    done = _evalstore(project, *base, "--grader", "nope", "--output", "42")
    assert done.returncode == 2
    assert "has no grader 'nope' (its graders: exact)" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "--output", "x"], "no grader named 'nope'"),
        (["has42"], "give --output TEXT"),
        (["../x", "--output", "x"], "give a name, not a path"),
        (["--eval", "a.yaml", "--run", "last", "--test", "t", "--grader", "g"], "not both"),
        (["--eval", "a.yaml", "--test", "t"], "needs --test ID and --grader NAME"),
        (["has42", "--output", "x", "--test", "t"], "go with --eval or --run"),
        (["--run", "last", "--test", "t", "--grader", "g", "--output", "x"], "grades the stored answer"),
    ],
)
def test_bad_input_is_one_error_and_exit_2(project: Path, args: list[str], message: str) -> None:
    done = _evalstore(project, *args)
    assert done.returncode == 2, done.stdout
    assert message in done.stderr and "Traceback" not in done.stderr


PARENT = """\
import json, os, sys
json.load(sys.stdin)
parent = open(f"/proc/{os.getppid()}/cmdline", "rb").read()
forked = b"warm interpreter's server" in parent  # the server's source is its command line
print(json.dumps({"score": 1, "assertions": [{"text": "forked" if forked else "spawned", "passed": True}]}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm interpreters are Linux's")
def test_no_warm_spawns_the_grader_which_is_otherwise_forked_from_a_warm_interpreter(project: Path) -> None:
    (project / ".agentv" / "graders" / "parent.py").write_text(PARENT, encoding="utf-8")
    seen = {}
    for flags in ((), ("--no-warm",)):
        done = _evalstore(project, "parent", "--output", "x", *flags)
        assert done.returncode == 0, done.stderr
        seen[flags] = json.loads(done.stdout)["assertions"][0]["text"]
    assert seen == {(): "forked", ("--no-warm",): "spawned"}
