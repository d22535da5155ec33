"""Grader scripts (a code grader's, an LLM grader's prompt template script), prompt files and converters gone
from disk, run (or read) from the bytes the run recorded.

A run keeps the bytes of every file its eval references (its eval snapshot). A replay grades with the
files on disk, and says which changed (drift); when one is gone (another user's checkout, a moved or
deleted folder), the recorded bytes are written to a private folder for the replay's length and the
graders and converters run them from there, so ``evalstore replay RUN`` still reproduces RUN. A file
that changed is run as it is now (``--strict`` refuses); only a missing one is restored.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from evalstore.replay.evalfile.snapshot import Drift
from evalstore.replay.evalfile.specs import CodeGraderSpec, ConverterSpec, EvalSuite, GraderSpec, LlmGraderSpec
from evalstore.replay.grading.materialize import PrivateTempDir
from evalstore.store import EventStore

RESTORED_ROLES = ("grader_script", "converter", "prompt")


@contextmanager
def restored_files(
    store: EventStore, suite: EvalSuite, drifted: list[Drift]
) -> Iterator[tuple[EvalSuite, list[Drift], dict[str, str]]]:
    """The suite with every gone grader script and converter pointing at its recorded bytes, the drift
    marked so, and where each gone path's copy is (the replay's own snapshot records the bytes under the
    path the eval names, so a replay of it restores them again); the copies are removed on exit."""
    gone = {d.path: d.recorded for d in drifted if d.role in RESTORED_ROLES and d.current is None and d.recorded}
    if not gone:
        yield suite, drifted, {}
        return
    with PrivateTempDir(prefix="evalstore-restored-") as tmp:
        moved: dict[str, str] = {}
        for i, (path, digest) in enumerate(gone.items()):
            copy = tmp.path / str(i) / Path(path).name  # one folder each: two scripts may share a name
            copy.parent.mkdir()
            copy.write_bytes(store.get_blob(digest))
            copy.chmod(0o700)  # a script run directly must stay executable
            moved[path] = str(copy)
        yield _repointed(suite, moved), [replace(d, restored=d.path in moved) for d in drifted], moved


def _repointed(suite: EvalSuite, moved: dict[str, str]) -> EvalSuite:
    def converters(specs: list[ConverterSpec]) -> list[ConverterSpec]:
        return [c.model_copy(update={"command": [moved.get(a, a) for a in c.command]}) for c in specs]

    def grader(spec: GraderSpec) -> GraderSpec:
        if isinstance(spec, CodeGraderSpec):
            spec = spec.model_copy(
                update={
                    "command": [moved.get(a, a) for a in spec.command],
                    "script": moved.get(spec.script, spec.script) if spec.script else None,
                }
            )
        if isinstance(spec, LlmGraderSpec) and spec.prompt_command:
            spec = spec.model_copy(update={"prompt_command": [moved.get(a, a) for a in spec.prompt_command]})
        if isinstance(spec, LlmGraderSpec) and spec.prompt_file in moved:
            spec = spec.model_copy(update={"prompt_file": moved[spec.prompt_file]})
        if hasattr(spec, "preprocessors"):
            spec = spec.model_copy(update={"preprocessors": converters(spec.preprocessors)})
        return spec

    repointed = suite.with_graders(grader)
    return repointed.model_copy(update={"preprocessors": converters(suite.preprocessors)})
