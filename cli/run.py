"""``evalstore run EVAL.yaml``: record a run against a real target."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from evalstore.cli.attest import checkpoint_option
from evalstore.cli.context import complete_run_id, open_store
from evalstore.cli.errors import EXIT_FAILED, handle_errors
from evalstore.cli.options import no_warm_option, refuse_with_resume
from evalstore.cli.output import echo, json_option, note, plural, print_json, progress_bar, resume_hint
from evalstore.cli.params import EXPERIMENT_NAME, UNIT_INTERVAL
from evalstore.cli.results import json_row, print_scored, result_labels, scored_rows


@click.command()
@click.argument("eval_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--target",
    "target_names",
    multiple=True,
    help="Target name in the targets file (default: the eval's execution.targets, else execution.target); "
    "give it more than once to run every test against each target in one run (AgentV's matrix).",
)
@click.option(
    "--targets",
    "targets_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Targets file (default: .agentv/targets.yaml found upward from the eval file).",
)
@click.option(
    "--workers", type=click.IntRange(1, 256), help="Tests run at once (default: the eval's execution.workers, else 4)."
)
@click.option("--threshold", type=UNIT_INTERVAL, help="Pass mark for a test score (default: the eval's, else 0.8).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds per target call (default: the target's timeout_seconds, else 1800 for a cli target); for an "
    "openai, azure, openrouter, anthropic or gemini target, per request (default 600, the vendor SDKs': AgentV "
    "reads no timeout_seconds for them).",
)
@click.option(
    "--max-retries",
    type=click.IntRange(min=0),
    help="Times a failed target call is tried again, 1 s, 2 s, 4 s ... later (default 2, as agentv eval "
    "--max-retries; a resumed run keeps its own). A conversation's turns are not retried.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where per-test workspaces go (default .evalstore/workspaces/RUN).",
)
@click.option("--judge-target", help="Judge target for every LLM grader.")
@click.option("--judge-model", help="Judge model for every LLM grader.")
@click.option(
    "--judge-concurrency",
    default=8,
    show_default=True,
    type=click.IntRange(1, 256),
    help="LLM judge calls in flight at once, across all tests.",
)
@click.option(
    "--cache/--no-cache",
    default=False,
    show_default=True,
    help="Reuse the judge replies and converter outputs the store holds for identical requests "
    "(default: a run asks afresh, as AgentV does without --cache).",
)
@click.option(
    "--experiment",
    type=EXPERIMENT_NAME,
    help="Experiment label of the run, written on each row it exports (AgentV's --experiment; default: default).",
)
@click.option(
    "--test-id",
    "test_ids",
    multiple=True,
    metavar="GLOB",
    help="Run only the tests whose id matches (repeatable: any; globs as agentv eval run --test-id's).",
)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    help="Run the eval file only if its tags: have this tag (repeatable: all of them), as agentv eval run --tag.",
)
@click.option(
    "--exclude-tag",
    "exclude_tags",
    multiple=True,
    help="Run the eval file only if its tags: do not have this tag (repeatable), as agentv eval run --exclude-tag.",
)
@click.option(
    "--resume",
    "resume",
    metavar="RUN",
    shell_complete=complete_run_id,
    help="Finish an interrupted run without calling the target again for recorded tests, with the settings "
    "it began with (options that would change them are refused).",
)
@no_warm_option
@json_option
@checkpoint_option
@click.pass_context
@handle_errors
def run(
    ctx: click.Context,
    eval_file: Path | None,
    target_names: tuple[str, ...],
    targets_path: Path | None,
    workers: int | None,
    threshold: float | None,
    timeout: float | None,
    max_retries: int | None,
    workdir: Path | None,
    judge_target: str | None,
    judge_model: str | None,
    judge_concurrency: int,
    cache: bool,
    experiment: str | None,
    test_ids: tuple[str, ...],
    tags: tuple[str, ...],
    exclude_tags: tuple[str, ...],
    resume: str | None,
    no_warm: bool,
    as_json: bool,
) -> None:
    """Run EVAL_FILE's tests against a target, capture every file the agent wrote, grade, and store it all.

    Exits 1 when any test scores below the threshold. --resume takes a run id, a unique prefix, or last.

    \b
    Example:
      evalstore run evals/report.eval.yaml --target my-agent
      evalstore run evals/report.eval.yaml --test-id 'paris-*' --test-id lyon-1
      evalstore run --resume rec-20261122T101500-3fa9c1
    """
    from evalstore.replay.analysis.views import resolve_run
    from evalstore.replay.grading.graders.base import GradeOptions
    from evalstore.replay.record import RunOptions, Unselected, prepare_run, record_prepared, resume_run

    if bool(eval_file) == bool(resume):
        raise click.UsageError("give either EVAL_FILE or --resume RUN")
    if resume and experiment is not None:
        raise click.UsageError("--experiment names a new run; --resume continues a run under its own")
    if resume:
        # What the run grades and records: given again here, the tests recorded before and those run now
        # would differ in it (another target's answers, another pass mark). How it runs (--workers,
        # --workdir, --judge-concurrency, --no-warm) may change.
        what = {
            "--target": target_names,
            "--targets": targets_path,
            "--threshold": threshold,
            "--timeout": timeout,
            "--max-retries": max_retries,
            "--judge-target": judge_target,
            "--judge-model": judge_model,
            "--cache": cache,
            "--test-id": test_ids,
            "--tag": tags,
            "--exclude-tag": exclude_tags,
        }
        refuse_with_resume(what, "a resumed run keeps the settings it began with; start a new run to change them")
    options = RunOptions(
        target=target_names[0] if len(target_names) == 1 else None,
        targets=list(target_names) if len(target_names) > 1 else [],
        targets_path=targets_path,
        workers=workers,
        threshold=threshold,
        timeout=timeout,
        max_retries=max_retries,
        workdir=workdir,
        grade=GradeOptions(judge_target=judge_target, judge_model=judge_model),
        cache=cache,
        judge_concurrency=judge_concurrency,
        warm=not no_warm,
        experiment=experiment,
        test_ids=list(test_ids),
        tags=list(tags),
        exclude_tags=list(exclude_tags),
    )
    # A new run's eval file and targets are checked before the store is opened: a bad one leaves no store.
    try:
        prepared = None if eval_file is None else prepare_run(eval_file, options, on_warning=_warn)
    except Unselected as skipped:  # AgentV: "No eval files matched the tag filters. Nothing to run." (exit 0)
        if as_json:
            print_json({"run_id": None, "skipped": str(skipped), "results": []})
        else:
            note(str(skipped))
        return
    store = open_store(ctx)
    with resume_hint("run") as begun, progress_bar("running tests") as bar:

        def started(run_id: str, total: int, unable: list[tuple[str, str]]) -> None:
            begun(run_id)
            note(f"run {run_id}: {plural(total, 'test')}")
            by_reason: dict[str, list[str]] = {}
            for test_id, reason in unable:
                by_reason.setdefault(reason, []).append(test_id)
            for reason, test_ids in by_reason.items():
                note(
                    f"{len(test_ids)} of {total} tests cannot be graded here ({reason}); their agent runs, and "
                    f"they are recorded not_regradable, for a replay where it is installed: {', '.join(test_ids)}"
                )
            bar.start(total)

        if resume:
            outcome = resume_run(store, resolve_run(store, resume), options, progress=bar.advance, on_start=started)
        else:
            assert prepared is not None  # checked above: EVAL_FILE or --resume, exactly one
            outcome = record_prepared(store, prepared, bar.advance, started)
    for warning in outcome.warnings:
        note(f"warning: {warning}")
    rows = scored_rows(store, outcome.run_id, outcome.results)
    # With trials a test passes or fails once, on its trials (any passed, as AgentV's status), not trial by
    # trial; a test recorded not_regradable has no score to fail with (a replay where its runtime is
    # installed grades it).
    # Trials are keyed like the results: the test id, with @target when the run has several targets.
    trial_names = dict(zip(outcome.trials, result_labels([(t, g, 1) for t, g in outcome.trials]), strict=True))
    trials = {trial_names[key]: dataclasses.asdict(t) for key, t in outcome.trials.items()}
    failed = {
        (r["test_id"], r["target"])
        for r in rows
        if not r["passed"] and r.get("status") != "not_regradable" and (r["test_id"], r["target"]) not in outcome.trials
    }
    failed |= {key for key, t in outcome.trials.items() if not t.passed}
    if as_json:
        payload = {"run_id": outcome.run_id, "threshold": outcome.threshold, "results": [json_row(r) for r in rows]}
        print_json({**payload, "trials": trials} if trials else payload)
    else:
        print_scored(f"run {outcome.run_id}", rows, outcome.run_id)
        for key, t in outcome.trials.items():
            strategy = t.aggregation["strategy"]
            echo(
                f"{trial_names[key]}: {t.score:.3f} from {plural(t.trials, 'trial')} ({strategy}), "
                f"{'pass' if t.passed else 'fail'}"
            )
        tests = len({(r["test_id"], r["target"]) for r in rows})
        echo(f"{tests - len(failed)}/{tests} passed (threshold {outcome.threshold})")
    if failed:
        sys.exit(EXIT_FAILED)


def _warn(warning: str) -> None:
    note(f"warning: {warning}")
