"""The README and CI stay in step with the code."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from evalstore import cli

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


def _architecture_sections() -> dict[str, set[str]]:
    """``### store/``-style headings of ARCHITECTURE.md, each with the module names its table gives."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    sections: dict[str, set[str]] = {}
    for block in re.split(r"^### ", doc, flags=re.M)[1:]:
        heading, _, body = block.partition("\n")
        if heading.endswith("/"):
            sections[heading.rstrip("/")] = set(re.findall(r"`([a-z_0-9]+\.py)`", body))
    return sections


PACKAGE_FOLDERS = [
    "cli",
    "store",
    "viewer",
    "grader",
    *sorted(str(p.parent.relative_to(ROOT)) for p in (ROOT / "replay").rglob("__init__.py")),
]


def test_architecture_names_every_module_in_its_package_section() -> None:
    sections = _architecture_sections()
    for folder in PACKAGE_FOLDERS:
        assert folder in sections, f"ARCHITECTURE.md has no section for {folder}/"
        modules = {m.name for m in (ROOT / folder).glob("*.py")} - {"__init__.py"}
        assert modules <= sections[folder], f"{folder}/: not in ARCHITECTURE.md: {sorted(modules - sections[folder])}"


def test_architecture_names_no_module_that_does_not_exist() -> None:
    for folder, names in _architecture_sections().items():
        existing = {p.name for p in (ROOT / folder).glob("*.py")}
        assert names <= existing, (
            f"ARCHITECTURE.md's {folder}/ section names modules that do not exist: {sorted(names - existing)}"
        )


def test_public_api_matches_the_usage_doc() -> None:
    import evalstore

    for name in evalstore.__all__:
        assert getattr(evalstore, name) is not None
    usage = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    block = usage[usage.index("## Python API") :]
    imported = re.search(r"from evalstore import \(([^)]*)\)", block).group(1)
    names = {n.strip() for n in imported.replace("\n", " ").split(",") if n.strip()}
    assert names <= set(evalstore.__all__), sorted(names - set(evalstore.__all__))


def test_the_readme_exit_code_rule_lists_every_exit_code() -> None:
    from evalstore.cli import errors

    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    rule = text[text.index("Exit codes, the one rule for every command:") :].split(". ")[0]
    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    assert codes == {0, 1, 2, 3, 130}
    for code in codes:
        assert re.search(rf"\b{code} ", rule), f"exit code {code} is not in README's rule: {rule}"
