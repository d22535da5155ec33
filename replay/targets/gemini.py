"""The ``gemini`` provider (``google``, ``google-gemini``): Google's Generative Language API, asked what
AgentV 4.42.4 asks it.

AgentV's ``GeminiProvider`` goes through pi-ai's ``google-generative-ai`` stream: the request and the reading of
its chunks are ``piai/gemini.py``'s (the judge sends the same); here the target's fields (the model defaults
to ``gemini-2.5-flash``) and the call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalstore.replay.piai import gemini as vendor
from evalstore.replay.piai.wire import LlmConfig
from evalstore.replay.targets import pi_ai
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec


def validate(spec: TargetSpec, config: dict[str, Any], eval_dir: Path) -> None:
    _config(spec, config)


def run(request: RunRequest) -> TargetOutcome:
    return pi_ai.streamed(request, _config(request.spec, request.config), vendor.build_request, vendor.read_stream)


def _config(spec: TargetSpec, config: dict[str, Any]) -> LlmConfig:
    return vendor.config(spec, config)
