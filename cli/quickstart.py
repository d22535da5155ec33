"""``evalstore quickstart``: the README's main command."""

from __future__ import annotations

import shlex

import click

from evalstore.cli.audit import print_audit
from evalstore.cli.compare import print_comparison
from evalstore.cli.context import open_store
from evalstore.cli.errors import handle_errors
from evalstore.cli.output import json_option, note, print_json, progress_bar
from evalstore.cli.results import json_row, print_scored, scored_rows

REGRADE_PROMPT = "report-quality=file://my-examples/quickstart/prompts/report-quality.v2.md"
COPIED_EVAL = "my-examples/quickstart/evals/report.eval.yaml"
"""Real paths in the copy `evalstore examples copy my-examples` makes (the quickstart's Next: lines)."""


def _step(text: str) -> None:
    click.echo(click.style(f"\n== {text}", bold=True))


@click.command()
@json_option
@click.pass_context
@handle_errors
def quickstart(ctx: click.Context, as_json: bool) -> None:
    """Record the bundled example suite, regrade it with a changed converter and grader without
    calling the agent, compare the two runs and audit one test. No API key or network needed.

    Writes to the store in use (by default .evalstore/evalstore.db here, created when missing).

    \b
    Example:
      evalstore quickstart
      evalstore --db sqlite:///demo.db quickstart --json
    """
    from evalstore.replay import quickstart as qs
    from evalstore.replay.analysis.audit import audit_test
    from evalstore.replay.analysis.compare import compare as compare_runs
    from evalstore.replay.material import load_scores

    store = open_store(ctx)
    p = qs.plan(qs.examples_dir(), qs.judge_configured())
    if as_json:
        _quickstart_json(store, p)
        return
    _step(f"1. recording a run of {p.eval_v1.name} (the agent writes a text answer, revenue.xlsx and summary.html)")
    if not p.with_judge:
        note(
            f"(the example's LLM grader is off: set {qs.JUDGE_ENV}, EVALSTORE_JUDGE_MODEL and, if your endpoint "
            "needs a key, EVALSTORE_JUDGE_API_KEY_ENV=NAME_OF_THE_VARIABLE_HOLDING_IT to run it too)"
        )
    with progress_bar("running tests") as bar:
        run = qs.record(store, p, progress=bar.advance, on_start=lambda _id, n, _u: bar.start(n))
    print_scored(
        f"recorded run {run.run_id}",
        scored_rows(store, run.run_id, run.results),
    )
    click.echo(
        "The workbook grader scored 0: it reads the files as converted text, and the suite has no .xlsx\n"
        "converter, so it saw the workbook only as a '[file preprocessing warning]' (AgentV's ContentFile\n"
        "problem). Every byte is stored anyway."
    )

    changed = (
        "the LLM grader's prompt" if p.with_judge else f"the workbook grader ({p.eval_v2.name if p.eval_v2 else ''})"
    )
    _step(f"2. regrading it with an .xlsx converter and {changed}, without calling the agent")
    with progress_bar("regrading") as bar:
        replay = qs.regrade(store, p, run.run_id, progress=bar.advance, on_start=lambda _id, n, _d, _u: bar.start(n))
    print_scored(
        f"replay {replay.run_id} (parent {run.run_id})",
        scored_rows(store, replay.run_id, replay.results),
    )

    _step("3. comparing the regrade with the original")
    print_comparison(compare_runs(load_scores(store, run.run_id), load_scores(store, replay.run_id)))

    test_id = replay.results[-1].test_id if replay.results else run.results[0].test_id
    _step(f"4. auditing {test_id} in the replay: every verdict back to its bytes")
    print_audit(audit_test(store, replay.run_id, test_id))

    click.echo(click.style("\nNext:", bold=True))
    db = (ctx.obj or {}).get("db")
    cli = f"evalstore --db {shlex.quote(db)}" if db else "evalstore"  # the store these runs are in
    steps = [
        (f"{cli} runs", "every run in this store"),
        (f"{cli} show {replay.run_id}", ""),
        (f"{cli} compare {run.run_id} {replay.run_id} --html report.html", ""),
        (f"{cli} audit {replay.run_id} {test_id}" + (" --show-prompt" if p.with_judge else ""), ""),
        (f"{cli} verify", "recheck the hash chain and every blob"),
        (f"{cli} view --open", "look at the runs, tests and comparison in a browser"),
        (f"{cli} examples copy my-examples", "these suites, to read and change"),
        (f"{cli} run {COPIED_EVAL}", "run the copy yourself"),
        *([(f"{cli} replay {replay.run_id} --prompt {REGRADE_PROMPT}", "")] if p.with_judge else []),
        (f"{cli} import .agentv/results", "in an AgentV project: your own runs"),
    ]
    width = max(len(command) for command, why in steps if why) + 2
    for command, why in steps:
        click.echo(f"  {command:<{width}}# {why}" if why else f"  {command}")


def _quickstart_json(store, p) -> None:  # type: ignore[no-untyped-def]
    from evalstore.replay import quickstart as qs
    from evalstore.replay.analysis.audit import audit_test
    from evalstore.replay.analysis.compare import compare as compare_runs
    from evalstore.replay.material import load_scores

    run = qs.record(store, p)
    replay = qs.regrade(store, p, run.run_id)
    test_id = replay.results[-1].test_id if replay.results else run.results[0].test_id
    print_json(
        {
            "run_id": run.run_id,
            "replay_id": replay.run_id,
            "llm_grader": p.with_judge,
            "recorded": [json_row(r) for r in scored_rows(store, run.run_id, run.results)],
            "replayed": [json_row(r) for r in scored_rows(store, replay.run_id, replay.results)],
            "comparison": compare_runs(load_scores(store, run.run_id), load_scores(store, replay.run_id)).to_dict(),
            "audit": audit_test(store, replay.run_id, test_id),
        }
    )
