"""The README and CI stay in step with the code."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

import cli

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [line.strip() for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S) for line in block.splitlines()]


def test_ci_runs_the_readme_test_command_exactly() -> None:
    test_command = next(c for c in _readme_commands() if "pytest" in c)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command in ci.splitlines()


def test_readme_main_command_installs_and_runs_the_quickstart() -> None:
    main = _readme_commands()[0]
    assert main.startswith("python3 -m venv") and "pip install -e ." in main and main.endswith("evalstore quickstart")


def test_every_command_has_help_and_is_documented() -> None:
    usage = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8") + (ROOT / "README.md").read_text(encoding="utf-8")
    runner = CliRunner()
    for name, command in cli.main.commands.items():
        assert command.help, f"{name} has no help text"
        result = runner.invoke(cli.main, [name, "--help"])
        assert result.exit_code == 0, result.output
        assert f"evalstore {name}" in usage, f"{name} is not in README.md or docs/usage.md"


def test_architecture_names_every_replay_and_store_module() -> None:
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for package in ("store", "replay"):
        for module in (ROOT / package).glob("*.py"):
            if module.name == "__init__.py" or module.name.startswith("_eval"):
                continue
            assert f"`{module.name}`" in doc or f"`{module.stem}" in doc, f"{package}/{module.name} missing from ARCHITECTURE.md"


def test_architecture_names_no_module_that_does_not_exist() -> None:
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    existing = {p.name for package in ("store", "replay", "cli", "migrations") for p in (ROOT / package).rglob("*.py")}
    named = set(re.findall(r"`([a-z_]+\.py)`", doc))
    assert named <= existing, f"ARCHITECTURE.md names modules that do not exist: {sorted(named - existing)}"
