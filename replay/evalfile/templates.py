"""Assertion templates: ``- include: NAME`` entries of an assertions list, as AgentV 4.42.4 expands them
(``packages/core/src/evaluation/loaders/grader-parser.ts``: ``expandGraderEntries``).

An entry that is an object with the single key ``include`` is replaced by the ``assertions`` list of a YAML
file. A bare name (no ``.``, ``/`` or ``\\`` at its start or in it) is a template looked for as
``.agentv/templates/NAME.yaml`` then ``.yml`` under the search roots; anything else is a path resolved
through the search roots. ``${{ VAR }}`` is filled in the template as in the eval file. Templates include
templates up to three levels deep, a nested include searching the including template's folder first; a
cycle, a missing file or a file without a top-level ``assertions`` list is an error, as in AgentV.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evalstore.replay.evalfile.fields import ParseContext
from evalstore.replay.evalfile.interpolation import with_env
from evalstore.replay.evalfile.search_roots import candidate_paths, find_reference
from evalstore.replay.evalfile.source import Where, load_yaml

MAX_INCLUDE_DEPTH = 3
"""AgentV's ``MAX_ASSERTION_INCLUDE_DEPTH``."""

Entry = tuple[Where, Any]


def is_include(item: Any) -> bool:
    return isinstance(item, dict) and len(item) == 1 and isinstance(item.get("include"), str)


def expand_includes(items: list[Any], where: Where, ctx: ParseContext) -> list[Entry]:
    """The entries of an assertions list with every include replaced by its template's assertions, each
    with the position it was written at (in the eval file or in a template)."""
    return _expand([(where.index(i), item) for i, item in enumerate(items)], ctx.search_roots, ctx, ())


def _expand(entries: list[Entry], roots: list[str], ctx: ParseContext, chain: tuple[str, ...]) -> list[Entry]:
    out: list[Entry] = []
    for at, item in entries:
        if is_include(item):
            out.extend(_included(item["include"], at.key("include"), roots, ctx, chain))
        else:
            out.append((at, item))
    return out


def _included(name: str, at: Where, roots: list[str], ctx: ParseContext, chain: tuple[str, ...]) -> list[Entry]:
    if len(chain) + 1 > MAX_INCLUDE_DEPTH:
        trail = " -> ".join((*chain, name))
        raise at.error(f"assertion template include depth exceeded {MAX_INCLUDE_DEPTH} (include chain: {trail})")
    path, tried = _find(name, roots, ctx)
    if path is None:
        raise at.error(f"assertion template `{name}` not found (tried: {', '.join(tried)}); create it or fix the name")
    if str(path) in chain:
        raise at.error(f"assertion template cycle: {' -> '.join((*chain, str(path)))}")
    ctx.reference("assertion_template", path, name)
    data, lines = load_yaml(ctx.read_text(path, at), str(path), ctx.warnings)
    top = Where(str(path), lines, (), "")
    data = with_env(data, ctx.env)
    if not isinstance(data, dict):
        raise top.error("an assertion template is a YAML object with an `assertions` list")
    assertions = data.get("assertions")
    if not isinstance(assertions, list):
        raise top.error("an assertion template needs a top-level `assertions` list")
    folder = str(path.parent)
    nested_roots = [folder, *(r for r in roots if os.path.normpath(r) != folder)]
    listed = top.key("assertions")
    entries = [(listed.index(i), item) for i, item in enumerate(assertions)]
    return _expand(entries, nested_roots, ctx, (*chain, str(path)))


def _find(name: str, roots: list[str], ctx: ParseContext) -> tuple[Path | None, list[str]]:
    bare = not name.startswith(".") and "/" not in name and "\\" not in name
    refs = [os.path.join(".agentv", "templates", f"{name}{ext}") for ext in (".yaml", ".yml")] if bare else [name]
    tried: list[str] = []
    for ref in refs:
        found = find_reference(ref, roots, ctx.resolver)
        if found is not None:
            return found, tried
        tried.extend(str(p) for p in candidate_paths(ref, roots))
    return None, tried
