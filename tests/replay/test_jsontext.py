"""JSON text as JavaScript's JSON.stringify writes it (replay/jsontext.py): the one encoder behind exports
and code-grader stdin."""

from __future__ import annotations

import json

import pytest

from evalstore.replay import jsontext
from evalstore.replay.agentv import wire
from evalstore.replay.jsontext import RawJSON, snake_key, stringify, to_snake_deep

PAYLOAD = {
    "question": "What is 2 + 2?",
    "output": [{"role": "assistant", "content": "Ünïcode \u2028 line, tab\t, nul\x00"}],
    "config": {"threshold": 0.5, "nested": {"empty": {}, "none": [], "flags": [True, False, None]}},
    "metadata": {},
    "cost_usd": 0.0125,
}


def test_indented_text_is_the_stdlib_indent_2_text_javascript_also_writes() -> None:
    """A code grader's stdin: byte for byte what ``json.dumps(indent=2, ensure_ascii=False)`` wrote before
    (cache keys of recorded executions stay valid) and what ``JSON.stringify(p, null, 2)`` writes."""
    assert stringify(PAYLOAD, indent=True) == json.dumps(PAYLOAD, indent=2, ensure_ascii=False).encode()
    assert stringify(PAYLOAD) == json.dumps(PAYLOAD, separators=(",", ":"), ensure_ascii=False).encode()


def test_floats_are_spelled_as_javascript_spells_them() -> None:
    assert stringify({"small": 1e-07, "half": 0.5}) == b'{"small":1e-7,"half":0.5}'


def test_raw_json_is_copied_in_without_parsing() -> None:
    # Canonical stored text is copied as is: spacing inside it would survive, which shows it was not re-encoded.
    raw = RawJSON(b'{"systemPrompt":"s", "userPrompt":"u"}')
    assert stringify({"input": raw, "n": 1}) == b'{"input":{"systemPrompt":"s", "userPrompt":"u"},"n":1}'
    assert raw.value() == {"systemPrompt": "s", "userPrompt": "u"}


@pytest.mark.parametrize("indent", [False, True])
def test_values_orjson_refuses_are_written_exactly_by_the_fallback(indent: bool) -> None:
    value = {"big": 2**70, "key": {1: "int key"}, "raw": RawJSON(b'{"a":[1,2]}'), "cut": "emoji \ud83d cut"}
    text = stringify(value, indent=indent)
    assert b"1180591620717411303424" in text
    assert b"\\ud83d" in text  # a lone surrogate is escaped, as JSON.stringify does, so the bytes are UTF-8
    text.decode("utf-8")
    assert json.loads(text) == {"big": 2**70, "key": {"1": "int key"}, "raw": {"a": [1, 2]}, "cut": "emoji \ud83d cut"}
    assert (b"\n  " in text) is indent


@pytest.mark.parametrize("value", [{"n": 1, "raw": RawJSON(b'{"a":[1,2]}')}, {"big": 2**70, "cut": "emoji \ud83d cut"}])
def test_a_line_is_the_text_and_one_newline_whichever_encoder_writes_it(value: dict) -> None:
    assert stringify(value, line=True) == stringify(value) + b"\n"


def test_anything_else_is_refused() -> None:
    with pytest.raises(TypeError):
        stringify({"x": object()})


@pytest.mark.parametrize(
    "key,snake",
    [
        ("sourceRepo", "source_repo"),
        ("testId", "test_id"),
        ("Read", "Read"),  # a tool name: starts with a capital, left alone
        ("maxURL", "max_u_r_l"),  # every capital, as AgentV's /[A-Z]/g replace does
        ("a1B", "a1_b"),
        ("_Private", "__private"),
        ("already_snake", "already_snake"),
        ("ÉtatX", "État_x"),  # only ASCII capitals count, at the start and inside
        ("", ""),
    ],
)
def test_keys_are_rewritten_as_agentvs_to_snake_case_does(key: str, snake: str) -> None:
    assert snake_key(key) == snake


def test_the_rewrite_goes_through_every_object_and_list_and_leaves_values() -> None:
    value = {"toolCalls": [{"Read": {"filePath": "a.txt"}}], "metadata": {"sourceRepo": "camelValue"}, 1: "x"}
    assert to_snake_deep(value) == {
        "tool_calls": [{"Read": {"file_path": "a.txt"}}],
        "metadata": {"source_repo": "camelValue"},
        1: "x",
    }


def test_integral_floats_are_numbers_as_javascript_writes_them() -> None:
    from evalstore.replay.jsontext import js_number

    assert [js_number(x) for x in (1.0, 157.0, 0.0, -2.0, 0.5, 1e21, 7, "1.0", None)] == [
        1,
        157,
        0,
        -2,
        0.5,
        1e21,
        7,
        "1.0",
        None,
    ]
    assert stringify({"score": js_number(1.0), "weight": js_number(0.25)}) == b'{"score":1,"weight":0.25}'


def test_js_number_rewrites_at_any_depth_and_leaves_everything_else_as_it_is() -> None:
    from types import MappingProxyType

    from evalstore.replay.jsontext import js_number

    class Text(str):
        pass

    value = {
        "a": [1.0, {"b": 2.0, "c": [0.5]}],
        "m": MappingProxyType({"d": 3.0}),
        "t": True,
        "s": Text("x"),
        "n": None,
    }
    out = js_number(value)
    assert out == {"a": [1, {"b": 2, "c": [0.5]}], "m": {"d": 3}, "t": True, "s": "x", "n": None}
    assert type(out["m"]) is dict and out["t"] is True and type(out["s"]) is Text and type(out["a"][0]) is int


@pytest.mark.parametrize(
    "line",
    [
        b'{"a":1,"a":2}',  # the last of a repeated key
        b'{"big":123456789012345678901234,"neg":-98765432109876543210}',  # orjson would read floats
        b'{"id":"1234567890123456789 in a string"}',
        b'{"x":NaN,"y":-Infinity,"z":1E400}',  # the stdlib's, which orjson refuses
        b'{"lone":"\\ud800"}',
        b'{"f":1.0000000000000001,"g":-0,"h":1e-400,"i":0.1e1,"j":"\\u0000\x7f\xc3\xa9"}',
        b"12345678901234567890",  # a long integer that starts the text
        b"[-12345678901234567890,1e12345678901234567890]",
        # long fractions (Inspect writes its timings so): floats, read by orjson, rounded as the stdlib does
        b'{"t":0.0050587719999839464,"u":0.1000000000000000055511151231257827021181583404541015625}',
        b"[2.22507385850720113605740979670913197593481954635164564e-308,9007199254740993.00000000000000000001]",
    ],
)
def test_loads_reads_every_line_as_the_stdlib_does(line: bytes) -> None:
    # wire.loads then repairs an escaped lone surrogate (tests/replay/test_import_variants.py).
    for loads in (jsontext.loads,) if b"\\ud800" in line else (jsontext.loads, wire.loads):
        value = loads(line)
        assert repr(value) == repr(json.loads(line))  # repr: NaN is not equal to itself, 1 is equal to 1.0


def test_only_a_run_of_digits_that_may_be_a_long_integer_takes_the_slower_path() -> None:
    assert not jsontext._long_integer(b'{"working_start":0.0050587719999839464,"n":-0.00012345678901234567}')
    assert jsontext._long_integer(b'{"n":1234567890123456789}')
    assert jsontext._long_integer(b"1234567890123456789")
    assert jsontext._long_integer(b'{"s":"id 1234567890123456789"}')  # in a string: only slower
    assert jsontext._long_integer(b'{"f":0.1234567890123456789,"n":12345678901234567890}')  # a fraction, then one
    # a hex digest's digits (after a letter or the opening quote), an exponent's: no integer
    digests = b'{"sha256":"1234567890123456789012ab","id":"ab12345678901234567890123cd","e":1e+1234567890123456789}'
    assert not jsontext._long_integer(digests)
    assert jsontext._long_integer(digests[:-1] + b',"n":[1,-1234567890123456789]}')  # then one, negative
    assert jsontext._long_integer(b"[1,\n 1234567890123456789]")  # after whitespace


@pytest.mark.parametrize(
    "tricky",
    [
        '{"big":123456789012345678901234}',  # a long digit run: the whole batch goes to the careful read
        '{"x":NaN}',  # orjson refuses it: so does the batch's fast read
        '{"lone":"\ud800"}',  # a lone surrogate as the database hands it back (text)
        '{"lone":"\\ud800"}',  # and escaped
        '{"a":1,"a":2}',
        '{"f":1.0000000000000001,"g":-0,"i":0.1e1}',
    ],
)
def test_a_batch_is_read_as_each_text_alone(tricky: str) -> None:
    # loads_many is how an export reads a run's payloads back: the same values as loads, text by text.
    texts = ['{"n":1}', tricky, '{"s":"1234567890"}', '{"t":"123456789","u":"0123456789"}']
    assert repr(jsontext.loads_many(texts)) == repr([jsontext.loads(t) for t in texts])
    assert repr(jsontext.loads_many([tricky])) == repr([json.loads(tricky)])
    assert jsontext.loads_many([]) == []


@pytest.mark.parametrize("at", [[0], [37], [99], [5, 6, 70], list(range(100))])
def test_a_large_batch_reads_the_texts_with_long_digit_runs_exactly(at: list[int]) -> None:
    """A batch holding a long digit run is halved until the texts that hold it are found: those are read
    exactly (the integer stays an integer), wherever they are, and every other text as orjson reads it."""
    texts = [f'{{"n":{i},"s":"{i:018d}"}}' for i in range(100)]  # 18 digits: one short of a long run
    for i in at:
        texts[i] = f'{{"big":{10**22 + i},"n":{i}}}'
    values = jsontext.loads_many(texts)
    assert repr(values) == repr([json.loads(t) for t in texts])
    assert all(values[i]["big"] == 10**22 + i for i in at)


@pytest.mark.parametrize("line", [b'{"a":"x\ty"}', b'{"a":01}', b"[1,]", b'{"a":1}x', b'{"a":"\xff"}', b'{"a":.5}'])
def test_loads_refuses_what_the_stdlib_refuses(line: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(line)
    with pytest.raises(ValueError, match="invalid JSON"):
        wire.loads(line)
