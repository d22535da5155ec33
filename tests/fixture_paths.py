"""Where the real AgentV files live: ``shared/`` beside the repository (as in CI's checkout)."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
AGENTV_FIXTURES = REPO.parent / "shared" / "fixtures" / "agentv"
