"""The grader dev loop behind ``evalstore assert``: run one code grader on one answer, write nothing.

Three ways to say what is graded:

- a grader found by name (``.agentv/graders/NAME.*``, walking up from the current folder) on an answer
  given on the command line or in a JSON file (``{output, input, criteria, expected_output}``);
- a test of an eval file (its input, criteria, expected output) and an answer given on the command line;
- a stored test of a run: its transcript, artifacts and workspace snapshot, as a replay would grade them.

Every way grades through :class:`evalstore.replay.grading.graders.code.CodeGrader`, the same code a run
and a replay use, with an in-memory recorder: the payload a grader sees here is the one it sees there.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstore.replay.content import Message
from evalstore.replay.errors import NotFoundError, ReplayError
from evalstore.replay.evalfile.specs import CodeGraderSpec, EvalSuite, EvalTest
from evalstore.replay.grading.graders.base import GraderResult, GradingContext, TranscriptInfo
from evalstore.replay.recording import MemoryRecorder

PASS_SCORE = 0.5
"""``agentv eval assert`` exits 0 when the score is at least this, 1 otherwise."""

GRADER_DIR = Path(".agentv") / "graders"
_EXTENSION_ORDER = ("", ".py", ".ts", ".mts", ".js", ".mjs", ".sh")


@dataclass
class AssertOutcome:
    grader: str
    command: list[str]
    result: GraderResult

    @property
    def passed(self) -> bool:
        return self.result.status == "ok" and self.result.score >= PASS_SCORE

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "grader": self.grader,
            "score": self.result.score,
            "status": self.result.status,
            "assertions": [a.model_dump(exclude_none=True) for a in self.result.assertions],
        }
        if self.result.details is not None:
            out["details"] = self.result.details
        if self.result.evidence:
            out["evidence"] = self.result.evidence
        return out


def find_grader(name: str, start: Path | None = None) -> Path:
    """``.agentv/graders/NAME.*`` in ``start`` (default: the cwd) or the nearest parent that has one."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ReplayError(f"grader name {name!r}: give a name, not a path (the file is .agentv/graders/NAME.*)")
    here = (start or Path.cwd()).resolve()
    looked: list[str] = []
    for folder in [here, *here.parents]:
        graders = folder / GRADER_DIR
        looked.append(str(graders))
        if not graders.is_dir():
            continue
        candidates = [p for p in graders.iterdir() if p.is_file() and (p.name == name or p.stem == name)]
        if candidates:
            return sorted(candidates, key=lambda p: _rank(p.suffix))[0]
    raise NotFoundError(
        f"no grader named {name!r}: looked for {GRADER_DIR}/{name}.* in {here} and its parents"
        + (f" ({len(looked)} folders)" if len(looked) > 1 else "")
    )


def _rank(suffix: str) -> int:
    return _EXTENSION_ORDER.index(suffix) if suffix in _EXTENSION_ORDER else len(_EXTENSION_ORDER)


def grader_command(script: Path) -> list[str]:
    """How to run a grader file: Python with this interpreter; anything else directly if executable,
    else through its ``#!`` line."""
    if script.suffix == ".py":
        return [sys.executable, str(script)]
    if os.access(script, os.X_OK):
        return [str(script)]
    with script.open("rb") as handle:
        first = handle.readline(512)
    if first.startswith(b"#!"):
        return [*shlex.split(first[2:].decode("utf-8", errors="replace").strip()), str(script)]
    raise ReplayError(f"{script}: not executable and has no #! line; make it executable or add a shebang")


def answer_from_file(path: Path) -> dict[str, Any]:
    """``--file result.json``: ``{output, input?, criteria?, expected_output?}``."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReplayError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ReplayError(f"{path}: expected a JSON object with `output` (and optionally `input`, `criteria`)")
    output = data.get("output", data.get("answer"))
    if output is None:
        raise ReplayError(f"{path}: no `output` field")
    return data


def assert_named(
    name: str,
    output: Any,
    *,
    input: Any = None,
    criteria: str | None = None,
    expected_output: Any = None,
    start: Path | None = None,
    warm: bool = True,
) -> AssertOutcome:
    """Run ``.agentv/graders/NAME.*`` on an answer given directly."""
    script = find_grader(name, start)
    spec = CodeGraderSpec(name=name, command=grader_command(script), script=str(script), cwd=str(Path.cwd()))
    test = EvalTest(id=name, input=_as_messages(input, "user"), criteria=criteria, expected_output=expected_output)
    suite = EvalSuite(path=str(Path.cwd() / "assert"), name="assert", tests=[test])
    return _grade(spec, suite, test, _answer_transcript(test, output), MemoryRecorder(), warm=warm)


def assert_eval_test(
    eval_path: str | Path, test_id: str, grader: str, output: str, *, warm: bool = True
) -> AssertOutcome:
    """Run the code grader GRADER of test TEST_ID in an eval file on an answer given directly. A name
    the test does not have is looked up in ``.agentv/graders/``."""
    from evalstore.replay.evalfile.parser import load_eval

    suite = load_eval(eval_path)
    test = next((t for t in suite.tests if t.id == test_id), None)
    if test is None:
        raise NotFoundError(f"{suite.path}: no test {test_id!r} (tests: {', '.join(t.id for t in suite.tests)})")
    spec = _spec_of(test, grader)
    return _grade(spec, suite, test, _answer_transcript(test, output), MemoryRecorder(), warm=warm)


def assert_stored(store: Any, run_id: str, test_id: str, grader: str, *, warm: bool = True) -> AssertOutcome:
    """Run a grader on a stored test of RUN: its transcript, artifacts and workspace snapshot, with the
    grader's script as it is on disk now. Nothing is written to the store."""
    from evalstore.replay.evalfile.specs import GraderSpec
    from evalstore.replay.material import load_run, transcript_info
    from evalstore.replay.regrade import transcript_run

    run = transcript_run(store, load_run(store, run_id))
    matches = run.results_of(test_id)
    if not matches:
        known = sorted({key[0] for key in run.tests})
        raise NotFoundError(f"run {run.run_id} has no test {test_id!r} (tests: {', '.join(known[:20])})")
    material = matches[0]
    if material.case is not None:
        case = material.case[1]
    else:  # an AgentV import's rows carry no case: the one its eval snapshot gives, as every reader shows it
        from evalstore.replay.analysis.cases import FoundCase, RunCases
        from evalstore.store.events import TestCaseRecorded

        found: FoundCase[TestCaseRecorded] = RunCases.of(store, run_id).find(material.key, None)
        if found.case is None:
            raise ReplayError(f"run {run.run_id}, test {test_id!r}: nothing to grade against: {found.missing}")
        case = found.case
    from pydantic import TypeAdapter

    specs = [TypeAdapter(GraderSpec).validate_python(g) for g in case.graders]
    test = EvalTest(
        id=case.test_id,
        input=[Message.model_validate(m) for m in case.input],
        input_files=case.input_files,
        expected_output=case.expected_output,
        criteria=case.criteria,
        metadata=case.metadata,
        graders=specs,
    )
    path = run.started.eval_path or str(Path.cwd() / "assert")
    suite = EvalSuite(path=path, name=run.started.suite or "assert", tests=[test])
    # Graded as `evalstore replay RUN` would grade it: RUN's eval and every swap down its replay chain.
    suite, test = _as_replayed(store, run_id, suite, test)
    spec = _spec_of(test, grader)
    info = transcript_info(store.get_blob, material)
    if info.missing:
        raise ReplayError(f"run {run.run_id}, test {test_id!r}: {info.missing}")
    recorder = MemoryRecorder(blob_source=store.get_blob)
    return _grade(spec, suite, test, info, recorder, target=material.key[1] or None, attempt=material.key[2], warm=warm)


def _spec_of(test: EvalTest, grader: str) -> CodeGraderSpec:
    for spec in test.graders:
        if spec.name == grader:
            if not isinstance(spec, CodeGraderSpec):
                raise ReplayError(
                    f"grader {grader!r} of test {test.id!r} is a {spec.type}; `evalstore assert` runs code graders"
                )
            return spec
    try:
        script = find_grader(grader)
    except NotFoundError:
        names = ", ".join(g.name for g in test.graders) or "none"
        raise NotFoundError(
            f"test {test.id!r} has no grader {grader!r} (its graders: {names}) and there is no "
            f"{GRADER_DIR}/{grader}.* above {Path.cwd()}"
        ) from None
    return CodeGraderSpec(name=grader, command=grader_command(script), script=str(script), cwd=str(Path.cwd()))


def _as_replayed(store: Any, run_id: str, suite: EvalSuite, test: EvalTest) -> tuple[EvalSuite, EvalTest]:
    """The suite and test ``evalstore replay RUN`` with no options grades with (RUN's eval snapshot and,
    for a replay, the eval, converter and prompt swaps of it and the replays it descends from), or the
    test case RUN recorded (``suite``, ``test``) when RUN has no eval snapshot or its eval no such test."""
    import atexit
    import contextlib

    from evalstore.replay.material import load_run
    from evalstore.replay.regrade import graded_suite

    run = load_run(store, run_id)
    if not any(s.role == "eval" and s.sha256 for s in run.started.eval_snapshot):
        return suite, test
    # Scripts and converters restored from the run's recorded bytes stay until the process ends
    # (`evalstore assert` grades once and exits).
    restored = contextlib.ExitStack()
    atexit.register(restored.close)
    replayed = graded_suite(store, run, restored)
    found = next((t for t in replayed.tests if t.id == test.id), None)
    return (replayed, found) if found is not None else (suite, test)


def _as_messages(value: Any, role: str) -> list[Message]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [Message(role=role, content=value)]
    if isinstance(value, dict):
        return [Message.model_validate(value)]
    if isinstance(value, list):
        return [Message.model_validate(m) if isinstance(m, dict) else Message(role=role, content=str(m)) for m in value]
    return [Message(role=role, content=str(value))]


def _answer_transcript(test: EvalTest, output: Any) -> TranscriptInfo:
    text = output if isinstance(output, str) else __import__("json").dumps(output, ensure_ascii=False)
    return TranscriptInfo(messages=[*test.input, Message(role="assistant", content=text)], output_text=text)


def _grade(
    spec: CodeGraderSpec,
    suite: EvalSuite,
    test: EvalTest,
    info: TranscriptInfo,
    recorder: MemoryRecorder,
    *,
    target: str | None = None,
    attempt: int = 1,
    warm: bool = True,
) -> AssertOutcome:
    from evalstore.replay.grading.graders.base import GradeOptions
    from evalstore.replay.grading.graders.code import CodeGrader
    from evalstore.replay.processes.warm import WarmPool

    with WarmPool() if warm else contextlib.nullcontext() as pool:
        ctx = GradingContext(
            suite=suite,
            test=test,
            transcript=info,
            recorder=recorder,
            target=target,
            attempt=attempt,
            options=GradeOptions(warm=pool),
        )
        result = CodeGrader(spec).grade(ctx)
    return AssertOutcome(grader=spec.name, command=list(spec.command), result=result)
