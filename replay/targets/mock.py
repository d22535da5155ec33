"""The ``mock`` provider, as AgentV 4.42.4's ``MockProvider``: every test answered with the target's
``response`` (a string; anything else, or none, gives AgentV's default answer), no usage, no delay
(``resolveMockConfig`` reads only ``response``, so the provider's delay settings are never set)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalstore.replay.content import Message
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec

DEFAULT_RESPONSE = '{"answer":"Mock provider response. Configure targets.yaml to supply a custom value."}'


def validate(spec: TargetSpec, config: dict[str, Any], eval_dir: Path) -> None:
    """Nothing can be wrong: any ``response`` is either used or replaced by the default."""


def run(request: RunRequest) -> TargetOutcome:
    response = request.config.get("response")
    answer = response if isinstance(response, str) else DEFAULT_RESPONSE
    return TargetOutcome(messages=[Message(role="assistant", content=answer)], output_text=answer)
