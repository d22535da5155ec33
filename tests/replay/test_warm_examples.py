"""Every Python code grader and converter of the examples and fixtures prints the same bytes warm as spawned.

The graders and converters are found by loading every eval file under ``examples/`` and ``tests/fixtures/``
(those that load), in a copy of both trees (a grader may write beside itself, and ``uv run`` makes a
project's environment and lock where it runs), with ``uv`` offline; each is run through the code grader a replay uses, on one answer with three files
(xlsx, html, docx, which the converters turn into text), once with every process spawned and once forked
from warm interpreters. What each process printed (stdout, stderr), its exit code and what was made of
it are compared.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from fixture_paths import REPO
from test_example_converters import DOCX, HTML, make_docx, make_workbook

from evalstore.replay.content import FileBlock, Message, TextBlock
from evalstore.replay.errors import ReplayError
from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.evalfile.specs import CodeGraderSpec, EvalSuite, EvalTest
from evalstore.replay.grading.graders.base import GradeOptions, GradingContext, TranscriptInfo
from evalstore.replay.grading.graders.code import CodeGrader
from evalstore.replay.processes.warm import WarmPool, available, python_command
from evalstore.replay.recording import MemoryRecorder
from evalstore.store.events import GraderCalled, PreprocessingRecorded

pytestmark = pytest.mark.skipif(not available(), reason="warm interpreters need fork and pidfd_open (Linux)")


def _graders(spec: Any) -> list[Any]:
    found = [spec]
    for attr in ("graders", "assertions"):
        for sub in getattr(spec, attr, None) or []:
            found += _graders(sub)
    return found


def python_graders(root: Path = REPO) -> list[tuple[EvalSuite, EvalTest, CodeGraderSpec]]:
    """One (suite, test, grader) per distinct Python code grader (command and cwd) of every eval file
    under examples/ and tests/fixtures/ of ``root`` that loads."""
    seen: dict[tuple[tuple[str, ...], str], tuple[EvalSuite, EvalTest, CodeGraderSpec]] = {}
    paths = sorted([*(root / "examples").rglob("*.y*ml"), *(root / "tests" / "fixtures").rglob("*.y*ml")])
    for path in paths:
        if "eval" not in path.name.lower():
            continue
        try:
            suite = load_eval(path)
        except (ReplayError, ValueError, OSError):
            continue  # not an eval file, or one a test elsewhere holds to its refusal
        for test in suite.tests:
            for spec in (g for top in test.graders for g in _graders(top)):
                if isinstance(spec, CodeGraderSpec) and python_command(list(spec.command), spec.cwd):
                    seen.setdefault((tuple(spec.command), spec.cwd), (suite, test, spec))
    return list(seen.values())


# uv's own progress lines on stderr. Whether uv says it builds a project depends on how its cache judges
# the project's timestamps (a copy made within the same second is built again), so two calls a moment
# apart differ there: that is uv's bookkeeping, not what the grader printed.
_UV_PROGRESS = re.compile(
    rb"^ *(Building|Built|Resolved|Prepared|Installed|Uninstalled|Audited|Downloading|Downloaded|Using CPython"
    rb"|Creating virtual environment) .*\n?",
    re.MULTILINE,
)


# uv's own failure to sync a project offline (sdk-python's): the grader never ran, and how uv words why
# (which package it names first, which hint it adds) changed from one call to the next, its cache aside.
_UV_OFFLINE = b"network was disabled"


def _without_uv_progress(text: bytes) -> bytes:
    return _UV_PROGRESS.sub(b"", text)


def _grade(suite: EvalSuite, test: EvalTest, spec: CodeGraderSpec, ws: Path, warm: WarmPool | None) -> dict:  # type: ignore[type-arg]
    recorder = MemoryRecorder()
    ctx = GradingContext(
        suite=suite,
        test=test,
        transcript=TranscriptInfo(
            messages=[
                *test.input,
                Message(
                    role="assistant",
                    content=[
                        TextBlock(text="Revenue was 42 units. The total is 2,880."),
                        FileBlock(media_type="xlsx", path="report.xlsx"),
                        FileBlock(media_type="text/html", path="summary.html"),
                        FileBlock(media_type=DOCX, path="notes.docx"),
                    ],
                ),
            ],
            workspace_path=str(ws),
        ),
        recorder=recorder,
        options=GradeOptions(warm=warm),
    )
    result = CodeGrader(spec).grade(ctx)
    uv = spec.command[0] == "uv"

    def blob(sha: str) -> bytes:
        data = recorder.get_blob(sha)
        return _without_uv_progress(data) if uv else data

    assertions = [a.model_dump() for a in result.assertions]
    for a in assertions:
        if uv and a.get("evidence"):
            a["evidence"] = _without_uv_progress(a["evidence"].encode()).decode()
    calls = [
        (e.exit_code, e.outcome, blob(e.reply_sha256 or ""), blob(e.stderr_sha256) if e.stderr_sha256 else b"")
        for _, e in recorder.events
        if isinstance(e, GraderCalled) and e.call == "process"
    ]
    if uv and any(_UV_OFFLINE in stderr for *_, stderr in calls):
        # uv failed before the grader ran: what is compared is that it failed, and how the grade says so.
        calls = [(code, outcome, b"", b"uv could not sync offline") for code, outcome, *_ in calls]
        assertions = [{**a, "evidence": "uv could not sync offline"} for a in assertions]
    conversions = [
        (e.path, e.status, e.output_sha256, e.stderr, e.reason)
        for _, e in recorder.events
        if isinstance(e, PreprocessingRecorded)
    ]
    return {
        "calls": calls,
        "conversions": conversions,
        "score": result.score,
        "status": result.status,
        "assertions": assertions,
    }


def test_every_python_grader_and_converter_prints_the_same_bytes_warm_as_spawned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "examples", copy / "examples")
    shutil.copytree(REPO / "tests" / "fixtures", copy / "tests" / "fixtures")
    monkeypatch.setenv("UV_OFFLINE", "1")  # no network at run time: a project uv cannot sync fails alike both ways
    # A cache of this test's own: with the shared one, a `uv run` of another test (another xdist worker)
    # filling it between the spawned and the warm call changed which error uv printed.
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    graders = python_graders(copy)
    ws = tmp_path / "ws"
    ws.mkdir()
    make_workbook(ws / "report.xlsx")
    (ws / "summary.html").write_text(HTML)
    make_docx(ws / "notes.docx")
    ran = converted = plain = 0
    with WarmPool() as pool:
        for suite, test, spec in graders:
            if spec.command[0] == "uv":
                # The first `uv run` in a project may sync it and say so on stderr (here: after pip
                # installed evalstore over uv's install): a one-off of uv's, not the grader's output.
                _grade(suite, test, spec, ws, None)
            spawned = _grade(suite, test, spec, ws, None)
            warm = _grade(suite, test, spec, ws, pool)
            assert warm == spawned, f"{spec.command} ({suite.path})"
            ran += len(spawned["calls"])
            if spec.command[0] != "uv":
                plain += len(spawned["calls"])
            converted += sum(1 for c in spawned["conversions"] if c[1] == "converted")
        forked = pool.forked
    names = {Path(s.command[-1]).name for _, _, s in graders}
    # The examples' own graders and the AgentV examples' uv-run ones are among them.
    assert {"check_report.py", "run_tests.py", "check_workbook.py", "check_python_keywords.py"} <= names, names
    assert ran >= 12 and converted >= 3
    assert forked >= plain + converted, "the warm side forked its graders (and converters) rather than spawning them"


def test_the_examples_have_python_graders_run_through_uv() -> None:
    launchers = {python_command(list(s.command), s.cwd).launcher[:2] for _, _, s in python_graders()}  # type: ignore[union-attr]
    assert ("uv", "run") in launchers and any(
        os.path.basename(launcher[0]).startswith("python") for launcher in launchers
    )
