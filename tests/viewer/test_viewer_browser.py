"""The viewer in a real headless browser (Chromium from the distribution, driven by selenium), served by
``evalstore view`` itself: follow a run to a test to a verdict, open a comparison, sort a table, check
that an agent's HTML does not run, and label answers through the page (``--label-as``). Screenshots of the main pages go to a folder the test prints.

Skipped, with the reason shown, where no Chromium and chromedriver are installed (``.ci/run`` installs them).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from viewer_helpers import EVALSTORE, Hostile

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
)

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="no Chromium/chromedriver: apt-get install chromium chromium-driver (as .ci/run does)",
)


@pytest.fixture
def serve() -> Iterator:
    """Start ``evalstore view`` on a store; yields (base URL), stops it after the test."""
    started: list[subprocess.Popen] = []

    def start(db: str, *more: str) -> str:
        env = {k: v for k, v in os.environ.items() if k != "EVALSTORE_DB"}
        proc = subprocess.Popen(
            [str(EVALSTORE), "--db", db, "view", "--port", "0", *more],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        started.append(proc)
        line = proc.stdout.readline() if proc.stdout else ""
        match = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        assert match, (
            f"no URL printed: {line!r} {proc.stderr.read() if proc.poll() is not None and proc.stderr else ''}"
        )
        return match.group(1)

    yield start
    for proc in started:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def browser() -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # type: ignore[assignment]
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
        "--disable-gpu",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("EVALSTORE_VIEW_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nviewer screenshots: {folder}", file=sys.stderr)
    return folder


def _shot(driver, folder: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    driver.set_window_size(1280, max(1000, min(6000, driver.execute_script("return document.body.scrollHeight"))))
    path = folder / f"{name}.png"
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000


def test_follow_a_run_to_a_test_to_a_verdict_and_compare(quickstart_db: str, serve, browser, shots: Path) -> None:
    from selenium.webdriver.common.by import By

    base = serve(quickstart_db)
    browser.get(f"{base}/runs")
    assert browser.title.startswith("Runs")
    rows = browser.find_elements(By.CSS_SELECTOR, "table#runs tbody tr")
    assert len(rows) == 2
    recorded, replay = (r.get_attribute("data-run") for r in rows)
    _shot(browser, shots, "1-runs")

    browser.find_element(By.LINK_TEXT, replay).click()
    assert browser.current_url == f"{base}/runs/{replay}"
    assert browser.find_element(By.ID, "result-count").text.startswith("3 results")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#histogram rect.bar")) == 10
    _shot(browser, shots, "2-run")

    # Sort the results by score (JavaScript, this page): the column ends up ordered, both ways.
    header = browser.find_element(By.XPATH, "//table[@id='results']/thead/tr/th[4]")
    header.click()

    def scores() -> list[float]:
        cells = browser.find_elements(By.CSS_SELECTOR, "table#results tbody tr td:nth-child(4)")
        return [float(c.text) for c in cells]

    assert scores() == sorted(scores()) and header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert scores() == sorted(scores(), reverse=True) and header.get_attribute("aria-sort") == "descending"

    browser.find_element(By.LINK_TEXT, "q3-report").click()
    assert browser.current_url == f"{base}/runs/{replay}/tests/q3-report"
    verdicts = browser.find_elements(By.CSS_SELECTOR, "div.verdict")
    assert verdicts, "no verdicts rendered"
    first = verdicts[0]
    assert re.search(r"score \d\.\d{3}", first.find_element(By.TAG_NAME, "h4").text)
    assert first.find_elements(By.CSS_SELECTOR, "table.assertions tbody tr") or first.find_elements(
        By.CSS_SELECTOR, "div.call"
    )
    # The agent's HTML renders in the sandboxed frame, and its own document cannot script.
    frame = browser.find_element(By.CSS_SELECTOR, "iframe.artifact-frame")
    assert frame.get_attribute("sandbox") == ""
    _shot(browser, shots, "3-test")

    browser.find_element(By.ID, "verify").click()
    assert "verify=1" in browser.current_url
    results = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#verify-result tbody td:nth-child(3)")]
    assert results and set(results) == {"ok"}

    browser.get(f"{base}/runs/{replay}/compare")
    assert browser.current_url == f"{base}/compare/{recorded}/{replay}"
    labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#delta-chart text.label")]
    assert labels and all(label for label in labels)
    assert browser.find_elements(By.CSS_SELECTOR, "table.side-by-side")
    assert "McNemar" in browser.find_element(By.ID, "stats").text
    _shot(browser, shots, "4-compare")


def test_hostile_content_does_not_run(hostile: Hostile, serve, browser, shots: Path) -> None:
    from selenium.webdriver.common.by import By

    base = serve(hostile.url)
    url = f"{base}/runs/{hostile.run_id}/tests/{quote(hostile.test_id, safe='')}"
    browser.get(url)
    title = browser.title
    assert "owned" not in title
    # No alert was raised by any of the markup on the page or in its frames.
    assert browser.execute_script("return typeof window.__owned") == "undefined"
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert "<script>alert('owned')</script>" in browser.find_element(By.ID, "answer").text
    _shot(browser, shots, "5-hostile")
    # The HTML artifact opened directly is a sandboxed document: its script does not run there either.
    browser.get(f"{base}/runs/{hostile.run_id}/artifacts/{hostile.digests['report.html']}/view")
    assert browser.title != "owned"


def _click(driver, element) -> None:  # type: ignore[no-untyped-def]
    """Click a link or a form's button and wait for the next page to replace this one."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    page = driver.find_element("tag name", "html")
    element.click()

    def replaced(_driver) -> bool:  # type: ignore[no-untyped-def]
        # Selenium's staleness_of, but Chromium asked about the old page mid-navigation may also answer
        # "Node with given id does not belong to the document" (a plain WebDriverException): gone as well.
        try:
            page.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return True
            raise
        return False

    WebDriverWait(driver, 20).until(replaced)


def test_label_answers_through_the_page(quickstart_db: str, tmp_path: Path, serve, browser, shots: Path) -> None:
    """With --label-as: start from the run page, label blind (no verdicts shown), see the verdicts after
    labelling, skip one, follow "next unlabelled" to the end; the labels are in the store."""
    import sqlite3

    from selenium.webdriver.common.by import By

    from evalstore.replay.labels import current_labels
    from evalstore.store import EventStore

    source = quickstart_db.removeprefix("sqlite:///")
    copy = tmp_path / "labelled.db"  # a copy: the session's quickstart store stays unlabelled for the other tests
    with sqlite3.connect(source) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    db = f"sqlite:///{copy}"
    store = EventStore.open(db)
    recorded, replay = store.run_ids()
    base = serve(db, "--label-as", "alice")

    browser.get(f"{base}/runs/{replay}")
    assert "labelling as alice" in browser.find_element(By.CSS_SELECTOR, "header.top").text
    _click(browser, browser.find_element(By.ID, "start-labelling"))
    assert browser.current_url == f"{base}/runs/{replay}/tests/q1-report"
    # Blind: the answer is there, its verdicts are not.
    assert browser.find_element(By.ID, "answer").text
    assert not browser.find_elements(By.CSS_SELECTOR, "div.verdict")
    assert "verdict hidden" in browser.find_element(By.CSS_SELECTOR, "#result-1 h2").text
    _shot(browser, shots, "6-label-blind")
    form = browser.find_element(By.ID, "label-1")
    form.find_element(By.NAME, "note").send_keys("the total is right")
    _click(browser, form.find_element(By.CSS_SELECTOR, "button[value=pass]"))
    # Back on the test, now labelled: the verdicts and the label are shown.
    assert browser.current_url.startswith(f"{base}/runs/{replay}/tests/q1-report")
    assert browser.find_elements(By.CSS_SELECTOR, "div.verdict")
    assert "pass by alice" in browser.find_element(By.CSS_SELECTOR, "ul.labels").text
    _shot(browser, shots, "7-label-recorded")

    _click(browser, browser.find_element(By.ID, "next-unlabelled"))
    assert browser.current_url == f"{base}/runs/{replay}/tests/q2-report"
    _click(browser, browser.find_element(By.CSS_SELECTOR, "#label-1 button[value=skip]"))
    assert browser.current_url == f"{base}/runs/{replay}/tests/q3-report"
    form = browser.find_element(By.ID, "label-1")
    form.find_element(By.NAME, "note").send_keys("West shows zero revenue")
    _click(browser, form.find_element(By.CSS_SELECTOR, "button[value=fail]"))
    _click(browser, browser.find_element(By.ID, "next-unlabelled"))
    assert browser.current_url == f"{base}/runs/{replay}/tests/q2-report"  # the skipped one, last
    _click(browser, browser.find_element(By.CSS_SELECTOR, "#label-1 button[value=pass]"))
    _click(browser, browser.find_element(By.ID, "next-unlabelled"))
    assert "Nothing left to label" in browser.page_source and "3 of 3" in browser.page_source

    labels = {x.label.test_id: x.label for x in current_labels(store, recorded)}
    assert {t: (lab.verdict, lab.by, lab.note) for t, lab in labels.items()} == {
        "q1-report": ("pass", "alice", "the total is right"),
        "q2-report": ("pass", "alice", None),
        "q3-report": ("fail", "alice", "West shows zero revenue"),
    }
    browser.get(f"{base}/runs/{replay}/compare")
    assert browser.find_element(By.ID, "agreement-table").find_elements(By.CSS_SELECTOR, "tbody tr")
    _shot(browser, shots, "8-compare-agreement")
    store.close()


def _errored_runs(url: str) -> tuple[str, str]:
    """A recorded run whose judge failed to run on q1 (AgentV's verdict skip, left out of the score: q1
    scores 1.0 on its other grader), and a replay in which the judge ran."""
    from evalstore.store import EventStore
    from evalstore.store.events import (
        RunCompleted,
        RunStarted,
        TestCaseRecorded,
        TestScored,
        TranscriptRecorded,
        VerdictRecorded,
    )

    recorded, replay = "rec-20260101T000000-errord", "rpl-20260101T000100-errord"
    store = EventStore.open(url)
    store.append(
        recorded,
        [
            RunStarted(run_id=recorded, kind="recorded", suite="s", target_name="agent", tool_version="test"),
            TestCaseRecorded(test_id="q1", input=[{"role": "user", "content": "What is 2+2?"}]),
            TranscriptRecorded(test_id="q1", messages_sha256=None, output_text="4"),
            VerdictRecorded(test_id="q1", grader="exact", grader_type="equals", score=1.0, verdict="pass"),
            VerdictRecorded(
                test_id="q1",
                grader="judge",
                grader_type="llm-grader",
                score=0.0,
                verdict="skip",
                status="execution_error",
                evidence=["Grader 'judge' failed: judge unreachable"],
            ),
            TestScored(test_id="q1", score=1.0, passed=True, status="ok", threshold=0.8),
            RunCompleted(tests=1, passed=1, failed=0, errors=0, mean_score=1.0),
        ],
    )
    store.append(
        replay,
        [
            RunStarted(run_id=replay, kind="replay", parent_run_id=recorded, suite="s", tool_version="test"),
            VerdictRecorded(test_id="q1", grader="exact", grader_type="equals", score=1.0, verdict="pass"),
            VerdictRecorded(test_id="q1", grader="judge", grader_type="llm-grader", score=0.4, verdict="fail"),
            TestScored(test_id="q1", score=0.7, passed=False, status="quality_failure", threshold=0.8),
            RunCompleted(tests=1, passed=0, failed=1, errors=0, mean_score=0.7),
        ],
    )
    store.close()
    return recorded, replay


def test_a_grader_that_failed_to_run_shows_as_an_error(tmp_path: Path, serve, browser, shots: Path) -> None:
    """The CLI's tables show a grader left out of its test's score as `error` (``grading/errored.py``); the
    viewer showed its recorded 0 and `skip`, which reads as a real score. The run page, the test page and
    the compare page now say error, with the recorded verdict beside it."""
    from selenium.webdriver.common.by import By

    db = f"sqlite:///{tmp_path / 'errored.db'}"
    recorded, replay = _errored_runs(db)
    base = serve(db)

    browser.get(f"{base}/runs/{recorded}")
    header = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "table#results thead th")]
    row = browser.find_elements(By.CSS_SELECTOR, "table#results tbody tr td")
    cells = dict(zip(header, row))
    assert cells["judge"].text == "error" and "v-error" in cells["judge"].get_attribute("class")
    assert "left out of the test's score" in cells["judge"].get_attribute("title")
    assert cells["exact"].text == "1.000 pass"
    _shot(browser, shots, "9-errored-run")

    browser.get(f"{base}/runs/{recorded}/tests/q1")
    judge = browser.find_element(By.ID, "verdict-judge")
    assert "v-error" in judge.get_attribute("class")
    heading = judge.find_element(By.TAG_NAME, "h4").text
    assert "error: failed to run, left out of the test's score" in heading and "skip · execution_error" in heading
    exact = browser.find_element(By.ID, "verdict-exact").find_element(By.TAG_NAME, "h4").text
    assert "score 1.000 · pass" in exact and "error" not in exact
    _shot(browser, shots, "9-errored-test")

    browser.get(f"{base}/compare/{recorded}/{replay}")
    rows = {
        tr.find_element(By.TAG_NAME, "td").text.split()[0]: tr
        for tr in browser.find_elements(By.CSS_SELECTOR, "table.side-by-side tbody tr")
        if tr.find_elements(By.CSS_SELECTOR, "td.run-a")
    }
    judge_a = rows["judge"].find_element(By.CSS_SELECTOR, "td.run-a .v-error")
    assert judge_a.text.startswith("error · left out of the score (recorded 0.000 skip · execution_error)")
    assert rows["judge"].find_element(By.CSS_SELECTOR, "td.run-b").text.startswith("0.400 fail")
    assert not rows["exact"].find_elements(By.CSS_SELECTOR, ".v-error")
    _shot(browser, shots, "9-errored-compare")
