"""Where a suite's tests come from, as AgentV 4.42.4 finds them (``loaders/case-file-loader.ts``,
``yaml-parser.ts``).

- ``tests: [...]``, a list: an entry that is a ``file://`` string is replaced, where it stands, by the tests
  of that file, or of every file a glob (``*``, ``?``, ``**``, ``{a,b}``) matches, in sorted order; a glob
  matching nothing is a warning and adds no test.
- ``tests: PATH``, a string: a tests file, or a folder of case folders.
- A tests file is a YAML list of tests or JSONL (one test object a line); an empty file is a warning and
  holds no test. Any other extension, a YAML file that is not a list (a ``tests:`` mapping, say) or holds
  something that is not a test object, is refused with AgentV's reason.
- A folder: each folder directly in it (in name order) holding ``case.yaml`` (or ``case.yml``) is one
  test, whose ``id`` is the folder's name unless the case gives one, and whose workspace template is the
  case folder's ``workspace/`` when there is one and the case sets no ``workspace``. A folder without a
  case file is a warning.

Paths are relative to the eval file's folder (not the search roots); ``${{ VAR }}`` is filled in every file
read here, as in the eval file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evalstore.replay.evalfile.fields import ParseContext, expect_list
from evalstore.replay.evalfile.interpolation import with_env
from evalstore.replay.evalfile.source import LineMap, Where, load_jsonl, load_yaml

FILE_SCHEME = "file://"
TESTS_FILE_SUFFIXES = (".yaml", ".yml", ".jsonl")
CASE_FILES = ("case.yaml", "case.yml")
_GLOB_CHARACTERS = ("*", "?", "{")

RawTest = tuple[Where, Any]


def raw_tests(ctx: ParseContext, raw: Any, where: Where) -> list[RawTest]:
    """The raw test objects ``tests`` names, each with where it was written."""
    if isinstance(raw, str):
        path = _local(ctx, raw)
        if ctx.resolver.is_dir(path):
            return _case_folders(ctx, path, raw, where)
        return _tests_file(ctx, path, raw, where)
    items = expect_list(raw, where, "a list of tests or a path to a .yaml/.jsonl file")
    out: list[RawTest] = []
    for i, item in enumerate(items):
        at = where.index(i)
        if isinstance(item, str) and item.startswith(FILE_SCHEME):
            out.extend(_file_reference(ctx, item, at))
        elif isinstance(item, str):
            raise at.error("a test given as a string must be a file reference (file://path.yaml or .jsonl)")
        else:
            out.append((at, item))
    return out


def _local(ctx: ParseContext, ref: str) -> Path:
    return Path(os.path.normpath(ctx.eval_dir / ref))


def _file_reference(ctx: ParseContext, ref: str, where: Where) -> list[RawTest]:
    written = ref[len(FILE_SCHEME) :]
    if not any(c in written for c in _GLOB_CHARACTERS):
        return _tests_file(ctx, _local(ctx, written), ref, where)
    matches = ctx.resolver.glob(str(_local(ctx, written)))
    if not matches:
        ctx.warn(where, f"`{ref}` matches no file ({_local(ctx, written)}); it adds no test")
        return []
    out: list[RawTest] = []
    for match in matches:
        out.extend(_tests_file(ctx, match, f"{FILE_SCHEME}{os.path.relpath(match, ctx.eval_dir)}", where))
    return out


def _tests_file(ctx: ParseContext, path: Path, ref: str, where: Where) -> list[RawTest]:
    suffix = path.suffix.lower()
    if suffix not in TESTS_FILE_SUFFIXES:
        raise where.error(
            f"unsupported tests file format `{suffix}` ({path}); use .yaml, .yml or .jsonl, or a folder of case folders"
        )
    if not ctx.resolver.is_file(path):
        raise where.error(f"cannot read the tests file `{ref}` ({path}): no such file; create it or fix the path")
    ctx.reference("tests", path, ref)
    text = ctx.read_text(path, where)
    if not text.strip():
        ctx.warn(where, f"the tests file `{ref}` is empty; it adds no test")
        return []
    if suffix == ".jsonl":
        rows = load_jsonl(text, str(path))
        out: list[RawTest] = []
        for i, (line, row) in enumerate(rows):
            at = Where(str(path), LineMap(default=line), (), f"tests[{i}]")
            if not isinstance(row, dict):
                raise at.error("expected a JSON object (a test) on this line")
            out.append((at, with_env(row, ctx.env)))
        return out
    data, lines = load_yaml(text, str(path), ctx.warnings)
    base = Where(str(path), lines, (), "tests")
    items = expect_list(data, base, "a YAML list of tests (a tests file holds the list itself, not `tests:`)")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise base.index(i).error("expected a test object; a tests file holds test objects only")
    return [(base.index(i), with_env(item, ctx.env)) for i, item in enumerate(items)]


def _case_folders(ctx: ParseContext, folder: Path, ref: str, where: Where) -> list[RawTest]:
    out: list[RawTest] = []
    for name in ctx.resolver.subfolders(folder):
        case_folder = folder / name
        case_file = next((case_folder / f for f in CASE_FILES if ctx.resolver.is_file(case_folder / f)), None)
        if case_file is None:
            ctx.warn(where, f"tests folder `{ref}`: `{name}` holds no case.yaml; it is not a test")
            continue
        ctx.reference("tests", case_file, f"{ref.rstrip('/')}/{name}/{case_file.name}")
        data, lines = load_yaml(ctx.read_text(case_file, where), str(case_file), ctx.warnings)
        at = Where(str(case_file), lines, (), "test")
        if not isinstance(data, dict):
            raise at.error("a case file holds one test object")
        case = with_env(data, ctx.env)
        if case.get("id") is None:
            case = {**case, "id": name}
        if not case.get("workspace") and ctx.resolver.is_dir(case_folder / "workspace"):
            case = {**case, "workspace": {"template": str(case_folder / "workspace")}}
        out.append((at, case))
    if not out:
        raise where.error(f"tests folder `{ref}` ({folder}) holds no */case.yaml; add one folder per test")
    return out
