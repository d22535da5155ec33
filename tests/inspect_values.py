"""What an Inspect log's scores are as numbers, read by Inspect itself: what the tests of an import hold
evalstore's verdicts to. Needs ``inspect_ai`` (the tests that use it skip without it)."""

from __future__ import annotations

import math
from pathlib import Path


def expected_verdicts(path: Path) -> dict[tuple[str, int], dict[str, float | None]]:
    """Per (sample id, epoch), each verdict Inspect's ``value_to_float`` gives (None: unscored); a dict value
    one per key, named ``SCORER/KEY``."""
    from inspect_ai.log import read_eval_log_samples
    from inspect_ai.scorer import value_to_float

    to_float = value_to_float()
    out: dict[tuple[str, int], dict[str, float | None]] = {}
    for sample in read_eval_log_samples(path, all_samples_required=False):
        verdicts: dict[str, float | None] = {}
        for name, score in (sample.scores or {}).items():
            value = score.value
            parts = value.items() if isinstance(value, dict) else [(None, value)]
            for key, part in parts:
                unscored = part is None or (isinstance(part, float) and math.isnan(part))
                verdicts[name if key is None else f"{name}/{key}"] = None if unscored else to_float(part)
        out[(str(sample.id), sample.epoch)] = verdicts
    return out
