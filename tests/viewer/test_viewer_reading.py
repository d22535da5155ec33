"""The viewer read by a person, in headless Chromium, on the store the README's screenshots are made from
(``screenshots.py``: the examples copied out, the quickstart run from the copy with a local judge, in a
neutral folder): judge prompts as role blocks, collapsed, and a line diff on the compare page; a converted
file shown once with the graders that saw it; histogram bins as intervals; a replay's changes in the
CLI's words; a 404 that lists the run's tests; no folder of the machine on any page; and no page wider
than a phone.

Skipped, with the reason shown, where no Chromium and chromedriver are installed (``.ci/run`` installs them).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import screenshots
from test_viewer_browser import CHROMEDRIVER, CHROMIUM

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="no Chromium/chromedriver: apt-get install chromium chromium-driver (as .ci/run does)",
)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str, str]]:
    """(viewer URL, recorded run, replay, the demo folder), served for the module."""
    folder = tmp_path_factory.mktemp("neutral") / "evalstore-demo"
    judge = screenshots.judge()
    try:
        db, recorded, replay = screenshots.build(folder, judge.base_url)
    finally:
        judge.stop()
    with screenshots.served(db) as base:
        yield base, recorded, replay, str(folder)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with screenshots.chromium() as driver:
        yield driver


def _open(driver, url: str, width: int = 1280) -> None:  # type: ignore[no-untyped-def]
    driver.set_window_size(width, 1000)
    driver.get(url)


def test_judge_prompts_are_role_blocks_collapsed_and_each_converted_text_is_shown_once(demo, browser) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    base, _, replay, _ = demo
    _open(browser, f"{base}/runs/{replay}/tests/q3-report")
    prompts = browser.find_elements(By.CSS_SELECTOR, "#verdict-report-quality details.prompt")
    assert prompts and all(d.get_attribute("open") is None for d in prompts)  # collapsed by default
    summary = prompts[0].find_element(By.TAG_NAME, "summary").text
    assert "2 messages: system, user" in summary
    page = browser.find_element(By.TAG_NAME, "body").text
    assert '[{"content"' not in page and '\\"score\\"' not in browser.page_source
    prompts[0].find_element(By.TAG_NAME, "summary").click()
    roles = [r.text for r in prompts[0].find_elements(By.CSS_SELECTOR, ".message .role")]
    assert roles == ["SYSTEM", "USER"]  # role labels (upper-cased by the style sheet)
    user = prompts[0].find_elements(By.CSS_SELECTOR, ".message.role-user pre")[0].text
    assert user.startswith("You are a strict auditor") and "\n" in user  # its text, lines and all
    # One conversion per file and text, naming every grader that read it.
    for artifact in browser.find_elements(By.CSS_SELECTOR, "div.artifact"):
        seen = artifact.find_elements(By.CSS_SELECTOR, "details.conversion")
        assert len(seen) == 1
        assert re.match(r"as 3 graders saw it \(states-total, workbook, report-quality\)", seen[0].text)


def test_the_compare_page_diffs_prompt_a_against_prompt_b(demo, browser) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    base, recorded, replay, _ = demo
    _open(browser, f"{base}/compare/{recorded}/{replay}")
    diffs = browser.find_elements(By.CSS_SELECTOR, "details.prompt-diff")
    assert len(diffs) == 3 and all(d.get_attribute("open") is None for d in diffs)  # one per changed test
    assert "judge prompt of report-quality: A → B" in diffs[0].text
    diffs[0].find_element(By.TAG_NAME, "summary").click()
    removed = [s.text for s in diffs[0].find_elements(By.CSS_SELECTOR, "span.ddel")]
    added = [s.text for s in diffs[0].find_elements(By.CSS_SELECTOR, "span.dadd")]
    assert any("You are grading a revenue report" in line for line in removed)
    assert any("You are a strict auditor" in line for line in added)
    # The unchanged prompt lines are context, not repeated as removed and added.
    assert not set(removed) & set(added)
    assert '[{"content"' not in browser.find_element(By.TAG_NAME, "body").text


def test_histogram_bins_are_intervals_and_a_replays_changes_are_the_clis_words(demo, browser) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By

    base, recorded, replay, _ = demo
    _open(browser, f"{base}/runs/{replay}")
    bins = browser.find_elements(By.CSS_SELECTOR, "#histogram g.bin")
    ranges = [b.get_attribute("data-range") for b in bins]
    assert ranges[0] == "[0.0, 0.1)" and ranges[-1] == "[0.9, 1.0]"
    ticks = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#histogram text.tick")]
    assert ticks[0] == "0.0" and ticks[-1] == "1.0" and len(ticks) == 11
    changes = browser.find_element(By.ID, "changes").text
    assert "preprocessor xlsx; prompt report-quality" in changes and "{" not in changes.split("options")[0]
    _open(browser, f"{base}/runs")
    row = browser.find_element(By.CSS_SELECTOR, f'tr[data-run="{replay}"] td.changes').text
    assert row == "preprocessor xlsx; prompt report-quality"
    assert browser.find_element(By.CSS_SELECTOR, f'tr[data-run="{recorded}"] td.changes').text == ""


def test_an_unknown_test_lists_the_runs_tests(demo, browser) -> None:  # type: ignore[no-untyped-def]
    base, _, replay, _ = demo
    _open(browser, f"{base}/runs/{replay}/tests/q9-report")
    text = browser.find_element("tag name", "body").text
    assert "has no test 'q9-report'; its tests: q1-report, q2-report, q3-report" in text


def test_no_page_names_the_checkout_it_was_made_from(demo, browser) -> None:  # type: ignore[no-untyped-def]
    """The screenshots' store names the neutral folder only: the examples ran from their copy there."""
    base, recorded, replay, folder = demo
    for path in (f"/runs/{replay}", f"/runs/{replay}/tests/q3-report", f"/compare/{recorded}/{replay}"):
        _open(browser, base + path)
        source = browser.page_source
        assert str(REPO) not in source, path
        assert folder in source or path.startswith("/compare"), path


@pytest.mark.parametrize("page", ["run", "test", "compare"])
def test_pages_fit_a_phone(demo, browser, page: str) -> None:  # type: ignore[no-untyped-def]
    """At 390 px no page is wider than the window: wide tables scroll inside it."""
    base, recorded, replay, _ = demo
    path = {
        "run": f"/runs/{replay}",
        "test": f"/runs/{replay}/tests/q3-report",
        "compare": f"/compare/{recorded}/{replay}",
    }[page]
    _open(browser, base + path, width=390)
    inner = browser.execute_script("return window.innerWidth")
    wide = browser.execute_script("return document.documentElement.scrollWidth")
    assert wide <= inner, f"{page} page is {wide} px wide in a {inner} px window"
