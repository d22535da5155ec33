"""The byte-level rules the hash chain rests on: canonical JSON and the event hash."""

from __future__ import annotations

import hashlib

import pytest

from evalstore.store.codec import canonical_json, event_hash


def test_canonical_json_is_sorted_compact_and_keeps_unicode() -> None:
    assert canonical_json({"b": [1, 2.5, None, True], "a": {"z": "é", "y": '\n"\\'}}) == (
        '{"a":{"y":"\\n\\"\\\\","z":"é"},"b":[1,2.5,null,true]}'
    )
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


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
