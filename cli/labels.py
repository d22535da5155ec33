"""``evalstore label``, ``evalstore labels`` (import, export, list) and ``evalstore agreement``."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import click

from evalstore.cli.context import open_store
from evalstore.cli.errors import UsageError, handle_errors
from evalstore.cli.files import output_option
from evalstore.cli.output import echo, json_option, note, print_json, print_table, visible
from evalstore.cli.params import UNIT_INTERVAL


@click.command()
@click.argument("run")
@click.argument("test", required=False)
@click.option("--pass", "passed", is_flag=True, help="The answer is right.")
@click.option("--fail", "failed", is_flag=True, help="The answer is wrong.")
@click.option("--score", type=UNIT_INTERVAL, help="A score from 0 to 1 (with or instead of pass/fail).")
@click.option("--grader", metavar="NAME", help="The grader (criterion) the label is about; default: the whole answer.")
@click.option("--note", "note_text", metavar="TEXT", help="Why.")
@click.option("--by", metavar="NAME", help="Who labels (default: the OS user).")
@click.option(
    "--next",
    "interactive",
    is_flag=True,
    help="Label RUN's tests one after another in the terminal: the ones you have not labelled yet.",
)
@click.option(
    "--blind/--show-verdict",
    default=True,
    show_default=True,
    help="With --next: hide the run's verdicts (blind) or show them beside the answer.",
)
@json_option
@click.pass_context
@handle_errors
def label(ctx, run, test, passed, failed, score, grader, note_text, by, interactive, blind, as_json) -> None:  # type: ignore[no-untyped-def]
    """Record a human label for TEST's answer in RUN (it applies to every regrade of that answer).

    RUN: an id, a unique prefix, or last. TEST is a test id, or TEST@TARGET#ATTEMPT when the run has
    several results for it (attempts count from 1: AgentV's sample_index + 1). A test id may itself hold
    @ or #; a TEST that can be read as two different results is refused, naming both. A newer label by
    the same person for the same test and grader supersedes the older one; both stay in the log.

    With --next (and no TEST), go through RUN's tests you have not labelled yet: each shows the question,
    the answer as the graders saw it (files converted to text) and, with --show-verdict, the run's
    verdicts; answer p (pass), f (fail), s (skip) or q (quit), optionally followed by a note. Each label is
    recorded as you give it; run it again to continue.

    \b
    Examples:
      evalstore label last q3-report --fail --note "West shows zero revenue" --by alice
      evalstore label last --next --by alice
    """
    from evalstore.replay.analysis.per_test import key_label
    from evalstore.replay.labels import LabelInput, contradiction, label_warnings, record_labels

    if passed and failed:
        raise UsageError("--pass and --fail contradict each other: give one")
    verdict = "pass" if passed else "fail" if failed else None
    why = contradiction(verdict, score)
    if why:
        raise UsageError(f"--{verdict} and --score {score:g} contradict each other: {why}; give the one you mean")
    if interactive:
        if test is not None:
            raise UsageError("--next labels the run's tests in turn; give no TEST with it")
        if verdict is not None or score is not None or note_text or as_json:
            raise UsageError(
                "--next asks for each verdict; --pass, --fail, --score, --note and --json do not go with it"
            )
        _label_next(open_store(ctx, create=False), run, by=by, grader=grader, blind=blind)
        return
    if test is None:
        raise UsageError("give TEST (or --next to label the run's tests in turn)")
    if verdict is None and score is None:
        raise UsageError("give --pass or --fail (and/or --score)")
    store = open_store(ctx, create=False)
    [event] = record_labels(
        store, [LabelInput(test=test, verdict=verdict, score=score, grader=grader, note=note_text, by=by)], run=run
    )
    for warning in label_warnings(store, [event]):
        note(f"warning: {warning}")
    if as_json:
        print_json(event.model_dump(mode="json"))
    else:
        what = " ".join(x for x in (event.verdict, None if event.score is None else f"score {event.score:g}") if x)
        about = f" [{event.grader}]" if event.grader else ""
        result = key_label((event.test_id, event.target, event.attempt))
        echo(f"labelled {result}{about} {what} by {event.by} (run {event.run_id})", one_line=True)


_ANSWERS = {
    "p": "pass",
    "pass": "pass",
    "f": "fail",
    "fail": "fail",
    "s": "skip",
    "skip": "skip",
    "q": "quit",
    "quit": "quit",
}
_RULE = "─" * 72


def _ask() -> tuple[str, str | None]:
    """One answer from the person: (pass|fail|skip|quit, note). End of input is quit."""
    while True:
        try:
            line = click.prompt(
                "pass, fail, skip or quit? [p/f/s/q, then an optional note]",
                default="",
                show_default=False,
                prompt_suffix=" ",
            )
        except click.Abort:
            echo()
            return "quit", None
        if not sys.stdin.isatty():
            echo(line)  # piped answers: show them, so the transcript reads like a session
        word, _, rest = line.strip().partition(" ")
        choice = _ANSWERS.get(word.lower())
        if choice:
            return choice, rest.strip() or None
        echo("  answer p, f, s or q (e.g. `f the total is wrong`)")


def _block(heading: str, text: str) -> None:
    """A heading, then stored text (a question, an answer) with each of its lines indented: the text
    keeps its line breaks, to be read as written, but none of its lines starts where the command's own
    do (the rule, ``[2/40] TEST``, ``Run's verdicts:``), so no line of it can pass for one of them."""
    echo(f"\n{heading}:")
    for line in visible(text).splitlines() or [""]:
        echo(f"  {line}")


def _label_next(store, run: str, *, by: str | None, grader: str | None, blind: bool) -> None:  # type: ignore[no-untyped-def]
    """The interactive loop of ``label --next``: show, ask, record, next."""
    from evalstore.replay.labelling import pending
    from evalstore.replay.labels import record_labels, unknown_grader

    queue = pending(store, run, by=by, grader=grader)
    about = f" [{queue.grader}]" if queue.grader else ""
    if queue.grader and (warning := unknown_grader(store, queue.base_run_id, queue.grader)):
        note(f"warning: {warning}")
    echo(
        f"labelling {queue.run_id}{about} as {queue.by}: {len(queue.keys)} of {queue.total} test(s) to go"
        + (" (verdicts hidden; --show-verdict shows them)" if blind else ""),
        one_line=True,
    )
    labelled = skipped = 0
    for i, review in enumerate(queue, start=1):
        echo(_RULE)
        echo(f"[{i}/{len(queue.keys)}] {review.name}", one_line=True)
        # A question the result did not record is the test as the run's eval snapshot has it: said so.
        _block(
            "Question (from the run's eval snapshot)" if review.case_origin == "eval_snapshot" else "Question",
            review.question,
        )
        if review.criteria:
            _block("Criteria", review.criteria)
        if review.expected:
            _block("Expected", review.expected)
        _block("Answer (as the graders saw it)", review.answer or "(empty)")
        if not blind:
            shown = [v for v in review.verdicts if not queue.grader or v.grader == queue.grader]
            verdicts = ", ".join(
                f"{v.grader} {v.verdict or '-'}" + ("" if v.score is None else f" {v.score:.2f}") for v in shown
            )
            test = "" if review.passed is None else f"; test {'pass' if review.passed else 'fail'}"
            echo()
            echo(f"Run's verdicts: {verdicts or 'none'}{test}", one_line=True)
        echo()
        choice, text = _ask()
        if choice == "quit":
            break
        if choice == "skip":
            skipped += 1
            continue
        record_labels(
            store,
            [review.label_input(verdict=choice, grader=queue.grader, note=text, by=queue.by)],
            run=queue.base_run_id,
        )
        labelled += 1
        echo(f"  recorded {choice}" + (f" ({text})" if text else ""), one_line=True)
    left = len(queue.keys) - labelled
    echo(_RULE)
    echo(f"labelled {labelled}, skipped {skipped}; {left} left for {queue.by}", one_line=True)
    if left:
        more = (f" --by {queue.by}" if by else "") + (f" --grader {queue.grader}" if queue.grader else "")
        echo(f"continue with: evalstore label {queue.run_id} --next{more}", one_line=True)


class _LabelsGroup(click.Group):
    """``evalstore labels RUN`` lists; ``labels import|export|list ...`` are subcommands."""

    def resolve_command(self, ctx, args):  # type: ignore[no-untyped-def]
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["list", *args]
        return super().resolve_command(ctx, args)


@click.group(cls=_LabelsGroup)
def labels() -> None:
    """Human labels: list a run's (labels RUN), import them from CSV or JSONL, export them all.

    \b
    Examples:
      evalstore labels last
      evalstore labels import labels.csv --run last
      evalstore labels export -o labels.jsonl
    """


@labels.command("list")
@click.argument("run")
@click.option("--all", "show_all", is_flag=True, help="Also list labels a newer one by the same person replaced.")
@json_option
@click.pass_context
@handle_errors
def list_labels(ctx, run, show_all, as_json) -> None:  # type: ignore[no-untyped-def]
    """The labels of RUN's answers (of the run it regraded, for a replay).

    RUN: an id, a unique prefix, or last.

    \b
    Example:
      evalstore labels list last --all
    """
    from evalstore.replay.analysis.per_test import key_label
    from evalstore.replay.labels import label_run, read_labels

    store = open_store(ctx, create=False)
    base = label_run(store, run)
    found = [lab for lab in read_labels(store, base) if show_all or not lab.superseded]
    if as_json:
        print_json([lab.to_dict() for lab in found])
        return
    print_table(
        f"labels of {base} ({len(found)})",
        ["test", "grader", "verdict", "score", "by", "when", "note"] + (["superseded"] if show_all else []),
        [
            (
                key_label((lab.label.test_id, lab.label.target, lab.label.attempt)),
                lab.label.grader or "",
                lab.label.verdict or "",
                "" if lab.label.score is None else f"{lab.label.score:g}",
                lab.label.by,
                lab.when[:19],
                lab.label.note or "",
                *(["yes" if lab.superseded else ""] if show_all else []),
            )
            for lab in found
        ],
    )


@labels.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--run", metavar="RUN", help="The run for rows without a run column.")
@click.pass_context
@handle_errors
def import_labels(ctx, file, run) -> None:  # type: ignore[no-untyped-def]
    """Import labels from a CSV (with a header) or JSONL file; a bad row is FILE:LINE and nothing is written.

    Columns: run, test_id, target, attempt, grader, verdict (pass/fail), score (0-1), note, by,
    labelled_at. test_id and verdict or score are required; run unless --run is given. A label the store
    holds already (the same file imported again, an export of this store) is not recorded again.

    \b
    Example:
      evalstore labels import labels.csv --run last
    """
    from evalstore.replay.labels import label_warnings, read_label_file, record_labels

    store = open_store(ctx, create=False)
    items, ids = read_label_file(file)
    # A label the store holds already (this file imported before, or an export of this store) is left out.
    events = record_labels(store, items, run=run, ids=list(ids), skip_present=True)
    runs = sorted({e.run_id for e in events})
    for warning in label_warnings(store, events):
        note(f"warning: {warning}")
    if there := len(items) - len(events):
        where = f" for {', '.join(runs)}" if runs else ""
        note(f"imported {len(events)} new label(s){where}; {there} already in the store")
    else:
        note(f"imported {len(events)} label(s) for {', '.join(runs) or 'no run'}")


@labels.command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv"]),
    default="jsonl",
    show_default=True,
    help="JSON lines or CSV, with the columns labels import reads.",
)
@output_option("-o", "--output", help="Write to FILE (default stdout).")
@click.pass_context
@handle_errors
def export_labels(ctx, fmt, output) -> None:  # type: ignore[no-untyped-def]
    """Export every label in the store (superseded ones too, oldest first), as import takes them.

    \b
    Example:
      evalstore labels export --format csv -o labels.csv
    """
    from evalstore.replay.labels import COLUMNS, all_labels, export_rows

    store = open_store(ctx, create=False)
    rows = list(export_rows(all_labels(store)))
    out = output.open("w", encoding="utf-8", newline="") if output else sys.stdout
    try:
        if fmt == "csv":
            writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        else:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    finally:
        if output:
            out.close()
    if output:
        note(f"wrote {len(rows)} label(s) to {output}")


def _est(e, digits: int = 2) -> str:  # type: ignore[no-untyped-def]
    if e.value is None:
        return e.note or "-"
    if e.low is None:
        return f"{e.value:.{digits}f}"
    return f"{e.value:.{digits}f} [{e.low:.{digits}f},{e.high:.{digits}f}]"


AGREEMENT_COLUMNS = (
    "run",
    "grader",
    "n",
    "TP/FN/FP/TN",
    "accuracy",
    "TPR",
    "TNR",
    "precision",
    "kappa",
    "pass rate",
    "corrected",
)


TOO_FEW = "too few labels"
"""What a row with fewer labelled tests than ``--min-labels`` says in place of its figures (the line under
the table says how many it needs)."""


def _agreement_row(r) -> list[object]:  # type: ignore[no-untyped-def]
    """One row of ``agreement``'s table. On too few labels no agreement figure holds: the accuracy cell
    says so once and the others stay blank (the raw pass rate, which needs no labels, stays)."""
    a = r.agreement
    c = a.confusion
    head = [r.run_id, r.grader, r.labelled, f"{c.tp}/{c.fn}/{c.fp}/{c.tn}"]
    if not a.enough:
        return [*head, TOO_FEW, "", "", "", "", _est(r.raw_pass_rate), ""]
    corrected = _est(r.corrected_pass_rate) if r.corrected_pass_rate.value is not None else "-"
    return [
        *head,
        *(_est(e) for e in (a.accuracy, a.tpr, a.tnr, a.precision, a.kappa)),
        _est(r.raw_pass_rate),
        corrected,
    ]


@click.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("--grader", metavar="NAME", help="Only this grader (or '(test)' for the test-level pass).")
@click.option(
    "--min-labels", default=10, show_default=True, type=click.IntRange(1), help="Fewer labelled tests: no numbers."
)
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap resampling.")
@click.option(
    "--resamples",
    default=2000,
    show_default=True,
    type=click.IntRange(1),
    help="Bootstrap resamples for the confidence intervals.",
)
@json_option
@click.pass_context
@handle_errors
def agreement(ctx, runs, grader, min_labels, seed, resamples, as_json) -> None:  # type: ignore[no-untyped-def]
    """How well each grader of each RUN agrees with the human labels, and the pass rate corrected for its errors.

    Give a run and its replays (e.g. one per grader prompt) to see which prompt grades like the people
    who labelled. Intervals are 95% bootstrap over the labelled tests (seeded). A test's attempts
    (epochs, trials) count once: each side passes it when any of its labelled attempts passed.

    \b
    Example:
      evalstore agreement rec-20261122T101500-3fa9c1 rpl-20261123T090000-77aa01 --grader report-quality
    """
    from evalstore.replay.analysis.agreement import TEST_LEVEL, graders_of
    from evalstore.replay.analysis.agreement import agreement as compute
    from evalstore.replay.analysis.views import resolve_run
    from evalstore.replay.labels import current_labels, label_run
    from evalstore.replay.material import load_scores

    store = open_store(ctx, create=False)
    ids = [resolve_run(store, r) for r in runs]
    bases = {label_run(store, r) for r in ids}
    if len(bases) > 1:
        raise UsageError(f"the runs regrade different recorded runs ({', '.join(sorted(bases))}); give one family")
    [base] = bases
    labels = current_labels(store, base)
    scores = [load_scores(store, r) for r in ids]
    known = {TEST_LEVEL}.union(*(graders_of(s) for s in scores))
    if grader is not None and grader not in known:
        raise UsageError(
            f"--grader {grader!r}: no grader of that name in these runs; they have {', '.join(sorted(known))}"
        )
    report = compute(
        base,
        labels,
        scores,
        grader=grader,
        seed=seed,
        resamples=resamples,
        min_labels=min_labels,
    )
    if as_json:
        print_json(report.to_dict())
        return
    echo(f"labels of {base}: {report.labels} by {', '.join(report.people) or 'nobody'}")
    if not report.labels:
        note(f"no labels yet: `evalstore label {base} TEST --pass|--fail` or `evalstore labels import FILE`")
    print_table(
        "agreement with the human labels (95% bootstrap intervals)",
        list(AGREEMENT_COLUMNS),
        [_agreement_row(r) for r in report.rows],
        ids=["run", "grader", "n", "TP/FN/FP/TN"],
        optional=["precision", "TNR", "TPR", "corrected", "pass rate", "TP/FN/FP/TN", "n", "kappa"],
    )
    if any(not r.agreement.enough for r in report.rows):
        echo(f"{TOO_FEW}: agreement needs at least {report.min_labels} labelled tests (n; --min-labels)")
    uncorrectable = {
        r.corrected_pass_rate.note for r in report.rows if r.agreement.enough and r.corrected_pass_rate.value is None
    }
    for why in sorted(n for n in uncorrectable if n):
        echo(f"corrected -: {why}")
    for name, alpha in report.alpha.items():
        if alpha.value is not None:
            echo(f"labellers agree on {name}: Krippendorff's alpha {alpha.value:.3f} (the ceiling for a judge)")
        elif len(report.people) > 1:
            echo(f"labellers on {name}: {alpha.note}")
    ties = max((r.ties for r in report.rows), default=0)  # the same tests for every run: count them once
    if ties:
        echo(f"{ties} labelled test(s) left out where the labellers were split evenly")
