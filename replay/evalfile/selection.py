"""Which tests and eval files a command selects: AgentV's ``--test-id`` globs and ``--tag``/``--exclude-tag``.

``agentv eval run --test-id GLOB`` matches test ids with micromatch (``yaml-parser.ts`` ``matchesFilter``:
any of the patterns); ``--tag``/``--exclude-tag`` keep or skip a whole eval file by its ``tags:``
(``run-eval.ts`` ``matchesTagFilters``). :func:`id_matcher` is micromatch's rule for the patterns ids are
given with: ``*`` and ``?`` within a ``/``-separated part (not a leading ``.``), ``**`` across parts,
``[...]`` classes (``[^...]`` negated), ``{a,b}`` and ``{1..3}`` alternatives, a leading ``!`` negating; ``tests/replay/
test_selection.py`` checks it against micromatch's own answers. A multi-digit range (``{1..10}``) is expanded
plainly, where micromatch's answers are a quirk of its own (``t{1..10}`` matches ``t1`` alone).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache


def matches_any(test_id: str, patterns: Sequence[str]) -> bool:
    """Whether ``test_id`` matches one of ``patterns`` (AgentV's OR of repeated ``--test-id``)."""
    return any(id_matcher(pattern)(test_id) for pattern in patterns)


@lru_cache(maxsize=64)
def id_matcher(pattern: str) -> Callable[[str], bool]:
    negated = False
    while pattern.startswith("!") and not pattern.startswith("!("):
        negated, pattern = not negated, pattern[1:]
    regex = re.compile("|".join(f"(?:{_regex(p)})" for p in _expand_braces(pattern)), re.DOTALL)
    if negated:
        return lambda text: regex.fullmatch(text) is None
    return lambda text: regex.fullmatch(text) is not None


def tags_selected(tags: Iterable[str], include: Sequence[str], exclude: Sequence[str]) -> bool:
    """``matchesTagFilters``: every ``--tag`` present and no ``--exclude-tag`` (a file without tags is
    skipped by any ``--tag``)."""
    have = set(tags)
    return all(t in have for t in include) and not any(t in have for t in exclude)


def _expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` -> ``abd``, ``acd``; ``{1..3}`` -> 1, 2, 3; nested; a brace without a comma or range is
    literal (as micromatch takes ``{a}``)."""
    depth, start = 0, -1
    for i, ch in enumerate(pattern):
        if ch == "\\":
            continue
        if ch == "{" and (i == 0 or pattern[i - 1] != "\\"):
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth and pattern[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                body, head, tail = pattern[start + 1 : i], pattern[:start], pattern[i + 1 :]
                options = _alternatives(body)
                if options is None:
                    return [head + "{" + b + "}" + t for b in _expand_braces(body) for t in _expand_braces(tail)]
                return [
                    head + o + t for option in options for o in _expand_braces(option) for t in _expand_braces(tail)
                ]
    return [pattern]


def _alternatives(body: str) -> list[str] | None:
    ranges: tuple[tuple[str, Callable[[str], int], Callable[[int], str]], ...] = (
        (r"(-?\d+)\.\.(-?\d+)", int, str),
        (r"([a-zA-Z])\.\.([a-zA-Z])", ord, chr),
    )
    for form, number, text in ranges:
        if (found := re.fullmatch(form, body)) is not None:
            a, b = number(found[1]), number(found[2])
            step = 1 if b >= a else -1
            return [text(n) for n in range(a, b + step, step)]
    parts, depth, current = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        current += ch
    parts.append(current)
    return parts if len(parts) > 1 else None


def _regex(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    part_start = True  # at the start of a /-separated part, where * and ? do not match a leading dot
    while i < n:
        ch = pattern[i]
        if ch == "*":
            stars = 1
            while i + stars < n and pattern[i + stars] == "*":
                stars += 1
            whole_part = part_start and (i + stars == n or pattern[i + stars] == "/")
            if stars > 1 and whole_part:
                # ``**`` alone in its part: any parts, none starting with a dot.
                if i + stars < n:  # ``**/``: zero or more parts, each followed by /
                    out.append(r"(?:(?!\.)[^/]*/)*")
                    i += stars + 1
                    continue
                out.append(r"(?:(?!\.)[^/]*(?:/(?!\.)[^/]*)*)?")
            else:
                out.append(r"(?!\.)[^/]*" if part_start else r"[^/]*")
            i += stars
            part_start = False
            continue
        if ch == "?":
            out.append(r"(?!\.)[^/]" if part_start else r"[^/]")
        elif ch == "[" and (end := _class_end(pattern, i)) is not None:
            body = pattern[i + 1 : end]
            negate = body[:1] == "^"  # micromatch's [!a] is a class of ! and a, not a negation
            body = body[1:] if negate else body
            out.append(("[^" if negate else "[") + body.replace("\\", "\\\\") + "]")
            i = end + 1
            part_start = False
            continue
        elif ch == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
            part_start = False
            continue
        else:
            out.append(re.escape(ch))
        part_start = ch == "/"
        i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int | None:
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    end = pattern.find("]", i)
    return end if end != -1 else None
