"""``evalstore assert``: the grader dev loop (AgentV's ``agentv eval assert``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalstore.cli.errors import EXIT_FAILED, UsageError, handle_errors
from evalstore.cli.options import no_warm_option
from evalstore.cli.output import echo, print_json


@click.command("assert")
@click.argument("name", required=False)
@click.option("--output", "output", metavar="TEXT", help="The agent's answer to grade.")
@click.option("--input", "input_", metavar="TEXT", help="The question the agent was asked (a user message).")
@click.option("--criteria", metavar="TEXT", help="What a good answer does.")
@click.option(
    "--file",
    "file_",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A JSON file {output, input?, criteria?, expected_output?} instead of --output/--input/--criteria.",
)
@click.option(
    "--eval", "eval_path", type=click.Path(dir_okay=False), help="Grade against this eval's test (with --test)."
)
@click.option("--run", "run_ref", metavar="RUN", help="Grade a stored test of RUN: transcript, artifacts, workspace.")
@click.option("--test", "test_id", metavar="ID", help="The test of --eval or --run.")
@click.option("--grader", metavar="NAME", help="The test's code grader (else .agentv/graders/NAME.*).")
@no_warm_option
@click.pass_context
@handle_errors
def assert_(
    ctx: click.Context,
    name: str | None,
    output: str | None,
    input_: str | None,
    criteria: str | None,
    file_: Path | None,
    eval_path: str | None,
    run_ref: str | None,
    test_id: str | None,
    grader: str | None,
    no_warm: bool,
) -> None:
    """Run one code grader on one answer and print its result as JSON; exit 0 if the score is at least 0.5.

    NAME is a grader script .agentv/graders/NAME.* found in the current folder or a parent (Python runs
    with this interpreter; other files directly or through their #! line). It gets the stdin payload a
    run would send it. With --eval and --test the payload is that test's (input, criteria, expected
    output); with --run and --test it is the stored test's transcript, artifacts and workspace, graded
    by the grader as it is on disk now. Nothing is written to the store.

    Exit 0 when the score is at least 0.5 (AgentV's rule), 1 otherwise or when the grader fails.

    \b
    Example:
      evalstore assert has-total --output "The total is 2,880." --criteria "states the total"
      evalstore assert --file result.json has-total
      evalstore assert --eval evals/report.eval.yaml --test q1 --grader check --output "..."
      evalstore assert --run last --test q1 --grader check
    """
    outcome = _outcome(ctx, name, output, input_, criteria, file_, eval_path, run_ref, test_id, grader, not no_warm)
    print_json(outcome.as_json())
    if outcome.result.status != "ok":
        echo(f"grader {outcome.grader} failed: {outcome.result.assertions[0].text}", err=True)
    sys.exit(0 if outcome.passed else EXIT_FAILED)


def _outcome(ctx, name, output, input_, criteria, file_, eval_path, run_ref, test_id, grader, warm):  # type: ignore[no-untyped-def]
    from evalstore.replay.grading import dev

    if run_ref or eval_path:
        if run_ref and eval_path:
            raise UsageError("give --eval or --run, not both")
        which = "--run" if run_ref else "--eval"
        grader = grader or name
        if not test_id or not grader:
            raise UsageError(f"{which} needs --test ID and --grader NAME")
        if name and grader != name:
            raise UsageError(f"NAME {name!r} and --grader {grader!r} disagree; give one")
        if run_ref:
            if output is not None or file_ or input_ is not None or criteria is not None:
                raise UsageError("--run grades the stored answer; drop --output/--input/--criteria/--file")
            from evalstore.cli.context import open_store
            from evalstore.replay.analysis.views import resolve_run

            store = open_store(ctx, create=False)
            return dev.assert_stored(store, resolve_run(store, run_ref), test_id, grader, warm=warm)
        if output is None:
            raise UsageError("--eval needs --output TEXT (the answer to grade)")
        if file_ or input_ is not None or criteria is not None:
            raise UsageError("--eval takes input and criteria from the test; drop --input/--criteria/--file")
        return dev.assert_eval_test(eval_path, test_id, grader, output, warm=warm)
    if not name:
        raise UsageError("name a grader (NAME), or use --eval/--run with --test and --grader")
    if test_id or grader:
        raise UsageError("--test and --grader go with --eval or --run")
    if file_:
        if output is not None or input_ is not None or criteria is not None:
            raise UsageError("give --file or --output/--input/--criteria, not both")
        data = dev.answer_from_file(file_)
        return dev.assert_named(
            name,
            data.get("output", data.get("answer")),
            input=data.get("input"),
            criteria=data.get("criteria"),
            expected_output=data.get("expected_output"),
            warm=warm,
        )
    if output is None:
        raise UsageError("give --output TEXT (or --file result.json)")
    return dev.assert_named(name, output, input=input_, criteria=criteria, warm=warm)
