"""The C2SP ``signed-note`` and ``tlog-checkpoint`` text formats, Ed25519 signatures only.

A signed note is a text (UTF-8, ending in a newline) followed by a blank line and one signature line per
signer: ``— NAME BASE64(key hash || signature)``. The key hash is the first 4 bytes of
``SHA-256(NAME || "\\n" || 0x01 || public key)``; the signature is Ed25519 over the text's bytes.

A checkpoint's text is ``ORIGIN\\nSIZE\\nBASE64(root hash)\\n`` and optional extension lines. evalstore adds
one, ``evalstore-head HEX``: the hash-chain hash of event ``seq = SIZE`` (64 zeros for an empty log).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field

from evalstore.replay.attest.keys import SigningKey, VerifierKey
from evalstore.replay.errors import AttestationFormatError

SIG_PREFIX = "— "  # an em dash and a space
HEAD_EXTENSION = "evalstore-head "
_SIG_LINE = re.compile(r"^— (\S+) (\S+)$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: bytes
    signature: bytes


@dataclass(frozen=True)
class SignedNote:
    text: str
    signatures: tuple[Signature, ...]

    def verify(self, key: VerifierKey) -> str | None:
        """None when a signature by ``key`` verifies; otherwise what is wrong, in one line."""
        mine = [s for s in self.signatures if s.name == key.name and s.key_id == key.key_id]
        if not mine:
            names = ", ".join(f"{s.name} ({s.key_id.hex()})" for s in self.signatures) or "nobody"
            return f"signed by {names}, not by key {key.name} ({key.key_id.hex()})"
        if any(key.verifies(s.signature, self.text.encode("utf-8")) for s in mine):
            return None
        return f"signature by {key.name} does not match the text (the checkpoint was altered after signing)"


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise AttestationFormatError("a note's text must end with a newline")
    if any(ord(c) < 0x20 and c != "\n" for c in text):
        raise AttestationFormatError("a note's text must not contain control characters")


def sign(text: str, key: SigningKey) -> str:
    """The signed note: ``text``, a blank line, and ``key``'s signature line."""
    _check_text(text)
    blob = key.key_id + key.sign(text.encode("utf-8"))
    return f"{text}\n{SIG_PREFIX}{key.name} {base64.b64encode(blob).decode('ascii')}\n"


def parse(note: str) -> SignedNote:
    """A signed note split into its text and signatures; the signatures are not checked here."""
    if not note.endswith("\n"):
        raise AttestationFormatError("not a signed note: it must end with a newline")
    cut = note.rfind("\n\n")
    if cut < 0:
        raise AttestationFormatError("not a signed note: no blank line before the signatures")
    text, sig_lines = note[: cut + 1], note[cut + 2 :].splitlines()
    _check_text(text)
    signatures = []
    for line in sig_lines:
        match = _SIG_LINE.match(line)
        if not match:
            raise AttestationFormatError(f"not a signed note: malformed signature line {line[:60]!r}")
        try:
            blob = base64.b64decode(match[2], validate=True)
        except binascii.Error:
            raise AttestationFormatError(f"not a signed note: signature of {match[1]} is not base64") from None
        if len(blob) < 5:
            raise AttestationFormatError(f"not a signed note: signature of {match[1]} is too short")
        signatures.append(Signature(match[1], blob[:4], blob[4:]))
    if not signatures:
        raise AttestationFormatError("not a signed note: no signature lines")
    return SignedNote(text, tuple(signatures))


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint commits to: the first ``size`` events of the log named ``origin``."""

    origin: str
    size: int
    root_hash: bytes
    head_hash: str
    """Hex hash-chain hash of event ``seq = size``."""
    extensions: tuple[str, ...] = field(default=())
    """Extension lines other than evalstore's own, kept as they are."""

    def text(self) -> str:
        if not self.origin or any(c.isspace() and c != " " for c in self.origin):
            raise AttestationFormatError(f"checkpoint origin {self.origin!r} must be one non-empty line")
        lines = [self.origin, str(self.size), base64.b64encode(self.root_hash).decode("ascii")]
        return "\n".join([*lines, HEAD_EXTENSION + self.head_hash, *self.extensions]) + "\n"


def parse_checkpoint(text: str) -> Checkpoint:
    lines = text.splitlines()
    if len(lines) < 3:
        raise AttestationFormatError("not a checkpoint: it needs origin, size and root hash lines")
    origin, size, root = lines[:3]
    if not size.isdigit() or (size != "0" and size.startswith("0")):
        raise AttestationFormatError(f"not a checkpoint: size {size!r} is not a decimal number")
    try:
        root_hash = base64.b64decode(root, validate=True)
    except binascii.Error:
        root_hash = b""
    if len(root_hash) != 32:
        raise AttestationFormatError("not a checkpoint: the root hash is not 32 base64-encoded bytes")
    heads = [line[len(HEAD_EXTENSION) :] for line in lines[3:] if line.startswith(HEAD_EXTENSION)]
    if len(heads) != 1 or not _HEX64.match(heads[0]):
        raise AttestationFormatError(f"not an evalstore checkpoint: it needs one `{HEAD_EXTENSION}HEX` line")
    others = tuple(line for line in lines[3:] if not line.startswith(HEAD_EXTENSION))
    return Checkpoint(origin, int(size), root_hash, heads[0], others)


def open_checkpoint(note: str, key: VerifierKey) -> tuple[Checkpoint, str | None]:
    """The checkpoint a signed note holds, and None when ``key``'s signature verifies, else why not."""
    signed = parse(note)
    return parse_checkpoint(signed.text), signed.verify(key)
