"""The HTML comparison report: self-contained, escaped, and showing what changed: every changed test (largest
change first), a chart labelled with test ids, and both verdicts of any test side by side."""

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


def report(a: RunResults, b: RunResults, **kwargs: object) -> str:
    return render_html(compare(a, b, **kwargs), a, b, title="Grader v2 <vs> v1")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def page() -> str:
    return report(*sample_runs(), test_id="summarise-report")


def section(page: str, heading: str) -> str:
    return page.split(heading, 1)[1].split("<h2", 1)[0]


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


def test_every_changed_test_is_detailed_largest_change_first_with_both_verdicts(page: str) -> None:
    changed = section(page, "<h2>Changed tests (7)</h2>")
    headings = re.findall(r'<h3 id="(c\d+)"[^>]*>(.*?) <span', changed)
    # Not only the flips: the steady tests whose score moved are detailed too; steady-0 did not move.
    names = [h for _, h in headings]
    assert names == [
        "&lt;img src=&quot;http://evil.example/x.png&quot;&gt;",
        "summarise-report@gpt",
        *(f"steady-{i}" for i in (5, 4, 3, 2, 1)),
    ]
    assert "steady-0" not in changed
    assert "0.900 → 0.300 (-0.600) · pass → fail" in changed and "0.500 → 0.750 (+0.250)</span>" in changed
    # Each side shows score, verdict and assertions.
    flip = changed.split("summarise-report@gpt", 1)[1].split("<h3", 1)[0]
    assert "score 0.9000" in flip and "score 0.3000" in flip
    assert flip.count("mentions revenue") == 2 and flip.count("cites table 2") == 2
    assert '<span class="pass">pass</span>' in flip and '<span class="fail">fail</span>' in flip
    steady = changed.split("steady-5", 1)[1].split("<h3", 1)[0]
    assert "score 0.5000" in steady and "score 0.7500" in steady and steady.count("ok") >= 2


def test_the_chart_labels_each_bar_with_its_test_id_and_links_to_its_verdicts(page: str) -> None:
    svg = page.split("<svg", 1)[1].split("</svg>", 1)[0]
    bars = re.findall(r'<a href="#(\w+)"><title>([^<]*)</title><text[^>]*>([^<]*)</text><rect', svg)
    assert len(bars) == 8 == svg.count("<rect")
    deltas = [float(title.rsplit(": ", 1)[1]) for _, title, _ in bars]
    assert deltas == sorted(deltas)
    assert deltas[0] == pytest.approx(-0.6) and deltas[-1] == pytest.approx(0.75)
    labels = [label for _, _, label in bars]
    assert labels[0] == "summarise-report@gpt" and "steady-0" in labels
    assert labels[-1] == "&lt;img src=&quot;http://evil.example/x.png&quot;&gt;"
    # A changed test's bar leads to its detailed section; an unchanged one to its entry among all tests.
    ids = set(re.findall(r' id="(\w+)"', page))
    assert all(anchor in ids for anchor, _, _ in bars)
    target = {label: anchor for anchor, _, label in bars}
    assert target["summarise-report@gpt"].startswith("c") and target["steady-0"].startswith("t")


def test_any_test_shows_both_verdicts_down_to_assertions(page: str) -> None:
    every = section(page, "Every test, side by side (8)</h2>")
    entries = re.findall(r"<details id=\"t\d+\"><summary>(.*?)</details>", every)
    assert len(entries) == 8
    steady = next(e for e in entries if "<code>steady-0</code>" in e)  # unchanged: still both sides
    assert "0.500 → 0.500 (+0.000)" in steady
    assert steady.count("score 0.5000") >= 2 and steady.count("✓</span> ok") == 2


def test_changed_tests_and_every_test_are_cut_at_a_stated_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_html, "MAX_CHANGED", 3)
    monkeypatch.setattr(report_html, "MAX_EVERY", 4)
    html = report(*sample_runs())
    assert len(re.findall(r'<h3 id="c\d+"', html)) == 3 and "4 more changed tests not shown" in html
    assert html.count("<details") == 4 and "4 more tests not listed" in html and "--test ID --html" in html


def test_summary_grader_table_and_lists(page: str) -> None:
    assert "8 paired results, 1 only in A, 1 only in B; 7 changed." in page
    assert "<th>rubric</th>" in page
    assert "Only in run A (1)" in page and "only-in-a" in page
    assert "Only in run B (1)" in page and "only-in-b" in page
    assert "CI method: bootstrap percentile (10000 resamples, seed 0)." in page


def test_assertion_diff_section(page: str) -> None:
    section = page.split("Assertions of <code>summarise-report@gpt</code>", 1)[1].split("<h2", 1)[0]
    assert "mentions revenue" in section and "passed changed" in section
    assert "cites table 2" not in section


def test_beyond_the_limit_the_largest_changes_are_labelled_and_a_distribution_shows_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(report_html, "MAX_LABELLED", 5)
    monkeypatch.setattr(report_html, "MAX_BARS", 10)
    a = run("A", *(result((f"t{i:02d}", None, 1), 0.5) for i in range(35)))
    b = run("B", *(result((f"t{i:02d}", None, 1), i / 50) for i in range(35)))
    html = report(a, b)
    labelled, distribution = (part.split("</svg>", 1)[0] for part in html.split("<svg")[1:3])
    labels = re.findall(r"<text[^>]*text-anchor=\"end\" fill=\"#1d232b\">([^<]*)</text>", labelled)
    # The 5 largest |delta|: t00 (-0.5), t01 (-0.48), t02, t03, t04; sorted by delta.
    assert labels == ["t00", "t01", "t02", "t03", "t04"]
    assert "The 5 largest changes of 35 tests" in html
    assert distribution.count("<rect") == 9  # ceil(35 / 10) = 4 tests per bar
    assert "each bar is the mean delta of 4 consecutive tests" in html


def test_long_test_ids_are_shortened_in_the_chart_but_whole_in_its_tooltip() -> None:
    long_id = "a-very-long-test-identifier-" + "x" * 60
    key: Key = (long_id, None, 1)
    html = report(run("A", result(key, 0.5)), run("B", result(key, 0.9)))
    svg = html.split("<svg", 1)[1].split("</svg>", 1)[0]
    assert f"<title>{long_id}: +0.4000</title>" in svg
    assert f">{long_id[: report_html.LABEL_CHARS - 1]}…</text>" in svg


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
    html = report(run("A"), run("B"))
    assert "0 paired results" in html
    assert "No paired results." in html and "No grader verdicts." in html
    assert "No test's score or grader verdicts changed" in html


def test_a_test_of_several_attempts_is_counted_as_results_where_the_terminal_counts_tests() -> None:
    """Three attempts of one test changed: "Changed tests (3)" beside the terminal's "changed tests (1 of 1)"."""
    keys: list[Key] = [("t", None, attempt) for attempt in (1, 2, 3)]
    a = run("A", *(result(k, 0.9, verdict(k, "g", 0.9, [])) for k in keys))
    b = run("B", *(result(k, 0.2, verdict(k, "g", 0.2, [])) for k in keys))
    html = report(a, b)
    assert "<h2>Changed results (3: each attempt of a test apart)</h2>" in html and "Changed tests (" not in html
    one = report(run("A", result(keys[0], 0.9)), run("B", result(keys[0], 0.2)))
    assert "<h2>Changed tests (1)</h2>" in one


def test_what_a_replay_swapped_is_said_under_the_summary() -> None:
    """A replay's --html report did not say it regraded at another threshold, which flips tests alone."""
    k: Key = ("t", None, 1)
    a, b = run("rec-1", result(k, 0.6)), run("rpl-2", result(k, 0.6))
    html = render_html(compare(a, b), a, b, title="t", changes={"rec-1": [], "rpl-2": ["threshold 0.5"]})
    assert "<p>Run B <code>rpl-2</code> regraded its parent with: threshold 0.5.</p>" in html
    assert "Run A <code>rec-1</code> regraded" not in html
