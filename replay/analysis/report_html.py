"""A comparison as one self-contained HTML page: inline CSS, inline SVG, no scripts, no network.

What it shows: the statistics; a chart with one bar per test labelled with its id, each linking to that
test's verdicts; every changed test (score, pass/fail, or a grader's verdict), the largest change first,
with each grader's verdict and assertions in A and B side by side; and every test, collapsed
(``<details>``, which opens without JavaScript), with the same side-by-side view.

Every piece of user text (run ids, test ids, grader names, assertion texts, evidence) goes through
:func:`_e`, so a test id like ``<img src=...>`` is shown, never rendered. Large runs stay readable and
the file stays small: the labelled chart shows the :data:`MAX_LABELLED` largest changes (a distribution
chart of at most :data:`MAX_BARS` bars shows all), and the changed, every-test and only-in-one-run lists
are cut at a stated limit, each saying how much was left out.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterator

from evalstore.replay.analysis.agreement import AgreementDifference
from evalstore.replay.analysis.compare import (
    AssertionDiff,
    Comparison,
    FlippedTest,
    GraderAssertionDiff,
    GraderPair,
    Key,
    RunResults,
    TestRow,
    Verdict,
    changed_tests,
    grader_pairs,
    with_full_verdicts,
)
from evalstore.replay.analysis.per_test import key_label
from evalstore.replay.analysis.stats import PairedStats

MAX_BARS = 1000
"""More tests than this: each bar of the distribution is the mean delta of consecutive tests in sorted order."""
MAX_LABELLED = 50
"""More tests than this: the labelled chart shows the largest changes, and a distribution chart shows all."""
LABEL_CHARS = 40
MAX_CHANGED = 500
MAX_EVERY = 1000
"""Tests listed (collapsed) with their verdicts side by side; beyond, ``compare --test ID --html``."""
MAX_LISTED = 500

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #1d232b; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #d8dee4; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { border: 1px solid #d8dee4; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f5f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #5c6773; }
.pass { color: #1a7f37; font-weight: 600; }
.fail { color: #cf222e; font-weight: 600; }
.skip { color: #9a6700; font-weight: 600; }
.worse { background: #ffebe9; }
.better { background: #dafbe1; }
.note { color: #5c6773; font-style: italic; }
ul.asserts { margin: 4px 0; padding-left: 18px; }
.side { width: 50%; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 13px; }
svg { display: block; margin: 8px 0; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _num(x: float | None, digits: int = 4, signed: bool = False) -> str:
    if x is None:
        return "—"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def _p(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.3g}" if x < 0.001 else f"{x:.4f}"


def _note(note: str | None) -> str:
    return f' <span class="note">({_e(note)})</span>' if note else ""


def _stats_cells(stats: PairedStats) -> str:
    s, c, m, k = stats.score, stats.counts, stats.mcnemar, stats.kappa
    ci = "—" if s.ci_low is None else f"[{_num(s.ci_low, signed=True)}, {_num(s.ci_high, signed=True)}]"
    return (
        f'<td class="num">{s.n}</td><td class="num">{_num(s.mean_a)}</td><td class="num">{_num(s.mean_b)}</td>'
        f'<td class="num">{_num(s.mean_diff, signed=True)}</td><td>{ci}{_note(s.note)}</td>'
        f'<td class="num">{c.n}</td><td class="num">{c.both_pass}</td><td class="num">{c.both_fail}</td>'
        f'<td class="num">{c.a_only_pass}</td><td class="num">{c.b_only_pass}</td>'
        f"<td>{_p(m.p_value)}{_note(m.note)}</td><td>{_num(k.kappa, 3)}{_note(k.note)}</td>"
    )


_STATS_HEAD = (
    "<th>score pairs</th><th>mean A</th><th>mean B</th><th>diff (B−A)</th><th>95% CI</th>"
    "<th>pass/fail pairs</th><th>both pass</th><th>both fail</th><th>A-only pass</th><th>B-only pass</th>"
    "<th>McNemar p</th><th>kappa</th>"
)


def _summary(c: Comparison, changed: int) -> str:
    s = c.overall.score
    worse = len(c.regressions)
    better = len(c.improvements)
    method = f'<p class="muted">CI method: {_e(s.method)}.</p>' if s.method else ""
    paired = f"{len(c.tests)} paired results"
    changes = f"{changed} changed"
    if c.averaged:  # the statistics and the flips count tests; the chart and verdicts below are per attempt
        paired = f"{len(c.units)} paired tests (each test's attempts averaged: {paired})"
        changes = f"{changed} paired result{'' if changed == 1 else 's'} changed"
    return (
        "<h2>Summary</h2>"
        f"<p>Run A <code>{_e(c.run_a)}</code> vs run B <code>{_e(c.run_b)}</code>: "
        f"{paired}, {len(c.only_in_a)} only in A, {len(c.only_in_b)} only in B; "
        f"{changes}. "
        f'<span class="fail">{worse} flipped pass→fail</span>, '
        f'<span class="pass">{better} flipped fail→pass</span>.</p>'
        f"<table><tr><th></th>{_STATS_HEAD}</tr><tr><th>tests</th>{_stats_cells(c.overall)}</tr></table>"
        f"{method}"
        '<p class="muted">Differences are B − A. CI: paired bootstrap percentile interval of the mean '
        "difference. McNemar: exact two-sided binomial test on the discordant pairs. Kappa: Cohen's kappa "
        "of pass/fail agreement.</p>"
    )


def _swaps(c: Comparison, changes: dict[str, list[str]]) -> str:
    """A line per run that regraded its parent with something swapped: what (a threshold, a preprocessor,
    a prompt), which its scores alone do not say (a threshold alone flips tests with every score the same)."""
    return "".join(
        f"<p>Run {side} <code>{_e(run)}</code> regraded its parent with: {_e('; '.join(changes[run]))}.</p>"
        for side, run in (("A", c.run_a), ("B", c.run_b))
        if changes.get(run)
    )


def _graders(c: Comparison) -> str:
    if not c.graders:
        return '<h2>Graders</h2><p class="note">No grader verdicts.</p>'
    rows = "".join(
        f"<tr><th>{_e(g.grader)}</th>{_stats_cells(g.stats)}"
        f'<td class="num">{g.skipped}</td><td class="num">{g.only_in_a}</td><td class="num">{g.only_in_b}</td></tr>'
        for g in c.graders
    )
    return (
        "<h2>Graders</h2>"
        f"<table><tr><th>grader</th>{_STATS_HEAD}<th>skipped</th><th>only in A</th><th>only in B</th></tr>"
        f"{rows}</table>"
        '<p class="muted">Pairs where either verdict is <code>skip</code> are left out of a grader\'s '
        "statistics and counted as skipped.</p>"
    )


def _bars(rows: list[TestRow]) -> tuple[list[tuple[float, str]], int]:
    """(delta, tooltip) per bar, sorted by delta; and how many tests each bar stands for."""
    ordered = sorted(rows, key=lambda r: (r.delta, r.key[0]))
    per_bar = max(1, math.ceil(len(ordered) / MAX_BARS))
    if per_bar == 1:
        return [(r.delta, f"{key_label(r.key)}: {r.delta:+.4f}") for r in ordered], 1
    bars = []
    for start in range(0, len(ordered), per_bar):
        chunk = ordered[start : start + per_bar]
        mean = math.fsum(r.delta for r in chunk) / len(chunk)
        tip = f"{len(chunk)} tests, {key_label(chunk[0].key)} … {key_label(chunk[-1].key)}: mean {mean:+.4f}"
        bars.append((mean, tip))
    return bars, per_bar


def _colour(delta: float) -> str:
    return "#1a7f37" if delta > 0 else "#cf222e" if delta < 0 else "#8c959f"


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _labelled(rows: list[tuple[int, TestRow]], anchors: dict[int, str]) -> str:
    """One horizontal bar per test, labelled with its id and delta; each links to the test's details."""
    width, label_w, margin, row_h, pad = 900, 300, 64, 20, 10
    x0, x1 = label_w + margin, width - margin
    lo = min(min((r.delta for _, r in rows), default=0.0), 0.0)
    hi = max(max((r.delta for _, r in rows), default=0.0), 0.0)
    span = (hi - lo) or 1.0
    zero_x = x0 + (x1 - x0) * -lo / span
    height = 2 * pad + row_h * len(rows) + 14
    parts = [
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        'aria-label="score delta per test, labelled with test ids">',
        f'<line x1="{zero_x:.2f}" y1="{pad}" x2="{zero_x:.2f}" y2="{height - pad - 14}" stroke="#8c959f"/>',
        f'<text x="{x0}" y="{height - pad}" font-size="11" fill="#5c6773" text-anchor="middle">{lo:+.3f}</text>',
        f'<text x="{x1}" y="{height - pad}" font-size="11" fill="#5c6773" text-anchor="middle">{hi:+.3f}</text>',
    ]
    for i, (index, r) in enumerate(rows):
        y = pad + i * row_h
        end_x = zero_x + (x1 - x0) * r.delta / span
        left, bar_w = min(zero_x, end_x), max(abs(end_x - zero_x), 1.0)
        value_x, anchor = (end_x + 4, "start") if r.delta >= 0 else (end_x - 4, "end")
        label = key_label(r.key)
        parts.append(
            f'<a href="#{anchors[index]}"><title>{_e(f"{label}: {r.delta:+.4f}")}</title>'
            f'<text x="{label_w - 8}" y="{y + 14}" font-size="12" text-anchor="end" fill="#1d232b">'
            f"{_e(_short(label))}</text>"
            f'<rect x="{left:.2f}" y="{y + 4}" width="{bar_w:.2f}" height="{row_h - 8}" fill="{_colour(r.delta)}"/>'
            f'<text x="{value_x:.2f}" y="{y + 14}" font-size="11" text-anchor="{anchor}" fill="#5c6773">'
            f"{r.delta:+.3f}</text></a>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _distribution(c: Comparison) -> str:
    bars, per_bar = _bars(c.tests)
    width, height, pad = 900, 240, 30
    plot_h = height - 2 * pad
    top = max(max((d for d, _ in bars), default=0.0), 0.0)
    bottom = min(min((d for d, _ in bars), default=0.0), 0.0)
    span = (top - bottom) or 1.0
    zero_y = pad + plot_h * top / span
    step = (width - 2 * pad) / len(bars)
    bar_w = min(max(step * 0.8, 0.5), 48.0)
    parts = [
        f'<svg width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="distribution of the score deltas of all tests">',
        f'<line x1="{pad}" y1="{zero_y:.2f}" x2="{width - pad}" y2="{zero_y:.2f}" stroke="#8c959f"/>',
        f'<text x="4" y="{pad - 8}" font-size="11" fill="#5c6773">{top:+.3f}</text>',
        f'<text x="4" y="{height - pad + 16}" font-size="11" fill="#5c6773">{bottom:+.3f}</text>',
    ]
    for i, (delta, tip) in enumerate(bars):
        h = plot_h * abs(delta) / span
        y = zero_y - h if delta > 0 else zero_y
        h = max(h, 1.0)
        parts.append(
            f'<rect x="{pad + i * step:.2f}" y="{y:.2f}" width="{bar_w:.2f}" height="{h:.2f}" '
            f'fill="{_colour(delta)}"><title>{_e(tip)}</title></rect>'
        )
    parts.append("</svg>")
    caption = (
        f"All {len(c.tests)} tests, one bar each, sorted by delta; hover a bar for the test."
        if per_bar == 1
        else f"{len(c.tests)} tests: each bar is the mean delta of {per_bar} consecutive tests in sorted order."
    )
    return "<h3>Distribution of all deltas</h3>" + "".join(parts) + f'<p class="muted">{_e(caption)}</p>'


def _chart(c: Comparison, anchors: dict[int, str]) -> str:
    head = "<h2>Score deltas by test</h2>"
    if not c.tests:
        return head + '<p class="note">No paired results.</p>'
    indexed = list(enumerate(c.tests))
    if len(indexed) <= MAX_LABELLED:
        chosen = indexed
        caption = "One bar per test (B − A), the largest drop first; click a bar for both verdicts."
    else:
        chosen = sorted(indexed, key=lambda t: (-abs(t[1].delta), t[1].key[0]))[:MAX_LABELLED]
        caption = (
            f"The {len(chosen)} largest changes of {len(indexed)} tests (B − A), the largest drop first; "
            "click a bar for both verdicts. Every test is in the distribution below."
        )
    chosen.sort(key=lambda t: (t[1].delta, t[1].key[0]))
    labelled = _labelled(chosen, anchors) + f'<p class="muted">{_e(caption)}</p>'
    return head + labelled + (_distribution(c) if len(indexed) > MAX_LABELLED else "")


def _arrow(flip: str) -> str:
    return _e(flip.replace("->", " → "))


def _verdict_word(verdict: str) -> str:
    return f'<span class="{_e(verdict)}">{_e(verdict)}</span>'


def _verdict_cell(v: Verdict | None) -> str:
    if v is None:
        return '<td class="side note">no verdict</td>'
    status = "" if v.status == "ok" else f' <span class="skip">{_e(v.status)}</span>'
    items = "".join(
        f'<li><span class="{"pass" if a.passed else "fail"}">{"✓" if a.passed else "✗"}</span> {_e(a.text)}'
        + (f' <span class="muted">— {_e(a.evidence)}</span>' if a.evidence else "")
        + "</li>"
        for a in v.assertions
    )
    asserts = f'<ul class="asserts">{items}</ul>' if items else '<div class="note">no assertions</div>'
    return (
        f'<td class="side">score {_num(v.score)} · {_verdict_word(v.verdict)}{status} '
        f'<span class="muted">({_e(v.grader_type)})</span>{asserts}</td>'
    )


def _grader_class(g: GraderPair) -> str:
    if g.a is None or g.b is None or g.a.score == g.b.score:
        return ""
    return ' class="worse"' if g.b.score < g.a.score else ' class="better"'


def _side_by_side(r: TestRow, graders: list[GraderPair]) -> str:
    """Every grader's verdict in A and in B on one row, with their assertions."""
    rows = "".join(
        f"<tr{_grader_class(g)}><th>{_e(g.grader)}"
        + (f'<div class="muted">{_arrow(g.flip)}</div>' if g.flip else "")
        + f"</th>{_verdict_cell(g.a)}{_verdict_cell(g.b)}</tr>"
        for g in graders
    )
    return (
        f"<table><tr><th>grader</th><th>A: score {_num(r.score_a)} · "
        f"{_verdict_word('pass' if r.passed_a else 'fail')}</th>"
        f"<th>B: score {_num(r.score_b)} · {_verdict_word('pass' if r.passed_b else 'fail')}</th></tr>"
        f"{rows}</table>"
    )


def _change_words(r: TestRow) -> str:
    flip = f" · {_arrow(r.flip)}" if r.flip else ""
    return f"{_num(r.score_a, 3)} → {_num(r.score_b, 3)} ({_num(r.delta, 3, signed=True)}){flip}"


def _changed_one(t: FlippedTest, anchor: str) -> str:
    r = t.row
    cls = "worse" if r.delta < 0 or r.flip == "pass->fail" else "better" if r.delta > 0 or r.flip else ""
    what = _change_words(r) if r.delta or r.flip else "same score; grader verdicts changed"
    return (
        f'<h3 id="{anchor}" class="{cls}">{_e(key_label(r.key))} <span class="muted">{what}</span></h3>'
        + _side_by_side(r, t.graders)
    )


def _changed(
    changed: list[FlippedTest], anchors: dict[TestRow, str], a: RunResults, b: RunResults, per_attempt: bool
) -> Iterator[str]:
    # Per attempt where a test has several (the terminal's "changed tests" counts tests, attempts averaged).
    head = (
        f"<h2>Changed results ({len(changed)}: each attempt of a test apart)</h2>"
        if per_attempt
        else f"<h2>Changed tests ({len(changed)})</h2>"
    )
    if not changed:
        yield head + '<p class="note">No test\'s score or grader verdicts changed between A and B.</p>'
        return
    yield head + (
        '<p class="muted">Every test whose score, pass/fail or grader verdicts changed, the largest score change '
        "first, with each grader's verdicts in A and B side by side.</p>"
    )
    # Only the tests shown need their assertions: their verdicts are read whole, a chunk at a time.
    for t in with_full_verdicts(changed[:MAX_CHANGED], a, b):
        yield _changed_one(t, anchors[t.row])
    if len(changed) > MAX_CHANGED:
        yield f'<p class="note">{len(changed) - MAX_CHANGED} more changed tests not shown; use --json for all.</p>'


def _every_test(c: Comparison, a: RunResults, b: RunResults) -> Iterator[str]:
    if not c.tests:
        return
    yield (
        f'<h2 id="every">Every test, side by side ({len(c.tests)})</h2>'
        '<p class="muted">Open a test to see every grader\'s verdict and assertions in A and in B.</p>'
    )
    listed = (FlippedTest(r, grader_pairs(r, a, b)) for r in c.tests[:MAX_EVERY])
    for i, t in enumerate(with_full_verdicts(listed, a, b)):
        yield (
            f'<details id="t{i}"><summary><code>{_e(key_label(t.row.key))}</code> '
            f'<span class="muted">{_change_words(t.row)}</span></summary>'
            f"{_side_by_side(t.row, t.graders)}</details>"
        )
    if len(c.tests) > MAX_EVERY:
        yield (
            f'<p class="note">{len(c.tests) - MAX_EVERY} more tests not listed; '
            "<code>evalstore compare A B --test ID --html FILE</code> shows one test's verdicts and assertions.</p>"
        )


def _key_list(title: str, keys: list[Key]) -> str:
    if not keys:
        return ""
    items = "".join(f"<li><code>{_e(key_label(k))}</code></li>" for k in keys[:MAX_LISTED])
    more = f'<p class="note">{len(keys) - MAX_LISTED} more not shown.</p>' if len(keys) > MAX_LISTED else ""
    return f"<h2>{_e(title)} ({len(keys)})</h2><ul>{items}</ul>{more}"


def _assert_items(label: str, texts: list[str]) -> str:
    if not texts:
        return ""
    return f'<div>{_e(label)}:<ul class="asserts">{"".join(f"<li>{_e(t)}</li>" for t in texts)}</ul></div>'


def _grader_diff(g: GraderAssertionDiff) -> str:
    presence = "" if g.in_a and g.in_b else f' <span class="note">(verdict only in {"A" if g.in_a else "B"})</span>'
    changed = "".join(
        f"<li>{_e(ch.text)}: {_verdict_word('pass' if ch.passed_a else 'fail')} → "
        f"{_verdict_word('pass' if ch.passed_b else 'fail')}</li>"
        for ch in g.changed
    )
    body = (
        _assert_items("only in A", [a.text for a in g.only_in_a])
        + _assert_items("only in B", [a.text for a in g.only_in_b])
        + (f'<div>passed changed:<ul class="asserts">{changed}</ul></div>' if changed else "")
    )
    if not body:
        body = f'<div class="note">no differences ({g.unchanged} assertions unchanged)</div>'
    return f"<h3>{_e(g.grader)}{presence}</h3>{body}"


def _assertion_diffs(diffs: list[AssertionDiff]) -> str:
    out = []
    for d in diffs:
        where = "" if d.in_a and d.in_b else f' <span class="note">(only in {"A" if d.in_a else "B"})</span>'
        graders = "".join(_grader_diff(g) for g in d.graders) or '<p class="note">no verdicts</p>'
        out.append(f"<h2>Assertions of <code>{_e(key_label(d.key))}</code>{where}</h2>{graders}")
    return "".join(out)


def _agreement(diffs: list[AgreementDifference] | None) -> str:
    """Which run agrees more with the human labels, per grader: what ``evalstore compare`` prints under
    the same title (and the viewer's compare page shows). Nothing when no test of the runs is labelled."""
    if not diffs:
        return ""
    rows = "".join(
        f'<tr><th>{_e(d.grader)}</th><td class="num">{d.n}</td><td class="num">{_num(d.accuracy_a, 3)}</td>'
        f'<td class="num">{_num(d.accuracy_b, 3)}</td><td class="num">{d.a_only_correct}</td>'
        f'<td class="num">{d.b_only_correct}</td><td class="num">{_p(d.mcnemar.p_value)}</td><td>{_e(d.verdict)}</td></tr>'
        for d in diffs
    )
    return (
        '<h2 id="agreement">Agreement with the human labels</h2>'
        "<table><tr><th>grader</th><th>labelled tests</th><th>accuracy A</th><th>accuracy B</th>"
        f"<th>only A right</th><th>only B right</th><th>McNemar p</th><th>verdict</th></tr>{rows}</table>"
        "<p class=\"muted\">On the labelled tests both runs judged: is each run's pass/fail the people's? "
        "McNemar: exact test on the tests where exactly one run is right. The row <code>(test)</code> is the "
        "test-level pass against labels of the whole answer. <code>evalstore agreement A B</code> gives "
        "each run's confusion matrix and intervals.</p>"
    )


def render_html(
    comparison: Comparison,
    a: RunResults,
    b: RunResults,
    *,
    title: str,
    agreement: list[AgreementDifference] | None = None,
    changes: dict[str, list[str]] | None = None,
) -> str:
    """The whole report as one HTML document that needs nothing but itself to display (:func:`iter_html`
    joined)."""
    return "".join(iter_html(comparison, a, b, title=title, agreement=agreement, changes=changes))


def iter_html(
    comparison: Comparison,
    a: RunResults,
    b: RunResults,
    *,
    title: str,
    agreement: list[AgreementDifference] | None = None,
    changes: dict[str, list[str]] | None = None,
) -> Iterator[str]:
    """The report in pieces, to be written as they come. ``changes``: by run id, what a run swapped to
    regrade its parent (``views.describe_swaps``), said under the summary.

    ``a`` and ``b`` are the results the comparison was built from: the report shows their verdicts. Runs
    read from the projections (:func:`evalstore.replay.material.load_scores`) are enough: the verdicts of
    the tests the report details are read whole (assertions) as it reaches them."""
    changed = changed_tests(comparison, a, b)
    shown = {t.row: f"c{i}" for i, t in enumerate(changed[:MAX_CHANGED])}
    anchors = {i: shown.get(r, f"t{i}" if i < MAX_EVERY else "every") for i, r in enumerate(comparison.tests)}
    yield (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
        f"<body><h1>{_e(title)}</h1>"
    )
    yield _summary(comparison, len(changed)) + _swaps(comparison, changes or {}) + _graders(comparison)
    yield _agreement(agreement)
    yield _chart(comparison, anchors)
    del anchors
    yield from _changed(changed, shown, a, b, comparison.averaged)
    yield _assertion_diffs(comparison.assertion_diffs)
    yield from _every_test(comparison, a, b)
    yield _key_list("Only in run A", comparison.only_in_a) + _key_list("Only in run B", comparison.only_in_b)
    yield "</body></html>\n"
