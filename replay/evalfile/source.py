"""Line-aware reading of eval YAML and JSONL, so every error and warning names FILE:LINE and field.

YAML is composed into a node tree first (which keeps start marks), then constructed into plain data
from that same tree; a walk over the tree records the line of every mapping key and sequence item by
its path. A :class:`Where` is a position in that data: the file, the path, and the field as users
read it (``tests[2].assertions[0].command``), even when the tests come from another file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from evalstore.replay.errors import EvalFileError

PathKey = str | int


class Yaml12Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader reading plain scalars as YAML 1.2's core schema does, as AgentV reads its
    files (the npm ``yaml`` package): ``yes``/``no``/``on``/``off`` stay strings, ``1e3`` is a number,
    ``0777`` is 777 and ``0o17`` 15, ``1_000`` and ``1:20`` stay strings. PyYAML alone follows YAML 1.1,
    where ``sourceOk: yes`` became ``true`` in a grader's payload and a judge's prompt, and a date
    (``2024-01-01``) a date object rather than the string AgentV passes on.

    libyaml's parser when PyYAML was built with it: same nodes and marks, about 8x faster on a suite of
    a thousand tests (a replay parses the eval before it grades anything)."""


_CORE_12 = {
    "tag:yaml.org,2002:bool": (re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), "tTfF"),
    "tag:yaml.org,2002:int": (re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), "-+0123456789"),
    "tag:yaml.org,2002:float": (
        re.compile(
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
        "-+.0123456789",
    ),
}
_NOT_CORE_12 = {*_CORE_12, "tag:yaml.org,2002:timestamp"}
Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _NOT_CORE_12]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag, (_regexp, _first) in _CORE_12.items():
    Yaml12Loader.add_implicit_resolver(_tag, _regexp, list(_first))


def _core_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    try:
        if text.startswith("0o"):
            return int(text[2:], 8)
        return int(text, 16) if text.startswith("0x") else int(text, 10)  # 0777 is 777: no octal without 0o
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits): no count is that large
        problem = f"an integer of {len(text)} digits is too large"
        raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark) from None


Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _core_int)


class LineMap:
    """1-based line of each path in one document; a path not recorded falls back to its parent's."""

    def __init__(
        self,
        lines: dict[tuple[PathKey, ...], int] | None = None,
        default: int = 1,
        aliased: set[tuple[PathKey, ...]] | None = None,
    ) -> None:
        self._lines = lines or {}
        self._default = default
        self.aliased = aliased or set()
        """Paths of values an alias (``*name``) repeats elsewhere in the document."""

    def holds_anchor(self, path: tuple[PathKey, ...]) -> bool:
        """Whether the value at ``path``, or a value inside it, is repeated elsewhere through an alias: a key
        such as AgentV's ``defaults:`` that holds anchors does its work where they are used."""
        return any(p[: len(path)] == path for p in self.aliased)

    def line(self, path: tuple[PathKey, ...]) -> int:
        while path:
            if path in self._lines:
                return self._lines[path]
            path = path[:-1]
        return self._lines.get((), self._default)


@dataclass(frozen=True)
class Where:
    """A position in a parsed document: for errors, warnings and nested positions."""

    file: str
    lines: LineMap = field(repr=False)
    path: tuple[PathKey, ...] = ()
    field: str = ""

    def key(self, name: Any) -> Where:
        name = str(name)
        return Where(self.file, self.lines, (*self.path, name), f"{self.field}.{name}" if self.field else name)

    def index(self, i: int) -> Where:
        return Where(self.file, self.lines, (*self.path, i), f"{self.field}[{i}]")

    @property
    def line(self) -> int:
        return self.lines.line(self.path)

    def error(self, problem: str) -> EvalFileError:
        return EvalFileError(self.file, self.line, self.field or None, problem)

    def message(self, problem: str) -> str:
        """The one-line text of a warning at this position (same shape as an error)."""
        return str(self.error(problem))


def load_yaml(text: str, file: str, warnings: list[str]) -> tuple[Any, LineMap]:
    """Plain data and its line map; duplicate mapping keys are reported in ``warnings``."""
    loader = Yaml12Loader(text)
    lines: dict[tuple[PathKey, ...], int] = {}
    aliased: set[tuple[PathKey, ...]] = set()
    try:
        node = loader.get_single_node()
        if node is not None:
            if _check_depth(node, file):  # a tree (no alias) expands to exactly what is written
                check_expansion(node, file)
            # Walked before construction, which folds merge keys (`<<: *x`) into their mappings: a key
            # written beside a merge overrides the merged one and is no duplicate.
            lines[()] = node.start_mark.line + 1
            _walk(node, (), lines, Where(file, LineMap(lines)), warnings, {}, aliased)
        data = loader.construct_document(node) if node is not None else None
    except RecursionError:
        raise EvalFileError(file, None, None, f"nested too deeply (at most {MAX_NESTING} levels); flatten it") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise EvalFileError(file, line, None, f"invalid YAML: {exc.problem or exc}; fix the syntax") from None
    except yaml.YAMLError as exc:
        raise EvalFileError(file, None, None, f"invalid YAML: {exc}; fix the syntax") from None
    finally:
        loader.dispose()
    return data, LineMap(lines, aliased=aliased)


MAX_NESTING = 100
"""How deeply values may nest in an eval or tests file: far beyond any real suite, far below what
would exhaust the interpreter's recursion limit further on (parsing, merging, canonical JSON)."""


def _check_depth(root: yaml.Node, file: str) -> bool:
    """An error at the first node nested deeper than :data:`MAX_NESTING` (iteratively: the check must
    not itself recurse). Returns whether a node was reached twice (through an alias)."""
    stack: list[tuple[yaml.Node, int]] = [(root, 0)]
    seen: set[int] = set()
    aliased = False
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:  # an alias: the same node object again
            aliased = True
            continue
        seen.add(id(node))
        if depth > MAX_NESTING:
            problem = f"nested more than {MAX_NESTING} levels deep; flatten it"
            raise EvalFileError(file, node.start_mark.line + 1, None, problem)
        if isinstance(node, yaml.MappingNode):
            stack.extend((child, depth + 1) for pair in node.value for child in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
    return aliased


MAX_ALIAS_EXPANSION = 100_000
"""How many values aliases may add to a YAML file beyond those written in it. An anchor used a few times
(``<<: *defaults``) adds a handful; a 500-byte file of nine aliases of nine aliases (an alias bomb) adds
hundreds of millions, which took 37 s and 4 GB to build and 420 MB to store."""

MAX_ALIAS_TEXT = 16 << 20
"""How many characters of text aliases may add beyond those written. Few values can still be large: a
1 MB string aliased 300 times is 300 MB of text, which a replay held several times over (1.6 GB). A
prompt of a few KB shared by a few hundred tests stays far below."""


def check_expansion(root: yaml.Node, file: str) -> None:
    """An error when the values ``root`` stands for, aliases expanded, outnumber the nodes written by more
    than :data:`MAX_ALIAS_EXPANSION`, or their text the text written by more than :data:`MAX_ALIAS_TEXT`
    (counted on the node graph, without expanding: each node's size once, iteratively); a recursive alias
    counts as too many."""
    size: dict[int, tuple[int, int]] = {}
    written, written_text = 0, 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    pending: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            pending.discard(key)
            children = [size[id(c)] for c in _children(node)]
            text = len(node.value) if isinstance(node, yaml.ScalarNode) else 0
            size[key] = (1 + sum(n for n, _ in children), text + sum(t for _, t in children))
            continue
        if key in size:
            continue
        if key in pending:  # an alias of a node inside itself: it never ends
            raise EvalFileError(
                file, node.start_mark.line + 1, None, "a recursive alias (an anchor used inside itself)"
            )
        pending.add(key)
        written += 1
        written_text += len(node.value) if isinstance(node, yaml.ScalarNode) else 0
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in size)
    values, text = size[id(root)]
    for total, seen, cap, unit, advice in (
        (values, written, MAX_ALIAS_EXPANSION, "values", "write the values out or alias less"),
        (text, written_text, MAX_ALIAS_TEXT, "characters of text", "alias less, or keep the large text in a file"),
    ):
        if total - seen > cap:
            raise EvalFileError(
                file,
                root.start_mark.line + 1,
                None,
                f"its aliases expand to {total} {unit}, more than {cap} beyond the {seen} written (an alias "
                f"bomb?); {advice}",
            )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def nesting_depth(value: Any) -> int:
    """How deeply a decoded JSON value nests (a scalar is 0), computed without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


MERGE_TAG = "tag:yaml.org,2002:merge"


def _walk(
    node: yaml.Node,
    path: tuple[PathKey, ...],
    lines: dict[tuple[PathKey, ...], int],
    where: Where,
    warnings: list[str],
    walked: dict[int, tuple[PathKey, ...]],
    aliased: set[tuple[PathKey, ...]],
) -> None:
    # An alias is the same node object again: its lines are already known, and it may be recursive.
    if id(node) in walked:
        aliased.add(walked[id(node)])
        return
    walked[id(node)] = path
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            if key_node.tag == MERGE_TAG:
                _walk(value_node, (*path, "<<"), lines, where, warnings, walked, aliased)
                continue
            key = str(key_node.value)
            child = (*path, key)
            if key in seen:
                lines[child] = key_node.start_mark.line + 1
                warnings.append(
                    Where(where.file, LineMap(dict(lines)), child, _field(child)).message(
                        "duplicate key; the last value wins, remove the other one"
                    )
                )
            seen.add(key)
            lines[child] = key_node.start_mark.line + 1
            _walk(value_node, child, lines, where, warnings, walked, aliased)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = (*path, i)
            lines[child] = item.start_mark.line + 1
            _walk(item, child, lines, where, warnings, walked, aliased)


def _field(path: tuple[PathKey, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def load_jsonl(text: str, file: str) -> list[tuple[int, Any]]:
    """``(line number, object)`` for every non-blank line."""
    rows: list[tuple[int, Any]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            problem = f"invalid JSON ({exc.msg} at column {exc.colno}); write one test object per line"
            raise EvalFileError(file, number, None, problem) from None
        except RecursionError:
            too_deep = True
        else:
            too_deep = nesting_depth(row) > MAX_NESTING
        if too_deep:
            raise EvalFileError(file, number, None, f"nested more than {MAX_NESTING} levels deep; flatten it")
        rows.append((number, row))
    return rows
