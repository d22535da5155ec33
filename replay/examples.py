"""The bundled examples (``evalstore.examples`` package data): their names, what each shows, and copying
them out of the installed package into a folder of the user's (``evalstore examples``), so that a wheel
user can read and change the suites the quickstart and the walkthroughs run."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from evalstore.replay.errors import ReplayError
from evalstore.replay.quickstart import examples_dir


@dataclass(frozen=True)
class Example:
    name: str
    shows: str
    """What the example shows, one line."""
    try_it: str
    """A command to start with, run in the folder the examples were copied to."""
    needs: tuple[str, ...] = ()
    """Other examples its files reference (by relative path), copied with it."""


EXAMPLES = (
    Example(
        "quickstart",
        "the suite `evalstore quickstart` records and regrades: an agent that answers with .xlsx and .html "
        "files, converters, a code grader in two versions, an LLM grader prompt",
        "evalstore run quickstart/evals/report.eval.yaml",
        needs=("preprocessors",),
    ),
    Example(
        "preprocessors",
        "ready-to-copy converters (xlsx, html, docx to text) and an eval that uses them",
        "cat preprocessors/README.md",
    ),
    Example(
        "calibration",
        "labelled answers and three grader prompts: pick the prompt that agrees with people (docs/calibration.md)",
        "cd calibration && python3 judge.py --port 8765 &   # then docs/calibration.md, step 1",
    ),
    Example(
        "functional-grading",
        "a code grader that runs a project's tests in the agent's workspace, regraded without the agent",
        "cat functional-grading/README.md",
    ),
)

_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")


def example(name: str) -> Example:
    for ex in EXAMPLES:
        if ex.name == name:
            return ex
    raise ReplayError(f"no example named {name!r} (examples: {', '.join(e.name for e in EXAMPLES)})")


def with_needs(names: list[str]) -> list[str]:
    """The examples named (all when none) and those their files reference, in catalogue order."""
    wanted = {example(n).name for n in names} if names else {e.name for e in EXAMPLES}
    for name in list(wanted):
        wanted.update(example(name).needs)
    return [e.name for e in EXAMPLES if e.name in wanted]


def copy_examples(dest: Path, names: list[str] | None = None) -> list[Path]:
    """Copy the examples named (all when none, each with the examples it references) into ``dest``, one
    folder each (``dest/NAME``), and return those folders. ``dest`` must be new or empty; the copy is made
    beside it and renamed into place, so a failed copy leaves nothing half-written."""
    chosen = with_needs(list(names or []))
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ReplayError(f"{dest}: already exists and is not an empty folder; give a new folder")
    source = examples_dir()
    parent = dest.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    partial = parent / f".{dest.name}.partial-{os.getpid()}"
    try:
        partial.mkdir()
        for name in chosen:
            shutil.copytree(source / name, partial / name, ignore=_IGNORED)
        if dest.exists():
            dest.rmdir()  # empty (checked above)
        partial.rename(dest)
    finally:
        if partial.exists():
            shutil.rmtree(partial)
    return [dest / name for name in chosen]
