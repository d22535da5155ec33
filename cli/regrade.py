"""``evalstore replay RUN``: regrade a stored run without calling the agent."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from evalstore.cli.attest import checkpoint_option
from evalstore.cli.context import complete_run_id, open_store
from evalstore.cli.errors import EXIT_FAILED, handle_errors
from evalstore.cli.files import output_option
from evalstore.cli.options import no_warm_option, refuse_with_resume
from evalstore.cli.output import echo, json_option, note, plural, print_json, progress_bar, resume_hint
from evalstore.cli.params import UNIT_INTERVAL
from evalstore.cli.results import print_scored, result_labels, scored_rows
from evalstore.replay.choices import REGRESSION_MODES

# The layers (SQLAlchemy, pydantic, the grading engine) are imported when the command runs, not for --help.


def not_regradable_groups(unable: list[tuple[tuple[str, str, int], str]]) -> dict[str, list[str]]:
    """The tests a replay cannot regrade, named, by reason."""
    from evalstore.replay.analysis.per_test import key_label

    groups: dict[str, list[str]] = {}
    for (test_id, target, attempt), reason in unable:
        groups.setdefault(reason, []).append(key_label((test_id, target or None, attempt)))
    return groups


@click.command()
@click.argument("run", required=False, shell_complete=complete_run_id)
@click.option(
    "--eval",
    "eval_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Regrade with this (newer) eval file instead of the run's snapshot.",
)
@click.option(
    "--preprocessor",
    "preprocessors",
    multiple=True,
    metavar="TYPE=COMMAND",
    help="Swap the converter for a media type, suite-wide (COMMAND: JSON argv array or a command line). Repeatable.",
)
@click.option(
    "--prompt",
    "prompts",
    multiple=True,
    metavar="GRADER=file://PATH",
    help="Swap an LLM grader's prompt; a relative PATH is from the current folder, else from the eval file's "
    "folder and its parents. Repeatable, once per grader (one --graders leaves out is refused).",
)
@click.option("--judge-target", help="Judge target for every LLM grader.")
@click.option("--judge-model", help="Judge model for every LLM grader.")
@click.option("--graders", help="Regrade only these graders (comma-separated); carry the others over.")
@click.option(
    "--tests", "tests_glob", metavar="GLOB", help="Regrade only tests whose id matches; carry the others over."
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Call judges, converters and code graders again instead of reusing recorded results.",
)
@click.option(
    "--batch",
    is_flag=True,
    help="Send the judge prompts the cache does not hold through the provider's batch API (OpenAI, Azure, "
    "Anthropic), at its batch price; waits for the batch (--resume continues one without submitting again).",
)
@click.option("--strict", is_flag=True, help="Refuse to run when a grader script, converter or prompt changed on disk.")
@click.option(
    "--threshold",
    type=UNIT_INTERVAL,
    help="Pass mark for a regraded test's score (default: the eval's, else 0.8); exit 1 when one is below it.",
)
@click.option(
    "--fail-on-regression",
    "fail_on",
    type=click.Choice(list(REGRESSION_MODES)),
    help="Also exit 1 when the regrade is worse than RUN: ci = mean-difference CI entirely below 0; "
    "flip = any pass->fail; any = either.",
)
@click.option(
    "--targets", "targets_path", type=click.Path(dir_okay=False, path_type=Path), help="Targets file for judges."
)
@click.option(
    "--concurrency",
    default=4,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Tests graded at once (a test's graders overlap where they wait; at most this many grader processes, "
    "or one per core if more).",
)
@click.option(
    "--shard", metavar="K/N", help="Regrade only the K-th of N slices of the tests (processes sharing one store)."
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Who grades the tests: threads of this process, or tasks on a Ray cluster (pip install 'evalstore[ray]'); "
    "this process writes the store either way.",
)
@click.option(
    "--ray-address",
    metavar="ADDR",
    help="The Ray cluster to use with --executor ray (default: a local one of this machine's cores).",
)
@click.option(
    "--resume",
    metavar="REPLAY",
    shell_complete=complete_run_id,
    help="Continue an interrupted replay with the settings it recorded (options that would change them are refused).",
)
@output_option("--html", "html_path", help="Write the comparison as HTML.")
@no_warm_option
@json_option
@checkpoint_option
@click.pass_context
@handle_errors
def replay(
    ctx: click.Context,
    run: str | None,
    eval_path: Path | None,
    preprocessors: tuple[str, ...],
    prompts: tuple[str, ...],
    judge_target: str | None,
    judge_model: str | None,
    graders: str | None,
    tests_glob: str | None,
    no_cache: bool,
    batch: bool,
    strict: bool,
    threshold: float | None,
    targets_path: Path | None,
    concurrency: int,
    shard: str | None,
    executor: str,
    ray_address: str | None,
    resume: str | None,
    fail_on: str | None,
    html_path: Path | None,
    no_warm: bool,
    as_json: bool,
) -> None:
    """Regrade RUN with swapped converters, prompts, rubrics or judge, never calling the agent.

    Writes a new run of kind replay (parent: RUN) and prints its comparison against RUN. RUN: an id,
    a unique prefix, or last. Exits 1, as run does, when a regraded test scores below the threshold or has
    an execution error (a grader failed to run, or the agent had failed in RUN; tests carried over unchanged do not count; a test with
    trials or epochs fails only when none of them passed), and with --fail-on-regression when the regrade
    is worse than RUN.

    \b
    Example:
      evalstore replay last --preprocessor 'xlsx=["python3","scripts/xlsx_to_csv_v2.py"]'
      evalstore replay rec-20261122T101500-3fa9c1 --prompt quality=file://prompts/quality-v2.md --graders quality
      evalstore replay last --shard 2/3
      evalstore replay last --executor ray --ray-address 10.0.0.5:6379
      evalstore replay last --judge-model gpt-4.1 --batch
    """
    from evalstore.cli import frozen_imports

    with frozen_imports():  # the store and the grading engine: out of the collector's passes over each test
        from evalstore.cli.compare import emit_comparison
        from evalstore.replay.analysis.compare import compare as compare_runs
        from evalstore.replay.analysis.compare import regression
        from evalstore.replay.analysis.per_test import failed_tests
        from evalstore.replay.analysis.views import resolve_run
        from evalstore.replay.executors import executor_for
        from evalstore.replay.material import load_scores
        from evalstore.replay.regrade import (
            ReplayOptions,
            judge_requests,
            parse_shard,
            replay_run,
            resume_replay,
            reuse_counts,
        )

    if bool(run) == bool(resume):
        raise click.UsageError("give either RUN or --resume REPLAY")
    if resume:
        recorded = {  # what a replay records in its run_started and a resume grades with again
            "--eval": eval_path,
            "--preprocessor": preprocessors,
            "--prompt": prompts,
            "--judge-target": judge_target,
            "--judge-model": judge_model,
            "--graders": graders,
            "--tests": tests_glob,
            "--no-cache": no_cache,
            "--batch": batch,
            "--threshold": threshold,
            "--targets": targets_path,
            "--strict": strict,  # checked when a replay starts, never again
        }
        refuse_with_resume(
            recorded, "a resumed replay keeps the settings it recorded; start a new replay of its run to change them"
        )
    store = open_store(ctx, create=False)  # a replay needs a recorded run: never a new store
    shard_spec = parse_shard(shard) if shard else None
    grader = executor_for(executor, ray_address=ray_address)
    with resume_hint("replay") as begun, progress_bar("regrading") as bar:

        def started(run_id: str, total: int, drifted, unable) -> None:  # type: ignore[no-untyped-def]
            begun(run_id)
            note(f"replay {run_id}: {plural(total, 'test')} to regrade")
            for reason, keys in not_regradable_groups(unable).items():
                note(
                    f"{len(keys)} of {total} tests cannot be regraded ({reason}); left out of the scores "
                    f"and the comparison: {', '.join(keys)}"
                )
            for d in drifted:
                note(f"drift: {d.describe()}")
            bar.start(total)

        if resume:
            outcome = resume_replay(
                store,
                resolve_run(store, resume),
                concurrency=concurrency,
                shard=shard_spec,
                warm=not no_warm,
                progress=bar.advance,
                on_start=started,
                executor=grader,
                note=note,
            )
        else:
            assert run is not None  # checked above: RUN or --resume, exactly one
            options = ReplayOptions(
                eval_path=str(eval_path.resolve()) if eval_path else None,
                preprocessors=list(preprocessors),
                prompts=list(prompts),
                judge_target=judge_target,
                judge_model=judge_model,
                graders=[g.strip() for g in graders.split(",") if g.strip()] if graders is not None else None,
                tests=tests_glob,
                no_cache=no_cache,
                batch=batch,
                threshold=threshold,
                targets_path=str(targets_path.resolve()) if targets_path else None,
                shard=shard_spec,
            )
            outcome = replay_run(
                store,
                resolve_run(store, run),
                options,
                strict=strict,
                concurrency=concurrency,
                warm=not no_warm,
                progress=bar.advance,
                on_start=started,
                executor=grader,
                note=note,
            )
    for warning in outcome.warnings:
        note(f"warning: {warning}")
    names = result_labels([(r.test_id, r.target, r.attempt) for r in outcome.results])
    # A test with several attempts (trials, epochs) fails the gate only when none of them passed, as it
    # does in `run` and in AgentV (per_test.test_passed): a bad trial of a passing test is no failure.
    test_failed = failed_tests(((r.test_id, r.target, r.attempt), r.passed) for r in outcome.results)
    below = [  # a result with nothing to regrade (not_regradable) has no score to be below anything
        (name, r)
        for name, r in zip(names, outcome.results, strict=True)
        if (r.test_id, r.target) in test_failed and r.origin != "carried" and r.status != "not_regradable"
    ]
    failed = [name for name, _ in below]  # named as the table and the notes name them (`wrong#2`)
    # A test whose grading failed cannot pass whatever its score: said as what it is, apart from the
    # tests that scored below the threshold.
    failed_names = [name for name, r in below if r.status != "execution_error"]
    errored_names = _by_failed_part([(name, r) for name, r in below if r.status == "execution_error"])
    if not outcome.complete:
        message = (
            f"replay {outcome.run_id}: this process graded {plural(len(outcome.results), 'test')}; "
            "the run completes when every shard is done"
        )
        if as_json:
            print_json(
                {
                    "run_id": outcome.run_id,
                    "parent_run_id": outcome.parent_run_id,
                    "complete": False,
                    "graded": len(outcome.results),
                    "failed": failed,
                }
            )
        else:
            echo(message)
        if fail_on:
            note("the regression gate is checked by the process that completes the replay")
        _exit_if(failed_names, errored_names, None)
        return
    comparison = compare_runs(load_scores(store, outcome.parent_run_id), load_scores(store, outcome.run_id))
    regressed = regression(comparison, fail_on) if fail_on else (False, "")
    _plain_text_note(store, outcome, comparison)
    reuse = reuse_counts(store, outcome.run_id)
    requests = judge_requests(store, outcome.run_id) if outcome.batch is not None else None
    if as_json:
        print_json(
            {
                "run_id": outcome.run_id,
                "parent_run_id": outcome.parent_run_id,
                "complete": True,
                "drift": [d.describe() for d in outcome.drift],
                "failed": failed,
                # this process's results: those regraded, and those carried over unchanged (--tests or
                # --graders left them alone, or the eval lacks them), which the gate does not count
                "regraded": sum(1 for r in outcome.results if r.origin != "carried" and r.status != "not_regradable"),
                "carried_over": sum(1 for r in outcome.results if r.origin == "carried"),
                "regression": regressed[1] if fail_on else None,
                "not_regradable": [
                    {"test_id": k[0], "target": k[1] or None, "attempt": k[2], "reason": reason}
                    for k, reason in outcome.not_regradable
                ],
                "reuse": reuse,
                "judge_requests": requests,
                "comparison": comparison.to_dict(),
            }
        )
        if html_path:
            emit_comparison(comparison, store, as_json=False, html_path=html_path)
    else:
        rows = scored_rows(store, outcome.run_id, outcome.results)
        print_scored(f"replay {outcome.run_id} (parent {outcome.parent_run_id})", rows, outcome.run_id)
        echo(
            f"code graders in replay {outcome.run_id} (every session of it): {reuse['code_ran']} run, "
            f"{reuse['code_reused']} reused from recorded executions"
            + (f", {reuse['code_not_run']} could not run" if reuse["code_not_run"] else "")
            + (f", {plural(reuse['code_carried'], 'verdict')} carried over" if reuse["code_carried"] else "")
            + f"; judge replies reused: {reuse['judge_reused']}"
        )
        if requests is not None and outcome.batch is not None:
            unanswered = len(outcome.batch.unanswered)
            echo(
                f"judge prompts in replay {outcome.run_id}: {requests['by_batch']} by batch "
                f"(batches: {', '.join(outcome.batch.batches) or 'none'}), "
                f"{requests['direct']} sent one at a time"
                + (f" ({unanswered} the batch did not answer)" if unanswered else "")
                + f", {requests['reused']} reused"
            )
        emit_comparison(comparison, store, as_json=False, html_path=html_path)
    _exit_if(failed_names, errored_names, regressed[1] if regressed[0] else None)


def _plain_text_note(store, outcome, comparison) -> None:  # type: ignore[no-untyped-def]
    """Said of a replay of an AgentV import whose scores a code grader's plain text moved
    (``regrade.plain_text_graders``): AgentV reads that text by the exit code alone."""
    from evalstore.replay.regrade import plain_text_graders

    changed = [t.key[0] for t in comparison.tests if t.delta]
    graders = plain_text_graders(store, outcome.run_id, outcome.parent_run_id, changed)
    if graders:
        note(
            f"warning: code grader{'s' if len(graders) > 1 else ''} {', '.join(graders)} printed plain text, which "
            "evalstore reads (a number, true/false) and AgentV 4.42.4 reads by the exit code alone (exit 0: 1.0): "
            "scores moved where the grader did not change (docs/usage.md, 'Code-grader plain text')"
        )


_FAILED_PARTS = {
    "grader": "a grader failed to run",
    "agent": "the agent failed in the run: reproduced, not graded",
    "setup": "its workspace setup failed in the run: reproduced, not graded",
    "not_run": "the run did not run it, for a failed dependency, the budget or fail_on_error: reproduced",
}
"""What each kind of execution error says failed (``failures.failed_part``), in the order they are listed."""


def _by_failed_part(errored: list[tuple[str, Any]]) -> dict[str, list[str]]:
    """The names of the execution errors, by what failed: a grader, or (reproduced from the run, never
    graded) the agent, the workspace's setup, a test that never ran."""
    from evalstore.replay.failures import failed_part

    out: dict[str, list[str]] = {}
    for name, result in errored:
        out.setdefault(failed_part(result.row_fields, result.graders), []).append(name)
    return out


def _exit_if(failed: list[str], errored: dict[str, list[str]], regressed: str | None) -> None:
    """The gate ``run`` has: exit 1 when a regraded test failed (below the threshold, or an execution error,
    which cannot pass: its grading failed, or its agent did in the run), or on a regression asked about."""
    if failed:
        note(f"{plural(len(failed), 'regraded test')} below the threshold: {_some(failed)}")
    for part, why in _FAILED_PARTS.items():
        if errored.get(part):
            names = errored[part]
            note(
                f"{plural(len(names), 'regraded test')} with an execution error ({why}; "
                f"such a test cannot pass): {_some(names)}"
            )
    if regressed:
        note(f"regression: {regressed}")
    if failed or errored or regressed:
        sys.exit(EXIT_FAILED)


def _some(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
