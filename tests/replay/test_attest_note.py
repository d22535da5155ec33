"""Signed notes, checkpoints and key files, held to the reference implementations' published examples."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from evalstore.replay.attest import note
from evalstore.replay.attest.keys import (
    SigningKey,
    create_key_file,
    default_key_path,
    load_signing_key,
    load_verifier_key,
    parse_signing_key,
    parse_verifier_key,
)
from evalstore.replay.attest.note import Checkpoint, open_checkpoint, parse_checkpoint
from evalstore.replay.errors import AttestationFormatError, SigningKeyError

# golang.org/x/mod/sumdb/note's documented example (Ed25519 is deterministic: same key, same text, same signature).
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
GO_NOTE = (
    GO_TEXT
    + "\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)
# The C2SP signed-note specification's example verifier key and note.
SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = (
    "This is an example message.\n\n"
    "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)


def test_signing_reproduces_the_go_reference_note_byte_for_byte() -> None:
    key = parse_signing_key(GO_SKEY)
    assert key.encoded() == GO_SKEY
    assert key.verifier.encoded() == GO_VKEY
    assert note.sign(GO_TEXT, key) == GO_NOTE
    assert note.parse(GO_NOTE).verify(parse_verifier_key(GO_VKEY)) is None


def test_the_specification_example_verifies_and_its_key_hash_is_the_specified_one() -> None:
    key = parse_verifier_key(SPEC_VKEY)
    public = bytes([1]) + key.public
    assert hashlib.sha256(b"example.com/foo\n" + public).digest()[:4] == key.key_id == bytes.fromhex("530d903a")
    assert note.parse(SPEC_NOTE).verify(key) is None


def test_an_altered_text_or_another_key_does_not_verify() -> None:
    key = parse_verifier_key(GO_VKEY)
    altered = GO_NOTE.replace("cryptography", "cryptographY")
    assert "does not match the text" in note.parse(altered).verify(key)
    other = SigningKey.generate("PeterNeumann").verifier  # same name, another key: another key hash
    assert (
        note.parse(GO_NOTE).verify(other)
        == f"signed by PeterNeumann (c74f20a3), not by key PeterNeumann ({other.key_id.hex()})"
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("no newline", "must end with a newline"),
        ("text\n", "no blank line"),
        ("text\n\nnot a signature\n", "malformed signature line"),
        ("text\n\n— name !!!!\n", "not base64"),
        ("te\x07xt\n\n— name AAAAAAAA\n", "control characters"),
    ],
)
def test_malformed_notes_are_refused(text: str, message: str) -> None:
    with pytest.raises(AttestationFormatError, match=message):
        note.parse(text)


def test_a_checkpoint_round_trips_through_its_signed_note() -> None:
    key = SigningKey.generate("ci.example.com/evals")
    cp = Checkpoint("evalstore/abc", 1234, bytes(range(32)), "ab" * 32, ("other-extension 1",))
    text = cp.text()
    assert text.startswith("evalstore/abc\n1234\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\nevalstore-head abab")
    signed = note.sign(text, key)
    assert open_checkpoint(signed, key.verifier) == (cp, None)
    assert parse_checkpoint(note.parse(signed).text) == cp


@pytest.mark.parametrize(
    "body, message",
    [
        ("origin\n12\n", "needs origin, size and root hash"),
        ("origin\n012\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", "not a decimal number"),
        ("origin\n12\nAAEC\n", "not 32 base64-encoded bytes"),
        ("origin\n12\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", "evalstore-head HEX"),
    ],
)
def test_malformed_checkpoints_are_refused(body: str, message: str) -> None:
    with pytest.raises(AttestationFormatError, match=message):
        parse_checkpoint(body)


def test_key_files_are_created_owner_only_and_never_overwritten_silently(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "signing.key"
    key = create_key_file(path, "me@host")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_signing_key(path) == key
    with pytest.raises(SigningKeyError, match="a key already exists there"):
        create_key_file(path, "me@host")
    assert load_signing_key(path) == key
    replaced = create_key_file(path, "me@host", force=True)
    assert replaced != key and load_signing_key(path) == replaced
    os.chmod(path, 0o644)
    with pytest.raises(SigningKeyError, match=r"readable by others .*chmod 600"):
        load_signing_key(path)


def test_key_files_that_are_not_keys_say_what_is_expected(tmp_path: Path) -> None:
    public = tmp_path / "pub.txt"
    public.write_text(GO_VKEY + "\n")
    assert load_verifier_key(public).encoded() == GO_VKEY
    public.write_text(GO_SKEY + "\n")
    with pytest.raises(SigningKeyError, match="this is a private signing key"):
        load_verifier_key(public)
    public.write_text(GO_VKEY.replace("c74f20a3", "c74f20a4"))
    with pytest.raises(SigningKeyError, match="does not match the key"):
        load_verifier_key(public)
    with pytest.raises(SigningKeyError, match="no signing key there; create one with `evalstore keys init`"):
        load_signing_key(tmp_path / "missing.key")
    with pytest.raises(SigningKeyError, match="without spaces or"):
        SigningKey.generate("two words")


def test_the_default_key_lives_under_the_xdg_config_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert default_key_path() == tmp_path / "cfg" / "evalstore" / "signing.key"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_key_path() == tmp_path / "home" / ".config" / "evalstore" / "signing.key"
