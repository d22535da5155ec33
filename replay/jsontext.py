"""JSON as AgentV writes it: the text ``JSON.stringify`` makes, compact in its files and indented by 2 on
a code grader's stdin (:func:`stringify`), and the snake_case keys of its deep key rewrite at every
process boundary (:func:`snake_key`, :func:`to_snake_deep`). One definition of each, for exports,
imports of legacy rows and grader payloads alike.

orjson writes it: the stdlib encoder was a quarter of an export, and its indented form runs in pure
Python (bench/read.py, bench/agentv_peer.py). orjson also spells floats as JavaScript does (``1e-7``,
not Python's ``1e-07``) and writes NaN as ``null``. What orjson refuses (an integer beyond 64 bits, a
lone surrogate, a key that is not a string) goes to the stdlib encoder with the same separators, so
every value can be written.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Mapping
from functools import lru_cache
from operator import attrgetter
from typing import Any

import orjson


class RawJSON:
    """JSON text as the store holds it (canonical: compact, keys sorted, UTF-8), copied into the output
    as it is. A recorded grader request is often half of an exported row: parsing it only to encode it
    again was a fifth of an export (bench/read.py)."""

    __slots__ = ("fragment", "text")

    def __init__(self, text: bytes) -> None:
        self.text = text
        self.fragment = orjson.Fragment(text)

    def value(self) -> Any:
        return json.loads(self.text)


_fragment = attrgetter("fragment")
"""orjson's ``default``: a :class:`RawJSON`'s text as it is (anything else raises, and :func:`stringify`
falls back to the stdlib, which says what is not JSON). A C getter: a Python function called for every
recorded request of an export cost three times as much."""


def _parsed(value: Any) -> Any:
    if isinstance(value, RawJSON):
        return value.value()
    raise TypeError(f"{type(value).__name__} is not JSON")


_COMPACT = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False, default=_parsed
).encode
_INDENTED = json.JSONEncoder(
    indent=2, ensure_ascii=False, allow_nan=False, check_circular=False, default=_parsed
).encode


LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""A surrogate code point in a Python string is always a lone one (a pair is one code point)."""


def without_lone_surrogates(value: Any) -> Any:
    """Lone UTF-16 surrogates (JSON.stringify writes ``\\ud83d`` for a string cut mid-emoji; a grader's
    reply may hold any) become U+FFFD, at any depth: UTF-8 cannot encode them, so the store could not
    hold them."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(v) for v in value]
    return value


def stringify(value: Any, *, indent: bool = False, line: bool = False) -> bytes:
    """``JSON.stringify(value)`` (or ``JSON.stringify(value, null, 2)``) as UTF-8 bytes; ``line``: with a
    newline after it, written with the text (a JSONL export's line was copied again to add it)."""
    option = (orjson.OPT_INDENT_2 if indent else 0) | (orjson.OPT_APPEND_NEWLINE if line else 0)
    try:
        return orjson.dumps(value, default=_fragment, option=option)
    except TypeError:  # orjson.JSONEncodeError is one
        text = (_INDENTED if indent else _COMPACT)(value)
        # A lone surrogate can only stand inside a string: escaped, as JSON.stringify writes it.
        text = LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
        return (text + "\n" if line else text).encode("utf-8")


_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
"""Every digit as ``0``, anything else a space: where the runs of digits are (:func:`_long_integer`)."""
_LONG_DIGIT_RUN = b"0" * 19
_NUMBER_STARTS = frozenset(b":,[-\x20\t\r\n")
"""What may stand before the first digit of a JSON number: a separator, whitespace, or its sign."""


def _long_integer(data: bytes) -> bool:
    """Whether ``data`` may hold an integer beyond 64 bits: a run of 19 digits or more that starts the text
    or follows what may stand before a number (:data:`_NUMBER_STARTS`). A run after anything else is no
    integer: a float's fraction (``0.0050587719999839464``, as Inspect's timings are written; orjson reads
    floats as the stdlib does) or exponent, or a string's digits after a letter or its opening quote (a hex
    digest holds 19 decimal digits in a row often enough that one batch of a run's payloads in six had such
    a run). A run in a string after a space counts too: that only costs the slower path.

    The translated text is searched for the bare run (a search that skips 19 bytes at every space; most
    texts have no run at all), and only each run found is looked at: its leftmost match is where it starts."""
    spaced = data.translate(_DIGITS_AS_ZEROS)
    at = spaced.find(_LONG_DIGIT_RUN)
    while at >= 0:
        if at == 0 or data[at - 1] in _NUMBER_STARTS:
            return True
        end = spaced.find(b" ", at + len(_LONG_DIGIT_RUN))
        if end < 0:
            return False
        at = spaced.find(_LONG_DIGIT_RUN, end)
    return False


def decode_problem(exc: ValueError) -> str:
    """What a JSON reader's ``ValueError`` says is wrong with the text. Python refuses an integer of more
    digits than ``sys.get_int_max_str_digits()`` with a message naming that function, which is no advice
    for a file's author: say what is wrong with the file instead."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if "integer string conversion" in str(exc):
        return f"an integer of more than {sys.get_int_max_str_digits()} digits"
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def loads(text: str | bytes) -> Any:
    """``json.loads``, read by orjson where that gives the same value (two to three times faster on the
    payloads an export reads back, bench/read.py). orjson reads an integer beyond 64 bits as a float,
    silently; such an integer has 19 digits or more, so a text that may hold one (:func:`_long_integer`)
    goes to the stdlib, which keeps it exact. So does whatever orjson refuses (NaN, a lone surrogate)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if not _long_integer(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def loads_many(texts: list[str]) -> list[Any]:
    """:func:`loads` of each text, the long-digit check made once for the batch (on the texts joined):
    checking each text on its own was most of the cost of reading a run's events back (bench/read.py).
    A batch that may hold a long integer somewhere is halved until the texts that hold it are found, and
    only those go to :func:`loads` one by one."""
    joined = "\n".join(texts).encode("utf-8", "surrogatepass")
    if _long_integer(joined):
        if len(texts) <= _ONE_BY_ONE:
            return [loads(text) for text in texts]
        half = len(texts) // 2
        return loads_many(texts[:half]) + loads_many(texts[half:])
    parse = orjson.loads
    try:
        return [parse(text) for text in texts]
    except orjson.JSONDecodeError:  # NaN, a lone surrogate: the stdlib reads the batch
        return [loads(text) for text in texts]


_ONE_BY_ONE = 16
"""A batch this small with a long digit run is checked text by text."""


def js_number(value: Any) -> Any:
    """Numbers as JavaScript holds them, at any depth: an integral float is an integer, so ``JSON.stringify``
    and ``String`` write ``1``, not Python's ``1.0`` (below 1e21, where JavaScript switches to exponents).
    Anything else as it is."""
    kind = type(value)
    if kind is float:  # a score, a weight: asked first
        return _js_float(value)
    if kind in _AS_IS:  # most of a payload: asking a string whether it is a Mapping (an ABC) costs more
        return value
    if kind is dict:
        return {k: js_number(v) for k, v in value.items()}
    if isinstance(value, float):
        return _js_float(value)
    if isinstance(value, Mapping):
        return {k: js_number(v) for k, v in value.items()}
    if isinstance(value, list):
        return [js_number(v) for v in value]
    return value


def _js_float(value: float) -> float | int:
    return int(value) if value.is_integer() and abs(value) < 1e21 else value


_AS_IS = frozenset({str, int, bool, type(None)})
"""Types :func:`js_number` returns as they are (exactly these: a subclass, which may be a mapping too, goes
the long way)."""

_ASCII_UPPER = re.compile("[A-Z]")


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value (a config, a grader's spec dumped), at any depth; keys left out."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings_in(item)


@lru_cache(maxsize=4096)  # the same few dozen keys in every payload and row
def snake_key(key: str) -> str:
    """AgentV's ``toSnakeCase``: a key that starts with an ASCII capital (a tool name such as ``Read``) is
    left alone; in any other, every ASCII capital becomes ``_`` and its lowercase (``sourceRepo`` ->
    ``source_repo``, ``maxURL`` -> ``max_u_r_l``, exactly as AgentV spells them)."""
    if "A" <= key[:1] <= "Z":
        return key
    return _ASCII_UPPER.sub(lambda m: "_" + m.group().lower(), key)


def to_snake_deep(value: Any) -> Any:
    """AgentV's ``toSnakeCaseDeep``: every key of every object, at any depth (user metadata and config too)."""
    if isinstance(value, dict):
        return {snake_key(k) if isinstance(k, str) else k: to_snake_deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_snake_deep(v) for v in value]
    return value
