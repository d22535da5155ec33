"""Suite metadata inherited by each test (AgentV v4 ``yaml-parser.ts`` merge, agentv-formats.md §5.6)."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any


def suite_metadata(metadata: Mapping[str, Any] | None, governance: Any = None) -> dict[str, Any]:
    """The suite's own metadata, with a top-level ``governance:`` replacing ``metadata.governance``."""
    merged = copy.deepcopy(dict(metadata or {}))
    if governance is not None:
        merged["governance"] = copy.deepcopy(governance)
    return merged


def merge_metadata(suite: Mapping[str, Any], test: Mapping[str, Any]) -> dict[str, Any]:
    """``test`` merged over ``suite``: nested objects recurse, arrays concatenate suite-first without
    duplicates, and any other test value wins over the suite's. Key order is AgentV's: the test's keys
    in the test's order, then the suite's remaining keys in the suite's order."""
    merged: dict[str, Any] = {}
    for key, value in test.items():
        base = suite.get(key)
        if isinstance(base, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_metadata(base, value)
        elif isinstance(base, list) and isinstance(value, list):
            merged[key] = _concat_unique(base, value)
        else:
            merged[key] = copy.deepcopy(value)
    for key, value in suite.items():
        if key not in merged:
            merged[key] = copy.deepcopy(value)
    return merged


def _concat_unique(first: list[Any], second: list[Any]) -> list[Any]:
    out: list[Any] = []
    seen: set[str] = set()
    for item in [*first, *second]:
        # Strings compare by value, anything else by canonical JSON (AgentV dedupes the same way).
        key = item if isinstance(item, str) else "\0" + json.dumps(item, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(copy.deepcopy(item))
    return out
