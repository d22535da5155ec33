"""``compare A B`` read from the projections prints what the full events give: ``--json`` every field of
``Comparison.to_dict()``, ``--html`` the same page byte for byte; the report decodes full verdicts only
for the tests it details, a chunk at a time."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest
from test_cli_read import _cli, _import

from evalstore.replay.analysis import report_html
from evalstore.replay.analysis.compare import changed_tests, compare
from evalstore.replay.material import load_results, load_scores
from evalstore.store import EventStore, make_engine

MOVED = {1, 2, 4, 30}


@pytest.fixture
def runs(sqlite_url: str, tmp_path: Path) -> tuple[str, str]:
    return _import(sqlite_url, tmp_path, "a", set()), _import(sqlite_url, tmp_path, "b", MOVED)


def test_json_and_html_equal_those_of_the_full_events(sqlite_url: str, runs: tuple[str, str], tmp_path: Path) -> None:
    a, b = runs
    store = EventStore(make_engine(sqlite_url))
    try:
        full_a, full_b = load_results(store, a), load_results(store, b)
        expected = compare(full_a, full_b, test_id="case-002")
        page = report_html.render_html(expected, full_a, full_b, title=f"{a} vs {b}")
    finally:
        store.close()

    printed = _cli(sqlite_url, "compare", a, b, "--json", "--test", "case-002")
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.stdout) == expected.to_dict()  # every field, not_regradable included
    assert "not_regradable" in json.loads(printed.stdout)

    report = tmp_path / "report.html"
    written = _cli(sqlite_url, "compare", a, b, "--test", "case-002", "--html", str(report))
    assert written.exit_code == 0, written.output
    # Every test is listed (62 < MAX_EVERY) with its assertions: each of them was read whole.
    assert report.read_text(encoding="utf-8") == page
    assert "names the cause of case 61" in page
    assert gc.get_freeze_count() == 0 and gc.isenabled()  # the command leaves the collector as it was


def test_html_decodes_only_the_verdicts_it_details(
    sqlite_url: str, runs: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report_html, "MAX_CHANGED", 3)
    monkeypatch.setattr(report_html, "MAX_EVERY", 5)
    a, b = runs
    store = EventStore(make_engine(sqlite_url))
    try:
        light_a, light_b = load_scores(store, a), load_scores(store, b)
        asked: list[list] = []
        for light in (light_a, light_b):
            read = light.details
            assert read is not None
            light.details = lambda keys, read=read: asked.append(list(keys)) or read(keys)  # type: ignore[misc]
        comparison = compare(light_a, light_b)
        assert asked == []  # pairing reads no event
        page = report_html.render_html(comparison, light_a, light_b, title="t")
        full_a, full_b = load_results(store, a), load_results(store, b)
        assert page == report_html.render_html(comparison, full_a, full_b, title="t")
    finally:
        store.close()
    changed = [t.row.key for t in changed_tests(comparison, light_a, light_b)]
    assert len(changed) == len(MOVED)
    detailed = set(changed[:3]) | {r.key for r in comparison.tests[:5]}
    assert {k for keys in asked for k in keys} == detailed
    assert len(detailed) < len(comparison.tests)


def test_an_html_report_cut_short_leaves_the_one_before(
    sqlite_url: str, runs: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = runs
    report = tmp_path / "report.html"
    report.write_text("the report of yesterday", encoding="utf-8")

    def cut_short(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        yield "<!doctype html><p>half a page"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report_html, "iter_html", cut_short)
    written = _cli(sqlite_url, "compare", a, b, "--html", str(report))
    assert written.exit_code == 2 and "No space left on device" in written.stderr, written.output
    assert report.read_text(encoding="utf-8") == "the report of yesterday"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".report")) == []
