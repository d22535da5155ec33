"""Capturing the files an agent names: real files, symlinks and FIFOs in tmp_path."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from evalstore.replay.content import FileBlock, Message, TextBlock
from evalstore.replay.targets import capture_files


def reply(*paths: str, media_type: str | None = "text/plain") -> list[Message]:
    blocks = [TextBlock(text="see files")] + [FileBlock(path=p, media_type=media_type) for p in paths]
    return [Message(role="assistant", content=blocks)]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "out").mkdir(parents=True)
    return ws


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read me")
    return secret


def only(result, path):
    [found] = [f for f in result.files if f.path == path]
    return found


def test_relative_file_is_stored_with_digest_and_block_annotated(workspace: Path) -> None:
    data = b"col1,col2\n1,2\n"
    (workspace / "out" / "a.csv").write_bytes(data)
    messages = reply("out/a.csv", media_type="text/csv")

    result = capture_files(messages, workspace)

    [captured] = result.files
    assert captured.status == "stored"
    assert captured.data == data
    assert captured.size == len(data)
    assert captured.sha256 == hashlib.sha256(data).hexdigest()
    assert captured.media_type == "text/csv"
    block = result.messages[0].content[1]
    assert isinstance(block, FileBlock)
    assert (block.sha256, block.status, block.reason) == (captured.sha256, "stored", None)
    assert block.path == "out/a.csv"
    # The caller's messages are left as they were.
    assert messages[0].content[1].sha256 is None and messages[0].content[1].status is None


def test_absolute_path_inside_workspace_and_file_url_are_stored(workspace: Path) -> None:
    target = workspace / "out" / "b.txt"
    target.write_text("inside")
    result = capture_files(reply(str(target), target.as_uri()), workspace)
    assert [f.status for f in result.files] == ["stored", "stored"]
    assert all(f.data == b"inside" for f in result.files)


def test_missing_file_is_recorded_as_missing(workspace: Path) -> None:
    result = capture_files(reply("out/nope.xlsx"), workspace)
    [captured] = result.files
    assert captured.status == "missing"
    assert captured.data is None and captured.sha256 is None
    assert result.messages[0].content[1].status == "missing"


def test_dotdot_escape_is_refused_and_not_read(workspace: Path, outside: Path) -> None:
    result = capture_files(reply("../secret.txt", "out/../../secret.txt"), workspace)
    assert [f.status for f in result.files] == ["refused", "refused"]
    for captured in result.files:
        assert captured.data is None
        assert "outside the test workspace" in (captured.reason or "")
    assert result.messages[0].content[1].reason == result.files[0].reason


def test_absolute_path_outside_is_refused_whether_or_not_it_exists(workspace: Path, outside: Path) -> None:
    result = capture_files(reply(str(outside), "/etc/passwd", "/no/such/file"), workspace)
    assert [f.status for f in result.files] == ["refused"] * 3
    assert all(f.data is None for f in result.files)


def test_symlink_leading_out_is_refused(workspace: Path, outside: Path) -> None:
    (workspace / "out" / "link.txt").symlink_to(outside)
    (workspace / "dirlink").symlink_to(outside.parent, target_is_directory=True)
    result = capture_files(reply("out/link.txt", "dirlink/secret.txt"), workspace)
    assert [f.status for f in result.files] == ["refused", "refused"]
    assert all(f.data is None for f in result.files)


def test_symlink_within_workspace_is_followed(workspace: Path) -> None:
    (workspace / "real.txt").write_text("real bytes")
    (workspace / "out" / "alias.txt").symlink_to(workspace / "real.txt")
    [captured] = capture_files(reply("out/alias.txt"), workspace).files
    assert captured.status == "stored" and captured.data == b"real bytes"


def test_directory_and_fifo_are_refused_as_not_regular(workspace: Path) -> None:
    os.mkfifo(workspace / "out" / "pipe")
    result = capture_files(reply("out", "out/pipe"), workspace)
    assert [f.status for f in result.files] == ["refused", "refused"]
    assert all(f.reason == "not a regular file" for f in result.files)


def test_size_cap_refuses_large_files(workspace: Path) -> None:
    (workspace / "big.bin").write_bytes(b"x" * 100)
    (workspace / "small.bin").write_bytes(b"x" * 10)
    result = capture_files(reply("big.bin", "small.bin"), workspace, max_file_bytes=50)
    big, small = result.files
    assert big.status == "refused" and "100 bytes" in (big.reason or "") and big.data is None
    assert small.status == "stored" and small.size == 10


def test_remote_and_empty_paths_are_refused(workspace: Path) -> None:
    result = capture_files(reply("https://example.com/a.pdf", ""), workspace)
    remote, empty = result.files
    assert remote.status == "refused" and "remote" in (remote.reason or "")
    assert empty.status == "refused" and empty.reason == "empty path"


def test_same_path_twice_is_captured_once_and_both_blocks_annotated(workspace: Path) -> None:
    (workspace / "r.txt").write_text("once")
    messages = reply("r.txt") + reply("r.txt")
    result = capture_files(messages, workspace)
    assert len(result.files) == 1
    digests = [m.content[1].sha256 for m in result.messages]
    assert digests == [hashlib.sha256(b"once").hexdigest()] * 2


def test_media_type_is_guessed_when_the_block_has_none(workspace: Path) -> None:
    (workspace / "page.html").write_text("<p>hi</p>")
    [captured] = capture_files(reply("page.html", media_type=None), workspace).files
    assert captured.media_type == "text/html"


def test_string_content_messages_pass_through(workspace: Path) -> None:
    result = capture_files([Message(role="assistant", content="plain")], workspace)
    assert result.files == [] and result.messages[0].content == "plain"


def test_a_relative_path_is_found_in_the_targets_cwd_after_the_workspace(
    tmp_path: Path, workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = tmp_path / "agent-cwd"
    (cwd / "out").mkdir(parents=True)
    (cwd / "out" / "report.csv").write_text("from the target's cwd")
    (cwd / "out" / "both.txt").write_text("the cwd's copy")
    (workspace / "out" / "both.txt").write_text("the workspace's copy")
    (cwd / "out" / "link.txt").symlink_to(outside)  # leads out of every root
    elsewhere = tmp_path / "process-cwd"
    elsewhere.mkdir()
    (elsewhere / "only-in-process-cwd.txt").write_text("not a folder the target was given")
    monkeypatch.chdir(elsewhere)

    result = capture_files(
        reply("out/report.csv", "out/both.txt", "out/link.txt", "../secret.txt", "only-in-process-cwd.txt", "gone.txt"),
        workspace,
        agent_cwd=cwd,
    )
    assert only(result, "out/report.csv").data == b"from the target's cwd"
    assert only(result, "out/both.txt").data == b"the workspace's copy"  # the workspace comes first
    for path in ("out/link.txt", "../secret.txt", "only-in-process-cwd.txt"):
        found = only(result, path)
        assert found.status == "refused" and found.data is None, found
        assert "outside the test workspace and the target's cwd" in (found.reason or "")
    assert only(result, "gone.txt").status == "missing"

    # Without a configured cwd, only the workspace is a root.
    alone = capture_files(reply("out/report.csv"), workspace)
    assert only(alone, "out/report.csv").status == "missing"


def test_a_mask_is_applied_to_the_bytes_before_their_digest_and_size(workspace: Path) -> None:
    """A captured file is the agent's output: its bytes pass the answer's mask, and what the store keys and
    sizes is the masked bytes (a binary file's other bytes kept as they were)."""
    from evalstore.replay.targetsfile.redaction import SecretMask

    mask = SecretMask.of(references={"AGENT_API_KEY": "s3cr3t-VALUE"})
    (workspace / "out" / "a.txt").write_bytes(b"key: s3cr3t-VALUE\n")
    (workspace / "out" / "b.bin").write_bytes(b"\xff\x00s3cr3t-VALUE\x80")

    result = capture_files(reply("out/a.txt", "out/b.bin"), workspace, mask=mask)

    text, binary = only(result, "out/a.txt"), only(result, "out/b.bin")
    assert text.data == b"key: ${{ AGENT_API_KEY }}\n"
    assert binary.data == b"\xff\x00${{ AGENT_API_KEY }}\x80"
    for captured in (text, binary):
        assert captured.data is not None
        assert (captured.sha256, captured.size) == (hashlib.sha256(captured.data).hexdigest(), len(captured.data))
    assert [b.sha256 for b in result.messages[0].content[1:]] == [text.sha256, binary.sha256]  # type: ignore[union-attr]
