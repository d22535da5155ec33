"""``evalstore validate``: eval, targets and results files checked as ``run`` and ``import`` load them.

Nothing runs: no agent, grader, judge or converter, and no store is opened or written. Each file is
loaded by the very function the command that reads it calls (``load_eval`` for ``run``,
``load_targets_file`` for a targets file, the import's validation pass for results), so what passes
here loads there, and an error here is the error the command would stop with.

Which files a path means follows ``agentv validate`` (AgentV 4.42.4, ``apps/cli/src/commands/validate``):
a folder is searched for ``*.eval.yaml``/``*.eval.yml``, leaving out hidden folders and ``node_modules``;
a YAML file is a targets file when it is ``targets.yaml``/``.yml`` under a ``.agentv`` folder (or says
``$schema: agentv-targets-v2.2``), else an eval file. Beyond AgentV: a YAML file anywhere that holds what a
targets file holds (a top-level ``targets:`` list of providers: ``is_targets_document``) is a targets
file too (AgentV skips it as of unknown type; read as an eval, it was refused for its secret references);
and a ``.jsonl`` file, or a folder holding an AgentV run (``index.jsonl``, a v5-next bundle), is results,
checked as ``evalstore import`` would take them in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from evalstore.replay.errors import ReplayError

Kind = Literal["eval", "targets", "results"]
YAML_SUFFIXES = (".yaml", ".yml")
EVAL_SUFFIXES = (".eval.yaml", ".eval.yml")
TARGETS_NAMES = ("targets.yaml", "targets.yml")
TARGETS_SCHEMA = re.compile(r"^\$schema:\s*[\"']?agentv-targets-v2\.2[\"']?\s*$", re.MULTILINE)
TARGETS_KEY = re.compile(r"^targets\s*:", re.MULTILINE)
"""A top-level ``targets:`` key: only a file holding one is parsed to see whether it is a targets file."""


class ValidateUsageError(ReplayError):
    """A path that names nothing to check (missing, or a file of no kind validate knows): bad usage."""


@dataclass
class FileCheck:
    """One file's verdict; ``ok`` is False exactly when ``errors`` is not empty."""

    path: str
    kind: Kind
    tests: int = 0
    """Tests an eval file holds, results a results file holds (0 for a targets file)."""
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "ok": self.ok,
            "tests": self.tests,
            "errors": self.errors,
            "warnings": self.warnings,
        }


def files_to_check(paths: Iterable[str | Path]) -> list[tuple[Path, Kind]]:
    """Every file the paths name, with its kind, in sorted order and each once (as AgentV lists them);
    raises :class:`ValidateUsageError` for a path that does not exist or names no file to check."""
    found: dict[Path, Kind] = {}
    for given in paths:
        path = Path(os.path.abspath(given))
        if path.is_dir():
            if _is_run_folder(path):
                found[path] = "results"
                continue
            eval_files = _eval_files_under(path)
            if not eval_files:
                raise ValidateUsageError(f"{given}: no *.eval.yaml files in this folder or below it")
            for eval_file in eval_files:
                found[eval_file] = "eval"
        elif path.is_file():
            found[path] = _kind_of(path, given)
        elif path.exists():
            raise ValidateUsageError(f"{given}: not a regular file or a folder")
        else:
            raise ValidateUsageError(f"{given}: no such file or directory")
    return sorted(found.items())


def validate(paths: Iterable[str | Path]) -> list[FileCheck]:
    """A :class:`FileCheck` for every file the paths name (see :func:`files_to_check`)."""
    return [check_file(path, kind) for path, kind in files_to_check(paths)]


def check_file(path: Path, kind: Kind) -> FileCheck:
    checkers = {"eval": _check_eval, "targets": _check_targets, "results": _check_results}
    result = FileCheck(str(path), kind)
    try:
        checkers[kind](path, result)
    except ReplayError as exc:
        result.errors.append(str(exc))
    return result


def _check_eval(path: Path, result: FileCheck) -> None:
    from evalstore.replay.evalfile.parser import load_eval

    # A file of suite-level graders and no tests is what `replay --eval` takes: valid, and said to be.
    suite = load_eval(path, run_tests=list)
    result.tests = len(suite.tests)
    result.warnings.extend(suite.warnings)
    if suite.tests_from_run:
        result.warnings.append(
            f"{path}: no `tests`: a file whose suite-level graders regrade a stored run's own tests "
            f"(`evalstore replay RUN --eval {path.name}`); `evalstore run` needs tests"
        )


def _check_targets(path: Path, result: FileCheck) -> None:
    from evalstore.replay.targetsfile.cli_fields import field_value, quoted_placeholders
    from evalstore.replay.targetsfile.loader import load_targets_file

    targets_file = load_targets_file(path)
    result.warnings.extend(targets_file.warnings)
    for entry in targets_file.targets.values():
        command = field_value(entry.fields, "command")
        quoted = quoted_placeholders(command) if entry.provider == "cli" and isinstance(command, str) else []
        if quoted:
            result.warnings.append(
                f"{entry.source}: target {entry.name!r} writes {', '.join(dict.fromkeys(quoted))} inside quotes: "
                "the value is filled quoted for the shell already, so the quotes become part of it and a "
                "double-quoted $(...) in a prompt is run; write it without quotes"
            )


def _check_results(path: Path, result: FileCheck) -> None:
    from evalstore.replay.agentv.importing import check_import

    checked = check_import(path)
    result.tests = checked.tests
    result.warnings.extend(checked.warnings)


def _kind_of(path: Path, given: str | Path) -> Kind:
    name = path.name.lower()
    if name.endswith(".jsonl"):
        return "results"
    if name.endswith(YAML_SUFFIXES):
        return "targets" if _is_targets_file(path) else "eval"
    if path.suffix not in (".json", ".eval") and path.is_file():
        from evalstore.replay.agentv.detect import rows_inside

        if rows_inside(path):  # result rows under another name, as import reads them
            return "results"
    if path.suffix in (".json", ".eval"):
        raise ValidateUsageError(
            f"{given}: an Inspect AI log's name; validate checks AgentV files (`evalstore import` reads the log, "
            "and refuses it in one line, writing nothing, if inspect_ai cannot)"
        )
    raise ValidateUsageError(
        f"{given}: not an eval or targets file (.yaml, .yml) or a results file (AgentV result rows, one JSON "
        "object a line, or an AgentV run folder)"
    )


def _is_targets_file(path: Path) -> bool:
    """AgentV's rule (``validation/file-type.ts``): a ``$schema`` saying so, else the name under ``.agentv``;
    and, wherever it lies and whatever its name, what it holds (``is_targets_document``)."""
    if path.name in TARGETS_NAMES and "/.agentv/" in path.as_posix():
        return True
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if TARGETS_SCHEMA.search(text) is not None:
        return True
    if TARGETS_KEY.search(text) is None:
        return False
    from evalstore.replay.errors import EvalFileError
    from evalstore.replay.evalfile.source import load_yaml
    from evalstore.replay.targetsfile.loader import is_targets_document

    try:
        data, _ = load_yaml(text, str(path), [])
    except EvalFileError:
        return False  # not YAML that loads: checked as an eval, whose error says where
    return is_targets_document(data)


def _is_run_folder(path: Path) -> bool:
    from evalstore.replay.agentv.detect import detect_format
    from evalstore.replay.errors import ImportFormatError

    try:
        detect_format(path)
    except ImportFormatError:
        return False
    return True


def _eval_files_under(folder: Path) -> list[Path]:
    """``*.eval.yaml``/``*.eval.yml`` below ``folder``, not in hidden folders or ``node_modules``."""
    out: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "node_modules" and not d.startswith(".")]
        out.extend(Path(root) / f for f in files if f.lower().endswith(EVAL_SUFFIXES))
    return out
