"""Trials (``execution.trials``) as AgentV 4.42.4 reads and aggregates them (``config-loader.ts``,
``trials.ts``); ``evalstore run`` with trials is in tests/e2e/test_e2e_trials.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.evalfile.specs import TrialsSpec
from evalstore.replay.grading.trials import aggregate, more_trials, t_critical


def _trials(tmp_path: Path, block: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "t.eval.yaml"
    path.write_text(f"execution:\n  trials: {block}\ntests: [{{id: t, input: x, criteria: c}}]\n")
    return load_eval(path)


def test_trials_are_read_as_agentv_reads_them(tmp_path: Path) -> None:
    suite = _trials(tmp_path, "{count: 3, strategy: mean, cost_limit_usd: 1.5}")
    assert suite.trials == TrialsSpec(count=3, strategy="mean", cost_limit_usd=1.5)
    assert _trials(tmp_path, "{count: 2}").trials == TrialsSpec(count=2, strategy="pass_at_k")
    assert _trials(tmp_path, "{count: 1}").trials is None  # one trial is no trials
    bad = _trials(tmp_path, "{count: 0}")
    assert bad.trials is None and "0 is not a whole number above 0" in bad.warnings[0]
    odd = _trials(tmp_path, "{count: 2, strategy: best_of, costLimitUsd: -1}")
    assert odd.trials == TrialsSpec(count=2, strategy="pass_at_k")
    assert len(odd.warnings) == 2


def test_pass_at_k_takes_the_best_and_stops_at_the_first_pass() -> None:
    spec = TrialsSpec(count=3)
    assert more_trials(spec, [0.5], [None]) and not more_trials(spec, [0.5, 0.8], [None, None])
    outcome = aggregate(spec, [0.5, 0.9], 0.8, [None, None])
    assert (outcome.score, outcome.passed, outcome.trials) == (0.9, True, 2)
    assert outcome.aggregation == {"strategy": "pass_at_k", "passed_attempts": 1, "total_attempts": 2}


def test_mean_runs_every_trial_and_a_cost_limit_stops_them() -> None:
    spec = TrialsSpec(count=3, strategy="mean", cost_limit_usd=1.0)
    assert more_trials(spec, [1.0], [0.4]) and not more_trials(spec, [1.0, 1.0], [0.6, 0.5])
    outcome = aggregate(spec, [1.0, 0.5], 0.8, [0.6, 0.5])
    assert outcome.aggregation == {"strategy": "mean", "mean": 0.75, "min": 0.5, "max": 1.0}
    # A trial passed, so the test does at a mean of 0.75 (AgentV 4.42.4's status is ok when any trial's is;
    # tests/fixtures/agentv-newuser2/trials-mean is AgentV's run saying so).
    assert (outcome.passed, outcome.cost_limited) == (True, True)
    assert not aggregate(spec, [0.7, 0.5], 0.8, [None, None]).passed
    assert not aggregate(spec, [1.0, 0.5], 0.8, [None, None], [False, False]).passed  # the trials' own verdicts


def test_confidence_interval_is_the_lower_bound_with_agentvs_t_table() -> None:
    spec = TrialsSpec(count=4, strategy="confidence_interval")
    outcome = aggregate(spec, [0.8, 0.9, 1.0], 0.8, [None] * 3)
    # mean 0.9, stddev 0.1, t(2) = 4.303: 0.9 - 4.303 * 0.1 / sqrt(3)
    assert outcome.score == pytest.approx(0.9 - 4.303 * 0.1 / 3**0.5)
    assert outcome.aggregation["ci95_upper"] == 1.0  # clamped
    assert (t_critical(29), t_critical(30), t_critical(0)) == (2.045, 1.96, 12.706)
    assert aggregate(spec, [0.7], 0.8, [None]).score == 0.7
