"""A run's content is untrusted: markup in answers, messages, file names, verdicts and test ids is shown as
text; an agent's HTML and SVG never run in the viewer's origin; a 50 MB artifact does not stall a page."""

from __future__ import annotations

import re
import time
from urllib.parse import quote

from starlette.testclient import TestClient
from viewer_helpers import BIG, HTML_FILE, SVG_FILE, Hostile

from evalstore.store import EventStore
from evalstore.viewer import create_app


def _client(hostile: Hostile) -> tuple[EventStore, TestClient]:
    store = EventStore.open(hostile.url)
    return store, TestClient(create_app(store), base_url="http://127.0.0.1")


def _no_live_markup(html: str) -> None:
    assert "<script>alert" not in html and "<script>parent" not in html and "<script>g</script>" not in html
    assert "onerror=alert" not in html.replace("onerror=alert(1)&gt;", "")
    assert not re.search(r"href=[\"']?\s*javascript:", html, re.I)
    assert "<i>suite</i>" not in html and "<b>sh</b>" not in html
    assert re.findall(r"<script[^>]*>", html) == ['<script src="/static/viewer.js" defer>']


def test_every_page_escapes_the_runs_content(hostile: Hostile) -> None:
    store, client = _client(hostile)
    try:
        test_url = f"/runs/{hostile.run_id}/tests/{quote(hostile.test_id, safe='')}"
        pages = {url: client.get(url) for url in ("/runs", f"/runs/{hostile.run_id}", test_url, test_url + "?verify=1")}
        for url, r in pages.items():
            assert r.status_code == 200, url
            _no_live_markup(r.text)
        test_page = pages[test_url].text
        # Shown, as text.
        assert "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;" in test_page
        assert "javascript:alert(1)" in test_page  # the text of the markdown link and the evidence, not a link
        assert "&lt;i&gt;suite&lt;/i&gt;" in pages["/runs"].text
        assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in pages[f"/runs/{hostile.run_id}"].text
    finally:
        store.close()


def test_agent_html_and_svg_are_sandboxed_or_source(hostile: Hostile) -> None:
    store, client = _client(hostile)
    try:
        page = client.get(f"/runs/{hostile.run_id}/tests/{quote(hostile.test_id, safe='')}").text
        html_digest, svg_digest = hostile.digests["report.html"], hostile.digests["chart.svg"]
        # HTML: escaped source, and a frame with every sandbox flag off (no allow-scripts, no allow-same-origin).
        assert "&lt;script&gt;parent.document.title=&#39;owned&#39;&lt;/script&gt;" in page
        frames = re.findall(r"<iframe[^>]*>", page)
        assert frames and all('sandbox=""' in f for f in frames)
        assert f'src="/runs/{hostile.run_id}/artifacts/{html_digest}/view"' in frames[0]
        # SVG: an <img> (scripts never run in an image), and its source as text.
        assert (
            f'<img class="artifact-img" alt="chart.svg" src="/runs/{hostile.run_id}/artifacts/{svg_digest}/view">'
            in page
        )
        for digest, body, media in ((html_digest, HTML_FILE, "text/html"), (svg_digest, SVG_FILE, "image/svg+xml")):
            framed = client.get(f"/runs/{hostile.run_id}/artifacts/{digest}/view")
            assert framed.content == body and framed.headers["content-type"].startswith(media)
            # Opened directly, the document is sandboxed: an opaque origin, scripts off.
            policy = [p.strip() for p in framed.headers["content-security-policy"].split(";")]
            assert policy[0] == "sandbox" and "default-src 'none'" in policy and "allow-scripts" not in policy[0]
            assert framed.headers["x-content-type-options"] == "nosniff"
            download = client.get(f"/runs/{hostile.run_id}/artifacts/{digest}")
            assert download.headers["content-type"] == "application/octet-stream"
            assert download.headers["content-disposition"].startswith("attachment;")
    finally:
        store.close()


def test_a_50_mb_artifact_is_downloadable_not_inlined(hostile: Hostile) -> None:
    store, client = _client(hostile)
    try:
        started = time.perf_counter()
        page = client.get(f"/runs/{hostile.run_id}/tests/{quote(hostile.test_id, safe='')}")
        elapsed = time.perf_counter() - started
        assert page.status_code == 200
        assert "Too large to preview here (50.0 MB)" in page.text
        assert len(page.text) < 1_000_000, "the page inlined the big file"
        assert "A" * 10_000 not in page.text
        # The verify on the page re-hashes it like any other digest; its download is complete.
        assert elapsed < 30
        digest = hostile.digests["big.txt"]
        download = client.get(f"/runs/{hostile.run_id}/artifacts/{digest}")
        assert len(download.content) == BIG and download.headers["content-disposition"].startswith("attachment")
    finally:
        store.close()
