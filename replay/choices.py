"""The values some options of the command line may take, defined here once for the library that acts on
them and for the CLI, whose ``--help`` reads them without loading the modules that use them."""

from __future__ import annotations

REGRESSION_MODES: tuple[str, ...] = ("ci", "flip", "any")
"""``--fail-on-regression``: the CI of the mean difference entirely below 0, any pass→fail flip, either."""

EXPORT_FORMATS: tuple[str, ...] = ("agentv-jsonl", "csv", "json")
"""``export --format`` (and ``bundle``, which ``replay/bundle.py`` writes)."""
