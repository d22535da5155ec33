"""Redacting literal secrets from what is stored: one rule for target configs, judge targets and
(through ``targets.secrets``) everything a run records about its target.

``${{ NAME }}`` references are kept as written; a literal secret is replaced by ``REDACTED``: the whole
value under a secret-looking key, and a secret-looking token inside any other string or argv list.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, overload
from urllib.parse import unquote, urlsplit

from evalstore.replay.jsontext import strings_in
from evalstore.replay.targetsfile.loader import ENV_REFERENCE, references

REDACTED = "***redacted***"

# A key looks secret when its last word is one of these (``api_key``, ``X-Api-Key``, ``authToken``,
# ``client_secret``), or when any word is one of the unambiguous ones. Judging by the last word keeps
# ``max_tokens`` and ``token_usage`` out.
_SECRET_LAST_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "authorization",
        "auth",
        "credential",
        "credentials",
        "cred",
        "creds",
        "passphrase",
        "pat",  # a personal access token: GITHUB_PAT
        "cookie",
        "signature",
    }
)
_SECRET_ANY_WORDS = frozenset({"password", "passwd", "secret", "authorization", "apikey", "credentials"})
_WORD_SPLIT = re.compile(r"[_\-.\s]+|(?<=[a-z0-9])(?=[A-Z])")
# What may stand beside a reference in a secret value without being a secret itself.
_AUTH_SCHEME = re.compile(r"^\s*(?:bearer|basic|token)?\s*$", re.IGNORECASE)


def looks_secret(key: str) -> bool:
    words = [w.lower() for w in _WORD_SPLIT.split(str(key)) if w]
    if not words:
        return False
    return words[-1] in _SECRET_LAST_WORDS or any(w in _SECRET_ANY_WORDS for w in words)


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config with ``${{ ENV }}`` references intact and literal secrets replaced: the whole value
    under a secret-looking key, and a secret-looking token inside any other string (see
    :func:`_redact_text`), so ``command: agent --api-key sk-...`` is stored without the key."""
    return {k: _redact_value(v, looks_secret(k)) for k, v in config.items()}


def literal_secrets(config: Mapping[str, Any]) -> list[str]:
    """What :func:`redact` replaces: literal secrets written in a config (``env: {MY_TOKEN: tok-...}``, a
    token in a command line), which what the target echoes must not carry into the store either."""
    found: list[str] = []

    def walk(value: Any, shown: Any) -> None:
        if isinstance(value, Mapping) and isinstance(shown, Mapping):
            for k, v in value.items():
                walk(v, shown.get(k))
        elif isinstance(value, (list, tuple)) and isinstance(shown, list):
            for v, w in zip(value, shown, strict=False):
                walk(v, w)
        elif isinstance(value, str) and shown == REDACTED and value != REDACTED:
            found.append(value)
        elif isinstance(value, str) and isinstance(shown, str) and REDACTED in shown and shown != value:
            # A token replaced inside a string (``--api-key sk-...`` in a command): what stood where each
            # marker stands.
            pattern = "(.+?)".join(re.escape(part) for part in shown.split(REDACTED))
            match = re.fullmatch(pattern, value, re.DOTALL)
            found.extend(match.groups() if match else ())

    walk(config, redact(config))
    return found


def _redact_value(value: Any, secret: bool) -> Any:
    if isinstance(value, Mapping):
        return {k: _redact_value(v, secret or looks_secret(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return _redact_list(value, secret)
    if not secret or value is None or value == "" or isinstance(value, bool):
        return _redact_text(value) if isinstance(value, str) else value
    if isinstance(value, str) and ENV_REFERENCE.search(value) and _AUTH_SCHEME.match(ENV_REFERENCE.sub("", value)):
        return value
    return REDACTED


def _redact_list(items: list[Any] | tuple[Any, ...], secret: bool) -> list[Any]:
    # An argv list splits ``--api-key VALUE`` over two items: the item after a secret-looking flag is
    # the secret, whatever it looks like.
    out: list[Any] = []
    after_secret_flag = False
    for item in items:
        if after_secret_flag and isinstance(item, str) and _is_literal(item):
            out.append(REDACTED)
        else:
            out.append(_redact_value(item, secret))
        after_secret_flag = isinstance(item, str) and _is_secret_flag(item)
    return out


# Tokens that are secrets by their shape alone, wherever they stand: provider key prefixes (OpenAI and
# Anthropic ``sk-``, Stripe, GitHub, GitLab, Slack, Hugging Face, AWS access key ids, Google API keys),
# JWTs, and long random-looking runs (upper case, lower case and digits all present, 32+ characters:
# hex digests, UUIDs, model names and paths lack one of these or the length).
_SECRET_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"(?:sk|pk|rk)[-_][A-Za-z0-9_-]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{32,}"
    r")(?![A-Za-z0-9_-])"
)
# A value given by name: ``--api-key VALUE``, ``--token=VALUE``, ``OPENAI_API_KEY=VALUE``,
# ``?token=VALUE&``, ``Authorization: Bearer VALUE``, ``Bearer VALUE``, ``https://user:VALUE@host``. The value ends
# at white space, a quote, ``&`` or ``#`` unless it is quoted; after a space it does not start with ``-``
# (that is the next flag).
_NAMED_VALUE = re.compile(
    r"(?P<lead>(?P<flag>(?<![\w-])--?[A-Za-z][\w.-]*)(?:\s*=\s*|\s+(?!-))"
    r"|(?P<name>(?<![\w-])[A-Za-z_][\w.-]*)\s*(?:=|:(?!//))\s*(?:(?:[Bb]earer|[Bb]asic|[Tt]oken)\s+)?"
    r"|(?P<scheme>\b(?:[Bb]earer|[Bb]asic))\s+"
    r"|(?P<userinfo>://[^/\s:@]+:))"
    r"""(?P<value>'[^']*'|"[^"]*"|[^\s'"&#]+)"""
    r"(?(userinfo)(?=@))"
)
_TEMPLATE_PLACEHOLDER = re.compile(r"""^['"]?\{[A-Z_]+\}['"]?$""")


def _redact_text(text: str) -> str:
    """``text`` with secret-looking tokens replaced; ``${{ NAME }}`` references are left as written."""
    # Split so that no rule can reach into a reference: an odd part is a reference, kept whole.
    parts = re.split(r"(\$\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}\})", text)
    for i in range(0, len(parts), 2):
        parts[i] = _SECRET_TOKEN.sub(REDACTED, _redact_named_values(parts[i]))
    return "".join(parts)


def _redact_named_values(text: str) -> str:
    out: list[str] = []
    pos = 0
    while (match := _NAMED_VALUE.search(text, pos)) is not None:
        key = match.group("flag") or match.group("name")
        secret = match.group("scheme") or match.group("userinfo") or (key is not None and looks_secret(key))
        # A bare scheme word (``Authorization: Bearer ${{ TOKEN }}``) is not the secret; what follows is.
        if secret and _is_literal(match.group("value")) and not _AUTH_SCHEME.match(match.group("value")):
            out += [text[pos : match.start("value")], REDACTED]
            pos = match.end("value")
        else:
            # Only the lead is passed over: a value that is not a secret may hold a pair that is
            # (``sh -c 'agent --token abc'``).
            out.append(text[pos : match.end("lead")])
            pos = match.end("lead")
    out.append(text[pos:])
    return "".join(out)


def _is_secret_flag(arg: str) -> bool:
    return re.fullmatch(r"--?[A-Za-z][\w.-]*", arg) is not None and looks_secret(arg)


def _is_literal(value: str) -> bool:
    """A value that is neither a reference nor a ``{PLACEHOLDER}`` of the command template."""
    return (
        bool(value)
        and not ENV_REFERENCE.search(value)
        and _TEMPLATE_PLACEHOLDER.match(value) is None
        and value != REDACTED
    )


# A value this short (``1``, ``on``) would turn every message into a string of markers and reveals next
# to nothing; such values are left in place.
MIN_MASKED_CHARS = 4


class SecretMask:
    """The other half of the one rule: the literal secrets a judge or target exchange carried, each with
    what is stored in its place. Everything kept from an exchange (replies, errors, stderr, evidence,
    assertions: whatever is built from them) passes through it first.

    A value a ``${{ NAME }}`` reference resolved to is shown as that reference (it says where the value
    came from); every other form of a credential (a header's token, a URL's password, the base64 that
    HTTP Basic sends) is shown as ``REDACTED``. Built with :meth:`of`.
    """

    def __init__(self, shown_as: Mapping[str, str]) -> None:
        # Longest first, so a secret inside a longer one does not split it.
        self._pairs = sorted(
            ((secret, shown) for secret, shown in shown_as.items() if len(secret) >= MIN_MASKED_CHARS),
            key=lambda pair: len(pair[0]),
            reverse=True,
        )
        # The same pairs as UTF-8, encoded once: files and process output are masked as bytes (:meth:`data`).
        self._encoded = [(secret.encode("utf-8"), shown.encode("utf-8")) for secret, shown in self._pairs]

    @classmethod
    def of(
        cls,
        *,
        references: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        urls: Iterable[str] = (),
        literals: Iterable[str] = (),
    ) -> SecretMask:
        """The mask of one exchange: ``references`` maps each referenced variable's name to its
        value; ``headers`` are the request's headers (those under a secret-looking name count: the
        value, its token after a scheme, and for ``Basic`` the decoded ``user:password`` and password);
        ``urls`` are the URLs it went to (their ``user:password``, as written, decoded and in base64,
        and the password); ``literals`` are secrets written as they are (shown as ``REDACTED``)."""
        shown: dict[str, str] = dict.fromkeys(_escaped(literals), REDACTED)
        for name, value in (headers or {}).items():
            if looks_secret(name):
                shown.update(dict.fromkeys(_header_forms(value), REDACTED))
        for url in urls:
            shown.update(dict.fromkeys(_escaped(_userinfo_forms(url)), REDACTED))
        for name, value in (references or {}).items():
            shown.update(dict.fromkeys(_escaped([value]), f"${{{{ {name} }}}}"))
        return cls(shown)

    def holds(self, data: bytes) -> bool:
        """Whether ``data`` holds any of the secrets (as UTF-8)."""
        return any(secret in data for secret, _ in self._encoded)

    def holds_text(self, text: str) -> bool:
        """Whether ``text`` holds any of the secrets as they are written (not JSON-escaped: :meth:`text`
        finds those too)."""
        return any(secret in text for secret, _ in self._pairs)

    def holds_in(self, pieces: Iterable[bytes]) -> bool:
        """Whether a stream of bytes (a large file, a chunk at a time) holds any of the secrets, one cut
        across two pieces too."""
        if not self._encoded:
            return False
        keep = max(len(secret) for secret, _ in self._encoded) - 1
        tail = b""
        for piece in pieces:
            window = tail + piece
            if self.holds(window):
                return True
            tail = window[len(window) - keep :] if keep else b""
        return False

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __or__(self, other: SecretMask) -> SecretMask:
        """Both masks' secrets (this one's way of showing a secret both hold wins)."""
        return SecretMask({**dict(other._pairs), **dict(self._pairs)})

    def text(self, text: str) -> str:
        for secret, shown in self._pairs:
            if secret in text:
                text = text.replace(secret, shown)
        if self._pairs and ("\\u" in text or "\\/" in text):
            text = _decoded_literals(text, self.text)
        return text

    def data(self, data: bytes) -> bytes:
        """Bytes (a reply body, a process's output, a file the agent wrote) with each secret's UTF-8 bytes
        replaced by its marker's, and every other byte left as it is.

        For UTF-8 text this is :meth:`text`: a character's encoding never starts inside another's, so a
        secret's bytes found in valid UTF-8 are that secret's characters. Bytes that are not UTF-8 (a binary
        file, an image, a zip) are masked all the same, where the secret stands as UTF-8; a secret stored
        otherwise (UTF-16, compressed, base64 when the mask has no base64 form of it) is not seen."""
        for secret, shown in self._encoded:
            if secret in data:
                data = data.replace(secret, shown)
        if self._pairs and (b"\\u" in data or b"\\/" in data):
            data = _decoded_literals(data, self.text)
        return data

    def value(self, value: Any) -> Any:
        """Every string inside a JSON-like value (a dumped message, a mapping) masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value


_LITERAL_REST = re.compile(r'(?:[^"\\]|\\.)*+"', re.DOTALL)
_LITERAL_REST_BYTES = re.compile(rb'(?:[^"\\]|\\.)*+"', re.DOTALL)


@overload
def _decoded_literals(text: str, mask: Callable[[str], str]) -> str: ...
@overload
def _decoded_literals(text: bytes, mask: Callable[[str], str]) -> bytes: ...
def _decoded_literals(text: str | bytes, mask: Callable[[str], str]) -> str | bytes:
    """``text`` with each JSON string literal that holds a secret once decoded written again masked. A
    grader or judge may escape every character of a key (``"\\u0073\\u006b..."``), which no list of
    the key's escaped forms covers; its JSON reply is read decoded. ``mask`` is :meth:`SecretMask.text`,
    so a literal inside a decoded literal (a reply's content, itself JSON) is looked at too. One pass left
    to right: a literal never closed ends it (linear in the text, whatever it holds)."""
    is_bytes = isinstance(text, bytes)
    quote: Any = b'"' if is_bytes else '"'
    rest: Any = _LITERAL_REST_BYTES if is_bytes else _LITERAL_REST
    backslash: Any = b"\\" if is_bytes else "\\"
    parts: list[Any] = []
    i = 0
    while (start := text.find(quote, i)) >= 0:
        match = rest.match(text, start + 1)
        if match is None:
            break
        literal = text[start : match.end()]
        replaced = _masked_literal(literal, mask) if backslash in literal else None
        parts.append(text[i:start])
        parts.append(literal if replaced is None else (replaced.encode("utf-8") if is_bytes else replaced))
        i = match.end()
    parts.append(text[i:])
    return (b"" if is_bytes else "").join(parts)


def _masked_literal(literal: str | bytes, mask: Callable[[str], str]) -> str | None:
    """The literal masked, as JSON again; None when it holds no secret (or is no JSON string)."""
    try:
        decoded = json.loads(literal)
    except ValueError:  # UnicodeDecodeError is one
        return None
    if not isinstance(decoded, str):
        return None
    masked = mask(decoded)
    return None if masked == decoded else json.dumps(masked, ensure_ascii=False)


def _escaped(forms: Iterable[str]) -> set[str]:
    """Each form as written, and as a JSON reply or a grader's JSON output escapes it (quotes, backslashes,
    non-ASCII as \\u escapes), once and inside a JSON string that is itself escaped again."""
    out: set[str] = set()
    for form in forms:
        for ascii_only in (True, False):
            once = json.dumps(form, ensure_ascii=ascii_only)[1:-1]
            out.update((form, once, json.dumps(once, ensure_ascii=ascii_only)[1:-1]))
    return out


# Secret-looking by name, but the shell's working folders: masking them would rewrite every path.
_NOT_SECRETS = frozenset({"PWD", "OLDPWD"})
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
"""A URL inside text, up to white space or a quote (for the user info the mask looks for)."""
_looks_secret = lru_cache(maxsize=4096)(looks_secret)  # the same few dozen names, for every child


def environment_mask(env: Mapping[str, str] | None = None) -> SecretMask:
    """The mask for whatever a child process (agent, grader, converter, hook) says: the value of every
    variable of ``env`` and of evalstore's own environment whose name looks secret (``OPENAI_API_KEY``,
    ``GITHUB_TOKEN``), shown as its ``${{ NAME }}`` reference, and every URL password found in any of
    their values (``DB_URL=postgresql://bob:pw@host``) as ``REDACTED``."""
    merged = {**os.environ, **(env or {})}
    secrets = tuple(sorted((k, v) for k, v in merged.items() if v and k not in _NOT_SECRETS and _looks_secret(k)))
    urls = tuple(sorted({url for v in merged.values() if "://" in v and "@" in v for url in URL.findall(v)}))
    return _environment_mask(secrets, urls)


@lru_cache(maxsize=32)
def _environment_mask(secrets: tuple[tuple[str, str], ...], urls: tuple[str, ...]) -> SecretMask:
    return SecretMask.of(references=dict(secrets), urls=urls)


def target_mask(
    config: Mapping[str, Any],
    resolved: Any = None,
    *,
    secrets_only: bool = False,
    environ: Mapping[str, str] | None = None,
) -> SecretMask:
    """The one redaction rule (:class:`SecretMask`) for what a target exchange leaves: the value of every
    variable ``config`` refers to shown as its ``${{ NAME }}`` reference, and the user info of every URL in
    the ``resolved`` config (password, ``user:password``, its base64 HTTP Basic form) shown as ``REDACTED``.

    ``secrets_only`` (for the agent's answer, which a plain ``${{ GREETING }}`` may rightly be part of)
    keeps to variables that look secret by their name or the key they stand under. A literal secret
    written in ``config`` (what the stored config shows as ``REDACTED``) is ``REDACTED`` wherever echoed.
    Here, not in ``targets``, since an import masks what a target echoed without being able to call one."""
    values = reference_values(config, secrets_only=secrets_only, environ=environ)
    return SecretMask.of(
        references=values,
        urls=[url for text in strings_in(resolved) for url in URL.findall(text)],
        literals=literal_secrets(config),
    )


def reference_values(
    config: Mapping[str, Any], *, secrets_only: bool = False, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Variable name to value for each set variable ``config`` refers to (see :func:`target_mask`)."""
    env = os.environ if environ is None else environ
    names = secret_references(dict(config)) if secrets_only else references(dict(config))
    return {name: env[name] for name in names if env.get(name)}


def secret_references(value: Any, secret: bool = False) -> list[str]:
    """The variables ``value`` refers to that look secret by their name or the key they stand under."""
    if isinstance(value, str):
        return [name for name in references(value) if secret or looks_secret(name)]
    if isinstance(value, Mapping):
        return [name for k, v in value.items() for name in secret_references(v, secret or looks_secret(str(k)))]
    if isinstance(value, (list, tuple)):
        return [name for item in value for name in secret_references(item, secret)]
    return []


def _header_forms(value: str) -> list[str]:
    scheme, _, token = value.strip().partition(" ")
    if not token:
        return [value]
    forms = [token.strip()]
    if scheme.lower() == "basic":
        try:
            userinfo = base64.b64decode(token.strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return forms
        forms += [userinfo, userinfo.partition(":")[2]]
    return forms


def _userinfo_forms(url: str) -> list[str]:
    parts = urlsplit(url)
    if parts.password is None:
        return []
    forms: list[str] = []
    for user, password in {
        (parts.username or "", parts.password),
        (unquote(parts.username or ""), unquote(parts.password)),
    }:
        userinfo = f"{user}:{password}"
        forms += [password, userinfo, base64.b64encode(userinfo.encode("utf-8")).decode("ascii")]
    return forms
