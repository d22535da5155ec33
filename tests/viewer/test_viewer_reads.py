"""The viewer's read models that stay fast on large runs give what the whole-run reads give: a test page
reads only its test's events (``load_test`` against ``load_run``), and the compare page's statistics come
from the projections (``compare_stats`` against ``evalstore compare``'s ``compare(load_results(...))``),
on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from evalstore.replay.agentv.importing import import_results
from evalstore.replay.analysis import browse
from evalstore.replay.analysis.compare import compare
from evalstore.replay.material import load_results, load_run
from evalstore.store import EventStore
from evalstore.viewer import create_app

GRADERS = (("exact", "code-grader", 1), ("rubric", "rubrics", 4), ("judge", "llm-grader", 100))


def _row(test_id: str, scores: dict[str, float], *, skip: str | None = None, metadata: dict | None = None) -> dict:
    entries = []
    for name, kind, _ in GRADERS:
        if name not in scores:
            continue
        verdict = "skip" if name == skip else ("pass" if scores[name] >= 0.8 else "fail")
        entries.append(
            {
                "name": name,
                "type": kind,
                "score": scores[name],
                "weight": 1,
                "verdict": verdict,
                "assertions": [{"text": f"{name} check", "passed": verdict == "pass"}],
            }
        )
    score = round(sum(scores.values()) / len(scores), 6)
    row = {
        "timestamp": "2026-03-01T00:00:00.000Z",
        "test_id": test_id,
        "suite": "viewer-reads",
        "score": score,
        "target": "default",
        "execution_status": "ok" if score >= 0.8 else "quality_failure",
        "scores": entries,
    }
    if metadata:
        row["metadata"] = metadata
    return row


def _two_runs(store: EventStore, tmp_path: Path, n: int, seed: int = 0) -> tuple[str, str]:
    """Run B is run A regraded (a quarter of the verdicts moved), with tests only in A, tests only in B,
    a grader only in B on some tests, and skipped verdicts."""
    rng = random.Random(seed)
    rows_a, rows_b = [], []
    for i in range(n):
        a = {name: rng.randint(0, levels) / levels for name, _, levels in GRADERS}
        b = {k: (rng.randint(0, lv) / lv if rng.random() < 0.25 else v) for (k, _, lv), v in zip(GRADERS, a.values())}
        if i % 17 == 0:
            a.pop("judge")  # judge only in B here
        test_id = f"t-{i}"  # t-1 is a prefix of t-10, t-100, ...
        rows_a.append(_row(test_id, a, skip="rubric" if i % 23 == 0 else None))
        rows_b.append(_row(test_id, b, skip="exact" if i % 29 == 0 else None))
    rows_a += [_row(f"only-a-{i}", {"exact": 1.0}) for i in range(3)]
    rows_b += [_row(f"only-b-{i}", {"exact": 0.0}) for i in range(2)]
    runs = []
    for name, rows in (("a", rows_a), ("b", rows_b)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        runs.append(import_results(store, path).run_id)
    return runs[0], runs[1]


@pytest.mark.parametrize("n", [60, 700])  # below and above the pair count where the bootstrap's draws depend on order
def test_compare_stats_are_evalstore_compares(store: EventStore, tmp_path: Path, n: int) -> None:
    run_a, run_b = _two_runs(store, tmp_path, n)
    expected = compare(load_results(store, run_a), load_results(store, run_b))
    got = browse.compare_stats(store, run_a, run_b)
    assert got.overall.to_dict() == expected.overall.to_dict()
    assert [g.to_dict() for g in got.graders] == [g.to_dict() for g in expected.graders]
    assert {g.grader: g.only_in_b for g in got.graders}["judge"] > 0  # the grader-only-in-B pairs were counted
    assert sum(g.skipped for g in got.graders) > 0
    assert got.paired == len(expected.tests) == n
    assert (got.only_in_a, got.only_in_a_total) == (expected.only_in_a, 3)
    assert (got.only_in_b, got.only_in_b_total) == (expected.only_in_b, 2)
    flipped = {f.row.key for f in expected.flipped}
    changed = [t for t in expected.tests if t.delta != 0 or t.key in flipped]
    assert {t.key for t in got.changed} == {t.key for t in changed}
    ranks = [(t.flip is None, t.key not in flipped, -abs(t.delta)) for t in got.changed]
    assert ranks == sorted(ranks)  # flips first, then grader-only flips, then the largest changes


def test_compare_pages_through_changed_tests(store: EventStore, tmp_path: Path) -> None:
    run_a, run_b = _two_runs(store, tmp_path, 300)
    stats = browse.compare_stats(store, run_a, run_b)
    per = browse.CHANGED_PER_PAGE
    pages = -(-len(stats.changed) // per)
    assert pages >= 3
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    url = f"/compare/{run_a}/{run_b}"
    seen = []
    for page in range(1, pages + 1):
        html = client.get(url, params={"page": page}).text
        ids = [int(i) for i in re.findall(r'<section class="changed" id="t-(\d+)"', html)]
        assert ids == list(range((page - 1) * per, min(page * per, len(stats.changed))))
        assert len(re.findall(r'<rect [^>]*class="bar ', html)) == len(ids)  # the chart shows this page's tests
        assert f"page {page} of {pages}" in html
        for rank in ids:
            key = stats.changed[rank].key
            section = html.split(f'id="t-{rank}"')[1].split("</section>")[0]
            assert f"{key[0]}@default" in section and section.count("<tr><td>") >= 1
            seen.append(key)
    assert seen == [t.key for t in stats.changed]
    assert client.get(url, params={"page": pages + 1}).status_code == 404
    assert client.get(url, params={"page": 0}).status_code == 400
    assert (
        client.get(f"/compare/{run_a[:10]}/{run_b}?page=2", follow_redirects=False)
        .headers["location"]
        .endswith("?page=2")
    )


def test_a_test_page_reads_what_the_whole_run_holds_for_that_test(store: EventStore, tmp_path: Path) -> None:
    rows = [_row(f"t-{i}", {"exact": 1.0, "rubric": 0.5}) for i in range(12)]
    # Another test's payload names t-1 as a JSON field of its own: it must not be taken for t-1's.
    rows.append(_row("t-decoy", {"exact": 0.0}, metadata={"test_id": "t-1"}))
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_id = import_results(store, path).run_id
    whole = load_run(store, run_id)
    for test_id in ("t-1", "t-10", "t-decoy"):
        one = browse.load_test(store, run_id, test_id)
        assert one.started == whole.started
        assert one.tests == {k: m for k, m in whole.tests.items() if k[0] == test_id}
        assert len(one.tests) == 1
    decoy = next(m for k, m in whole.tests.items() if k[0] == "t-decoy")
    assert decoy.case and '"test_id":"t-1"' in json.dumps(decoy.case[1].metadata, separators=(",", ":"))
    assert browse.load_test(store, run_id, "t-nope").tests == {}
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    assert client.get(f"/runs/{run_id}/tests/t-1").status_code == 200
    assert client.get(f"/runs/{run_id}/tests/t-nope").status_code == 404
