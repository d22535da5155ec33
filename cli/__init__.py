"""The ``evalstore`` command line (placeholder until the CLI lands)."""


def main() -> None:  # pragma: no cover - replaced by the click group
    raise SystemExit("evalstore CLI not built yet")
