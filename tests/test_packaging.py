"""One import name: the wheel installs `evalstore` and nothing else, works beside other distributions
that ship top-level `cli` and `store` modules, and carries what `evalstore quickstart` needs."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

import evalstore

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
TIMEOUT = 300


def _pip(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=TIMEOUT,
    )


def _wheel(project: Path, out: Path) -> Path:
    # --no-build-isolation: the test extra installs the setuptools the build needs, so nothing is downloaded.
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(project))
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of what the wheel is made of: setuptools writes build/ and evalstore.egg-info/ into
    the folder it builds, and two test workers building from the repository at once raced over them."""
    copy = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, copy / name)
    for folder in sorted(set(PYPROJECT["tool"]["setuptools"]["package-dir"].values())):
        shutil.copytree(REPO / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return _wheel(copy, tmp_path_factory.mktemp("wheel"))


def test_every_package_folder_is_listed_and_mapped() -> None:
    setuptools = PYPROJECT["tool"]["setuptools"]
    mapping = setuptools["package-dir"]
    listed = set(setuptools["packages"])
    on_disk = set()
    for name, folder in mapping.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            on_disk.add(".".join([name, *rel.parts]))
    assert listed == on_disk


def test_public_api_lists_what_it_exports() -> None:
    tree = ast.parse((REPO / "evalstore" / "__init__.py").read_text(encoding="utf-8"))
    exports = next(
        ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.AnnAssign) and n.target.id == "_EXPORTS"
    )
    assert set(evalstore.__all__) == {"__version__", *exports}
    for name in evalstore.__all__:
        assert getattr(evalstore, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        evalstore.nope  # noqa: B018


def test_wheel_installs_one_top_level_name_and_every_module(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert zf.read(top_level).decode().split() == ["evalstore"]
        entry_points = zf.read(top_level.replace("top_level.txt", "entry_points.txt")).decode()
    assert {n.split("/")[0] for n in names} == {"evalstore", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "evalstore = evalstore.cli:entry" in entry_points
    for folder, package in (
        ("store", "store"),
        ("replay", "replay"),
        ("cli", "cli"),
        ("migrations", "migrations"),
        ("grader", "grader"),
    ):
        for module in (REPO / folder).rglob("*.py"):
            assert f"evalstore/{package}/{module.relative_to(REPO / folder).as_posix()}" in names
    assert "evalstore/migrations/script.py.mako" in names
    assert "evalstore/examples/quickstart/.agentv/targets.yaml" in names
    viewer = [p for p in (REPO / "viewer").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert {p.relative_to(REPO / "viewer").parent.as_posix() for p in viewer} >= {".", "templates", "static"}
    for path in viewer:  # the viewer's modules, every template and every static file
        assert f"evalstore/viewer/{path.relative_to(REPO / 'viewer').as_posix()}" in names


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel and a throwaway distribution with top-level `cli` and `store`.
    Third-party dependencies come from this interpreter's site-packages through a .pth line (a path
    added that way has its own .pth files ignored, so the editable evalstore here stays out)."""
    root = tmp_path_factory.mktemp("venv")
    other = root / "other-dist"
    other.mkdir()
    (other / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "other-tool"
        version = "1.0"
        [project.scripts]
        other-tool = "cli:main"
        [tool.setuptools]
        py-modules = ["cli", "store"]
        """)
    )
    (other / "cli.py").write_text("def main():\n    print('other-tool works')\n")
    (other / "store.py").write_text("WHO = 'other store'\n")
    other_wheel = _wheel(other, root / "other-wheel")

    env_dir = root / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=TIMEOUT)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for whl in (other_wheel, wheel):  # the other tool first: installing evalstore must not break it
        _pip("--python", str(python), "install", "--no-deps", str(whl))
    return env_dir


def _clean_env(**extra: str) -> dict[str, str]:
    drop = ("PYTHONPATH", "EVALSTORE_DB", "EVALSTORE_EXAMPLES", "EVALSTORE_JUDGE_BASE_URL", "VIRTUAL_ENV")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def test_installed_beside_a_distribution_with_top_level_cli_and_store(venv: Path, tmp_path: Path) -> None:
    bindir = venv / "bin"
    version = subprocess.run(
        [str(bindir / "evalstore"), "--version"],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=tmp_path,
        timeout=60,
    )
    assert version.returncode == 0 and version.stdout.strip() == f"evalstore, version {evalstore.__version__}"
    as_module = subprocess.run(
        [str(bindir / "python"), "-m", "evalstore", "--version"],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=tmp_path,
        timeout=60,
    )
    assert as_module.stdout == version.stdout
    other = subprocess.run(
        [str(bindir / "other-tool")], capture_output=True, text=True, env=_clean_env(), cwd=tmp_path, timeout=60
    )
    assert other.stdout.strip() == "other-tool works"
    where = subprocess.run(
        [
            str(bindir / "python"),
            "-c",
            "import json, cli, store, evalstore.cli, evalstore.store; "
            "print(json.dumps([store.WHO, evalstore.cli.__file__, evalstore.store.__file__]))",
        ],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    who, cli_file, store_file = json.loads(where.stdout)
    assert who == "other store"
    assert cli_file.startswith(str(venv)) and store_file.startswith(str(venv))  # the wheel's copy, not the clone


def test_quickstart_from_the_wheel_in_an_empty_directory(venv: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [str(venv / "bin" / "evalstore"), "quickstart", "--json"],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=tmp_path,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["run_id"] != out["replay_id"] and len(out["recorded"]) == 3 and len(out["replayed"]) == 3
    assert out["comparison"]["overall"]["counts"]["n"] == 3
    assert str(venv) in json.dumps(out["audit"])  # the suite came from the installed package data
    assert (tmp_path / ".evalstore" / "evalstore.db").is_file()
    assert not any(p.name == ".git" for p in tmp_path.iterdir())  # nothing of a clone needed


VIEW_PAGES = """
import sys
from starlette.testclient import TestClient
from evalstore.store import EventStore
from evalstore.viewer import create_app

client = TestClient(create_app(EventStore.open(sys.argv[1])), base_url="http://127.0.0.1")
runs = client.get("/runs")
assert runs.status_code == 200 and "Runs" in runs.text, runs.text
run = client.get("/runs/last", follow_redirects=True)
assert run.status_code == 200 and 'id="histogram"' in run.text, run.text
for name in ("viewer.css", "viewer.js", "favicon.svg"):
    static = client.get("/static/" + name)
    assert static.status_code == 200 and static.content, name
import evalstore.viewer
print(evalstore.viewer.__file__)
"""


def test_viewer_pages_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    """The installed viewer finds its templates and static files (package data, not the source tree)."""
    done = subprocess.run(
        [str(venv / "bin" / "evalstore"), "quickstart"], capture_output=True, text=True, env=_clean_env(), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    db = f"sqlite:///{tmp_path / '.evalstore' / 'evalstore.db'}"
    shown = subprocess.run(
        [str(venv / "bin" / "python"), "-c", VIEW_PAGES, db],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=tmp_path,
        timeout=TIMEOUT,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().startswith(str(venv))  # the wheel's copy answered, not this checkout
