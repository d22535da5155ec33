"""The values some options of the command line may take, defined here once for the library that acts on
them and for the CLI, whose ``--help`` reads them without loading the modules that use them."""

from __future__ import annotations

import re

REGRESSION_MODES: tuple[str, ...] = ("ci", "flip", "any")
"""``--fail-on-regression``: the CI of the mean difference entirely below 0, any pass→fail flip, either."""

OUTCOME_THRESHOLD = 0.1
"""``compare --threshold``: the score difference that makes a test a win or a loss, ``agentv compare``'s
default (``replay/analysis/outcomes.py``)."""

EXPORT_FORMATS: tuple[str, ...] = ("agentv-jsonl", "csv", "json")
"""``export --format`` (and ``bundle``, which ``replay/bundle.py`` writes)."""

DEFAULT_EXPERIMENT = "default"
"""The ``experiment`` AgentV 4.42.4 writes on every result row of a run given no ``--experiment``
(``DEFAULT_EXPERIMENT_NAME``, apps/cli/src/commands/eval/result-layout.ts)."""


def experiment_name(value: str) -> str:
    """``run --experiment``'s value as AgentV's ``normalizeExperimentName`` takes it: trimmed, blank for
    :data:`DEFAULT_EXPERIMENT`, else letters, numbers, ``.``, ``_`` and ``-`` only (ValueError, in its words)."""
    from evalstore.replay.jstext import js_trim  # here: the CLI's --help loads this module, not that one

    name = js_trim(value)
    if not name:
        return DEFAULT_EXPERIMENT
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise ValueError(f'Invalid experiment name "{name}". Use only letters, numbers, ".", "_" and "-".')
    return name
