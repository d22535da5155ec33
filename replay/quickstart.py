"""The quickstart: record the bundled example suite, regrade it with a changed converter and grader,
and compare. Used by ``evalstore quickstart``; needs no network and no API key."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from evalstore.replay.errors import ReplayError
from evalstore.replay.record import RunOptions, RunOutcome, record_run
from evalstore.replay.regrade import ReplayOptions, ReplayOutcome, replay_run
from evalstore.store import EventStore

JUDGE_ENV = "EVALSTORE_JUDGE_BASE_URL"
XLSX_CONVERTER = '["python3", "../../preprocessors/scripts/xlsx_to_csv.py"]'


def examples_dir() -> Path:
    """The bundled examples: the ``evalstore.examples`` package data (``examples/`` in a clone);
    ``EVALSTORE_EXAMPLES`` points elsewhere."""
    configured = os.environ.get("EVALSTORE_EXAMPLES")
    if configured:
        path = Path(configured)
    else:
        from evalstore import examples

        path = Path(examples.__file__).resolve().parent
    if not (path / "quickstart" / "evals" / "report.eval.yaml").is_file():
        raise ReplayError(
            f"{path}: the bundled examples are not there (quickstart/evals/report.eval.yaml is missing); "
            "reinstall evalstore, or set EVALSTORE_EXAMPLES to an examples/ folder of the evalstore repository"
        )
    return path


def judge_configured() -> bool:
    return bool(os.environ.get(JUDGE_ENV))


@dataclass
class QuickstartPlan:
    eval_v1: Path
    eval_v2: Path | None
    replay: ReplayOptions
    with_judge: bool


def plan(examples: Path, with_judge: bool) -> QuickstartPlan:
    evals = examples / "quickstart" / "evals"
    if with_judge:
        # With a judge the changed grader is the LLM grader's prompt; the workbook checks stay.
        return QuickstartPlan(
            eval_v1=evals / "report.judged.eval.yaml",
            eval_v2=None,
            replay=ReplayOptions(
                preprocessors=[f"xlsx={XLSX_CONVERTER}"],
                prompts=["report-quality=file://../prompts/report-quality.v2.md"],
            ),
            with_judge=True,
        )
    return QuickstartPlan(
        eval_v1=evals / "report.eval.yaml",
        eval_v2=evals / "report.v2.eval.yaml",
        replay=ReplayOptions(eval_path=str(evals / "report.v2.eval.yaml"), preprocessors=[f"xlsx={XLSX_CONVERTER}"]),
        with_judge=False,
    )


def record(store: EventStore, p: QuickstartPlan, workdir: Path | None = None, **kwargs) -> RunOutcome:  # type: ignore[no-untyped-def]
    return record_run(store, p.eval_v1, RunOptions(workdir=workdir), **kwargs)


def regrade(store: EventStore, p: QuickstartPlan, run_id: str, **kwargs) -> ReplayOutcome:  # type: ignore[no-untyped-def]
    return replay_run(store, run_id, p.replay, **kwargs)
