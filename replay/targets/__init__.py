"""Targets: the agents and endpoints a recorded run asks for answers.

Only the recording runner imports this package. Replaying a stored run must never be able to call a
target, so nothing else in ``replay`` depends on it.
"""

from evalstore.replay.targets.base import (
    DEFAULT_MAX_RETRIES,
    TargetOutcome,
    TargetSpec,
    as_target_spec,
    call_with_retries,
    check_target,
    exchange_masks,
    run_target,
    stored_config,
)
from evalstore.replay.targets.capture import DEFAULT_MAX_FILE_BYTES, CapturedFile, CapturedOutput, capture_files
from evalstore.replay.targets.secrets import REDACTED, looks_secret, redact, resolve

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_RETRIES",
    "REDACTED",
    "CapturedFile",
    "CapturedOutput",
    "TargetOutcome",
    "TargetSpec",
    "as_target_spec",
    "call_with_retries",
    "capture_files",
    "check_target",
    "exchange_masks",
    "looks_secret",
    "redact",
    "resolve",
    "run_target",
    "stored_config",
]
