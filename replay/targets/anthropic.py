"""The ``anthropic`` provider: Anthropic's Messages API, asked what AgentV 4.42.4 asks it.

AgentV's ``AnthropicProvider`` goes through pi-ai's ``anthropic-messages`` stream: the request and the reading
of its events are ``piai/anthropic.py``'s (the judge sends the same); here the target's fields and the call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalstore.replay.piai import anthropic as vendor
from evalstore.replay.piai.wire import LlmConfig
from evalstore.replay.targets import pi_ai
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec


def validate(spec: TargetSpec, config: dict[str, Any], eval_dir: Path) -> None:
    _config(spec, config)


def run(request: RunRequest) -> TargetOutcome:
    return pi_ai.streamed(request, _config(request.spec, request.config), vendor.build_request, vendor.read_stream)


def _config(spec: TargetSpec, config: dict[str, Any]) -> LlmConfig:
    return vendor.config(spec, config)
