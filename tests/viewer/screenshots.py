"""The README's screenshots of the viewer, made from a neutral folder.

    python tests/viewer/screenshots.py docs/            # --reuse: the store of the last run, pages again

builds a store the way a new user would (``evalstore examples copy``, then ``evalstore quickstart`` with
a judge, the bundled examples taken from that copy: ``EVALSTORE_EXAMPLES``), in ``/tmp/evalstore-demo``,
so every path a page shows is in that folder and none is of the machine or checkout it was made on. It
then serves ``evalstore view`` and saves a run page, a test page and the compare page, each at 1280 px
and at a phone's 390 px: ``viewer-run.png``, ``viewer-test.png``, ``viewer-compare.png`` and their
``-phone.png`` twins, and ``viewer-test-prompt.png``: the LLM grader's verdict with its judge prompt
open. The judge is ``tests/judge_server.py``'s local stand-in (no network), scoring report-quality 0.9
under the first prompt and 0.6 under the stricter second one.

Needs Chromium and chromedriver (as ``tests/viewer/test_viewer_browser.py``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # judge_server

from judge_server import JudgeServer, by_content, freeform  # noqa: E402

EVALSTORE = Path(sys.executable).parent / "evalstore"
NEUTRAL = Path("/tmp/evalstore-demo")
"""Where the screenshots' store and example copies live: a folder any reader could have."""
SIZES = {"": (1280, 1800), "-phone": (390, 2400)}
"""Window width and the most page height kept, per file suffix."""
CLEAN_ENV = ("EVALSTORE_JUDGE_BASE_URL", "EVALSTORE_JUDGE_MODEL", "EVALSTORE_JUDGE_API_KEY_ENV", "EVALSTORE_DB")


def judge() -> JudgeServer:
    checks = [("every region is listed", True), ("the total is the sum of the regions", True)]
    strict = [("every region is listed", True), ("no region reports zero revenue", False)]
    return JudgeServer(
        by_content([("strict auditor", freeform(0.6, strict))], freeform(0.9, checks)),
    ).start()


def build(folder: Path, judge_url: str) -> tuple[str, str, str]:
    """The demo store in ``folder`` (made anew): returns (store URL, recorded run, replay)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    db = f"sqlite:///{folder / '.evalstore' / 'evalstore.db'}"
    env = {k: v for k, v in os.environ.items() if k not in (*CLEAN_ENV, "EVALSTORE_EXAMPLES")}
    demo = {
        **env,
        "EVALSTORE_EXAMPLES": str(folder / "examples"),
        "EVALSTORE_JUDGE_BASE_URL": judge_url,
        "EVALSTORE_JUDGE_MODEL": "demo-judge",
    }
    # The installed examples copied out, then the quickstart run from the copy.
    for args, with_env in ((["examples", "copy", "examples"], env), (["quickstart"], demo)):
        done = subprocess.run(
            [str(EVALSTORE), *args], cwd=folder, env=with_env, capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            raise RuntimeError(f"evalstore {' '.join(args)} failed: {done.stderr}")
    runs = subprocess.run(
        [str(EVALSTORE), "--db", db, "runs", "--json"], capture_output=True, text=True, timeout=60, check=True
    )
    import json

    recorded, replay = (r["run_id"] for r in json.loads(runs.stdout))
    return db, recorded, replay


@contextmanager
def served(db: str) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    proc = subprocess.Popen(
        [str(EVALSTORE), "--db", db, "view", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        match = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        if not match:
            raise RuntimeError(f"evalstore view printed no URL: {line!r}")
        yield match.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def chromium() -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def shoot(  # type: ignore[no-untyped-def]
    driver, url: str, path: Path, width: int, most: int, open_details: str | None = None, at: str | None = None
) -> None:
    """``url`` at ``width`` px, as tall as the page up to ``most``; ``open_details``: the ``<details>`` a
    reader would open (a prompt diff); ``at``: an element to scroll to (a verdict with its prompt)."""
    driver.set_window_size(width, 1000)
    driver.get(url)
    if open_details:
        driver.execute_script(f"document.querySelectorAll({open_details!r}).forEach(d => d.open = true)")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(most, max(800, height)))
    if at:
        driver.execute_script(f"document.querySelector({at!r}).scrollIntoView()")
    if not driver.save_screenshot(str(path)):
        raise RuntimeError(f"no screenshot of {url}")


def existing(folder: Path) -> tuple[str, str, str]:
    """The demo store a previous ``build`` left in ``folder`` (``--reuse``: pages changed, runs did not)."""
    import json

    db = f"sqlite:///{folder / '.evalstore' / 'evalstore.db'}"
    runs = subprocess.run(
        [str(EVALSTORE), "--db", db, "runs", "--json"], capture_output=True, text=True, timeout=60, check=True
    )
    recorded, replay = (r["run_id"] for r in json.loads(runs.stdout))
    return db, recorded, replay


def main(out: Path, reuse: bool = False) -> None:
    if reuse:
        db, recorded, replay = existing(NEUTRAL)
    else:
        server = judge()
        try:
            db, recorded, replay = build(NEUTRAL, server.base_url)
        finally:
            server.stop()
    test = f"/runs/{replay}/tests/q3-report"
    pages = {
        "viewer-run": (f"/runs/{replay}", None, None),
        "viewer-test": (test, None, None),
        "viewer-compare": (f"/compare/{recorded}/{replay}", "details.prompt-diff", None),
    }
    out.mkdir(parents=True, exist_ok=True)
    with served(db) as base, chromium() as driver:
        for name, (path, open_details, at) in pages.items():
            for suffix, (width, most) in SIZES.items():
                target = out / f"{name}{suffix}.png"
                shoot(driver, base + path, target, width, most, open_details, at)
                print(target)
        # The LLM grader's verdict on the test page, its judge prompt opened: the role blocks.
        target = out / "viewer-test-prompt.png"
        shoot(
            driver, base + test, target, 1280, 1300, "#verdict-report-quality details.prompt", "#verdict-report-quality"
        )
        print(target)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--reuse"]
    main(Path(args[0] if args else "docs"), reuse="--reuse" in sys.argv[1:])
