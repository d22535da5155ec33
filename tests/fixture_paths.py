"""Where the tests' data files live: ``tests/fixtures/`` (see its README for where each came from)."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES_DIR = REPO / "tests" / "fixtures"
AGENTV_FIXTURES = FIXTURES_DIR / "agentv"
HANDMADE_V4_RUN = FIXTURES_DIR / "handmade" / "v4-run"
