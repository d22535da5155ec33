"""Typed reads of raw YAML values, each failing with an :class:`EvalFileError` at the field's line.

:class:`ParseContext` carries what every part of the eval parser shares: the search roots and file
resolver, and the warnings and referenced files being collected for the suite.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalstore.replay.errors import ReferenceNotFoundError, ReplayError
from evalstore.replay.evalfile.search_roots import FileResolver, find_reference, resolve_reference
from evalstore.replay.evalfile.source import Where


@dataclass
class ParseContext:
    eval_path: Path
    search_roots: list[str]
    resolver: FileResolver
    warnings: list[str] = field(default_factory=list)
    referenced_files: list[tuple[str, str, str | None]] = field(default_factory=list)
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    """Where ``${{ VAR }}`` in the files read is filled from."""
    test_id: str | None = None
    """The test whose graders are being read (AgentV's ``evalId`` in its warnings); None for the suite's."""
    suite_skips: list[tuple[Where, Callable[[str], str]]] = field(default_factory=list)
    """Suite-level graders AgentV skips with a warning naming each test they would be added to: where, and
    the warning for a test's id (said by each test that gets the suite's graders)."""
    v5_bundle: bool = False
    """The file is a Promptfoo-shaped v5-next bundle (``prompts``, ``providers`` or ``default_test`` at the
    top), whose AgentV graded ``llm-rubric`` and ``script``: read as LLM and code graders there only."""
    custom_types: dict[str, Path] | None = None
    """The custom assertions AgentV discovers above the eval file, by type (``graders.discovered_types``)."""

    @property
    def eval_dir(self) -> Path:
        return self.eval_path.parent

    def warn(self, where: Where, problem: str) -> None:
        text = where.message(problem)
        if text not in self.warnings:
            self.warnings.append(text)

    def reference(self, role: str, path: Path, ref: str | None) -> None:
        """Record a file the suite depends on, once per (role, path)."""
        if not any(r == role and p == str(path) for r, p, _ in self.referenced_files):
            self.referenced_files.append((role, str(path), ref))

    def resolve(self, ref: str, where: Where, what: str) -> Path:
        try:
            return resolve_reference(ref, self.search_roots, self.resolver)
        except ReferenceNotFoundError as exc:
            if exc.folder is not None:
                raise where.error(f"{what} {exc}") from exc
            raise where.error(
                f"{what} `{ref}` not found in the search roots ({', '.join(self.search_roots)}); "
                "create it or fix the path"
            ) from exc

    def find(self, ref: str) -> Path | None:
        return find_reference(ref, self.search_roots, self.resolver)

    def read_text(self, path: Path, where: Where) -> str:
        try:
            return read_text(path, self.resolver)
        except ReplayError as exc:
            raise where.error(str(exc)) from exc


def read_text(path: Path, resolver: FileResolver) -> str:
    """The text of a file a user named (an eval's reference, a replay's ``--prompt``), or a
    :class:`ReplayError` naming it and saying what to do."""
    try:
        return resolver.read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReplayError(f"cannot read `{path}` as UTF-8 text ({exc}); save it as UTF-8") from exc
    except OSError as exc:
        raise ReplayError(f"cannot read `{path}` ({exc.strerror or exc}); fix the file") from exc


def warn_unknown(ctx: ParseContext, obj: dict[str, Any], known: Iterable[str], where: Where) -> None:
    """A warning per key that means nothing here; not for a key holding YAML anchors used elsewhere (such as
    AgentV's ``defaults:`` of shared messages), whose value does its work where the aliases stand."""
    known_set = set(known)
    for key in obj:
        if str(key) not in known_set and not where.lines.holds_anchor((*where.path, str(key))):
            ctx.warn(where.key(key), f"unknown key `{key}` ignored (known: {', '.join(sorted(known_set))})")


def expect_mapping(value: Any, where: Where, what: str = "an object") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise where.error(f"expected {what}, got {_kind(value)}")
    return value


def expect_list(value: Any, where: Where, what: str = "a list") -> list[Any]:
    if not isinstance(value, list):
        raise where.error(f"expected {what}, got {_kind(value)}")
    return value


def opt_str(obj: dict[str, Any], key: str, where: Where) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise where.key(key).error(f"expected a string, got {_kind(value)}")
    return value


def req_str(obj: dict[str, Any], key: str, where: Where, hint: str) -> str:
    if obj.get(key) is None:
        raise where.error(f"`{key}` is required; {hint}")
    value = opt_str(obj, key, where)
    if value is None or not value.strip():
        raise where.key(key).error(f"must not be empty; {hint}")
    return value


def opt_bool(obj: dict[str, Any], key: str, where: Where) -> bool | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise where.key(key).error(f"expected true or false, got {_kind(value)}")
    return value


def opt_number(
    obj: dict[str, Any],
    key: str,
    where: Where,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise where.key(key).error(f"expected a number, got {_kind(value)}")
    number = float(value)
    if math.isnan(number):  # YAML's .nan: every comparison with it is false, so no range would refuse it
        raise where.key(key).error("NaN is not a number; give a number")
    too_low = low is not None and (number <= low if low_open else number < low)
    if too_low or (high is not None and number > high):
        bounds = [f"{'above' if low_open else 'at least'} {low:g}"] if low is not None else []
        bounds += [f"at most {high:g}"] if high is not None else []
        raise where.key(key).error(f"{value} is out of range; use a number {' and '.join(bounds)}")
    return number


def str_list(value: Any, where: Where, what: str = "a list of strings") -> list[str]:
    items = expect_list(value, where, what)
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise where.index(i).error(f"expected a non-empty string, got {_kind(item)}")
    return list(items)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"boolean {value}"
    if isinstance(value, (int, float)):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {value[:40]!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
