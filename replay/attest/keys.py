"""Ed25519 signing keys, in the key encodings of Go's ``golang.org/x/mod/sumdb/note`` (and C2SP signed-note).

- signer key (the private key file): ``PRIVATE+KEY+NAME+KEYHASH+BASE64(0x01 || 32-byte seed)``
- verifier key (what ``evalstore keys show`` prints, ``--pubkey`` reads): ``NAME+KEYHASH+BASE64(0x01 || public key)``

``KEYHASH`` is 8 hex digits: the first 4 bytes of ``SHA-256(NAME || "\\n" || 0x01 || public key)``. The
private key lives outside the store, by default under ``$XDG_CONFIG_HOME/evalstore/`` (else
``~/.config/evalstore/``), in a file only its owner can read (0600); a key file others can read is refused.
Signing and verifying use the ``cryptography`` package.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from evalstore.replay.errors import SigningKeyError

ALG_ED25519 = 0x01
KEY_FILE_NAME = "signing.key"
_NAME = re.compile(r"^[^\s+]+$")


def default_key_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "evalstore" / KEY_FILE_NAME


def key_id(name: str, public: bytes) -> bytes:
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([ALG_ED25519]) + public).digest()[:4]


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise SigningKeyError(f"key name {name!r} must be non-empty, without spaces or '+'")
    return name


@dataclass(frozen=True)
class VerifierKey:
    name: str
    public: bytes
    """The raw 32-byte Ed25519 public key."""

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.public)

    def encoded(self) -> str:
        return f"{self.name}+{self.key_id.hex()}+{base64.b64encode(bytes([ALG_ED25519]) + self.public).decode()}"

    def verifies(self, signature: bytes, message: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True)
class SigningKey:
    name: str
    seed: bytes

    @property
    def _private(self) -> Ed25519PrivateKey:
        return Ed25519PrivateKey.from_private_bytes(self.seed)

    @property
    def verifier(self) -> VerifierKey:
        return VerifierKey(self.name, self._private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))

    @property
    def key_id(self) -> bytes:
        return self.verifier.key_id

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)

    def encoded(self) -> str:
        seed = base64.b64encode(bytes([ALG_ED25519]) + self.seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.key_id.hex()}+{seed}"

    @classmethod
    def generate(cls, name: str) -> SigningKey:
        seed = Ed25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        return cls(check_name(name), seed)


def _split(text: str, parts: int, what: str) -> list[str]:
    # The base64 part may itself hold '+': split from the left only.
    fields = text.strip().split("+", parts - 1)
    if len(fields) != parts:
        raise SigningKeyError(f"not {what}")
    return fields


def _key_bytes(name: str, hash_hex: str, b64: str, what: str) -> bytes:
    check_name(name)
    try:
        raw = base64.b64decode(b64, validate=True)
    except binascii.Error:
        raise SigningKeyError(f"not {what}: the key is not base64") from None
    if len(raw) != 33 or raw[0] != ALG_ED25519:
        raise SigningKeyError(f"not {what}: only Ed25519 keys (algorithm 1, 32 bytes) are supported")
    if not re.fullmatch(r"[0-9a-f]{8}", hash_hex):
        raise SigningKeyError(f"not {what}: the key hash must be 8 hex digits")
    return raw[1:]


def parse_signing_key(text: str) -> SigningKey:
    what = "a signing key (PRIVATE+KEY+NAME+HASH+KEY)"
    private, key_word, name, hash_hex, b64 = _split(text, 5, what)
    if (private, key_word) != ("PRIVATE", "KEY"):
        raise SigningKeyError(f"not {what}")
    key = SigningKey(name, _key_bytes(name, hash_hex, b64, what))
    if key.key_id.hex() != hash_hex:
        raise SigningKeyError(f"not {what}: its key hash {hash_hex} does not match the key")
    return key


def parse_verifier_key(text: str) -> VerifierKey:
    what = "a verifier key (NAME+HASH+KEY, as `evalstore keys show` prints it)"
    if text.strip().startswith("PRIVATE+KEY+"):
        raise SigningKeyError("this is a private signing key; give the public key (`evalstore keys show`)")
    name, hash_hex, b64 = _split(text, 3, what)
    key = VerifierKey(name, _key_bytes(name, hash_hex, b64, what))
    if key.key_id.hex() != hash_hex:
        raise SigningKeyError(f"not {what}: its key hash {hash_hex} does not match the key")
    return key


def create_key_file(path: Path, name: str, *, force: bool = False) -> SigningKey:
    """Write a new signing key to ``path`` (mode 0600; its folder 0700 when created here)."""
    key = SigningKey.generate(name)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise SigningKeyError(f"{path}: a key already exists there (--force replaces it)") from None
    with os.fdopen(fd, "w", encoding="ascii") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(key.encoded() + "\n")
    return key


def load_signing_key(path: Path | None) -> SigningKey:
    path = path or default_key_path()
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise SigningKeyError(f"{path}: no signing key there; create one with `evalstore keys init`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SigningKeyError(f"{path}: cannot read the signing key: {exc}") from None
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SigningKeyError(
            f"{path}: the signing key is readable by others (mode {stat.S_IMODE(mode):04o}); run chmod 600 {path}"
        )
    try:
        return parse_signing_key(text)
    except SigningKeyError as exc:
        raise SigningKeyError(f"{path}: {exc}") from None


def load_verifier_key(path: Path) -> VerifierKey:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SigningKeyError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SigningKeyError(f"{path}: cannot read the public key: {exc}") from None
    try:
        return parse_verifier_key(text)
    except SigningKeyError as exc:
        raise SigningKeyError(f"{path}: {exc}") from None
