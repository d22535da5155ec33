"""``evalstore compare A B``, and the comparison printout ``replay`` and ``quickstart`` share."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalstore.cli.context import complete_run_id, complete_test_id, open_store
from evalstore.cli.errors import EXIT_FAILED, handle_errors
from evalstore.cli.output import fmt_score, json_option, note, plural, print_json, print_table
from evalstore.replay.analysis.compare import REGRESSION_MODES, Comparison, key_label, regression
from evalstore.replay.analysis.compare import compare as compare_runs
from evalstore.replay.analysis.views import resolve_run
from evalstore.replay.material import load_results


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.3f}"


def _stats_cells(stats) -> tuple[str, str, str]:  # type: ignore[no-untyped-def]
    s = stats.score
    ci = f"[{s.ci_low:+.3f}, {s.ci_high:+.3f}]" if s.ci_low is not None else (s.note or "not enough pairs")
    p = f"{stats.mcnemar.p_value:.4g}" if stats.mcnemar.p_value is not None else (stats.mcnemar.note or "-")
    k = f"{stats.kappa.kappa:.3f}" if stats.kappa.kappa is not None else (stats.kappa.note or "-")
    return ci, p, k


def print_comparison(c: Comparison, *, max_tests: int = 50) -> None:
    o = c.overall
    ci, p, k = _stats_cells(o)
    click.echo(f"compare {c.run_a} (A) -> {c.run_b} (B): {plural(o.score.n, 'paired result')}")
    click.echo(
        f"mean score A={fmt_score(o.score.mean_a)} B={fmt_score(o.score.mean_b)} diff={_signed(o.score.mean_diff)} "
        f"95% CI {ci} (paired bootstrap, seed {c.seed})"
    )
    click.echo(
        f"pass/fail: both pass {o.counts.both_pass}, both fail {o.counts.both_fail}, "
        f"pass->fail {o.counts.a_only_pass}, fail->pass {o.counts.b_only_pass}; McNemar exact p={p}; kappa={k}"
    )
    print_table(
        "per grader",
        ["grader", "n", "mean A", "mean B", "diff", "95% CI", "pass->fail", "fail->pass", "McNemar p", "kappa"],
        [
            (
                g.grader,
                g.stats.score.n,
                fmt_score(g.stats.score.mean_a),
                fmt_score(g.stats.score.mean_b),
                _signed(g.stats.score.mean_diff),
                *_stats_cells(g.stats)[:1],
                g.regressions,
                g.improvements,
                *_stats_cells(g.stats)[1:],
            )
            for g in c.graders
        ],
        ids=["grader", "n", "mean A", "mean B", "diff"],
        optional=["kappa", "McNemar p", "n", "fail->pass", "pass->fail"],
    )
    changed = [t for t in c.tests if t.delta != 0 or t.flip]
    if changed:
        shown = sorted(changed, key=lambda t: (t.flip is None, -abs(t.delta)))[:max_tests]
        print_table(
            f"changed tests ({len(changed)} of {len(c.tests)})"
            + (f", first {max_tests}" if len(changed) > max_tests else ""),
            ["test", "A", "B", "delta", "flip"],
            [
                (key_label(t.key), fmt_score(t.score_a), fmt_score(t.score_b), _signed(t.delta), t.flip or "")
                for t in shown
            ],
            ids=["test", "A", "B", "delta", "flip"],
        )
    else:
        click.echo("no test changed score")
    if c.only_in_a or c.only_in_b:
        click.echo(f"only in A: {', '.join(key_label(k) for k in c.only_in_a) or '-'}")
        click.echo(f"only in B: {', '.join(key_label(k) for k in c.only_in_b) or '-'}")
    for diff in c.assertion_diffs:
        click.echo(f"assertions of {key_label(diff.key)}:")
        for g in diff.graders:
            for a in g.only_in_a:
                click.echo(f"  [{g.grader}] only in A ({'pass' if a.passed else 'fail'}): {a.text}")
            for a in g.only_in_b:
                click.echo(f"  [{g.grader}] only in B ({'pass' if a.passed else 'fail'}): {a.text}")
            for ch in g.changed:
                click.echo(
                    f"  [{g.grader}] {'pass' if ch.passed_a else 'fail'} -> {'pass' if ch.passed_b else 'fail'}: {ch.text}"
                )
            if not (g.only_in_a or g.only_in_b or g.changed):
                click.echo(f"  [{g.grader}] no assertion changed ({g.unchanged} the same)")


@click.command()
@click.argument("run_a", shell_complete=complete_run_id)
@click.argument("run_b", shell_complete=complete_run_id)
@click.option(
    "--test", "test_id", shell_complete=complete_test_id, help="Show assertion-level differences for this test id."
)
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap resampling.")
@click.option(
    "--resamples",
    default=10_000,
    show_default=True,
    type=click.IntRange(1),
    help="Bootstrap resamples for the confidence intervals.",
)
@click.option(
    "--fail-on-regression",
    "fail_on",
    type=click.Choice(list(REGRESSION_MODES)),
    help="Exit 1 when B is worse: ci = mean-difference CI entirely below 0; flip = any pass->fail; any = either.",
)
@click.option(
    "--html", "html_path", type=click.Path(dir_okay=False, path_type=Path), help="Write a self-contained HTML report."
)
@json_option
@click.pass_context
@handle_errors
def compare(ctx, run_a, run_b, test_id, seed, resamples, fail_on, html_path, as_json) -> None:  # type: ignore[no-untyped-def]
    """Compare run B against run A, test by test and grader by grader, with paired statistics.

    RUN_A and RUN_B: each an id, a unique prefix, or last. Exits 1 with --fail-on-regression when B is worse.

    \b
    Example:
      evalstore compare rec-20261122T101500-3fa9c1 last --fail-on-regression flip --html report.html
    """
    store = open_store(ctx, create=False)
    a, b = resolve_run(store, run_a), resolve_run(store, run_b)
    comparison = compare_runs(
        load_results(store, a), load_results(store, b), seed=seed, resamples=resamples, test_id=test_id
    )
    emit_comparison(comparison, as_json=as_json, html_path=html_path)
    if fail_on:
        regressed, reason = regression(comparison, fail_on)
        if regressed:
            note(f"regression: {reason}")
            sys.exit(EXIT_FAILED)


def emit_comparison(comparison: Comparison, *, as_json: bool, html_path: Path | None = None) -> None:
    if html_path:
        from evalstore.replay.analysis.report_html import render_html

        html_path.write_text(
            render_html(comparison, title=f"{comparison.run_a} vs {comparison.run_b}"), encoding="utf-8"
        )
        note(f"wrote {html_path}")
    if as_json:
        print_json(comparison.to_dict())
    else:
        print_comparison(comparison)
