"""Results of an AgentV run that a regrade scores or marks otherwise with no grader changed: marked pass or
fail against another pass mark than the one the regrade applies (:func:`marked_otherwise`), or scored 0 for
a grader that failed to run (:func:`scored_zero`).

A regrade judges each test against the test's own ``execution.threshold``, else ``--threshold``, else the
eval file's (``scoring.effective_threshold``). AgentV 4.42.4 marks each result against ``agentv eval
--threshold``, else 0.8, and applies an eval file's ``execution.threshold`` only to its summary
(``runSingleEvalFile`` passes the command line's threshold on, not the file's:
tests/fixtures/agentv-threshold). A result of an imported AgentV run can then flip between pass and fail
with its score unchanged; the regrade says so, once, rather than leave the flips to look like changes of
the graders. Only AgentV's rows are held to the rule: elsewhere pass or fail is not the score against a
threshold alone (an Inspect scorer's, pass@k over trials, a conversation missing a turn).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from evalstore.replay.analysis.views import ResultKey, result_key
from evalstore.replay.evalfile.parser import DEFAULT_THRESHOLD as AGENTV_DEFAULT
from evalstore.replay.grading.errored import left_out_of_score
from evalstore.replay.grading.scoring import effective_threshold, weighted_mean
from evalstore.store import EventStore

_JUDGED = ("ok", "quality_failure")
"""The statuses a pass mark decides (an execution error fails whatever its score)."""


def marked_otherwise(
    results: list[dict[str, Any]],
    run_id: str,
    threshold: float,
    own: Mapping[str, float | None],
    keys: Collection[ResultKey],
) -> str | None:
    """A warning naming the results of the AgentV run ``run_id`` (``results``: its results projection's
    rows) among ``keys`` whose pass or fail is not what ``threshold`` (a test's own in ``own``, by test id)
    makes of their score; None when there are none."""
    otherwise = [
        r
        for r in results
        if r["status"] in _JUDGED
        and r["score"] is not None
        and r["test_id"] in own
        and result_key(r["test_id"], r["target"], r["attempt"]) in keys
        and bool(r["passed"]) != (r["score"] >= effective_threshold(own[r["test_id"]], None, threshold))
    ]
    if not otherwise:
        return None
    first, count = otherwise[0], len(otherwise)
    # AgentV's default, named where it gives each such result its pass or fail again.
    keep = (
        f" (--threshold {AGENTV_DEFAULT:g} keeps AgentV's pass and fail)"
        if all(bool(r["passed"]) == (r["score"] >= AGENTV_DEFAULT) for r in otherwise)
        else ""
    )
    return (
        f"{count} result{'s' if count > 1 else ''} of run {run_id} {'were' if count > 1 else 'was'} marked pass "
        f"or fail against another pass mark than this replay's {threshold:g} (e.g. {first['test_id']}: score "
        f"{first['score']:.3g}, {'passed' if first['passed'] else 'failed'}; AgentV 4.42.4 marks each result "
        "against `agentv eval --threshold`, else 0.8, and applies the eval file's execution.threshold only to "
        f"its summary): with the same score {'they' if count > 1 else 'it'} may change pass/fail here; "
        f"--threshold sets the pass mark{keep}"
    )


def scored_zero(
    store: EventStore, results: list[dict[str, Any]], run_id: str, keys: Collection[ResultKey]
) -> str | None:
    """A warning naming the results of the AgentV run ``run_id`` (``results``: its results projection's rows)
    among ``keys`` that AgentV scored 0 because a grader of theirs failed to run (its verdict ``skip``: a
    judge's reply it could not parse) while their other graders' weighted mean is not 0. evalstore leaves
    such a grader out of the mean (``scoring._aggregate``, docs/usage.md "Execution errors"), so a regrade
    that grades them as they were scores them that mean, and ``compare`` counts them changed (a win) with no
    grader changed. None when there are none."""
    zeroed = [  # in the run's order: the first named is its first such result
        key
        for r in results
        if r["status"] == "execution_error"
        and r["score"] == 0
        and (key := result_key(r["test_id"], r["target"], r["attempt"])) in keys
    ]
    if not zeroed:
        return None
    by_result: dict[ResultKey, list[dict[str, Any]]] = {}
    for v in store.verdicts_of(run_id, {k[0] for k in zeroed}):
        by_result.setdefault(result_key(v["test_id"], v["target"], v["attempt"]), []).append(v)
    means = {}
    for key in zeroed:
        verdicts = by_result.get(key, [])
        counted = [(v["score"], v["weight"]) for v in verdicts if not left_out_of_score(v["status"])]
        errored = any(v["status"] == "execution_error" for v in verdicts)
        if errored and (mean := weighted_mean(counted)):
            means[key] = mean
    if not means:
        return None
    (first, mean), count = next(iter(means.items())), len(means)
    return (
        f"{count} result{'s' if count > 1 else ''} of run {run_id} AgentV scored 0 because a grader "
        f"failed to run (e.g. {first[0]}, whose other graders' mean is {mean:.3g}): AgentV 4.42.4 sets such a "
        "test's score to 0, evalstore leaves the grader out of the mean (docs/usage.md, Execution errors), so "
        f"graded as before {'they score' if count > 1 else 'it scores'} that mean here and compare counts "
        f"{'them' if count > 1 else 'it'} as changed with no grader changed"
    )
