"""Every page of the viewer and its status codes, over HTTP (Starlette's test client), on the quickstart's
store; the same pages on PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from viewer_helpers import quickstart

from evalstore.store import EventStore
from evalstore.viewer import create_app


@pytest.fixture
def opened(quickstart_db: str) -> Iterator[tuple[EventStore, TestClient]]:
    store = EventStore.open(quickstart_db)
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        yield store, client
    store.close()


def _runs(store: EventStore) -> tuple[str, str]:
    recorded, replay = store.run_ids()
    return recorded, replay


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_runs_page_shows_the_lineage_and_filters(opened) -> None:
    store, client = opened
    recorded, replay = _runs(store)
    r = client.get("/runs")
    assert r.status_code == 200
    html = r.text
    # The replay is listed right after the run it regrades, one level deeper, with what it swapped.
    assert html.index(f'data-run="{recorded}"') < html.index(f'data-run="{replay}"')
    assert re.search(rf'<tr class="depth-1" data-run="{replay}"', html)
    assert "revenue-report" in html and "66.7%" not in html.split(recorded)[1].split("</tr>")[0]
    assert f"/runs/{replay}/compare" in html
    # What it changed, in the words `evalstore runs` uses: not its options as escaped JSON.
    row = html.split(f'data-run="{replay}"')[1].split("</tr>")[0]
    assert '<td class="changes">eval report.v2.eval.yaml; preprocessor xlsx</td>' in row
    assert "{" not in row and "&#34;" not in row and "eval_path" not in row
    # A recorded run swapped nothing: its options (its targets file) are not listed as changes.
    recorded_row = html.split(f'data-run="{recorded}"')[1].split("</tr>")[0]
    assert '<td class="changes"></td>' in recorded_row and "targets_file" not in recorded_row
    # Filters: by kind, and by text.
    only_replays = client.get("/runs", params={"kind": "replay"}).text
    assert replay in only_replays and f'data-run="{recorded}"' not in only_replays
    by_text = client.get("/runs", params={"q": replay[-6:]}).text
    assert f'data-run="{replay}"' in by_text and f'data-run="{recorded}"' not in by_text
    assert "No runs match" in client.get("/runs", params={"suite": "no-such-suite"}).text
    assert client.get("/runs", params={"kind": "bogus"}).status_code == 400
    assert client.get("/", follow_redirects=False).headers["location"] == "/runs"


def test_run_page_results_aggregates_and_snapshot(opened) -> None:
    store, client = opened
    recorded, replay = _runs(store)
    r = client.get(f"/runs/{replay}")
    assert r.status_code == 200
    html = r.text
    results = store.query("results", run_id=replay)
    for row in results:
        assert f"/runs/{replay}/tests/{row['test_id']}" in html
    assert f"{len(results)} results" in html
    # Per-grader means agree with the verdicts.
    verdicts = store.query("verdicts", run_id=replay)
    for grader in {v["grader"] for v in verdicts}:
        scores = [v["score"] for v in verdicts if v["grader"] == grader]
        row = html.split(f">{grader}</a></td>")[1].split("</tr>")[0]
        assert f"{sum(scores) / len(scores):.3f}" in row
    # The histogram has one column per bin and counts every result.
    counts = [int(n) for n in re.findall(r'class="count">(\d+)<', html)]
    assert sum(counts) == len(results)
    # Each bin is labelled as the interval it holds; the last is closed, so a score of 1.0 is in it.
    bins = re.findall(r'data-range="([^"]+)"><title>score [^:]+: (\d+) result', html)
    assert [b for b, _ in bins] == [f"[{i / 10:.1f}, {(i + 1) / 10:.1f})" for i in range(9)] + ["[0.9, 1.0]"]
    top = sum(1 for row in results if row["score"] >= 0.9)
    assert int(bins[-1][1]) == top and "0.9–:" not in html
    changes = html.split('<dd id="changes">')[1].split("</dd>")[0]
    assert changes.startswith("eval report.v2.eval.yaml; preprocessor xlsx")  # the CLI's wording
    # The snapshot lists the eval's files, each one a page of its own.
    started = next(store.read_stream(replay, types=["run_started"])).event
    assert started.eval_snapshot
    for f in started.eval_snapshot:
        assert f.path in html
    first = started.eval_snapshot[0]
    page = client.get(f"/runs/{replay}/snapshot/{first.sha256}")
    assert page.status_code == 200 and first.path in page.text
    assert client.get(f"/runs/{replay}/snapshot/{'0' * 64}").status_code == 404
    assert f"/runs/{recorded}" in html  # the parent


def test_run_page_filters_sorts_and_paginates(opened) -> None:
    store, client = opened
    _, replay = _runs(store)
    results = store.query("results", run_id=replay)
    passed = [r for r in results if r["passed"]]
    failing_status = {r["status"] for r in results if not r["passed"]}
    ok = client.get(f"/runs/{replay}", params={"status": "ok"}).text
    assert f"{sum(r['status'] == 'ok' for r in results)} result" in ok
    low = client.get(f"/runs/{replay}", params={"max": "0.5"}).text
    assert f"{sum(r['score'] <= 0.5 for r in results)} result" in low
    verdicts = store.query("verdicts", run_id=replay)
    grader = verdicts[0]["grader"]
    failed_by = {v["test_id"] for v in verdicts if v["grader"] == grader and v["verdict"] == "fail"}
    page = client.get(f"/runs/{replay}", params={"grader": grader, "verdict": "fail"}).text
    assert f"{len(failed_by)} result" in page
    # Sorted by score, descending, across all pages.
    page = client.get(f"/runs/{replay}", params={"sort": "score", "desc": "1"}).text
    shown = re.findall(rf'href="/runs/{replay}/tests/([^"]+)"', page)
    expected = [r["test_id"] for r in sorted(results, key=lambda r: (-r["score"], r["test_id"]), reverse=False)]
    assert [s for s in shown if s in expected][: len(expected)] == sorted(
        expected, key=lambda t: (-next(r["score"] for r in results if r["test_id"] == t), [-ord(c) for c in t])
    )
    # One result per page: three pages, with next/previous links.
    first = client.get(f"/runs/{replay}", params={"per": "1"}).text
    assert f"page 1 of {len(results)}" in first and 'rel="next"' in first
    last = client.get(f"/runs/{replay}", params={"per": "1", "page": str(len(results))}).text
    assert 'rel="prev"' in last and 'rel="next"' not in last
    # Past the last page: no page ("showing 4-3" of an empty one), as the compare page says it.
    past = client.get(f"/runs/{replay}", params={"per": "1", "page": str(len(results) + 1)})
    assert past.status_code == 404 and f"there is no page {len(results) + 1}" in past.text
    assert passed or failing_status  # the quickstart has results of both kinds
    for bad in ({"min": "x"}, {"per": "0"}, {"sort": "evil"}, {"status": "nope"}, {"max": "nan"}):
        assert client.get(f"/runs/{replay}", params=bad).status_code == 400


def test_short_ids_redirect_to_stable_urls(opened) -> None:
    store, client = opened
    _, replay = _runs(store)
    r = client.get("/runs/last", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == f"/runs/{replay}"
    r = client.get(f"/runs/{replay[:-2]}/tests/q1-report", follow_redirects=False)
    assert r.headers["location"] == f"/runs/{replay}/tests/q1-report"
    assert client.get("/runs/no-such-run").status_code == 404
    missing = client.get(f"/runs/{replay}/tests/q1-reprot")
    assert missing.status_code == 404
    # The run's tests are named, as the CLI names them (not "it has no tests").
    assert "has no test &#39;q1-reprot&#39;; its tests: q1-report, q2-report, q3-report" in missing.text
    assert "no tests" not in missing.text
    assert client.get("/nothing/here").status_code == 404
    assert client.post("/runs").status_code == 405


def test_test_page_shows_transcript_artifacts_verdicts_and_processes(opened) -> None:
    store, client = opened
    recorded, replay = _runs(store)
    r = client.get(f"/runs/{replay}/tests/q3-report")
    assert r.status_code == 200
    html = r.text
    # Transcript and artifacts come from the recorded run the replay regraded.
    assert f'recorded by <a href="/runs/{recorded}/tests/q3-report">' in html
    transcript = next(
        e.event for e in store.read_stream(recorded, types=["transcript_recorded"]) if e.event.test_id == "q3-report"
    )
    assert (transcript.output_text or "").split("\n")[0] in _text(html)
    artifacts = [
        e.event for e in store.read_stream(recorded, types=["artifact_stored"]) if e.event.test_id == "q3-report"
    ]
    assert artifacts
    for a in artifacts:
        assert a.path in html
        if a.status == "stored":
            assert f"/runs/{replay}/artifacts/{a.sha256}" in html
    assert 'iframe class="artifact-frame" sandbox=""' in html  # summary.html, framed without scripts
    # Each file as the graders saw it, once per text however many graders saw it (each grader's conversion
    # is an event of its own; the same text is not shown once per grader), with the graders named.
    seen = re.findall(r"as (?:the grader|\d+ graders) saw it \(([^)]*)\): converted", html)
    assert len(seen) == len(artifacts), seen
    assert "states-total, workbook" in seen
    # Every verdict, with its score and assertions; code graders with argv, exit code and stdout.
    for v in store.query("verdicts", run_id=replay, test_id="q3-report"):
        assert f'id="verdict-{v["grader"]}"' in html
    assert "exit code 0" in html and "argv" in html
    assert "digests checked: all match" in html


def test_verify_rehashes_every_digest_on_the_page(opened) -> None:
    store, client = opened
    _, replay = _runs(store)
    html = client.get(f"/runs/{replay}/tests/q3-report", params={"verify": "1"}).text
    rows = re.findall(
        r"<tr class=\"(good|bad)\"><td>[^<]*</td><td><code>([0-9a-f]{64})</code></td><td>(\w+)</td>", html
    )
    assert len(rows) >= 5
    assert {status for _, _, status in rows} == {"ok"}
    # What the page links is what was checked: every artifact digest is among them.
    checked = {d for _, d, _ in rows}
    linked = set(re.findall(r"/artifacts/([0-9a-f]{64})", html))
    assert linked and linked <= checked


def test_artifacts_are_served_as_sandboxed_downloads(opened) -> None:
    store, client = opened
    recorded, replay = _runs(store)
    artifacts = [e.event for e in store.read_stream(recorded, types=["artifact_stored"]) if e.event.status == "stored"]
    html_file = next(a for a in artifacts if a.path.endswith(".html"))
    r = client.get(f"/runs/{replay}/artifacts/{html_file.sha256}")
    assert r.status_code == 200 and r.content == store.get_blob(html_file.sha256)
    assert r.headers["content-disposition"].startswith("attachment")
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-security-policy"].startswith("sandbox")
    view = client.get(f"/runs/{replay}/artifacts/{html_file.sha256}/view")
    assert view.status_code == 200 and view.headers["content-type"].startswith("text/html")
    assert view.headers["content-security-policy"].startswith("sandbox;")
    workbook = next(a for a in artifacts if a.path.endswith(".xlsx"))
    assert client.get(f"/runs/{replay}/artifacts/{workbook.sha256}/view").status_code == 400
    assert client.get(f"/runs/{replay}/artifacts/{'f' * 64}").status_code == 404


def test_compare_page_shows_statistics_chart_and_side_by_side(opened) -> None:
    store, client = opened
    recorded, replay = _runs(store)
    r = client.get(f"/runs/{replay}/compare", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == f"/compare/{recorded}/{replay}"
    html = client.get(f"/compare/{recorded}/{replay}").text
    from evalstore.replay.analysis.compare import compare
    from evalstore.replay.material import load_results

    c = compare(load_results(store, recorded), load_results(store, replay))
    assert f"{c.overall.score.mean_diff:+.3f}" in html
    for g in c.graders:
        assert f"<td>{g.grader}" in html
    changed = [t for t in c.tests if t.delta != 0 or t.flip]
    assert changed, "the quickstart's regrade changes scores"
    bars = re.findall(r'<rect [^>]*class="bar (up|down|same)', html)
    assert len(bars) == len({t.key for t in changed} | {f.row.key for f in c.flipped})
    for t in changed:
        assert f"{t.delta:+.3f}" in html and t.key[0] in html
    assert 'class="side-by-side"' in html
    assert client.get(f"/runs/{recorded}/compare").status_code == 404  # not a replay: nothing to default to
    assert (
        client.get("/compare", params={"a": recorded[:8], "b": "last"}, follow_redirects=False).headers["location"]
        == f"/compare/{recorded}/{replay}"
    )
    assert client.get("/compare").status_code == 400


def test_pages_carry_a_strict_content_security_policy(opened) -> None:
    store, client = opened
    _, replay = _runs(store)
    for url in ("/runs", f"/runs/{replay}", f"/runs/{replay}/tests/q1-report", f"/runs/{replay}/compare"):
        r = client.get(url)
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert "<script>" not in r.text  # only <script src=...> of the viewer's own file
        assert re.findall(r"<script[^>]*>", r.text) == ['<script src="/static/viewer.js" defer>']
        assert " style=" not in r.text and "<style" not in r.text


def test_other_hosts_are_refused(quickstart_db: str) -> None:
    store = EventStore.open(quickstart_db)
    try:
        client = TestClient(create_app(store), base_url="http://attacker.example")
        assert client.get("/runs").status_code == 400
    finally:
        store.close()


def test_the_same_pages_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    quickstart(tmp_path, postgres_url)
    store = EventStore.open(postgres_url)
    try:
        client = TestClient(create_app(store), base_url="http://127.0.0.1")
        _, replay = _runs(store)
        assert replay in client.get("/runs").text
        html = client.get(f"/runs/{replay}", params={"sort": "score", "max": "1"}).text
        assert "3 results" in html
        counts = [int(n) for n in re.findall(r'class="count">(\d+)<', html)]
        assert sum(counts) == 3
        assert client.get(f"/runs/{replay}/tests/q3-report", params={"verify": "1"}).status_code == 200
        assert "McNemar" in client.get(f"/runs/{replay}/compare").text
    finally:
        store.close()


def test_view_refuses_a_store_that_is_not_there(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from evalstore.cli import main

    missing = tmp_path / "nothing.db"
    result = CliRunner().invoke(main, ["--db", f"sqlite:///{missing}", "view"])
    assert result.exit_code == 2 and f"Error: no store at {missing}" in result.output
    assert not missing.exists()  # read-only: nothing was created


def test_a_graders_mean_leaves_out_the_verdicts_that_failed_to_run(tmp_path: Path) -> None:
    """The run page's Graders table averaged a grader's execution errors (recorded as 0, skip) into its mean,
    which the tests' own scores leave out: two real verdicts 0.8 and 0.6 and one error read 0.467, not 0.7.
    The counts still show every verdict; a grader whose verdicts all failed has no mean."""
    from evalstore.replay.analysis.browse import grader_means
    from evalstore.store.events import RunCompleted, RunStarted, TestScored, VerdictRecorded

    store = EventStore.open(f"sqlite:///{tmp_path / 'means.db'}")
    events: list = [RunStarted(run_id="r1", kind="recorded", suite="s", tool_version="test")]
    for test_id, score, status in (("a", 0.8, "ok"), ("b", 0.6, "ok"), ("c", 0.0, "execution_error")):
        verdict = "skip" if status == "execution_error" else "pass" if score >= 0.7 else "fail"
        events += [
            VerdictRecorded(
                test_id=test_id, grader="judge", grader_type="llm-grader", score=score, verdict=verdict, status=status
            ),
            VerdictRecorded(
                test_id=test_id,
                grader="broken",
                grader_type="code-grader",
                score=0.0,
                verdict="skip",
                status="execution_error",
            ),
            TestScored(test_id=test_id, score=score, passed=score >= 0.7, status=status, threshold=0.7),
        ]
    store.append("r1", [*events, RunCompleted(tests=3, passed=1, failed=1, errors=1, mean_score=0.7)])

    means = {g.grader: g for g in grader_means(store.grader_counts("r1"))}
    judge, broken = means["judge"], means["broken"]
    assert (judge.verdicts, judge.passed, judge.failed, judge.skipped, judge.errors) == (3, 1, 1, 1, 1)
    assert judge.mean == 0.7
    assert (broken.verdicts, broken.errors, broken.mean) == (3, 3, None)

    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        page = client.get("/runs/r1").text
    table = page[page.index('id="graders"') :]
    table = table[: table.index("</table>")]
    judge_row = re.search(r"<tr><td><a [^>]*>judge</a></td>(.*?)</tr>", table).group(1)
    assert '<td class="num">0.700</td>' in judge_row
    broken_row = re.search(r"<tr><td><a [^>]*>broken</a></td>(.*?)</tr>", table).group(1)
    assert '<td class="num">-</td>' in broken_row
    store.close()


def test_a_failed_answer_says_why_it_has_no_verdicts_and_expected_messages_show_as_messages(tmp_path: Path) -> None:
    """An errored result's test page had a "Verdicts" heading with nothing under it; an expected output of
    chat messages (AgentV's) showed as JSON with literal \\n escapes; every page asked for a favicon (404)."""
    from evalstore.store.events import RunCompleted, RunStarted, TestCaseRecorded, TestScored, TranscriptRecorded

    store = EventStore.open(f"sqlite:///{tmp_path / 'failed.db'}")
    expected = [{"role": "assistant", "content": "def add(a, b):\n    return a + b"}]
    store.append(
        "r1",
        [
            RunStarted(run_id="r1", kind="recorded", suite="s", tool_version="test"),
            TestCaseRecorded(test_id="t", input=[{"role": "user", "content": "add"}], expected_output=expected),
            TranscriptRecorded(test_id="t", messages_sha256=None, status="error", error="the agent crashed: boom"),
            TestScored(test_id="t", score=0.0, passed=False, status="execution_error", threshold=0.8),
            RunCompleted(tests=1, passed=0, failed=0, errors=1, mean_score=0.0),
        ],
    )
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        page = client.get("/runs/r1/tests/t").text
        icon = client.get("/static/favicon.svg")
    store.close()
    assert 'id="no-verdicts-1">No grader graded this result: the answer failed (the agent crashed: boom).' in page
    shown = page[page.index("<h4>expected output</h4>") :]
    assert shown.index('<div class="message role-assistant">') < shown.index("<h4>", 5)
    assert "def add(a, b):\n    return a + b" in shown and "\\n" not in shown[: shown.index("<h4>", 5)]
    assert '<link rel="icon" href="/static/favicon.svg"' in page
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
