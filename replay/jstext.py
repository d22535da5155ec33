"""JavaScript's string rules where AgentV's graders rely on them and Python's differ: ``trim``, ``slice``
(UTF-16 code units), ``replace`` (the ``$`` patterns of a replacement), ``new RegExp(pattern, flags).test(text)``
and whether ``JSON.parse`` accepts a text.

A regex is translated into Python's ``re`` syntax, not reinterpreted: outside the ``u`` flag, ``\\d``,
``\\w`` and ``\\b`` are ASCII in JavaScript; ``\\s`` and ``trim`` know the same whitespace, which is not
Python's; ``.`` stops at every line terminator (``\\r``, U+2028, U+2029 too), ``$`` without ``m`` only
at the very end (Python's also before a final newline), named groups are ``(?<name>)``, an escaped
letter with no meaning is the letter, ``[]`` matches nothing and ``[^]`` anything, a backreference to a
group that has not matched matches the empty string (past the last group it is an octal escape or a
digit). Without ``u`` a pattern and its text are UTF-16 units (an emoji is two) and ``i`` folds no other
letter into ASCII. The translation runs on the ``regex`` module (mrab-regex), not ``re``: it has what
JavaScript has and ``re`` lacks (lookbehinds of varying width, ``\\p{...}`` properties, the ``v`` flag's
nested classes with ``--`` and ``&&``). What JavaScript refuses (flags outside ``dgimsuvy``, Python-only
syntax such as ``(?P<name>)``) is an error naming the pattern, with JavaScript's message.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import regex


_WHITESPACE_CLASS = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
"""ECMAScript's WhiteSpace and LineTerminator, as a character class body: what ``\\s`` and ``trim`` know."""
_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
WHITESPACE_UNITS = frozenset(map(ord, _WHITESPACE))
"""The same characters as UTF-16 code units: what V8's date parser skips as white space."""
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
_JS_LETTER_ESCAPES = set("dDwWsSbBtnvfrcxu")
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


_SUBSTITUTION = re.compile(r"\$([$&`'])")
"""The patterns of a replacement string ``String.prototype.replace`` reads when its regex has no groups."""


def js_replace_all(text: str, needle: str, replacement: str) -> str:
    """``text.replace(/NEEDLE/g, replacement)`` for a regex that matches ``needle`` literally, with no groups:
    in ``replacement`` (``GetSubstitution``) ``$$`` is a dollar, ``$&`` the match, ``$``` the text before it,
    ``$'`` the text after it; any other ``$`` stays as it is."""
    if "$" not in replacement or needle not in text:
        return text.replace(needle, replacement)
    parts = text.split(needle)
    out = [parts[0]]
    start = len(parts[0])
    for part in parts[1:]:
        end = start + len(needle)
        said = {"$": "$", "&": needle, "`": text[:start], "'": text[end:]}
        out += [_SUBSTITUTION.sub(lambda m: said[m.group(1)], replacement), part]  # noqa: B023 (used at once)
        start = end + len(part)
    return "".join(out)


def js_length(text: str) -> int:
    """``text.length``: UTF-16 code units (a character beyond U+FFFF counts two)."""
    return len(text) + sum(1 for c in text if c > "\uffff")


def js_slice(text: str, end: int) -> str:
    """``text.slice(0, end)``: JavaScript counts UTF-16 code units, so a character beyond U+FFFF is two."""
    units = text.encode("utf-16-le", "surrogatepass")
    if len(units) <= 2 * end:
        return text
    return units[: 2 * end].decode("utf-16-le", "surrogatepass")


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_FOLDS_TO_ASCII = {"\u0130": "\ue000", "\u0131": "\ue001", "\u017f": "\ue002", "\u212a": "\ue003"}
"""The letters Python's case-insensitive matching folds into ASCII ones (İ ı to i, ſ to s, the Kelvin sign to
k); JavaScript's ``i`` folds none of them without ``u``, and only ſ and K with it. Where JavaScript would
not fold them, they are put out of reach of the ASCII letters (private-use stand-ins, in text and pattern
alike), so each still matches itself."""
_GUARDS = {
    False: str.maketrans(_FOLDS_TO_ASCII),
    True: str.maketrans({k: v for k, v in _FOLDS_TO_ASCII.items() if k in "\u0130\u0131"}),
}


def _units(text: str) -> str:
    """Each character beyond U+FFFF as its two UTF-16 surrogates: what a pattern without ``u`` sees."""
    return _ASTRAL.sub(_surrogates, text)


def _surrogates(match: re.Match[str]) -> str:
    offset = ord(match.group()) - 0x10000
    return chr(0xD800 + (offset >> 10)) + chr(0xDC00 + (offset & 0x3FF))


@dataclass(frozen=True)
class JsRegex:
    source: str
    flags: str
    compiled: regex.Pattern[str]

    def test(self, text: str) -> bool:
        """``RegExp.prototype.test`` on a new RegExp: from the start; with ``y`` (sticky) only there."""
        text = _as_seen(text, self.flags)
        found = self.compiled.match(text) if "y" in self.flags else self.compiled.search(text)
        return found is not None


def _as_seen(text: str, flags: str) -> str:
    """Text (or a pattern's source) as the match sees it: UTF-16 units without ``u``/``v``; with ``i``,
    the letters JavaScript does not fold into ASCII guarded."""
    unicode = "u" in flags or "v" in flags
    if not unicode:
        text = _units(text)
    return text.translate(_GUARDS[unicode]) if "i" in flags else text


@lru_cache(maxsize=256)
def js_regex(source: str, flags: str = "") -> JsRegex:
    """``new RegExp(source, flags)``, or :class:`JsRegexError` with the message JavaScript would give."""
    import regex  # loaded by the first regex an eval uses

    if set(flags) - _VALID_FLAGS or len(set(flags)) != len(flags) or {"u", "v"} <= set(flags):
        raise JsRegexError(f"Invalid flags supplied to RegExp constructor '{flags}'")
    bits = (regex.IGNORECASE if "i" in flags else 0) | (regex.MULTILINE if "m" in flags else 0)
    bits |= (regex.DOTALL if "s" in flags else 0) | (regex.V1 if "v" in flags else regex.V0)
    try:
        return JsRegex(source, flags, regex.compile(_translate(_as_seen(source, flags), flags), bits))
    except regex.error as exc:
        raise JsRegexError(f"Invalid regular expression: /{source}/{flags}: {exc}") from None


def _groups(source: str) -> tuple[int, dict[str, int]]:
    """How many capturing groups a pattern has, and the numbers of its named ones."""
    count, names, i, in_class = 0, {}, 0, False
    while i < len(source):
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif (
            c == "("
            and (not source.startswith("(?", i) or source.startswith("(?<", i))
            and not source.startswith(("(?<=", "(?<!"), i)
        ):
            count += 1
            if source.startswith("(?<", i) and ">" in source[i:]:
                names[source[i + 3 : source.index(">", i)]] = count
        i += 1
    return count, names


def _translate(source: str, flags: str) -> str:
    out: list[str] = []
    in_class, depth = False, 0
    i, n = 0, len(source)
    unicode = "u" in flags or "v" in flags
    total, names = _groups(source)
    # Capturing groups opened so far; what each open parenthesis is (its group, or None); the groups closed.
    opened, stack, closed = 0, list[int | None](), set[int]()

    def reference(group: int) -> str:
        # JavaScript: a group that has not matched (or is not closed yet) matches the empty string.
        return f"(?:(?({group})\\{group}|))" if group in closed else "(?:)"

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
            elif e == "k" and names:  # with named groups \k<name> is a reference; without, the letter k
                end = source.find(">", i)
                if not source.startswith("<", i) or end < 0 or source[i + 1 : end] not in names:
                    raise JsRegexError(
                        f"Invalid regular expression: /{source}/{flags}: Invalid named capture referenced"
                    )
                out.append(reference(names[source[i + 1 : end]]))
                i = end + 1
            elif e in "123456789" and not in_class:
                digits = e
                while i < n and source[i].isdigit():
                    digits += source[i]
                    i += 1
                if int(digits) <= total:
                    out.append(reference(int(digits)))
                elif e in "89":  # no such group: \8 is the digit 8
                    out.append(e)
                    i -= len(digits) - 1
                else:  # no such group: a legacy octal escape of up to three digits, at most \377
                    octal = re.match("[0-7]{1,3}", digits).group()  # type: ignore[union-attr]
                    if int(octal, 8) > 0o377:
                        octal = octal[:2]
                    out.append(re.escape(chr(int(octal, 8))))
                    i -= len(digits) - len(octal)
            elif e == "c" and i < n and source[i].isascii() and source[i].isalpha():
                out.append(re.escape(chr(ord(source[i]) % 32)))
                i += 1
            elif e == "u" and unicode and source.startswith("{", i) and "}" in source[i:]:
                end = source.index("}", i)
                out.append(re.escape(chr(int(source[i + 1 : end], 16))))
                i = end + 1
            elif e in "pP" and unicode:  # a Unicode property: the regex module knows JavaScript's names
                out.append("\\" + e)
            elif e.isascii() and e.isalpha() and e not in _JS_LETTER_ESCAPES:
                out.append(e)  # an identity escape: the letter itself (\A is "A", not Python's anchor)
            else:
                out.append("\\" + e)
            continue
        if in_class and "v" in flags:
            # v: classes nest and hold set operations (--, &&), written as the regex module's V1 writes them.
            depth += {"[": 1, "]": -1}.get(c, 0)
            in_class = depth > 0
            out.append(c)
            i += 1
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
                in_class, depth = True, 1
                out.append("[^" if source.startswith("[^", i) else "[")
                i += 2 if source.startswith("[^", i) else 1
            continue
        if c == "(":
            if source.startswith(("(?P", "(?#", "(?>"), i):
                raise JsRegexError(f"Invalid regular expression: /{source}/{flags}: Invalid group")
            named = source.startswith("(?<", i) and not source.startswith(("(?<=", "(?<!"), i)
            if named or not source.startswith("(?", i):
                opened += 1
                stack.append(opened)
            else:
                stack.append(None)
            if named:
                out.append("(?P<")
                i += 3
                continue
        elif c == ")" and stack:
            group = stack.pop()
            if group is not None:
                closed.add(group)
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


def js_number_text(value: float) -> str:
    """``String(n)``: a number as JavaScript writes it in a template literal (``3000``, not ``3000.0``;
    ``1e-7``, ``1e+21``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        value = float(value)
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        sign = "-" if exponent.startswith("-") else "+"
        digits = exponent.lstrip("+-").lstrip("0") or "0"
        mantissa = mantissa[:-2] if mantissa.endswith(".0") else mantissa
        return f"{mantissa}e{sign}{digits}"
    return text


def js_string(value: Any) -> str:
    """``String(value)`` for a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return js_number_text(value)
    if isinstance(value, list):
        return ",".join("" if v is None else js_string(v) for v in value)
    return "[object Object]"


def js_fixed(value: float, digits: int) -> str:
    """``Number.prototype.toFixed``: the exact binary value rounded half up (``0.125.toFixed(2)`` is
    ``0.13``; Python's formatting rounds that tie to even)."""
    from decimal import ROUND_HALF_UP, Decimal

    if value != value:
        return "NaN"
    if abs(value) >= 1e21:
        return js_number_text(value)
    exact = Decimal(abs(value)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    text = f"{exact:.{digits}f}"
    return f"-{text}" if value < 0 and exact != 0 else text
