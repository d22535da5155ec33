"""``evalstore compare A B``, and the comparison printout ``replay`` and ``quickstart`` share."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import click

from evalstore.cli.context import complete_run_id, complete_test_id, open_reader
from evalstore.cli.errors import EXIT_FAILED, UsageError, handle_errors
from evalstore.cli.files import output_option, replacing
from evalstore.cli.output import (
    echo,
    fmt_score,
    json_option,
    no_cycle_collection,
    note,
    plural,
    print_json,
    print_table,
)
from evalstore.cli.params import NON_NEGATIVE
from evalstore.replay.choices import OUTCOME_THRESHOLD, REGRESSION_MODES

if TYPE_CHECKING:  # annotations only: the modules load when the command runs, not for its --help
    from evalstore.replay.analysis.compare import Comparison, RunResults
    from evalstore.store import EventStore


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.3f}"


def _stats_cells(stats) -> tuple[str, str, str]:  # type: ignore[no-untyped-def]
    s = stats.score
    ci = f"[{s.ci_low:+.3f}, {s.ci_high:+.3f}]" if s.ci_low is not None else (s.note or "not enough pairs")
    p = f"{stats.mcnemar.p_value:.4g}" if stats.mcnemar.p_value is not None else (stats.mcnemar.note or "-")
    k = f"{stats.kappa.kappa:.3f}" if stats.kappa.kappa is not None else (stats.kappa.note or "-")
    return ci, p, k


def _outcomes_line(c: Comparison) -> str:
    """``agentv compare``'s summary line, its counts spelled as AgentV spells them."""
    w = c.outcomes
    gain = "" if w.mean_normalized_gain is None else f" | g: {w.mean_normalized_gain:+.3f}"
    return (
        f"win/loss/tie (agentv compare, |delta| >= {w.threshold:g}): {w.wins} win{'' if w.wins == 1 else 's'}, "
        f"{w.losses} loss{'' if w.losses == 1 else 'es'}, {w.ties} tie{'' if w.ties == 1 else 's'} | "
        f"mean delta {w.mean_delta:+.3f}{gain} | status: {w.status}"
    )


def print_comparison(c: Comparison, *, max_tests: int = 50) -> None:
    from evalstore.replay.analysis.per_test import key_label

    # Every line here holds stored text (run and test ids, assertions): none may break into two.
    line = partial(echo, one_line=True)
    o = c.overall
    ci, p, k = _stats_cells(o)
    if c.averaged:
        line(
            f"compare {c.run_a} (A) -> {c.run_b} (B): {plural(o.score.n, 'paired test')} "
            f"({plural(len(c.tests), 'paired result')}: each test's attempts averaged, one pair a test)"
        )
    else:
        line(f"compare {c.run_a} (A) -> {c.run_b} (B): {plural(o.score.n, 'paired result')}")
    if c.not_regradable:
        line(
            f"left out: {len(c.not_regradable)} not regradable (nothing to grade): "
            + ", ".join(key_label(k) for k in c.not_regradable),
        )
    line(
        f"mean score A={fmt_score(o.score.mean_a)} B={fmt_score(o.score.mean_b)} diff={_signed(o.score.mean_diff)} "
        f"95% CI {ci} (paired bootstrap, seed {c.seed})",
    )
    line(
        f"pass/fail: both pass {o.counts.both_pass}, both fail {o.counts.both_fail}, "
        f"pass->fail {o.counts.a_only_pass}, fail->pass {o.counts.b_only_pass}; McNemar exact p={p}; kappa={k}",
    )
    line(_outcomes_line(c))
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
    changed = [t for t in c.units if t.changed]
    if changed:
        shown = sorted(changed, key=lambda t: (t.flip is None, -abs(t.delta)))[:max_tests]
        print_table(
            f"changed tests ({len(changed)} of {len(c.units)})"
            + (f", first {max_tests}" if len(changed) > max_tests else ""),
            ["test", "A", "B", "delta", "flip", "result"],
            [
                (
                    t.label,
                    fmt_score(t.score_a),
                    fmt_score(t.score_b),
                    _signed(t.delta),
                    t.flip or "",
                    c.outcome(t),
                )
                for t in shown
            ],
            ids=["test", "A", "B", "delta", "flip"],
            optional=["result"],
        )
    else:
        line("no test changed score")
    if c.only_in_a or c.only_in_b:
        line(f"only in A: {', '.join(key_label(k) for k in c.only_in_a) or '-'}")
        line(f"only in B: {', '.join(key_label(k) for k in c.only_in_b) or '-'}")
    for diff in c.assertion_diffs:
        line(f"assertions of {key_label(diff.key)}:")
        for g in diff.graders:
            for a in g.only_in_a:
                line(f"  [{g.grader}] only in A ({'pass' if a.passed else 'fail'}): {a.text}")
            for a in g.only_in_b:
                line(f"  [{g.grader}] only in B ({'pass' if a.passed else 'fail'}): {a.text}")
            for ch in g.changed:
                line(
                    f"  [{g.grader}] {'pass' if ch.passed_a else 'fail'} -> {'pass' if ch.passed_b else 'fail'}: {ch.text}",
                )
            if not (g.only_in_a or g.only_in_b or g.changed):
                line(f"  [{g.grader}] no assertion changed ({g.unchanged} the same)")


@click.command()
@click.argument("runs", nargs=-1, required=True, shell_complete=complete_run_id)
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
@output_option("--html", "html_path", help="Write a self-contained HTML report.")
@click.option(
    "--cluster-by",
    metavar="KEY",
    help="Tests sharing this metadata value (conversation_id, category, or any metadata key) are not "
    "independent: cluster-robust standard errors. With two runs, a line with that interval, which "
    "--fail-on-regression ci then gates on.",
)
@click.option(
    "--threshold",
    default=OUTCOME_THRESHOLD,
    show_default=True,
    type=NON_NEGATIVE,
    help="Score difference that makes a test a win (B higher) or a loss (B lower), else a tie, as agentv compare "
    "counts them.",
)
@json_option
@click.pass_context
@handle_errors
def compare(ctx, runs, test_id, seed, resamples, fail_on, html_path, cluster_by, threshold, as_json) -> None:  # type: ignore[no-untyped-def]
    """Compare run B against run A, test by test and grader by grader, with paired statistics.

    RUNS: each an id, a unique prefix, or last. Exits 1 with --fail-on-regression when B is worse.
    RUN@TARGET takes only that target's results (a run of several targets, AgentV's matrix): A@T1 B@T2
    pairs them test by test, e.g. two targets of one run; RUN@ takes its results without a target.

    With more runs (BASE V1 V2 ..., e.g. regrades with several prompt variants), one row per variant
    against BASE, p-values Holm-adjusted over the variants. When human labels exist for the tests, each
    run's agreement with them, and whether the difference is more than noise.

    \b
    Example:
      evalstore compare rec-20261122T101500-3fa9c1 last --fail-on-regression flip --html report.html
      evalstore compare BASE VARIANT1 VARIANT2 --cluster-by category
    """
    from evalstore.replay.analysis.compare import compare as compare_runs
    from evalstore.replay.analysis.compare import one_target, regression
    from evalstore.replay.analysis.views import resolve_run
    from evalstore.replay.labels import label_run
    from evalstore.replay.material import load_scores

    if len(runs) < 2:
        raise UsageError("compare needs at least two runs: A B, or BASE V1 V2 ...")

    store = open_reader(ctx)
    # RUN@TARGET: that target's results of the run (a run id has no `@`), paired with the other side's by test;
    # RUN@ its results without a target.
    targets = [r.rpartition("@")[2] if "@" in r else None for r in runs]
    ids = [resolve_run(store, r.rpartition("@")[0] if "@" in r else r) for r in runs]
    by_target = any(t is not None for t in targets)
    if by_target:
        if len(runs) != 2 or None in targets:
            raise UsageError("RUN@TARGET pairs two targets: give both sides one, as A@TARGET B@TARGET")
        if cluster_by:
            raise UsageError("--cluster-by compares whole runs; leave out @TARGET")
    repeated = sorted({i for i in ids if ids.count(i) > 1}) if not by_target else []
    if repeated:  # allowed (a sanity check of the statistics), but rarely what was meant
        note(f"run {', '.join(repeated)} is given more than once: it is compared with itself")
    bases = [label_run(store, r) for r in ids]  # the run holding each run's transcripts (and labels)
    labels = _labels_for(store, bases) if not by_target else []  # labels name a result's target
    if len(ids) > 2:
        if (
            test_id
            or fail_on
            or html_path
            or ctx.get_parameter_source("threshold") is not click.core.ParameterSource.DEFAULT
        ):
            raise UsageError("--test, --fail-on-regression, --html and --threshold compare two runs; give only A and B")
        _compare_many(store, ids, bases[0], cluster_by=cluster_by, labels=labels, as_json=as_json)
        return
    a, b = ids
    if a != b:
        _incomplete(store, ids)
    results_a, results_b = load_scores(store, a), load_scores(store, b)
    if targets[0] is not None and targets[1] is not None:
        results_a, results_b = one_target(results_a, targets[0]), one_target(results_b, targets[1])
    with no_cycle_collection():  # both runs are read; what the comparison builds has no cycles
        comparison = compare_runs(
            results_a, results_b, seed=seed, resamples=resamples, test_id=test_id, threshold=threshold
        )
        extra: dict[str, object] = {}
        clustered = None
        if labels:
            from evalstore.replay.analysis.agreement import agreement_difference

            extra["agreement"] = agreement_difference(labels, results_a, results_b)
        if cluster_by:
            from evalstore.replay.analysis.variants import compare_variants

            clusters = _clusters(store, [bases[0], a, b], cluster_by, [results_a, results_b])
            row = compare_variants(results_a, [results_b], clusters=clusters, cluster_by=cluster_by).rows[0]
            extra["clustered"] = row
            clustered = (cluster_by, row.difference)
        emit_comparison(
            comparison, store, as_json=as_json, html_path=html_path, extra=extra, results=(results_a, results_b)
        )
    if not comparison.tests and not comparison.not_regradable:
        from evalstore.replay.analysis.compare import targets_apart

        apart = targets_apart(results_a, results_b)
        if apart:
            named_a, named_b = (f"target {t}" if t else "no target" for t in apart)
            note(
                f"no result pairs: A's are of {named_a}, B's of {named_b} (results pair by test, target and "
                f"attempt); to compare them test by test: evalstore compare {a}@{apart[0]} {b}@{apart[1]}"
            )
    if fail_on:
        regressed, reason = regression(comparison, fail_on, clustered)
        if regressed:
            note(f"regression: {reason}")
            sys.exit(EXIT_FAILED)


def _clusters(store, run_ids: list[str], key: str, runs: list) -> dict:  # type: ignore[no-untyped-def]
    """Each test's value of ``key`` (``variants.cluster_labels``). No test having it is a mistyped key,
    refused (every test its own cluster would be printed as clustered); some tests without it are each
    their own cluster, said in a note."""
    from evalstore.replay.analysis.variants import cluster_keys, cluster_labels

    clusters = cluster_labels(store, run_ids, key)
    if not clusters:
        known = cluster_keys(store, run_ids)
        raise UsageError(
            f"--cluster-by {key}: no test of these runs has it"
            + (f"; their tests have: {', '.join(known)}" if known else "; their tests have no metadata to cluster by")
        )
    tests = {(test_id, target) for run in runs for test_id, target, _ in run.results}
    without = len(tests - clusters.keys())
    if without:
        note(f"{without} of {len(tests)} tests have no {key}: each is a cluster of its own")
    return clusters


def _incomplete(store, run_ids: list[str]) -> None:  # type: ignore[no-untyped-def]
    """A run still ``started`` (an interrupted replay, a shard not done) holds only the tests it recorded:
    the others would be read as missing from it without a word."""
    for side, run_id in zip("AB", run_ids, strict=False):
        status = store.query("runs", run_id=run_id)[0]["status"]
        if status != "completed":
            other = "B" if side == "A" else "A"
            note(
                f"run {run_id} ({side}) is incomplete (status {status}): only its recorded tests are compared; "
                f"the others are listed as only in {other}"
            )


def _labels_for(store, bases: list[str]) -> list:  # type: ignore[no-untyped-def]
    """The current labels of the runs' transcripts, when all the runs regrade the same recorded run."""
    from evalstore.replay.labels import current_labels

    family = set(bases)
    return current_labels(store, family.pop()) if len(family) == 1 else []


def _p(x: float | None) -> str:
    if x is None:
        return "-"
    return "<0.0001" if x < 1e-4 else f"{x:.4g}"  # a normal tail underflows to 0; it is never exactly 0


def _compare_many(store, ids, base_transcripts, *, cluster_by, labels, as_json) -> None:  # type: ignore[no-untyped-def]
    from evalstore.replay.analysis.stats import MIN_PAIRS_CI
    from evalstore.replay.analysis.variants import compare_variants
    from evalstore.replay.material import load_scores

    base, variants = ids[0], ids[1:]
    loaded = [load_scores(store, r) for r in ids]
    clusters = _clusters(store, [base_transcripts, *ids], cluster_by, loaded) if cluster_by else None
    report = compare_variants(
        loaded[0],
        loaded[1:],
        clusters=clusters,
        cluster_by=cluster_by,
        labels=labels,
    )
    if as_json:
        print_json(report.to_dict())
        return
    se = f"clustered by {cluster_by}" if cluster_by else "tests independent"
    echo(f"compare {len(variants)} variants against {base}: mean test score, attempts averaged per test ({se})")
    print_table(
        "variants against the base (p-values Holm-adjusted over the variants: family-wise error 5%)",
        [
            "variant",
            "tests",
            "clusters",
            "mean base",
            "mean variant",
            "diff",
            "95% CI",
            "p",
            "p (Holm)",
            "detectable at 80% power",
        ],
        [
            (
                r.run_id,
                r.difference.n,
                r.difference.clusters,
                fmt_score(r.mean_base),
                fmt_score(r.mean_variant),
                _signed(r.difference.mean_diff),
                "-" if r.difference.low is None else f"[{r.difference.low:+.3f}, {r.difference.high:+.3f}]",
                _p(r.difference.p_value),
                _p(r.p_holm),
                "-" if r.difference.mde is None else f"±{r.difference.mde:.3f}",
            )
            for r in report.rows
        ],
        ids=["variant", "tests", "mean base", "mean variant", "diff", "95% CI"],
        optional=["detectable at 80% power", "clusters", "p", "mean base", "tests"],
    )
    if any(r.difference.p_value is None and r.difference.n for r in report.rows):
        note(f"a CI and p-value need at least {MIN_PAIRS_CI} paired tests (or clusters); '-' marks fewer")
    rows = [(r, a) for r in report.rows for a in r.agreement]
    if rows:
        print_table(
            "agreement with the human labels (McNemar on right/wrong per labelled test, Holm-adjusted)",
            ["variant", "grader", "n", "accuracy base", "accuracy variant", "p", "p (Holm)"],
            [
                (
                    r.run_id,
                    a.grader,
                    a.n,
                    fmt_score(a.accuracy_a),
                    fmt_score(a.accuracy_b),
                    _p(a.mcnemar.p_value),
                    _p(r.agreement_p_holm.get(a.grader)),
                )
                for r, a in rows
            ],
            ids=["variant", "grader"],
        )


def _stream_json(c: Comparison, tail: dict[str, object]) -> None:
    """``Comparison.to_dict()`` (plus ``tail``) written field by field, each long list an item a line (the
    flipped tests' full verdicts read a chunk at a time): memory does not hold the whole document."""
    out = sys.stdout
    dumps = json.JSONEncoder(ensure_ascii=False, default=str).encode
    fields = [*c.json_fields(), *tail.items()]
    out.write("{\n")
    for n, (key, value) in enumerate(fields, 1):
        out.write(f"  {dumps(key)}: ")
        if isinstance(value, Iterator):
            out.write("[")
            first = True
            for item in value:
                out.write(("\n    " if first else ",\n    ") + dumps(item))
                first = False
            out.write("\n  ]")
        else:
            out.write(dumps(value))
        out.write(",\n" if n < len(fields) else "\n}\n")


def emit_comparison(
    comparison: Comparison,
    store: EventStore,
    *,
    as_json: bool,
    html_path: Path | None = None,
    extra: dict | None = None,
    results: tuple[RunResults, RunResults] | None = None,
) -> None:
    """Print the comparison (table or --json) and write its HTML report; ``results``: the runs it was
    paired from, when the caller has them (else they are read again from the projections)."""
    from evalstore.replay.material import load_scores

    if html_path:
        from evalstore.replay.analysis.report_html import iter_html
        from evalstore.replay.analysis.views import describe_swaps, run_started

        a, b = results or (load_scores(store, comparison.run_a), load_scores(store, comparison.run_b))
        # What each run swapped to regrade its parent (`runs`' "changes"): a report of a replay says it.
        changes = {
            run: describe_swaps(run_started(store, run.split("@", 1)[0]).overrides)
            for run in (comparison.run_a, comparison.run_b)
        }
        with replacing(html_path) as page:  # a report cut short (disk full, Ctrl-C) leaves the old one
            title = f"{comparison.run_a} vs {comparison.run_b}"
            agreement = (extra or {}).get("agreement")
            page.writelines(iter_html(comparison, a, b, title=title, agreement=agreement, changes=changes))
        note(f"wrote {html_path}")
    extra = extra or {}
    if as_json:
        tail: dict[str, object] = {}
        if "agreement" in extra:
            tail["agreement"] = [a.to_dict() for a in extra["agreement"]]
        if "clustered" in extra:
            tail["clustered"] = extra["clustered"].to_dict()
        _stream_json(comparison, tail)
        return
    print_comparison(comparison)
    if "clustered" in extra:
        from evalstore.replay.analysis.compare import plural_clusters
        from evalstore.replay.analysis.stats import MIN_PAIRS_CI

        d = extra["clustered"].difference
        if d.se is not None:
            echo(
                f"clustered: {d.clusters} groups: mean diff {d.mean_diff:+.3f}, "
                f"95% CI [{d.low:+.3f}, {d.high:+.3f}], p={d.p_value:.4g}; detectable at 80% power: ±{d.mde:.3f}"
            )
        else:  # said, not left out: the bootstrap interval above assumes the tests independent
            echo(
                f"clustered: {plural_clusters(d.clusters)}: no CI or p-value (need at least {MIN_PAIRS_CI} "
                "clusters); the interval above treats the tests as independent"
            )
    if extra.get("agreement"):
        print_table(
            "agreement with the human labels (A vs B; McNemar exact on right/wrong per labelled test)",
            ["grader", "n", "accuracy A", "accuracy B", "A only right", "B only right", "p", "verdict"],
            [
                (
                    a.grader,
                    a.n,
                    fmt_score(a.accuracy_a),
                    fmt_score(a.accuracy_b),
                    a.a_only_correct,
                    a.b_only_correct,
                    _p(a.mcnemar.p_value),
                    a.verdict,
                )
                for a in extra["agreement"]
            ],
        )
