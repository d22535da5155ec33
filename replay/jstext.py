"""JavaScript's string rules where AgentV's graders rely on them and Python's differ: ``trim``, ``slice``
(UTF-16 code units), ``new RegExp(pattern, flags).test(text)`` and whether ``JSON.parse`` accepts a text.

A regex is translated into Python's ``re`` syntax, not reinterpreted: outside the ``u`` flag, ``\\d``,
``\\w`` and ``\\b`` are ASCII in JavaScript; ``\\s`` and ``trim`` know the same whitespace, which is not
Python's; ``.`` stops at every line terminator (``\\r``, U+2028, U+2029 too), ``$`` without ``m`` only
at the very end (Python's also before a final newline), named groups are ``(?<name>)``, an escaped
letter with no meaning is the letter, ``[]`` matches nothing and ``[^]`` anything. What ``re`` cannot
express (a lookbehind of varying width, ``\\p{...}``) is an error naming the pattern, as is what
JavaScript refuses (flags outside ``dgimsuvy``, Python-only syntax such as ``(?P<name>)``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache

_WHITESPACE_CLASS = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
"""ECMAScript's WhiteSpace and LineTerminator, as a character class body: what ``\\s`` and ``trim`` know."""
_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_LINE_END = "\\n\\r\\u2028\\u2029"
_WORD = "A-Za-z0-9_"
_CLASS_ESCAPES = {
    # escape: (outside a class, inside one). A negated class cannot be put inside another: there Python's
    # own (Unicode) \D, \W, \S stand in.
    "d": ("[0-9]", "0-9"),
    "D": ("[^0-9]", "\\D"),
    "w": (f"[{_WORD}]", _WORD),
    "W": (f"[^{_WORD}]", "\\W"),
    "s": (f"[{_WHITESPACE_CLASS}]", _WHITESPACE_CLASS),
    "S": (f"[^{_WHITESPACE_CLASS}]", "\\S"),
}
_BOUNDARY = f"(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}]))"
_NOT_BOUNDARY = f"(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}]))"
_JS_LETTER_ESCAPES = set("dDwWsSbBtnvfrcxuk")
"""Letters with a meaning after ``\\`` in a pattern without the ``u`` flag; any other escaped letter is itself."""
_VALID_FLAGS = set("dgimsuvy")


class JsRegexError(ValueError):
    """A pattern JavaScript refuses, or one evalstore cannot run as JavaScript would."""


def js_truthy(value: object) -> bool:
    """``Boolean(value)`` for a JSON value: ``[]`` and ``{}`` are true, ``0``, ``""`` and ``null`` false."""
    if value is None or value is False or value == "":
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == value and value != 0  # NaN is false
    return True


def js_trim(text: str) -> str:
    """``String.prototype.trim``: Python's ``strip()`` keeps U+FEFF and strips U+001C-U+001F and U+0085."""
    return text.strip(_WHITESPACE)


def js_slice(text: str, end: int) -> str:
    """``text.slice(0, end)``: JavaScript counts UTF-16 code units, so a character beyond U+FFFF is two."""
    units = text.encode("utf-16-le", "surrogatepass")
    if len(units) <= 2 * end:
        return text
    return units[: 2 * end].decode("utf-16-le", "surrogatepass")


@dataclass(frozen=True)
class JsRegex:
    source: str
    flags: str
    compiled: re.Pattern[str]

    def test(self, text: str) -> bool:
        """``RegExp.prototype.test`` on a new RegExp: from the start; with ``y`` (sticky) only there."""
        found = self.compiled.match(text) if "y" in self.flags else self.compiled.search(text)
        return found is not None


@lru_cache(maxsize=256)
def js_regex(source: str, flags: str = "") -> JsRegex:
    """``new RegExp(source, flags)``, or :class:`JsRegexError` with the message JavaScript would give."""
    if set(flags) - _VALID_FLAGS or len(set(flags)) != len(flags) or {"u", "v"} <= set(flags):
        raise JsRegexError(f"Invalid flags supplied to RegExp constructor '{flags}'")
    bits = (re.IGNORECASE if "i" in flags else 0) | (re.MULTILINE if "m" in flags else 0)
    bits |= re.DOTALL if "s" in flags else 0
    try:
        return JsRegex(source, flags, re.compile(_translate(source, flags), bits))
    except re.error as exc:
        raise JsRegexError(f"Invalid regular expression: /{source}/{flags}: {exc}") from None


def _translate(source: str, flags: str) -> str:
    out: list[str] = []
    in_class = False
    i, n = 0, len(source)
    unicode = "u" in flags or "v" in flags
    while i < n:
        c = source[i]
        if c == "\\":
            if i + 1 == n:
                raise JsRegexError(f"Invalid regular expression: /{source}/{flags}: \\ at end of pattern")
            e = source[i + 1]
            i += 2
            if e in _CLASS_ESCAPES:
                out.append(_CLASS_ESCAPES[e][in_class])
            elif e in "bB" and not in_class:
                out.append(_BOUNDARY if e == "b" else _NOT_BOUNDARY)
            elif e == "k" and source.startswith("<", i) and ">" in source[i:]:
                end = source.index(">", i)
                out.append(f"(?P={source[i + 1 : end]})")
                i = end + 1
            elif e == "c" and i < n and source[i].isascii() and source[i].isalpha():
                out.append(re.escape(chr(ord(source[i]) % 32)))
                i += 1
            elif e == "u" and unicode and source.startswith("{", i) and "}" in source[i:]:
                end = source.index("}", i)
                out.append(re.escape(chr(int(source[i + 1 : end], 16))))
                i = end + 1
            elif e in "pP" and unicode:
                raise JsRegexError(f"cannot run /{source}/{flags} as JavaScript does: \\{e}{{...}} is not supported")
            elif e.isascii() and e.isalpha() and e not in _JS_LETTER_ESCAPES:
                out.append(e)  # an identity escape: the letter itself (\A is "A", not Python's anchor)
            else:
                out.append("\\" + e)
            continue
        if in_class:
            if c == "]":
                in_class = False
            # Python reads these as (future) set operations inside a class; in JavaScript they are characters.
            out.append("\\" + c if c in "[&~|" else c)
            i += 1
            continue
        if c == "[":
            if source.startswith("[]", i):
                out.append("(?!)")  # matches nothing
                i += 2
            elif source.startswith("[^]", i):
                out.append("[\\s\\S]")  # matches anything
                i += 3
            else:
                in_class = True
                out.append("[^" if source.startswith("[^", i) else "[")
                i += 2 if source.startswith("[^", i) else 1
            continue
        if c == "(" and source.startswith("(?", i):
            if source.startswith("(?P", i) or source.startswith("(?#", i) or source.startswith("(?>", i):
                raise JsRegexError(f"Invalid regular expression: /{source}/{flags}: Invalid group")
            if source.startswith("(?<", i) and not source.startswith(("(?<=", "(?<!"), i):
                out.append("(?P<")
                i += 3
                continue
        if c == "." and "s" not in flags:
            out.append(f"[^{_LINE_END}]")
        elif c == "$":
            out.append(f"(?=[{_LINE_END}]|\\Z)" if "m" in flags else "\\Z")
        elif c == "^" and "m" in flags:
            out.append(f"(?:^|(?<=[{_LINE_END}]))")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def js_json_parses(text: str) -> bool:
    """Whether ``JSON.parse(text)`` succeeds: no NaN or Infinity (Python's parser takes them), and any depth
    (Python's gives up past about a thousand levels, where JavaScript goes on)."""
    try:
        json.loads(text, parse_constant=_refuse)
    except ValueError:
        return False
    except RecursionError:
        return _parses_flat(text)
    return True


def _refuse(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


_JSON_TOKEN = re.compile(
    r"[ \t\n\r]*(?:(?P<open>[\[{])|(?P<close>[\]}])|(?P<comma>,)|(?P<colon>:)"
    r'|(?P<string>"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*")'
    r"|(?P<scalar>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null))"
)


def _parses_flat(text: str) -> bool:
    """JSON's grammar checked with a stack instead of recursion."""
    stack: list[str] = []
    expect = "value"  # value | value_or_close | key_or_close | key | colon | comma_or_close
    pos = 0
    while True:
        if expect == "done":
            return text[pos:].strip(" \t\n\r") == ""
        match = _JSON_TOKEN.match(text, pos)
        if match is None:
            return False
        pos, kind, token = match.end(), match.lastgroup, match.group(match.lastgroup or 0)
        if expect in ("value", "value_or_close") and kind in ("string", "scalar", "open"):
            if kind == "open":
                stack.append(token)
                expect = "value_or_close" if token == "[" else "key_or_close"
                continue
        elif expect in ("key", "key_or_close") and kind == "string":
            expect = "colon"
            continue
        elif expect == "colon" and kind == "colon":
            expect = "value"
            continue
        elif expect == "comma_or_close" and kind == "comma":
            expect = "value" if stack[-1] == "[" else "key"
            continue
        elif kind == "close" and expect in ("comma_or_close", "value_or_close", "key_or_close"):
            if not stack or {"[": "]", "{": "}"}[stack.pop()] != token:
                return False
        else:
            return False
        expect = "comma_or_close" if stack else "done"
