"""The model table AgentV 4.42.4's ``anthropic`` and ``gemini`` providers read through pi-ai: per model its
base URL, whether it reasons, its output-token ceiling and its prices (USD per million tokens: input, output,
cache read, cache write).

Copied from ``@earendil-works/pi-ai`` 0.74.2 (``dist/models.generated.js``, the ``anthropic`` and ``google``
providers), the version AgentV 4.42.4 installs: the ceiling decides the ``max_tokens`` an Anthropic request
sends when the target sets none (a third of it), the prices decide the cost AgentV reports. A model not listed
is one AgentV cannot call without a base URL (pi-ai has none for it).
"""

from __future__ import annotations

from typing import NamedTuple


class PiModel(NamedTuple):
    base_url: str
    reasoning: bool
    max_tokens: int
    cost: tuple[float, float, float, float]
    """USD per million tokens: input, output, cache read, cache write."""


MODELS: dict[str, dict[str, PiModel]] = {
    "anthropic": {
        "claude-3-5-haiku-20241022": PiModel("https://api.anthropic.com", False, 8192, (0.8, 4.0, 0.08, 1.0)),
        "claude-3-5-haiku-latest": PiModel("https://api.anthropic.com", False, 8192, (0.8, 4.0, 0.08, 1.0)),
        "claude-3-5-sonnet-20240620": PiModel("https://api.anthropic.com", False, 8192, (3.0, 15.0, 0.3, 3.75)),
        "claude-3-5-sonnet-20241022": PiModel("https://api.anthropic.com", False, 8192, (3.0, 15.0, 0.3, 3.75)),
        "claude-3-7-sonnet-20250219": PiModel("https://api.anthropic.com", True, 64000, (3.0, 15.0, 0.3, 3.75)),
        "claude-3-haiku-20240307": PiModel("https://api.anthropic.com", False, 4096, (0.25, 1.25, 0.03, 0.3)),
        "claude-3-opus-20240229": PiModel("https://api.anthropic.com", False, 4096, (15.0, 75.0, 1.5, 18.75)),
        "claude-3-sonnet-20240229": PiModel("https://api.anthropic.com", False, 4096, (3.0, 15.0, 0.3, 0.3)),
        "claude-haiku-4-5": PiModel("https://api.anthropic.com", True, 64000, (1.0, 5.0, 0.1, 1.25)),
        "claude-haiku-4-5-20251001": PiModel("https://api.anthropic.com", True, 64000, (1.0, 5.0, 0.1, 1.25)),
        "claude-opus-4-0": PiModel("https://api.anthropic.com", True, 32000, (15.0, 75.0, 1.5, 18.75)),
        "claude-opus-4-1": PiModel("https://api.anthropic.com", True, 32000, (15.0, 75.0, 1.5, 18.75)),
        "claude-opus-4-1-20250805": PiModel("https://api.anthropic.com", True, 32000, (15.0, 75.0, 1.5, 18.75)),
        "claude-opus-4-20250514": PiModel("https://api.anthropic.com", True, 32000, (15.0, 75.0, 1.5, 18.75)),
        "claude-opus-4-5": PiModel("https://api.anthropic.com", True, 64000, (5.0, 25.0, 0.5, 6.25)),
        "claude-opus-4-5-20251101": PiModel("https://api.anthropic.com", True, 64000, (5.0, 25.0, 0.5, 6.25)),
        "claude-opus-4-6": PiModel("https://api.anthropic.com", True, 128000, (5.0, 25.0, 0.5, 6.25)),
        "claude-opus-4-7": PiModel("https://api.anthropic.com", True, 128000, (5.0, 25.0, 0.5, 6.25)),
        "claude-sonnet-4-0": PiModel("https://api.anthropic.com", True, 64000, (3.0, 15.0, 0.3, 3.75)),
        "claude-sonnet-4-20250514": PiModel("https://api.anthropic.com", True, 64000, (3.0, 15.0, 0.3, 3.75)),
        "claude-sonnet-4-5": PiModel("https://api.anthropic.com", True, 64000, (3.0, 15.0, 0.3, 3.75)),
        "claude-sonnet-4-5-20250929": PiModel("https://api.anthropic.com", True, 64000, (3.0, 15.0, 0.3, 3.75)),
        "claude-sonnet-4-6": PiModel("https://api.anthropic.com", True, 64000, (3.0, 15.0, 0.3, 3.75)),
    },
    "google": {
        "gemini-2.0-flash": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", False, 8192, (0.1, 0.4, 0.025, 0.0)
        ),
        "gemini-2.0-flash-lite": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", False, 8192, (0.075, 0.3, 0.0, 0.0)
        ),
        "gemini-2.5-flash": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 65536, (0.3, 2.5, 0.03, 0.0)
        ),
        "gemini-2.5-flash-lite": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 65536, (0.1, 0.4, 0.01, 0.0)
        ),
        "gemini-2.5-pro": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 65536, (1.25, 10.0, 0.125, 0.0)
        ),
        "gemini-3-flash-preview": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 65536, (0.5, 3.0, 0.05, 0.0)
        ),
        "gemini-3-pro-preview": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 65536, (2.0, 12.0, 0.2, 0.0)
        ),
        "gemini-3.1-flash-lite": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 65536, (0.25, 1.5, 0.025, 0.0)
        ),
        "gemini-3.1-flash-lite-preview": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 65536, (0.25, 1.5, 0.025, 0.0)
        ),
        "gemini-3.1-pro-preview": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 65536, (2.0, 12.0, 0.2, 0.0)
        ),
        "gemini-3.1-pro-preview-customtools": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 65536, (2.0, 12.0, 0.2, 0.0)
        ),
        "gemini-3.5-flash": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 65536, (1.5, 9.0, 0.15, 0.0)
        ),
        "gemini-flash-latest": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 65536, (0.3, 2.5, 0.075, 0.0)
        ),
        "gemini-flash-lite-latest": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 65536, (0.1, 0.4, 0.025, 0.0)
        ),
        "gemma-4-26b-a4b-it": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 32768, (0.0, 0.0, 0.0, 0.0)
        ),
        "gemma-4-31b-it": PiModel(
            "https://generativelanguage.googleapis.com/v1beta", True, 32768, (0.0, 0.0, 0.0, 0.0)
        ),
    },
}
