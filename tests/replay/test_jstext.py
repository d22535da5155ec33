"""JavaScript's string rules where AgentV's graders rely on them: every expected value here is what
node 20 printed for the same call (``new RegExp(p, f).test(t)``, ``s.trim()``, ``s.slice(0, n)``,
``s.replace(/{{X}}/g, r)``)."""

from __future__ import annotations

import re

import pytest

from evalstore.replay.jstext import (
    JsRegexError,
    js_json_parses,
    js_regex,
    js_replace_all,
    js_slice,
    js_trim,
    js_truthy,
)


@pytest.mark.parametrize(
    ("pattern", "flags", "text", "matches"),
    [
        ("^\\w+\\s", "", "Café x", False),  # \w is ASCII
        ("\\d+ units", "", "４２ units", False),  # so is \d
        ("^42$", "", "42\n", False),  # $ is the very end
        ("^42$", "m", "41\n42\n", True),
        ("(?<w>line) one", "", "line one", True),  # named groups
        ("(?<w>a)\\k<w>", "", "aa", True),
        ("Line", "y", "line one\nLine Two", False),  # sticky: only at the start
        ("line", "y", "line one", True),
        ("a.b", "", "a\rb", False),  # . stops at every line terminator
        ("a.b", "s", "a\rb", True),
        ("^b", "m", "a\rb", True),
        ("a$", "m", "a\u2028b", True),
        ("\\bcafé\\b", "", "un café noir", False),  # \b is ASCII too
        ("\\bcaf", "", "un café noir", True),
        ("\\s", "", "\ufeff", True),  # JavaScript's whitespace, not Python's
        ("\\s", "", "\x85", False),
        ("[\\s]x", "", "\xa0x", True),
        ("\\Ax", "", "Ax", True),  # an escaped letter without a meaning is the letter
        ("[]", "", "x", False),
        ("[^]", "", "\n", True),
        ("a[&b]", "", "a&", True),
        ("caf[eé]", "i", "CAFÉ", True),
        ("[\\w-]+@x", "", "a-b@x", True),
        ("\\u00e9", "", "é", True),
        ("x\\/y", "", "x/y", True),
        ("\\cJ", "", "\n", True),
        ("HELLO", "i", "hello", True),
        ("(?:🎉|Price)", "u", "Price", True),
        ("\\u{1F600}", "u", "😀", True),
        ("^$", "", "", True),
    ],
)
def test_a_regex_matches_as_javascript_matches(pattern: str, flags: str, text: str, matches: bool) -> None:
    assert js_regex(pattern, flags).test(text) is matches


@pytest.mark.parametrize(
    ("pattern", "flags", "text", "matches"),
    [
        # Backreferences: to a group that has not matched (or comes later, or is still open) they match
        # the empty string; past the last group, \\8 is "8" and \\1 to \\377 are octal escapes.
        ("(z)?\\1q", "", "q", True),
        ("(?:(z)|c)\\1 q", "", "c q", True),
        ("\\1(a)", "", "a", True),
        ("\\8", "", "8", True),
        ("\\1", "", "\x01", True),
        ("(a)\\2", "", "a\x02", True),
        ("\\12", "", "\n", True),
        ("(a)\\1", "", "aa", True),
        ("(a)\\1", "", "ab", False),
        ("(?<w>x)\\k<w>", "", "xx", True),
        ("\\k<w>", "", "k<w>", True),
        ("(a\\1)", "", "a", True),
        ("^.$", "", "😀", False),
        ("^..$", "", "😀", True),
        ("^[😀]$", "", "😀", False),
        ("^.$", "u", "😀", True),
        ("5\\w", "i", "5K", False),
        ("5k", "i", "5K", False),
        (" s end", "i", "5K ſ end", False),
        ("5k", "iu", "5K", True),
        ("i", "i", "İ", False),
        ("i", "iu", "ı", False),
        ("(\\d)(\\d)(\\d)(\\d)(\\d)(\\d)(\\d)(\\d)(\\d)(\\d)\\10", "", "01234567899", True),
        ("\\123", "", "S", True),
        ("\\400", "", " 0", True),
        ("caf[eé]", "i", "CAFÉ", True),
        ("(a)|\\1b", "", "b", True),
    ],
)
def test_backreferences_units_and_case_folding_are_javascripts(
    pattern: str, flags: str, text: str, matches: bool
) -> None:
    """Without u, a pattern sees UTF-16 units (an emoji is two) and i folds no other letter into ASCII
    (Python's folds the Kelvin sign into k, the long s into s, dotless and dotted i into i)."""
    assert js_regex(pattern, flags).test(text) is matches


@pytest.mark.parametrize(
    ("pattern", "flags", "text", "matches"),
    [
        ("^\\p{Lu}\\p{Ll}+", "u", "Hello", True),
        ("[\\p{L}--[a-z]]$", "v", "abcÉ", True),
        ("[\\p{L}--[a-z]]$", "v", "abcd", False),
        ("[[a-z]&&[aeiou]]", "v", "x", False),
        ("[[a-z]&&[aeiou]]", "v", "e", True),
        ("\\p{Script=Greek}", "u", "α", True),
        ("\\p{L}", "", "p{L}", True),  # without u, \\p is the letter p
        ("(?<=a+)b", "", "aab", True),  # a lookbehind of varying width
    ],
)
def test_what_re_lacks_runs_as_javascript_runs_it(pattern: str, flags: str, text: str, matches: bool) -> None:
    """Unicode properties, v-flag set operations, lookbehinds of any width (Python's re has none of them)."""
    assert js_regex(pattern, flags).test(text) is matches


def test_the_cases_above_are_ones_where_python_alone_differs() -> None:
    """Not a tautology: Python's re gives the other answer (or refuses) on these."""
    assert re.search("^\\w+\\s", "Café x") and re.search("^42$", "42\n") and re.search("\\s", "\x85")
    with pytest.raises(re.error):
        re.compile("(?<w>line) one")


@pytest.mark.parametrize(
    ("pattern", "flags", "message"),
    [
        ("a", "x", "Invalid flags supplied to RegExp constructor 'x'"),
        ("a", "gg", "Invalid flags supplied to RegExp constructor 'gg'"),
        ("a", "uv", "Invalid flags supplied to RegExp constructor 'uv'"),
        ("(", "i", "Invalid regular expression: /(/i: "),
        ("(?P<n>a)", "", "Invalid regular expression: /(?P<n>a)/: Invalid group"),
    ],
)
def test_a_regex_javascript_refuses_or_re_cannot_run_is_an_error(pattern: str, flags: str, message: str) -> None:
    with pytest.raises(JsRegexError) as caught:
        js_regex(pattern, flags)
    assert str(caught.value).startswith(message)


def test_trim_and_slice_are_javascripts() -> None:
    assert js_trim("\ufeffOK\x85") == "OK\x85"
    assert js_trim("\x1cx\x1f") == "\x1cx\x1f"
    assert js_trim("  a\xa0\u3000\n") == "a"
    assert js_slice("(?:🎉|🎈|🎊|🎁|🎂|🎃|🎄|🎅)|Price", 30) == "(?:🎉|🎈|🎊|🎁|🎂|🎃|🎄|🎅)|Pr"
    assert js_slice("ab😀", 3) == "ab\ud83d"  # half a surrogate pair, as JavaScript leaves it
    assert js_slice("short", 30) == "short"


@pytest.mark.parametrize(
    ("replacement", "replaced"),
    [
        ("r$$1", "A r$1 B r$1 C"),  # $$ is a dollar
        ("[$&]", "A [{{X}}] B [{{X}}] C"),  # $& the match
        ("[$`]", "A [A ] B [A {{X}} B ] C"),  # $` what stands before it
        ("[$']", "A [ B {{X}} C] B [ C] C"),  # $' what follows it
        ("$1$<n>$", "A $1$<n>$ B $1$<n>$ C"),  # no groups: as written
        ("plain", "A plain B plain C"),
    ],
)
def test_replace_reads_a_replacements_dollars_as_javascript_does(replacement: str, replaced: str) -> None:
    """What AgentV's LLM aggregator does to the members' results JSON it puts in its prompt."""
    assert js_replace_all("A {{X}} B {{X}} C", "{{X}}", replacement) == replaced
    assert js_replace_all("no needle", "{{X}}", replacement) == "no needle"


@pytest.mark.parametrize(
    ("text", "parses"),
    [
        ("[" * 3000 + "]" * 3000, True),  # deeper than Python's parser goes (it raised RecursionError)
        ("[" * 3000 + "]" * 2999, False),
        ('{"a":' * 2000 + "1" + "}" * 2000, True),
        ('{"a":' * 2000 + "1," + "}" * 2000, False),
        ("[NaN]", False),  # Python's parser takes NaN; JSON.parse does not
        ('{"a": [1, 2, {"b": null}]}', True),
        ("", False),
    ],
)
def test_json_parses_as_json_parse_decides(text: str, parses: bool) -> None:
    assert js_json_parses(text) is parses


def test_truthiness_is_javascripts() -> None:
    truthy = [True, 1, -0.5, "0", "false", [], {}, [0]]
    falsy = [False, 0, 0.0, "", None, float("nan")]
    assert [js_truthy(v) for v in truthy] == [True] * len(truthy)
    assert [js_truthy(v) for v in falsy] == [False] * len(falsy)
