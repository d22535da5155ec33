"""Workspaces in `evalstore run`: template, isolation, repos, hooks, snapshot limits and excludes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from e2e_helpers import cli

from evalstore.store import EventStore

AGENT = """\
import os, sys, pathlib
ws = pathlib.Path(os.environ["AGENTV_WORKSPACE_PATH"])
seen = sorted(p.name for p in ws.iterdir())
(ws / "count.txt").write_text(str(int((ws / "count.txt").read_text()) + 1) if (ws / "count.txt").exists() else "1")
(ws / "seed.txt").unlink(missing_ok=True)
print("cwd=" + os.getcwd() + " seen=" + ",".join(seen))
"""

HOOK = """\
import json, sys, pathlib
payload = json.load(sys.stdin)
name = sys.argv[1]
log = pathlib.Path(sys.argv[2])
with log.open("a") as f:
    f.write(json.dumps({"hook": name, "test_id": payload["test_id"], "ws": payload["workspace_path"]}) + "\\n")
if name == "before_each" and payload["test_id"] == "t-fail":
    sys.stderr.write("database not ready\\n")
    sys.exit(3)
"""


def _project(tmp_path: Path, workspace: str, tests: str = "[t1, t2]") -> Path:
    (tmp_path / "template").mkdir()
    (tmp_path / "template" / "seed.txt").write_text("from the template\n")
    (tmp_path / "template" / "node_modules").mkdir()
    (tmp_path / "template" / "node_modules" / "big.js").write_text("x" * 100)
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "hook.py").write_text(HOOK)
    (tmp_path / ".agentv").mkdir()
    (tmp_path / ".agentv" / "targets.yaml").write_text(
        f"targets:\n  - name: a\n    provider: cli\n    command: [{json.dumps(sys.executable)}, {json.dumps(str(tmp_path / 'agent.py'))}]\n"
    )
    ids = [t.strip() for t in tests.strip("[]").split(",")]
    cases = "".join(f"  - id: {t}\n    input: go\n    assertions: [{{type: contains, value: cwd}}]\n" for t in ids)
    (tmp_path / "w.eval.yaml").write_text(
        "execution: {target: a}\nworkspace:\n" + textwrap.indent(workspace, "  ") + "tests:\n" + cases
    )
    return tmp_path / "w.eval.yaml"


def _hook(name: str, log: Path, extra: str = "") -> str:
    return f"  {name}: {{command: [{json.dumps(sys.executable)}, hook.py, {name}, {json.dumps(str(log))}]{extra}}}\n"


def _events(db: str) -> tuple[str, list]:
    store = EventStore.open(db)
    (run,) = store.run_ids()
    events = [e.event for e in store.read_stream(run)]
    store.close()
    return run, events


def test_per_test_isolation_copies_the_template_and_runs_every_hook(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "hooks.log"
    hooks = "".join(_hook(n, log) for n in ("before_all", "before_each", "after_each", "after_all"))
    eval_file = _project(tmp_path, f"template: template\nisolation: per_test\nhooks:\n{hooks}")
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 's.db'}"
    done = cli(db, "run", str(eval_file), "--workdir", "ws", "--workers", "1")
    assert done.exit_code == 0, done.output
    _, events = _events(db)
    transcripts = [e for e in events if e.type == "transcript_recorded"]
    # Each test starts from a fresh copy: the counter is 1 in both, the template's seed is there for both.
    snapshots = {e.test_id: e for e in events if e.type == "workspace_snapshotted"}
    for snap in snapshots.values():
        assert {e.path for e in snap.entries} == {"count.txt"}, "seed deleted, node_modules excluded"
        assert snap.exclude[:2] == [".git", "node_modules"]
    assert snapshots["t1"].entries[0].sha256 == snapshots["t2"].entries[0].sha256
    for t in transcripts:
        assert "deleted file mode 100644\nindex 47c4f82..0000000\n--- a/seed.txt\n+++ /dev/null" in t.file_changes
        assert "new file mode 100644\nindex 0000000..56a6051\n--- /dev/null\n+++ b/count.txt" in t.file_changes
    ran = [e for e in events if e.type == "workspace_hook_ran"]
    assert sorted((e.hook, e.test_id) for e in ran) == [
        ("after_each", "t1"), ("after_each", "t2"), ("before_all", "t1"), ("before_all", "t2"),
        ("before_each", "t1"), ("before_each", "t2"),
    ]  # fmt: skip
    assert all(e.outcome == "ok" and e.exit_code == 0 and e.cwd == str(tmp_path) for e in ran)
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert {entry["ws"] for entry in logged} == {str(tmp_path / "ws" / "t1"), str(tmp_path / "ws" / "t2")}


def test_shared_isolation_reuses_one_workspace_and_reset_restores_it(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "hooks.log"
    for reset, counts in (("none", ["1", "2"]), ("fast", ["1", "1"])):
        project = tmp_path / reset
        project.mkdir()
        hooks = _hook("before_all", log) + _hook("before_each", log, f", reset: {reset}" if reset != "none" else "")
        hooks += _hook("after_all", log)
        eval_file = _project(project, f"template: template\nhooks:\n{hooks}")
        monkeypatch.chdir(project)
        db = f"sqlite:///{project / 's.db'}"
        done = cli(db, "run", str(eval_file), "--workdir", "ws", "--workers", "4")
        assert done.exit_code == 0, done.output
        _, events = _events(db)
        snaps = sorted((e for e in events if e.type == "workspace_snapshotted"), key=lambda e: e.test_id)
        blobs = EventStore.open(db)
        got = [blobs.get_blob(next(x for x in s.entries if x.path == "count.txt").sha256).decode() for s in snaps]
        assert sorted(got) == counts, reset
        assert {s.root for s in snaps} == {str(project / "ws" / "shared")}
        hooks_ran = [(e.hook, e.test_id) for e in events if e.type == "workspace_hook_ran"]
        assert hooks_ran[0] == ("before_all", None) and hooks_ran[-1] == ("after_all", None)


def test_a_failing_setup_hook_is_a_setup_error_naming_it(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "hooks.log"
    eval_file = _project(
        tmp_path, f"template: template\nisolation: per_test\nhooks:\n{_hook('before_each', log)}", "[t1, t-fail]"
    )
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 's.db'}"
    done = cli(db, "run", str(eval_file), "--workdir", "ws")
    assert done.exit_code == 1
    _, events = _events(db)
    scored = {e.test_id: e for e in events if e.type == "test_scored"}
    assert scored["t1"].passed
    error = scored["t-fail"].error
    assert scored["t-fail"].status == "execution_error"
    assert error.startswith("setup error: before_each hook [") and "exited with code 3: database not ready" in error
    (failed,) = [e for e in events if e.type == "workspace_hook_ran" and e.outcome != "ok"]
    assert failed.exit_code == 3 and failed.stderr_tail == "database not ready\n"
    assert not [e for e in events if e.type == "transcript_recorded" and e.test_id == "t-fail"], "agent not run"


def test_a_failing_before_all_of_a_shared_workspace_fails_the_run(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    hook = f"  before_all: {{command: [{json.dumps(sys.executable)}, -c, 'import sys; sys.exit(\"no db\")']}}\n"
    eval_file = _project(tmp_path, f"template: template\nhooks:\n{hook}")
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 's.db'}"
    done = cli(db, "run", str(eval_file), "--workdir", "ws")
    assert done.exit_code == 2 and "setup error: before_all hook" in done.output and "no db" in done.output
    _, events = _events(db)
    assert events[-1].type == "run_failed" and "before_all" in events[-1].reason
    assert not [e for e in events if e.type == "transcript_recorded"]


def test_repos_local_cloned_and_unreachable_remote_refused_before_the_run(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    (upstream / "lib.py").write_text("VALUE = 1\n")
    git = ["git", "-c", "user.email=e@x", "-c", "user.name=e"]
    subprocess.run(["git", "init", "-q", str(upstream)], check=True)
    subprocess.run([*git, "-C", str(upstream), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(upstream), "commit", "-qm", "one"], check=True)
    eval_file = _project(
        tmp_path, "template: template\nisolation: per_test\nrepos:\n  - {path: vendor/up, repo: upstream}\n", "[t1]"
    )
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 's.db'}"
    done = cli(db, "run", str(eval_file), "--workdir", "ws")
    assert done.exit_code == 0, done.output
    _, events = _events(db)
    (snap,) = [e for e in events if e.type == "workspace_snapshotted"]
    assert "vendor/up/lib.py" in {e.path for e in snap.entries}
    assert not any(e.path.startswith("vendor/up/.git") for e in snap.entries)

    remote = tmp_path / "remote"
    remote.mkdir()
    bad = _project(remote, "template: template\nrepos:\n  - {path: x, repo: 'file:///nonexistent/repo.git'}\n", "[t1]")
    monkeypatch.chdir(remote)
    db2 = f"sqlite:///{remote / 's.db'}"
    done = cli(db2, "run", str(bad), "--workdir", "ws")
    assert done.exit_code == 2 and "workspace.repos[x]: cannot reach file:///nonexistent/repo.git" in done.output
    assert EventStore.open(db2).run_ids() == [], "refused before anything was recorded"


@pytest.mark.parametrize(
    ("workspace", "message"),
    [
        ("path: somewhere\nisolation: per_test\n", "cannot be combined with `isolation: per_test`"),
        ("isolation: sometimes\n", "`sometimes` is not an isolation"),
        (
            "template: template\nhooks:\n  after_all: {command: [x], reset: fast}\n",
            "`reset` applies to before_each and after_each only",
        ),
    ],
)
def test_bad_workspace_config_is_one_error(tmp_path: Path, monkeypatch, workspace: str, message: str) -> None:  # type: ignore[no-untyped-def]
    eval_file = _project(tmp_path, workspace)
    monkeypatch.chdir(tmp_path)
    done = cli(f"sqlite:///{tmp_path / 's.db'}", "run", str(eval_file))
    assert done.exit_code == 2 and message in done.output


def test_each_test_gets_its_own_workspace_inside_the_run_folder_whatever_its_id(tmp_path: Path) -> None:
    """Test ids are data: ``..`` must not make a test work in the folder of every run's workspaces, and
    ``a/b`` (made a folder name) must not share ``a_b``'s workspace."""
    ids = ["..", ".", "a/b", "a_b", "plain"]
    (tmp_path / ".agentv").mkdir()
    agent = tmp_path / "agent.py"
    agent.write_text("import os, sys\nopen(sys.argv[1], 'w').write(os.getcwd())\n", encoding="utf-8")
    (tmp_path / ".agentv" / "targets.yaml").write_text(
        f"targets:\n  - name: where\n    provider: cli\n    command: [{json.dumps(sys.executable)}, {json.dumps(str(agent))}, '{{OUTPUT_FILE}}']\n",
        encoding="utf-8",
    )
    tests = "".join(
        f"  - id: {json.dumps(i)}\n    input: x\n    assertions:\n      - {{type: contains, value: work}}\n"
        for i in ids
    )
    eval_file = tmp_path / "ids.eval.yaml"
    eval_file.write_text(f"name: ids\nexecution:\n  target: where\ntests:\n{tests}", encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'store.db'}"
    work = tmp_path / "work"
    out = cli(db, "run", str(eval_file), "--json", "--workdir", str(work))
    assert out.exit_code in (0, 1), out.stderr
    store = EventStore.open(db)
    try:
        run_id = json.loads(out.stdout)["run_id"]
        folders = {
            e.payload["test_id"]: Path(e.payload["workspace_path"])
            for e in store.read_stream(run_id, types=["transcript_recorded"])
        }
    finally:
        store.close()
    assert sorted(folders) == sorted(ids)
    assert len(set(folders.values())) == len(ids)
    for folder in folders.values():
        assert folder.resolve().parent == work.resolve(), folder
    assert folders["plain"].name == "plain"
