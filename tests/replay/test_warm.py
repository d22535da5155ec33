"""Warm interpreters (``processes.warm``): a Python grader forked from a warm server behaves, byte for byte,
as the same grader spawned, under the same limits; anything else is spawned."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalstore.replay.processes.children import cancel_children, run_child
from evalstore.replay.processes.warm import WarmPool, available, python_command

pytestmark = pytest.mark.skipif(not available(), reason="warm interpreters need fork and pidfd_open (Linux)")

PY = sys.executable


@pytest.fixture
def pool() -> Iterator[WarmPool]:
    with WarmPool() as warm:
        yield warm


def _script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def _both(pool: WarmPool, argv: list[str], stdin: bytes = b"", **kwargs):  # type: ignore[no-untyped-def]
    """The same call spawned, then forked from the pool's warm server."""
    return run_child(argv, stdin, timeout=60, **kwargs), run_child(argv, stdin, timeout=60, warm=pool, **kwargs)


def _same(spawned, warm) -> None:  # type: ignore[no-untyped-def]
    assert (warm.exit_code, warm.stdout, warm.stderr) == (spawned.exit_code, spawned.stdout, spawned.stderr)
    assert (warm.timed_out, warm.output_exceeded, warm.spawn_error) == (
        spawned.timed_out,
        spawned.output_exceeded,
        spawned.spawn_error,
    )


INTROSPECT = """\
import json, os, resource, sys
payload = sys.stdin.read()
main = sys.modules["__main__"]
print(json.dumps({
    "payload": payload,
    "argv": sys.argv,
    "orig_argv": sys.orig_argv,
    "executable": sys.executable,
    "path": sys.path,
    "cwd": os.getcwd(),
    "env": dict(os.environ),
    "globals": [k for k in globals()],
    "file": __file__,
    "name": __name__,
    "main_is_module": main.__dict__ is globals(),
    "own_group": os.getpgid(0) == os.getpid() == os.getsid(0),
    "fds": sorted(os.listdir("/proc/self/fd")),
    "stdio": [sys.stdin.seekable(), sys.stdout.line_buffering, sys.stderr.line_buffering,
              sys.stdout.encoding, sys.stderr.errors, sys.stdout.isatty()],
    "limits": [resource.getrlimit(getattr(resource, n)) for n in ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_NOFILE", "RLIMIT_CPU")],
    "flags": str(sys.flags),
    "loader": type(__loader__).__name__,
    "spec": __spec__,
}, sort_keys=True))
print("to stderr", file=sys.stderr)
"""


def test_a_warm_child_sees_what_a_spawned_interpreter_sees(tmp_path: Path, pool: WarmPool) -> None:
    (tmp_path / "work").mkdir()
    script = _script(tmp_path, "introspect.py", INTROSPECT)
    env = dict(os.environ, GRADER_SETTING="x y", EVALSTORE_DB="sqlite:///secret-place.db")
    spawned, warm = _both(pool, [PY, str(script), "--flag", "ä"], b'{"q": 1}', cwd=str(tmp_path / "work"), env=env)
    _same(spawned, warm)
    seen = json.loads(warm.stdout)
    assert seen["payload"] == '{"q": 1}' and seen["argv"] == [str(script), "--flag", "ä"]
    assert seen["own_group"] and seen["fds"] == ["0", "1", "2", "3"]  # 3: the listdir's own
    assert seen["env"]["GRADER_SETTING"] == "x y" and "EVALSTORE_DB" not in seen["env"]  # the one environment rule
    assert seen["path"][0] == str(tmp_path) and seen["name"] == "__main__" and seen["main_is_module"]


def test_a_relative_script_and_the_cwd_are_as_spawned(
    tmp_path: Path, pool: WarmPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "graders").mkdir()
    _script(tmp_path / "graders", "introspect.py", INTROSPECT)
    spawned, warm = _both(pool, ["python3", "graders/introspect.py"], b"", cwd=str(tmp_path))
    _same(spawned, warm)
    monkeypatch.chdir(tmp_path.parent)  # a cwd relative to evalstore's, not to the server's
    spawned, warm = _both(pool, ["python3", "graders/introspect.py"], b"", cwd=tmp_path.name)
    _same(spawned, warm)


def test_exit_codes_tracebacks_and_system_exit_messages_are_the_interpreters(tmp_path: Path, pool: WarmPool) -> None:
    cases = {
        "exit3.py": "import sys\nprint('graded')\nsys.exit(3)\n",
        "message.py": "import sys\nsys.exit('bad payload: no output')\n",
        "raises.py": "def grade(x):\n    return x['missing']\n\nprint('partial', flush=True)\ngrade({})\n",
        "syntax.py": "def broken(:\n    pass\n",
        "threads.py": textwrap.dedent(
            """\
            import atexit, threading, time
            atexit.register(lambda: print("atexit ran"))
            def late():
                time.sleep(0.2)
                print("thread joined")
            threading.Thread(target=late).start()
            print("main done")
            """
        ),
        "unflushed.py": "import sys\nsys.stdout.write('no newline, no flush')\nsys.stderr.write('err too')\n",
    }
    for name, body in cases.items():
        script = _script(tmp_path, name, body)
        spawned, warm = _both(pool, [PY, str(script)], b"", cwd=str(tmp_path))
        _same(spawned, warm)
        if name == "raises.py":
            assert b"KeyError: 'missing'" in warm.stderr and b"<string>" not in warm.stderr


def test_every_call_starts_from_fresh_module_state(tmp_path: Path, pool: WarmPool) -> None:
    script = _script(
        tmp_path,
        "mutates.py",
        """\
        import json, os, sys
        print(getattr(json, "calls", 0), "mine" in sys.modules, os.getppid())
        json.calls = getattr(json, "calls", 0) + 1
        sys.modules["mine"] = json
        """,
    )
    outs = [run_child([PY, str(script)], b"", timeout=60, warm=pool).stdout.split() for _ in range(3)]
    assert [o[:2] for o in outs] == [[b"0", b"False"]] * 3
    assert len({o[2] for o in outs}) == 1, "one server per interpreter"


def test_a_module_the_scripts_folder_shadows_is_its_own(tmp_path: Path, pool: WarmPool) -> None:
    _script(tmp_path, "json.py", "def dumps(x):\n    return 'local json'\n")
    script = _script(tmp_path, "uses_json.py", "import json\nprint(json.dumps({}))\n")
    spawned, warm = _both(pool, [PY, str(script)], b"", cwd=str(tmp_path))
    _same(spawned, warm)
    assert warm.stdout == b"local json\n"


def test_the_timeout_kills_the_warm_childs_process_group(tmp_path: Path, pool: WarmPool) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = _script(
        tmp_path,
        "hangs.py",
        f"""\
        import subprocess, time
        p = subprocess.Popen(["sleep", "1000"])
        open({str(pid_file)!r}, "w").write(str(p.pid))
        time.sleep(1000)
        """,
    )
    started = time.monotonic()
    result = run_child([PY, str(script)], b"", timeout=2.0, warm=pool)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 15
    _gone(int(pid_file.read_text()))


def test_output_over_the_cap_and_a_large_stdin_are_handled_as_for_a_spawned_child(
    tmp_path: Path, pool: WarmPool
) -> None:
    echo = _script(tmp_path, "echo.py", "import sys, shutil\nshutil.copyfileobj(sys.stdin.buffer, sys.stdout.buffer)\n")
    data = os.urandom(3_000_000)
    result = run_child([PY, str(echo)], data, timeout=60, warm=pool)
    assert result.ok and result.stdout == data
    flood = _script(tmp_path, "flood.py", "import sys\nsys.stdout.write('a' * 1000 + 'b' * 1_000_000)\n")
    spawned, warm = _both(pool, [PY, str(flood)], b"", max_output_bytes=1000)
    _same(spawned, warm)
    assert warm.output_exceeded and warm.stdout == b"a" * 1000


def test_cancel_children_kills_warm_children(tmp_path: Path, pool: WarmPool) -> None:
    from evalstore.replay.processes.children import Cancelled, allow_children

    script = _script(tmp_path, "sleeps.py", "import time\nprint('started', flush=True)\ntime.sleep(1000)\n")
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            run_child([PY, str(script)], b"", timeout=120, warm=pool)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    time.sleep(1.0)
    cancel_children()
    thread.join(30)
    allow_children()
    assert outcome and isinstance(outcome[0], Cancelled)


def test_what_is_not_an_interpreter_and_a_script_is_spawned(tmp_path: Path) -> None:
    script = _script(tmp_path, "g.py", "print(1)\n")
    (tmp_path / "pkg").mkdir()
    _script(tmp_path, "inline.py", "# /// script\n# dependencies = []\n# ///\nprint(1)\n")
    cwd = str(tmp_path)
    assert python_command(["python3", "g.py", "a"], cwd) is not None
    assert python_command([PY, str(script)], "/") is not None
    assert python_command(["/usr/bin/python3.11", "g.py"], cwd) is not None
    uv = python_command(["uv", "run", "g.py"], cwd)
    assert uv is not None and uv.launcher == ("uv", "run", "python") and uv.uv
    assert python_command(["uv", "run", "python", "g.py"], cwd) is not None
    for argv in (
        ["python3", "-u", "g.py"],  # interpreter flags
        ["python3", "-c", "print(1)"],
        ["python3", "-m", "g"],
        ["python3", "missing.py"],  # the spawned interpreter says why
        ["python3", "pkg"],  # a folder: its __main__.py
        ["uv", "run", "inline.py"],  # inline metadata: an environment of its own
        ["uv", "run", "pytest"],
        ["bun", "run", "g.ts"],
        ["sh", "-c", "python3 g.py"],
        ["python3"],
    ):
        assert python_command(argv, cwd) is None, argv


def test_an_interpreter_that_cannot_serve_has_its_calls_spawned(tmp_path: Path, pool: WarmPool) -> None:
    # An interpreter whose server never says hello (here: one that refuses -c) is spawned, every call.
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\n[ "$1" = "-c" ] && exit 7\nexec {PY} "$@"\n')
    fake.chmod(0o755)
    script = _script(tmp_path, "g.py", "import sys\nprint('graded', sys.argv[1:])\n")
    for _ in range(2):
        result = run_child([str(fake), str(script), "a"], b"", timeout=30, warm=pool)
        assert result.ok and result.stdout == b"graded ['a']\n"


def test_closing_the_pool_ends_its_servers(tmp_path: Path) -> None:
    script = _script(tmp_path, "ppid.py", "import os\nprint(os.getppid())\n")
    with WarmPool() as pool:
        server = int(run_child([PY, str(script)], b"", timeout=60, warm=pool).stdout)
        assert server != os.getpid()
    _gone(server)
    assert run_child([PY, str(script)], b"", timeout=60, warm=pool).stdout.strip() == str(os.getpid()).encode()


def test_a_killed_server_is_replaced(tmp_path: Path, pool: WarmPool) -> None:
    script = _script(tmp_path, "ppid.py", "import os\nprint(os.getppid())\n")
    first = int(run_child([PY, str(script)], b"", timeout=60, warm=pool).stdout)
    os.kill(first, signal.SIGKILL)
    _gone(first)
    second = run_child([PY, str(script)], b"", timeout=60, warm=pool)
    assert second.ok and int(second.stdout) not in (first, os.getpid())


def _gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if _zombie(pid):
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} is still running")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def test_the_server_source_runs_on_the_graders_interpreter_only() -> None:
    # It is handed to the grader's interpreter as text; evalstore never imports it.
    out = subprocess.run(
        [
            PY,
            "-c",
            "import sys; import evalstore.replay.processes.warm; print(sorted(m for m in sys.modules if 'warm_server' in m))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip() == "[]"


PARENT = """\
import json, os, sys
json.load(sys.stdin)
print(json.dumps({"score": 1, "assertions": [{"text": str(os.getppid()), "passed": True}]}))
"""


@pytest.mark.parametrize(("key", "expected"), [("", "warm"), ("    warm: false\n", "spawned")])
def test_a_grader_with_warm_false_is_spawned(tmp_path: Path, key: str, expected: str) -> None:
    from evalstore.replay.content import Message
    from evalstore.replay.evalfile.parser import load_eval
    from evalstore.replay.evalfile.specs import CodeGraderSpec
    from evalstore.replay.grading.graders.base import GradeOptions, GradingContext, TranscriptInfo
    from evalstore.replay.grading.graders.code import CodeGrader
    from evalstore.replay.recording import MemoryRecorder

    _script(tmp_path, "parent.py", PARENT)
    eval_file = tmp_path / "dataset.eval.yaml"
    eval_file.write_text(
        "tests:\n  - id: t1\n    input: hi\n    assertions:\n"
        "      - type: code-grader\n        name: who\n        command: [python3, parent.py]\n"
        + key.replace("    ", "        ")
    )
    suite = load_eval(eval_file)
    spec = suite.tests[0].graders[0]
    assert isinstance(spec, CodeGraderSpec) and spec.warm == (expected == "warm") and "warm" not in (spec.config or {})
    with WarmPool() as pool:
        ctx = GradingContext(
            suite=suite,
            test=suite.tests[0],
            transcript=TranscriptInfo(messages=[Message(role="assistant", content="hello")]),
            recorder=MemoryRecorder(),
            options=GradeOptions(warm=pool),
        )
        result = CodeGrader(spec).grade(ctx)
        (parent,) = [a.text for a in result.assertions]
        assert (parent == str(os.getpid())) == (expected == "spawned")  # else its parent is the warm server
        assert pool.forked == (1 if expected == "warm" else 0)
