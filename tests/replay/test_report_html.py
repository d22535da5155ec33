"""The HTML comparison report: self-contained, escaped, and showing what flipped."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from evalstore.replay.analysis import compare as compare_module
from evalstore.replay.analysis import report_html
from evalstore.replay.analysis.compare import Key, RunResults, compare
from evalstore.replay.analysis.report_html import render_html
from evalstore.store import events
from evalstore.store.events import Assertion, VerdictRecorded

Result = compare_module.TestResult  # not named Test* here, so pytest does not try to collect it

EVIL_ID = '<img src="http://evil.example/x.png">'
EVIL_ASSERTION = "<script>alert('x')</script> uses url(https://evil.example/a.css)"


def verdict(key: Key, grader: str, score: float, asserts: list[tuple[str, bool]]) -> VerdictRecorded:
    test_id, target, attempt = key
    return VerdictRecorded(
        test_id=test_id,
        target=target,
        attempt=attempt,
        grader=grader,
        grader_type="llm-grader",
        score=score,
        verdict="pass" if score >= 0.8 else "fail",
        assertions=[Assertion(text=t, passed=p, evidence="see https://example.org/e") for t, p in asserts],
    )


def result(key: Key, score: float, *verdicts: VerdictRecorded) -> Result:
    test_id, target, attempt = key
    scored = events.TestScored(
        test_id=test_id,
        target=target,
        attempt=attempt,
        score=score,
        passed=score >= 0.8,
        status="ok" if score >= 0.8 else "quality_failure",
        threshold=0.8,
    )
    return Result(scored, {v.grader: v for v in verdicts})


def run(run_id: str, *results: Result) -> RunResults:
    return RunResults(run_id, {(r.scored.test_id, r.scored.target, r.scored.attempt): r for r in results})


def sample_runs() -> tuple[RunResults, RunResults]:
    k_evil: Key = (EVIL_ID, None, 1)
    k_flip: Key = ("summarise-report", "gpt", 1)
    a = [
        result(k_flip, 0.9, verdict(k_flip, "rubric", 0.9, [("mentions revenue", True), ("cites table 2", True)])),
        result(k_evil, 0.2, verdict(k_evil, "rubric", 0.2, [(EVIL_ASSERTION, False)])),
        result(("only-in-a", None, 1), 1.0),
    ]
    b = [
        result(k_flip, 0.3, verdict(k_flip, "rubric", 0.3, [("mentions revenue", False), ("cites table 2", True)])),
        result(k_evil, 0.95, verdict(k_evil, "rubric", 0.95, [(EVIL_ASSERTION, True)])),
        result(("only-in-b", None, 1), 1.0),
    ]
    for i in range(6):
        key: Key = (f"steady-{i}", None, 1)
        a.append(result(key, 0.5, verdict(key, "rubric", 0.5, [("ok", True)])))
        b.append(result(key, 0.5 + i / 20, verdict(key, "rubric", 0.5 + i / 20, [("ok", True)])))
    return run("run<A>", *a), run("run&B", *b)


@pytest.fixture(scope="module")
def page() -> str:
    a, b = sample_runs()
    return render_html(compare(a, b, test_id="summarise-report"), title="Grader v2 <vs> v1")


class _Assets(HTMLParser):
    """Collects what a browser would fetch or run: tag names, attribute values, style sheets."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attribute_values: list[str] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attribute_values.extend(value or "" for _, value in attrs)
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


def test_no_external_assets(page: str) -> None:
    # Raw markup: no attribute pointing at the network (escaped user text cannot form one).
    assert not re.search(r"""\b(?:src|href|srcset|action)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assets = _Assets()
    assets.feed(page)
    assert not assets.tags & {"script", "link", "iframe", "object", "embed", "img", "image", "use", "base"}
    assert not any(re.search(r"(?:https?:)?//", value) for value in assets.attribute_values)
    css = "".join(assets.styles) + "".join(assets.attribute_values)
    assert "url(" not in css and "@import" not in css and "@font-face" not in css
    assert "http" not in "".join(assets.styles)


def test_user_text_is_escaped(page: str) -> None:
    assert "<img" not in page and "<script" not in page
    assert "&lt;img src=&quot;http://evil.example/x.png&quot;&gt;" in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "<title>Grader v2 &lt;vs&gt; v1</title>" in page
    assert "run&lt;A&gt;" in page and "run&amp;B" in page


def test_flipped_tests_appear_with_both_verdicts(page: str) -> None:
    section = page.split("<h2>Flipped tests</h2>", 1)[1].split("<h2>", 1)[0]
    assert "summarise-report@gpt" in section and "pass → fail" in section
    assert "&lt;img src=" in section and "fail → pass" in section
    assert "steady-" not in section
    # Regressions come first, and each side shows score, verdict and assertions.
    assert section.index("summarise-report") < section.index("&lt;img")
    flip = section.split("summarise-report", 1)[1].split("<h3", 1)[0]
    assert "score 0.9000" in flip and "score 0.3000" in flip
    assert flip.count("mentions revenue") == 2 and flip.count("cites table 2") == 2
    assert '<span class="pass">pass</span>' in flip and '<span class="fail">fail</span>' in flip


def test_summary_grader_table_and_lists(page: str) -> None:
    assert "8 paired results, 1 only in A, 1 only in B" in page
    assert "<th>rubric</th>" in page
    assert "Only in run A (1)" in page and "only-in-a" in page
    assert "Only in run B (1)" in page and "only-in-b" in page
    assert "CI method: bootstrap percentile (10000 resamples, seed 0)." in page


def test_assertion_diff_section(page: str) -> None:
    section = page.split("Assertions of <code>summarise-report@gpt</code>", 1)[1].split("<h2>", 1)[0]
    assert "mentions revenue" in section and "passed changed" in section
    assert "cites table 2" not in section


def test_chart_has_one_sorted_bar_per_test(page: str) -> None:
    svg = page.split("<svg", 1)[1].split("</svg>", 1)[0]
    titles = re.findall(r"<title>([^<]*)</title>", svg)
    assert len(titles) == 8 == svg.count("<rect")
    deltas = [float(t.rsplit(": ", 1)[1]) for t in titles]
    assert deltas == sorted(deltas)
    assert deltas[0] == pytest.approx(-0.6) and deltas[-1] == pytest.approx(0.75)


def test_chart_groups_bars_beyond_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_html, "MAX_BARS", 10)
    a = run("A", *(result((f"t{i:02d}", None, 1), 0.5) for i in range(35)))
    b = run("B", *(result((f"t{i:02d}", None, 1), i / 50) for i in range(35)))
    html = render_html(compare(a, b), title="many")
    svg = html.split("<svg", 1)[1].split("</svg>", 1)[0]
    assert svg.count("<rect") == 9  # ceil(35 / 10) = 4 tests per bar
    assert "each bar is the mean delta of 4 consecutive tests" in html


class _Balance(HTMLParser):
    VOID = frozenset({"meta", "br", "hr", "img", "input", "line", "rect"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID and (not self.stack or self.stack[-1] != tag):
            return
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
        self.stack.pop()


def test_markup_is_balanced(page: str) -> None:
    parser = _Balance()
    parser.feed(page)
    parser.close()
    assert parser.stack == []


def test_empty_comparison_renders() -> None:
    html = render_html(compare(run("A"), run("B")), title="empty")
    assert "0 paired results" in html
    assert "No paired results." in html and "No grader verdicts." in html
    assert "No test or grader verdict flipped" in html
