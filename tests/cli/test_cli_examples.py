"""`evalstore examples`: the bundled examples listed, and copied out of the installed package."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from evalstore import cli as cli_package
from evalstore.replay.quickstart import examples_dir


def _cli(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, list(args))


def test_examples_lists_every_bundled_example_with_what_it_shows() -> None:
    listed = json.loads(_cli("examples", "--json").stdout)
    installed = sorted(p.name for p in examples_dir().iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert sorted(e["name"] for e in listed["examples"]) == installed
    assert all(e["shows"] and e["try"] for e in listed["examples"])
    table = _cli("examples")
    assert table.exit_code == 0 and all(name in table.stdout for name in installed)
    assert "evalstore examples copy DIR" in table.stdout


def test_copy_writes_the_examples_and_those_they_reference_into_a_new_folder(tmp_path: Path) -> None:
    dest = tmp_path / "mine"
    done = _cli("examples", "copy", str(dest), "quickstart")
    assert done.exit_code == 0, done.output
    # The quickstart's evals run the preprocessors' converters (../../preprocessors/...): copied with it.
    assert sorted(p.name for p in dest.iterdir()) == ["preprocessors", "quickstart"]
    source = examples_dir() / "quickstart"
    for path in source.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            assert (dest / "quickstart" / path.relative_to(source)).read_bytes() == path.read_bytes()
    assert (dest / "quickstart" / ".agentv" / "targets.yaml").is_file()
    assert not list(dest.rglob("__pycache__"))
    everything = tmp_path / "all"
    assert _cli("examples", "copy", str(everything)).exit_code == 0
    assert len(list(everything.iterdir())) == len(json.loads(_cli("examples", "--json").stdout)["examples"])


def test_copy_refuses_a_folder_in_use_and_an_unknown_name_writing_nothing(tmp_path: Path) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    done = _cli("examples", "copy", str(used))
    assert (
        done.exit_code == 2
        and done.stderr == f"Error: {used}: already exists and is not an empty folder; give a new folder\n"
    )
    assert [p.name for p in used.iterdir()] == ["notes.txt"]
    done = _cli("examples", "copy", str(tmp_path / "new"), "quikstart")
    assert done.exit_code == 2 and "no example named 'quikstart' (examples: quickstart," in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["used"]  # nothing half-written
