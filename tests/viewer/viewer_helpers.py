"""Stores for the viewer tests: the quickstart's (made by the real command, once per session) and a run
full of hostile content, built event by event."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

EVALSTORE = Path(sys.executable).parent / "evalstore"
CLEAN_ENV = ("EVALSTORE_JUDGE_BASE_URL", "EVALSTORE_JUDGE_MODEL", "EVALSTORE_JUDGE_API_KEY_ENV", "EVALSTORE_DB")


def quickstart(cwd: Path, db: str | None = None) -> str:
    """Run ``evalstore quickstart`` in ``cwd`` (on ``db`` when given); returns the store's URL."""
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    args = [str(EVALSTORE), *(["--db", db] if db else []), "quickstart"]
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert " view --open" in done.stdout  # the quickstart ends by naming the viewer (with --db when given)
    return db or f"sqlite:///{cwd / '.evalstore' / 'evalstore.db'}"


@pytest.fixture(scope="session")
def quickstart_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return quickstart(tmp_path_factory.mktemp("quickstart"))


@dataclass
class Hostile:
    url: str
    run_id: str
    test_id: str
    digests: dict[str, str]


SCRIPT = "<script>alert('owned')</script>"
HTML_FILE = b"<html><body><h1>report</h1><script>parent.document.title='owned'</script><a href=\"javascript:alert(1)\">x</a></body></html>"
SVG_FILE = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script><circle r="5"/></svg>'
BIG = 50 * 1024 * 1024


@pytest.fixture(scope="session")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    """A recorded run whose every string is an attack: the answer, the messages, the files the agent
    wrote (HTML and SVG with scripts, a 50 MB file), the judge's evidence, a test id with markup."""
    from evalstore.store import EventStore
    from evalstore.store.codec import sha256_hex
    from evalstore.store.events import (
        ArtifactStored,
        Assertion,
        RunCompleted,
        RunStarted,
        TestCaseRecorded,
        TestScored,
        TranscriptRecorded,
        VerdictRecorded,
    )

    url = f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'store.db'}"
    store = EventStore.open(url)
    run_id = "rec-20260101T000000-hostile"
    test_id = 'evil"><img src=x onerror=alert(1)>'
    big = b"A" * BIG
    messages = (
        b'[{"role":"user","content":"' + SCRIPT.encode() + b'"},'
        b'{"role":"assistant","content":[{"type":"text","text":"[click](javascript:alert(1)) '
        + SCRIPT.encode()
        + b'"}],"tool_calls":[{"tool":"<b>sh</b>","input":{"cmd":"'
        + SCRIPT.encode()
        + b'"}}]}]'
    )
    files = {"report.html": HTML_FILE, "chart.svg": SVG_FILE, "big.txt": big, "messages": messages}
    digests = {name: sha256_hex(data) for name, data in files.items()}
    media = {"report.html": "text/html", "chart.svg": "image/svg+xml", "big.txt": "text/plain"}
    events = [
        RunStarted(run_id=run_id, kind="recorded", suite="<i>suite</i>", target_name=SCRIPT, tool_version="test"),
        TestCaseRecorded(test_id=test_id, input=[{"role": "user", "content": SCRIPT}], criteria=SCRIPT),
        TranscriptRecorded(test_id=test_id, messages_sha256=digests["messages"], output_text=SCRIPT),
        *[
            ArtifactStored(
                test_id=test_id, path=name, media_type=media[name], sha256=digests[name], size=len(files[name])
            )
            for name in media
        ],
        VerdictRecorded(
            test_id=test_id,
            grader="<script>g</script>",
            grader_type="llm-grader",
            score=0.25,
            verdict="fail",
            assertions=[Assertion(text=SCRIPT, passed=False, evidence='<a href="javascript:alert(1)">see</a>')],
            evidence=[SCRIPT],
        ),
        TestScored(test_id=test_id, score=0.25, passed=False, status="quality_failure", threshold=0.5, error=SCRIPT),
        RunCompleted(tests=1, passed=0, failed=1, errors=0, mean_score=0.25),
    ]
    store.append(run_id, events, blobs={digests[n]: d for n, d in files.items()})
    store.close()
    yield Hostile(url, run_id, test_id, digests)
