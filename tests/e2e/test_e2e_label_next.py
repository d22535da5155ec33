"""``evalstore label RUN --next``: the interactive labelling loop, driven as a user drives it.

The store is the quickstart's (a recorded run whose answers are an .xlsx and an .html file, and a replay
that converts the workbook). The loop runs as the installed console script in a real subprocess: once with
answers piped on stdin, once on a pseudo-terminal where each answer is typed after its prompt appears.
What was recorded is read back with ``labels RUN --json``; what was shown is the process's output.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pytest
from e2e_helpers import EVALSTORE, SUBPROCESS_TIMEOUT

PROMPT = "pass, fail, skip or quit?"
VERDICT_WORDS = ("Run's verdicts", "names-files", "states-total", "workbook pass", "workbook fail")


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A folder with the quickstart's store, and the ids of its recorded run and replay."""
    cwd = tmp_path_factory.mktemp("label-next")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("EVALSTORE_") or k == "EVALSTORE_CEILING_DIRECTORIES"
    }
    done = subprocess.run(
        [str(EVALSTORE), "quickstart"], cwd=cwd, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    runs = json.loads(_run(cwd, "runs", "--json").stdout)
    return cwd, {r["kind"]: r["run_id"] for r in runs}


def _env() -> dict[str, str]:
    return {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith("EVALSTORE_") or k == "EVALSTORE_CEILING_DIRECTORIES"
        },
        "COLUMNS": "120",
    }


def _run(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EVALSTORE), *args],
        cwd=cwd,
        env=_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )


def _labels(cwd: Path, run: str, by: str) -> dict[str, dict]:
    listed = json.loads(_run(cwd, "labels", run, "--json").stdout)
    return {lab["test_id"]: lab for lab in listed if lab["by"] == by}


def _shown(out: str) -> list[str]:
    """The tests the loop showed, in order (from its ``[i/n] test@target`` headers)."""
    return re.findall(r"^\[\d+/\d+\] ([^@\s]+)", out, flags=re.MULTILINE)


def test_piped_answers_are_recorded_in_order_and_a_second_session_continues(
    quickstart: tuple[Path, dict[str, str]],
) -> None:
    cwd, runs = quickstart
    first = _run(cwd, "label", runs["replay"], "--next", "--by", "ann", stdin="p\nmaybe\nf West is zero\nq\n")
    assert first.returncode == 0, first.stderr
    out = first.stdout
    assert "1 of 3" not in out and "3 of 3 test(s) to go" in out and "verdicts hidden" in out
    # The answer as the graders of the replay saw it: the workbook converted to CSV, the HTML to Markdown.
    assert "[[ file: revenue.xlsx ]]" in out and "Region,Revenue" in out
    assert "[[ file: summary.html ]]" in out and "Total revenue: **" in out
    assert "Write the Q1 revenue report" in out
    # Blind: no verdict, no grader result anywhere in what was shown.
    for word in VERDICT_WORDS:
        assert word not in out
    assert "answer p, f, s or q" in out  # `maybe` was asked again
    shown = _shown(out)
    assert shown == ["q1-report", "q2-report", "q3-report"]
    assert "labelled 2, skipped 0; 1 left for ann" in out
    assert f"continue with: evalstore label {runs['replay']} --next --by ann" in out

    got = _labels(cwd, runs["recorded"], "ann")
    assert {t: (lab["verdict"], lab["note"]) for t, lab in got.items()} == {
        "q1-report": ("pass", None),
        "q2-report": ("fail", "West is zero"),
    }
    # The labels belong to the recorded run (the transcripts), given on its replay.
    assert {lab["run"] for lab in got.values()} == {runs["recorded"]}

    second = _run(cwd, "label", runs["recorded"], "--next", "--by", "ann", stdin="s\n")
    assert second.returncode == 0, second.stderr
    assert "1 of 3 test(s) to go" in second.stdout and _shown(second.stdout) == ["q3-report"]
    assert "labelled 0, skipped 1; 1 left for ann" in second.stdout
    # The recorded run had no workbook converter: its graders saw a warning line, and so does the labeller.
    assert "[file preprocessing warning] revenue.xlsx" in second.stdout
    # End of input is a quit, not an error; someone else starts from the beginning.
    other = _run(cwd, "label", runs["recorded"], "--next", "--by", "bea", stdin="")
    assert other.returncode == 0 and "3 of 3 test(s) to go" in other.stdout and "labelled 0" in other.stdout
    assert _labels(cwd, runs["recorded"], "bea") == {}


def test_bad_combinations_are_usage_errors(quickstart: tuple[Path, dict[str, str]]) -> None:
    cwd, runs = quickstart
    r = _run(cwd, "label", runs["recorded"], "q1-report", "--next")
    assert r.returncode == 2 and r.stderr.splitlines()[-1].startswith("Error: --next labels the run's tests in turn")
    r = _run(cwd, "label", runs["recorded"], "--next", "--pass")
    assert r.returncode == 2 and "do not go with it" in r.stderr
    r = _run(cwd, "label", runs["recorded"])
    assert r.returncode == 2 and "give TEST" in r.stderr


class Terminal:
    """A child process on a pseudo-terminal: read what it prints, type answers."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.fd, child = pty.openpty()
        self.proc = subprocess.Popen(argv, cwd=cwd, env=_env(), stdin=child, stdout=child, stderr=child, close_fds=True)
        os.close(child)
        self.seen = ""

    def expect(self, text: str, timeout: float = 30.0) -> str:
        """Read until ``text`` has appeared (after what earlier calls consumed); return what was read."""
        deadline = time.monotonic() + timeout
        start = len(self.seen)
        while text not in self.seen[start:]:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{text!r} did not appear; the terminal shows:\n{self.seen[start:]}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"{text!r} did not appear before the end:\n{self.seen[start:]}")
                self.seen += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        return self.seen[start:]

    def type(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())

    def close(self) -> int:
        code = self.proc.wait(timeout=SUBPROCESS_TIMEOUT)
        os.close(self.fd)
        return code


def test_on_a_terminal_with_verdicts_shown(quickstart: tuple[Path, dict[str, str]]) -> None:
    cwd, runs = quickstart
    term = Terminal([str(EVALSTORE), "label", runs["replay"], "--next", "--by", "cy", "--show-verdict"], cwd)
    try:
        page = term.expect(PROMPT)
        assert "[1/3] q1-report" in page and "Run's verdicts: " in page and "workbook pass" in page
        assert "verdicts hidden" not in page
        term.type("f wrong region order")
        page = term.expect(PROMPT)
        assert "recorded fail (wrong region order)" in page and "[2/3] q2-report" in page
        term.type("q")
        term.expect("left for cy")
    finally:
        code = term.close()
    assert code == 0
    got = _labels(cwd, runs["recorded"], "cy")
    assert {t: (lab["verdict"], lab["note"]) for t, lab in got.items()} == {"q1-report": ("fail", "wrong region order")}
