"""The byte-level rules the hash chain rests on: canonical JSON and the event hash."""

from __future__ import annotations

import hashlib

import pytest

from evalstore.store.codec import canonical_json, canonical_json_bytes, event_hash


def test_canonical_json_is_sorted_compact_and_keeps_unicode() -> None:
    assert canonical_json({"b": [1, 2.5, None, True], "a": {"z": "é", "y": '\n"\\'}}) == (
        '{"a":{"y":"\\n\\"\\\\","z":"é"},"b":[1,2.5,null,true]}'
    )
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


def test_a_map_of_strings_takes_the_same_bytes_whatever_its_characters() -> None:
    """canonical_json_bytes writes a map of strings to strings another way (orjson): every character but the
    surrogates, in keys and values, and keys that sort apart only past the BMP, come out as canonical_json's."""
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(chars), 4096):
        text = "".join(chars[start : start + 4096])
        value = {text: text[::-1], text[:1]: text[1:2], "\uffff": "", "\U00010000": "a", "": text}
        assert canonical_json_bytes(value) == canonical_json(value).encode("utf-8")


@pytest.mark.parametrize(
    "value",
    [
        {"small": 1e-05, "big": 1e16},  # orjson: 1e-5, 1e16
        {"nested": {"b": "x", "a": "y"}},
        ["a", "b"],
        "text",
        {1: "a"},
    ],
)
def test_anything_but_a_map_of_strings_is_written_as_canonical_json(value: object) -> None:
    assert canonical_json_bytes(value) == canonical_json(value).encode("utf-8")


def test_a_lone_surrogate_is_refused_as_canonical_json_refuses_it() -> None:
    with pytest.raises(UnicodeEncodeError):
        canonical_json_bytes({"prompt": "half a pair \ud800"})


@pytest.mark.parametrize(
    "payload",
    [
        '{"a":1}',
        '{"text":"quotes \\" backslash \\\\ newline \\n tab \\t"}',
        "unicode é ü 中文 \U0001f600 and \u2028 \x00 \x1f \x7f raw controls",
        "",
    ],
)
def test_event_hash_is_the_digest_of_the_canonical_body(payload: str) -> None:
    fields = {
        "seq": 123456789012,
        "event_id": 'a1b2-"odd"-id',
        "stream_id": "run/é",
        "stream_version": 7,
        "type": "verdict_recorded",
        "schema_version": 2,
        "payload": payload,
        "recorded_at": "2026-11-22T16:28:05.458626+00:00",
    }
    prev = "f" * 64
    expected = hashlib.sha256(prev.encode("ascii") + canonical_json(fields).encode("utf-8")).hexdigest()
    assert event_hash(prev, **fields) == expected  # type: ignore[arg-type]
