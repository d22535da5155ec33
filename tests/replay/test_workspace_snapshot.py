"""Workspace snapshots (limits, excludes, symlinks, materializing) and the file_changes diff."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from evalstore.replay.evalfile.specs import SnapshotSpec
from evalstore.replay.workspace.changes import folder_state, unified_diff
from evalstore.replay.workspace.snapshot import SnapshotUnusable, excluded, materialize, take_snapshot
from evalstore.store.codec import sha256_hex
from evalstore.store.events import WorkspaceEntry, WorkspaceSnapshotted


def _tree(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("A = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "big.bin").write_bytes(b"\0" * 5000)
    (root / "empty").mkdir()
    (root / "node_modules" / "x").mkdir(parents=True)
    (root / "node_modules" / "x" / "i.js").write_text("js")
    (root / "app.log").write_text("log")
    os.symlink("src/a.py", root / "alias.py")
    os.symlink("/etc/passwd", root / "outside")


def _snap(root: Path, **limits: object) -> tuple[WorkspaceSnapshotted, dict[str, bytes]]:
    blobs: dict[str, bytes] = {}

    def put(data: bytes) -> str:
        blobs[sha256_hex(data)] = data
        return sha256_hex(data)

    spec = SnapshotSpec(**limits)  # type: ignore[arg-type]
    return take_snapshot(root, spec, put, test_id="t", target=None), blobs


def test_a_snapshot_keeps_files_modes_links_and_empty_folders(tmp_path: Path) -> None:
    _tree(tmp_path / "ws")
    snap, blobs = _snap(tmp_path / "ws", exclude=["node_modules", "*.log"])
    entries = {e.path: e for e in snap.entries}
    assert set(entries) == {"src/a.py", "run.sh", "big.bin", "empty", "alias.py", "outside"}
    assert entries["run.sh"].mode == 0o755 and entries["empty"].kind == "dir"
    assert entries["outside"].kind == "symlink" and entries["outside"].target == "/etc/passwd"
    assert entries["outside"].sha256 is None, "a link is never followed"
    assert not snap.partial and snap.file_count == 3 and snap.total_bytes == 6 + 18 + 5000

    dest = tmp_path / "copy"
    dest.mkdir()
    materialize(snap, blobs.__getitem__, dest)
    assert (dest / "src" / "a.py").read_text() == "A = 1\n"
    assert os.access(dest / "run.sh", os.X_OK) and (dest / "empty").is_dir()
    assert os.readlink(dest / "alias.py") == "src/a.py" and (dest / "alias.py").read_text() == "A = 1\n"


def test_limits_make_a_snapshot_partial_and_name_what_they_left_out(tmp_path: Path) -> None:
    _tree(tmp_path / "ws")
    snap, _ = _snap(tmp_path / "ws", max_file_bytes=1000, max_files=2)  # kept: app.log, run.sh
    assert snap.partial and snap.omitted_count == 2 and snap.file_count == 2
    assert snap.omitted == ["big.bin: 5000 bytes, over max_file_bytes (1000)", "src/a.py: over max_files (2)"]
    snap, _ = _snap(tmp_path / "ws", max_bytes=30)
    assert snap.partial and [o.split(":")[0] for o in snap.omitted] == ["big.bin"]


@pytest.mark.parametrize(
    ("path", "patterns", "hit"),
    [
        ("a/node_modules/b.js", ["node_modules"], True),
        ("build/out.o", ["build/"], True),
        ("src/build.py", ["build/"], False),
        ("logs/x.log", ["*.log"], True),
        ("src/a.py", ["src/*.py"], True),
        ("lib/src/a.py", ["src/*.py"], False),
    ],
)
def test_exclude_globs(path: str, patterns: list[str], hit: bool) -> None:
    assert excluded(path, patterns) is hit


@pytest.mark.parametrize("bad", ["../escape.txt", "/abs.txt"])
def test_materialize_refuses_paths_that_leave_the_folder(tmp_path: Path, bad: str) -> None:
    snap = WorkspaceSnapshotted(test_id="t", root="/ws", entries=[WorkspaceEntry(path=bad, sha256="0" * 64)])
    with pytest.raises(SnapshotUnusable):
        materialize(snap, lambda _: b"x", tmp_path)
    through_link = WorkspaceSnapshotted(
        test_id="t",
        root="/ws",
        entries=[
            WorkspaceEntry(path="out", kind="symlink", target=str(tmp_path.parent)),
            WorkspaceEntry(path="out/pwned.txt", sha256="0" * 64),
        ],
    )
    dest = tmp_path / "d"
    dest.mkdir()
    with pytest.raises(SnapshotUnusable, match="passes through a link"):
        materialize(through_link, lambda _: b"x", dest)
    assert not (tmp_path.parent / "pwned.txt").exists()


def _git(ws: Path, *args: str) -> str:
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(ws.parent), "PATH": os.environ.get("PATH", "")}
    done = subprocess.run(["git", *args], cwd=ws, env=env, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to compare with")
def test_file_changes_is_byte_identical_to_git_diff_as_agentv_runs_it(tmp_path: Path) -> None:
    """AgentV commits a baseline, stages everything after the agent and prints `git diff BASE`, trimmed."""
    ws = tmp_path / "ws"
    _tree(ws)
    long = "".join(f"    v{i} = {i}\n" for i in range(1, 40))
    (ws / "src" / "long.py").write_text("import os\n\n\ndef f():\n" + long + "class K:\n" + long)
    (ws / "gone-empty.txt").write_text("")
    (ws / "modes.sh").write_text("echo\n")
    (ws / "modes2.sh").write_text("echo\n")
    (ws / "big.bin").write_bytes(b"\0" * 10)
    spec = SnapshotSpec()
    before = folder_state(ws, spec)
    _git(ws, "init", "-q")
    _git(ws, "add", "-A")
    _git(ws, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--no-verify", "-m", "agentv-baseline")
    (ws / "src" / "a.py").write_text("A = 2\n")
    (ws / "run.sh").unlink()
    (ws / "gone-empty.txt").unlink()
    (ws / "new.txt").write_text("no newline")
    (ws / "empty.txt").write_text("")
    (ws / "big.bin").write_bytes(b"\0" * 11)
    (ws / "deep" / "er").mkdir(parents=True)
    (ws / "deep" / "er" / "x.md").write_text("# x\n\ntext\n")
    os.chmod(ws / "modes.sh", 0o755)
    os.chmod(ws / "modes2.sh", 0o755)
    (ws / "modes2.sh").write_text("echo 2\n")
    text = (ws / "src" / "long.py").read_text()
    (ws / "src" / "long.py").write_text(
        text.replace("v20 = 20\n", "v20 = 'twenty'\n", 1).replace("    v35 = 35\n", "", 2)
    )
    os.symlink("src/a.py", ws / "link")
    _git(ws, "add", "-A")
    expected = _git(ws, "-c", "core.filemode=true", "diff", "HEAD", "--submodule=diff").strip()
    assert "@@ def f():\n" in expected and "@@ class K:\n" in expected  # what is compared
    assert unified_diff(before, folder_state(ws, spec)) == expected
    assert unified_diff(before, before) == ""


def test_a_mask_is_applied_to_every_file_path_and_link_target_a_snapshot_keeps(tmp_path: Path) -> None:
    """The snapshot of an agent's workspace passes the answer's mask: file bytes (text or not; sizes and
    digests of the masked bytes), and the names and link targets it wrote."""
    from evalstore.replay.targetsfile.redaction import SecretMask

    secret = "s3cr3t-VALUE"
    mask = SecretMask.of(references={"AGENT_API_KEY": secret})
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text(f"KEY = {secret!r}\n")
    (ws / "b.bin").write_bytes(b"\xff\x00" + secret.encode() + b"\x80")
    (ws / f"named-{secret}.txt").write_text("plain")
    os.symlink(f"/tmp/{secret}", ws / "link")
    blobs: dict[str, bytes] = {}

    def put(data: bytes) -> str:
        blobs[sha256_hex(data)] = data
        return sha256_hex(data)

    snap = take_snapshot(ws, SnapshotSpec(), put, test_id="t", target=None, mask=mask)

    entries = {e.path: e for e in snap.entries}
    assert set(entries) == {"src/a.py", "b.bin", "named-${{ AGENT_API_KEY }}.txt", "link"}
    assert blobs[entries["src/a.py"].sha256 or ""] == b"KEY = '${{ AGENT_API_KEY }}'\n"
    assert blobs[entries["b.bin"].sha256 or ""] == b"\xff\x00${{ AGENT_API_KEY }}\x80"
    assert entries["link"].target == "/tmp/${{ AGENT_API_KEY }}"
    assert all(e.size == len(blobs[e.sha256]) for e in snap.entries if e.sha256)
    assert snap.total_bytes == sum(len(b) for b in blobs.values())
    assert not any(secret.encode() in data for data in blobs.values())
    assert secret not in snap.model_dump_json()
